"""Reproducer, step 1 (from records): the eager reference of a kernel: its post-grad FX nodes as the graph's
code writes them, the nodes outside it they read (each tied to the kernel argument holding it) and the nodes it
leaves for others (each tied to the argument the kernel writes it to); or why there is none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from ..parse.symbolic import SYM_TYPE, Hints, evaluate, tensor_dims
from ..records import FxGraph, FxNode, GraphRecord, KernelRecord, Launch
from .arguments import alias_chain
from .parts import TORCH_DTYPES, Reference, ReferenceInput, ReferenceOutput, ScalarArg, TensorArg

# Ops whose eager result cannot equal the kernel's: random numbers come from another generator.
_RANDOM_OPS = ("rand", "dropout", "bernoulli", "seed", "multinomial", "normal", "uniform", "exponential")


def reference_of(
    graph: GraphRecord, kernel: KernelRecord, launch: Launch, args: tuple[TensorArg | ScalarArg, ...]
) -> Reference:
    fx = graph.fx_graph("transformed")
    if fx is None:
        return Reference(
            missing="the capture holds no post-grad FX graph (fx_graph_transformed.py) for this graph"
        )
    by_name = {n.name: n for n in fx.nodes}
    members = [n for n in kernel.post_grad_nodes if n in by_name]
    if not members:
        return Reference(missing="the records name no post-grad FX node for this kernel (a capture without "
                         "Inductor's provenance tracking or comment_origin)")  # fmt: skip
    inside = _closure(fx, set(members))
    random_ops = sorted(
        n.target for n in fx.nodes if n.name in inside and any(w in n.target.lower() for w in _RANDOM_OPS)
    )
    if random_ops:
        return Reference(
            missing=f"it draws random numbers ({', '.join(random_ops)}): eager's generator gives others"
        )
    users: dict[str, set[str]] = {}
    for node in fx.nodes:
        for name in node.inputs:
            users.setdefault(name, set()).add(node.name)
    ordered = [n for n in fx.nodes if n.name in inside]
    external = list(dict.fromkeys(i for n in ordered for i in n.inputs if i not in inside and i in by_name))
    # a node another kernel computes again for its own use (``add_78`` of a residual, recomputed by the
    # LayerNorm after it) is not one this kernel hands on
    # (a template that lists its prologue's ops but reads them from this kernel's output is not such a one)
    written = {n for name in launch.writes for n in alias_chain(graph, name)}
    elsewhere = [set(k.post_grad_nodes) for k in graph.kernels if k.name != kernel.name
                 and not any(n in written for la in graph.launches if la.target == k.name
                             and la.position > launch.position for r in la.reads for n in alias_chain(graph, r))]  # fmt: skip

    def needed_outside(node: FxNode) -> bool:
        outside = [u for u in users.get(node.name, ()) if u not in inside]
        return any(not any(node.name in nodes and u in nodes for nodes in elsewhere) for u in outside)

    escaping = [n for n in ordered if needed_outside(n) and not _is_size(n)]
    tensors = [a for a in args if isinstance(a, TensorArg)]
    inputs, why = _tie_inputs(graph, launch, [by_name[e] for e in external], tensors)
    if why:
        return Reference(missing=why)
    outputs, unchecked = _tie_outputs(escaping, tensors, graph.hints)
    if not outputs:
        return Reference(
            missing="no node of the kernel is read outside it, so nothing it writes can be tied to an FX node"
        )
    lines = fx.code.splitlines()
    code = []
    for node in ordered:
        text = lines[node.line - 1].strip() if 0 < node.line <= len(lines) else ""
        if not text.startswith(f"{node.name}"):
            return Reference(missing=f"the FX graph's code has no line for {node.name}")
        code.append(_without_deletions(text))
    return Reference(
        code="\n".join(code), inputs=tuple(inputs), outputs=tuple(outputs), unchecked=tuple(unchecked)
    )


def _closure(fx: FxGraph, members: set[str]) -> set[str]:
    """The kernel's nodes, plus the getitems of its multi-output nodes and the constants it reads
    (``full``, ``scalar_tensor``: nodes with no tensor input, which the kernel computes itself)."""
    inside = set(members)
    changed = True
    while changed:
        changed = False
        read = {i for n in fx.nodes if n.name in inside for i in n.inputs}  # a node added now counts next pass
        for node in fx.nodes:
            if node.name in inside or node.op != "call_function":
                continue
            getitem = "getitem" in node.target and node.inputs and node.inputs[0] in inside
            constant = not any(i for i in node.inputs) and not _is_size(node)
            if getitem or (constant and node.name in read):
                inside.add(node.name)
                changed = True
    return inside


def _is_size(node: FxNode) -> bool:
    return bool(SYM_TYPE.match(node.type or ""))


def _without_deletions(line: str) -> str:
    """An FX code line without its ``;  x = y = None`` (a deletion at a value's last use in the whole graph,
    which may be the fragment's own output)."""
    return re.sub(r";\s+(?:\w+ = )+None\s*$", "", line)


def _numel(size: Iterable[int]) -> int:
    return math.prod(size)


def _node_dims(node: FxNode, hints: Hints) -> tuple[str, tuple[int, ...]] | None:
    parsed = tensor_dims(node.type, hints)
    if parsed is None or parsed[0] not in TORCH_DTYPES:
        return None
    return TORCH_DTYPES[parsed[0]], tuple(parsed[1])


def _tie_inputs(
    graph: GraphRecord, launch: Launch, external: list[FxNode], tensors: list[TensorArg]
) -> tuple[list[ReferenceInput], str]:
    hints = graph.hints
    readable = [a for a in tensors if a.role in ("in", "in_out")]
    producers = {a.param: _producer_nodes(graph, launch, a) for a in readable}
    tied: dict[str, tuple[str, str]] = {}  # node -> (param, how)
    for node in external:
        if _is_size(node):
            continue
        by_name = [a for a in readable if node.name in alias_chain(graph, _written_base(a))]
        by_producer = [a for a in readable if node.name in producers[a.param]]
        for candidates, how in (
            (by_name, "by name"),
            (by_producer, "written by the launch that computes it"),
        ):
            free = [a for a in candidates if a.param not in {p for p, _ in tied.values()}]
            if len(free) >= 1 and node.name not in tied:
                tied[node.name] = (free[0].param, how)
    for node in external:
        if _is_size(node) or node.name in tied:
            continue
        dims = _node_dims(node, hints)
        if dims is None:
            return [], f"the FX input {node.name} has a type a script cannot build ({node.type})"
        used = {p for p, _ in tied.values()}
        same = [
            a
            for a in readable
            if a.param not in used and a.dtype == dims[0] and _numel(a.size) == _numel(dims[1])
        ]
        if not same:
            return [], f"no argument of the kernel holds its FX input {node.name} ({node.type})"
        tied[node.name] = (same[0].param, "the only argument of its dtype and size" if len(same) == 1
                           else "the first free argument of its dtype and size")  # fmt: skip
    inputs = []
    for node in external:
        if _is_size(node):
            match = SYM_TYPE.match(node.type or "")
            value = evaluate(match["expr"], hints) if match else None
            if value is None:
                return [], f"the size {node.name} ({node.type}) has no value at the recorded hints"
            inputs.append(
                ReferenceInput(node.name, node.type or "", value=value, how="its value at the size hints")
            )
        else:
            param, how = tied[node.name]
            inputs.append(ReferenceInput(node.name, node.type or "", param=param, how=how))
    return inputs, ""


def _written_base(arg: TensorArg) -> str:
    match = re.match(r"reinterpret_tensor\((\w+),", arg.written)
    return match[1] if match else arg.written


def _producer_nodes(graph: GraphRecord, launch: Launch, arg: TensorArg) -> set[str]:
    """The post-grad nodes of the last earlier launch that wrote the argument's buffer (or one it reuses)."""
    chain = set(alias_chain(graph, _written_base(arg)))
    writer = None
    for earlier in graph.launches:
        if earlier.position >= launch.position:
            break
        if chain & set(earlier.writes):
            writer = earlier
    if writer is None:
        return set()
    nodes: set[str] = set()
    if graph.provenance is not None and writer.handle:
        nodes.update(graph.provenance.kernel_to_post.get(writer.handle, ()))
    producer = graph.kernel(writer.target)
    if producer is not None:
        nodes.update(producer.post_grad_nodes)
    return nodes


def _creation(arg: TensorArg) -> int:
    """The number of the buffer the launch writes (``buf12`` -> 12); graph inputs written in place first."""
    match = re.fullmatch(r"buf(\d+)", _written_base(arg))
    return int(match[1]) if match else -1


def _tie_outputs(
    escaping: list[FxNode], tensors: list[TensorArg], hints: Hints
) -> tuple[list[ReferenceOutput], list[str]]:
    writable = [a for a in tensors if a.role in ("out", "in_out")]
    outputs: list[ReferenceOutput] = []
    used: set[str] = set()
    pending = []
    for node in escaping:
        parsed = tensor_dims(node.type, hints) if node.type else None
        dims = (TORCH_DTYPES.get(parsed[0]), _numel(parsed[1])) if parsed else None
        same = [a for a in writable if dims is None or (a.dtype, _numel(a.size)) == dims]
        pending.append((node, same))
    # nodes with one candidate first; then each other node, in graph order, takes the free candidate whose
    # buffer Inductor created first (it numbers buffers as it lowers the nodes in graph order)
    for node, same in [p for p in pending if len(p[1]) == 1] + [p for p in pending if len(p[1]) != 1]:
        free = sorted((a for a in same if a.param not in used), key=_creation)
        if not free:
            continue
        how = "the only written argument of its dtype and size" if len(same) == 1 else \
            "of the written arguments of its dtype and size, the first Inductor created (buffer number)"  # fmt: skip
        outputs.append(ReferenceOutput(node.name, node.type or "", free[0].param, how))
        used.add(free[0].param)
    order = {n.name: i for i, n in enumerate(escaping)}
    outputs.sort(key=lambda o: order[o.node])
    unchecked = [f"{a.param} ({a.written}): no FX node read outside the kernel is tied to it (a scratch buffer)"
                 for a in writable if a.param not in used]  # fmt: skip
    return outputs, unchecked
