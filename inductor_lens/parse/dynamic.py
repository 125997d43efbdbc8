"""Parse stage: the symbolic sizes of one graph (dynamic shapes) and the hints they are worked out at.

A graph's symbols are those its FX types and ``call()``'s buffers are written in (``f32[2, s53, 32]``),
plus the sizes ``call()`` itself names (``s70 = arg1_1``, ``ps0 = 32*s53``). Each one's hint, its value
when the graph was compiled, comes from the first of:

1. Inductor's benchmark harness (``get_args()`` in output_code.py), which passes example arguments at
   the hints: an int for a ``Sym(s53)`` placeholder, and for a tensor placeholder ``i64[2, s53]`` a
   tensor of sizes (2, 24), so s53 = 24 position by position;
2. ``call()``'s own size computations, worked out from the harness and the hints found so far;
3. the frame's ``create_symbol`` records in the TORCH_TRACE log (``val``).

The harness comes first because it belongs to the graph itself (a backward graph, a folder read
without its trace). The trace adds what Dynamo made each symbol from (``L['x'].size()[0]``), its range
and the user line; where the two disagree on a hint a note says so.
"""

from __future__ import annotations

import re

from ..records import FxGraph, FxNode, ShapeSymbol
from .diagnostics import Diagnostics
from .output_code import OutputCode
from .symbolic import SYM_TYPE, evaluate, is_symbol, split_dims, symbols_in
from .trace import FrameTrace

_TENSOR_DIMS = re.compile(r"^[a-z0-9]+\[(?P<dims>[^\]]*)\]")
# call()'s shape reads: ``arg2_1_size[1]`` (after ``arg2_1_size = arg2_1.size()``), ``arg2_1.size()[1]``,
# ``arg2_1.size(1)``.
_SIZE_OF = re.compile(r"^(?P<tensor>\w+)\.size\(\)$")
_INDEXED = re.compile(r"^(?P<base>[\w.()]+)\[(?P<index>\d+)\]$")
_SIZE_CALL = re.compile(r"^(?P<tensor>\w+)\.size\((?P<index>\d+)\)$")


def graph_symbols(
    fx_graphs: tuple[FxGraph, ...],
    code: OutputCode,
    frame: FrameTrace | None,
    where: str,
    diagnostics: Diagnostics,
) -> tuple[ShapeSymbol, ...]:
    """The graph's symbols in order of first use, each with its hint, source and range where known."""
    names = _names(fx_graphs, code)
    if not names:
        return ()
    hints: dict[str, int | float] = {}
    origin: dict[str, str] = {}

    def learn(name: str, value: int | float | None, source: str) -> None:
        if value is not None and name not in hints:
            hints[name] = value
            origin[name] = source

    for node in _placeholders(fx_graphs):
        for name, value in _from_harness(node.name, node.type or "", code.harness):
            learn(name, value, "benchmark harness")
    for name, expression in code.sizes.items():
        if is_symbol(name):
            learn(name, _size_value(expression, code, hints), "call()")
    traced = {s.name: s for s in frame.symbols} if frame is not None else {}
    symbols = []
    for name in names:
        created = traced.get(name)
        if created is not None and created.hint is not None:
            if name in hints and hints[name] != created.hint:
                diagnostics.note(
                    where,
                    f"{name}: the {origin[name]} says {hints[name]}, the trace's create_symbol {created.hint}; "
                    f"the {origin[name]}'s value is used",
                )
            learn(name, created.hint, "trace")
        symbols.append(
            ShapeSymbol(
                name=name,
                hint=hints.get(name),
                hint_from=origin.get(name, ""),
                source=created.source if created else "",
                range=created.range if created else "",
                user_line=created.user_line if created else None,
            )
        )
    return tuple(symbols)


def _names(fx_graphs: tuple[FxGraph, ...], code: OutputCode) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for fx in fx_graphs:
        for node in fx.nodes:
            found.update(dict.fromkeys(symbols_in(node.type)))
    for text in code.buffers.values():
        found.update(dict.fromkeys(symbols_in(text)))
    found.update(dict.fromkeys(n for n in code.sizes if is_symbol(n)))
    return tuple(found)


def _placeholders(fx_graphs: tuple[FxGraph, ...]) -> list[FxNode]:
    graph = fx_graphs[0] if fx_graphs else None
    return [n for n in graph.nodes if n.op == "placeholder"] if graph else []


def _from_harness(
    name: str, type_text: str, harness: dict[str, int | float | tuple[int, ...]]
) -> list[tuple[str, int | float]]:
    """(symbol, value) pairs a placeholder's type and the harness's value for it agree on."""
    value = harness.get(name)
    if value is None:
        return []
    if (sym := SYM_TYPE.match(type_text)) is not None:
        expression = sym["expr"].strip()
        return [(expression, value)] if is_symbol(expression) and not isinstance(value, tuple) else []
    match = _TENSOR_DIMS.match(type_text)
    if match is None or not isinstance(value, tuple):
        return []
    dims = split_dims(match["dims"])
    if len(dims) != len(value):
        return []
    return [(dim, size) for dim, size in zip(dims, value, strict=True) if is_symbol(dim)]


def _size_value(expression: str, code: OutputCode, hints: dict[str, int | float]) -> int | float | None:
    """A size call() computes: ``arg1_1``, ``arg2_1_size[1]``, ``32*s53``, at the harness and the hints."""
    text = expression.replace(" ", "")
    tensor, index = None, None
    if match := _INDEXED.match(text):
        base = code.sizes.get(match["base"], match["base"]).replace(" ", "")
        if size_of := _SIZE_OF.match(base):
            tensor, index = size_of["tensor"], int(match["index"])
    elif match := _SIZE_CALL.match(text):
        tensor, index = match["tensor"], int(match["index"])
    if tensor is not None and index is not None:
        shape = code.harness.get(tensor)
        return shape[index] if isinstance(shape, tuple) and index < len(shape) else None
    scalars = {k: v for k, v in code.harness.items() if not isinstance(v, tuple)}
    return evaluate(text, {**scalars, **hints})
