"""Reproducer, step 1 (from records): the kernel's arguments at its first launch: each tensor's size, strides,
offset and dtype (the ``empty_strided``, ``assert_size_stride`` (grouped too) and ``reinterpret_tensor`` of
``call()``, read by ``parse/call_layouts.py``; symbolic sizes at their hints), the storage it shares with the
others, what values random inputs get (integers kept within the kernel's own index bounds), and scalars as
``call()`` passes them.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..parse.call_layouts import WrittenLayout, view_layout, written_layouts
from ..parse.symbolic import Hints, evaluate, tensor_dims
from ..records import GraphRecord, KernelRecord
from .parts import FLOAT_DTYPES, PARSED_GRAPHS, TORCH_DTYPES, ReproError, ScalarArg, TensorArg

# "index out of bounds: 0 <= tmp4 < 100L": the bound a kernel asserts for an indirect index.
_INDEX_BOUND = re.compile(r"index out of bounds: 0 <= \w+ < (\d+)L?")


@dataclass(frozen=True)
class Layout:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0
    base: str | None = None  # a view's buffer


def call_layouts(output_code: str, hints: Hints) -> dict[str, Layout]:
    """Buffer and input name -> its layout, from call()'s allocations, input checks and views, at the hints."""
    return dict(_call_layouts(output_code, tuple(sorted(hints.items()))))


@functools.lru_cache(maxsize=PARSED_GRAPHS)
def _call_layouts(output_code: str, hints: tuple[tuple[str, int | float], ...]) -> dict[str, Layout]:
    found: dict[str, Layout] = {}
    values = dict(hints)
    for name, written in written_layouts(output_code).items():
        layout = _layout(written, values)
        if layout is not None:
            found[name] = layout
    return found


def _layout(written: WrittenLayout, hints: Hints) -> Layout | None:
    sizes = _ints(written.size, hints)
    strides = _ints(written.stride, hints)
    start = _ints([written.offset], hints)
    if sizes is None or strides is None or start is None or len(sizes) != len(strides):
        return None
    return Layout(sizes, strides, start[0], written.base)


def _ints(texts: Iterable[str], hints: Hints) -> tuple[int, ...] | None:
    values = []
    for text in texts:
        if not text:
            continue
        value = evaluate(text, hints)
        if not isinstance(value, int):
            return None
        values.append(value)
    return tuple(values)


def contiguous(size: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(size):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def extent(size: tuple[int, ...], stride: tuple[int, ...], offset: int) -> int:
    """Elements of storage a view reaches (0 for an empty one)."""
    if any(s == 0 for s in size):
        return offset
    return offset + 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))


def alias_chain(graph: GraphRecord, name: str) -> list[str]:
    """``buf3`` and every name it reuses (``buf3 = buf0; del buf0  # reuse``), nearest first."""
    chain = [name]
    while chain[-1] in graph.aliases and graph.aliases[chain[-1]] not in chain:
        chain.append(graph.aliases[chain[-1]])
    return chain


def _role(param: str) -> str:
    if param.startswith("in_out_ptr"):
        return "in_out"
    if param.startswith("out_ptr"):
        return "out"
    return "in"


def launch_argument(
    graph: GraphRecord,
    kernel: KernelRecord,
    param: str,
    written: str,
    layouts: Mapping[str, Layout],
    hints: Hints,
    source: str,
    declared: str | None,
) -> TensorArg | ScalarArg:
    """One launch argument; ``declared``: the dtype the kernel's signature gives its pointer."""
    text = written.strip()
    base, layout = _tensor_layout(graph, text, layouts, hints)
    if base is None:
        value = _scalar(text, hints)
        if value is None:
            raise ReproError(
                f"{kernel.name}: argument {param} = {text!r} is neither a known buffer nor a number"
            )
        return ScalarArg(param, text, value)
    buffer_type = _buffer_type(graph, base)
    parsed = tensor_dims(buffer_type, hints) if buffer_type else None
    dtype = declared or (TORCH_DTYPES.get(parsed[0]) if parsed else None)
    layout_why = ""
    if layout is None and parsed is not None:
        layout = Layout(tuple(parsed[1]), contiguous(tuple(parsed[1])))
        layout_why = "call() states no layout for it: taken as contiguous"
    if layout is None or dtype is None:
        raise ReproError(
            f"{kernel.name}: the type of {base} ({buffer_type or 'unknown'}) is not one a script can build"
        )
    role = _role(param)
    values, why = _values(dtype, role, source)
    # the storage the argument lives in: the allocation its view or reuse chain ends at
    storage = alias_chain(graph, base)[-1]
    return TensorArg(
        param, role, text, storage, layout.size, layout.stride, layout.offset, dtype, values, why, layout_why
    )


def _tensor_layout(
    graph: GraphRecord, text: str, layouts: Mapping[str, Layout], hints: Hints
) -> tuple[str | None, Layout | None]:
    """(buffer, layout as the kernel sees it) of a tensor argument; (None, None) for a scalar."""
    if text.startswith("reinterpret_tensor("):
        view = view_layout(text)
        if view is None:
            return None, None
        return view.base, _layout(view, hints)
    if not re.fullmatch(r"\w+", text) or text[0].isdigit():
        return None, None
    for name in alias_chain(graph, text):
        if name in layouts:
            return text, layouts[name]
    return (
        (text, None) if _buffer_type(graph, text) is not None and not _is_sym(graph, text) else (None, None)
    )


def _buffer_type(graph: GraphRecord, name: str) -> str | None:
    for alias in alias_chain(graph, name):
        if alias in graph.buffers:
            return graph.buffers[alias]
    return None


def _is_sym(graph: GraphRecord, name: str) -> bool:
    return (_buffer_type(graph, name) or "").startswith("Sym(")


def _scalar(text: str, hints: Hints) -> int | float | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = evaluate(text, hints)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _values(dtype: str, role: str, source: str) -> tuple[str, str]:
    if role == "out":
        return "zeros", "written by the kernel"
    if dtype in FLOAT_DTYPES:
        return "randn", "normal random values"
    if dtype == "bool":
        return "bool", "random booleans"
    bounds = [int(b) for b in _INDEX_BOUND.findall(source)]
    if bounds:
        return (
            f"randint(0, {min(bounds)})",
            f"integers in [0, {min(bounds)}): the smallest index bound the kernel asserts",
        )
    return "randint(0, 2)", "integers in [0, 2): the kernel asserts no index bound"
