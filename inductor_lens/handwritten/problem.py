"""Stage 4 of the pipeline (bench), hand-written side: what one launch computes, and on what shapes.

From the records alone (no torch), each Inductor kernel or extern call becomes a ``Problem``:
1. the ATen ops it computes become *concepts* ("softmax", "layernorm", "convolution", "batchnorm", ...):
   layout ops (views, transposes, dtype conversions) are dropped and the pieces of a decomposed op
   (softmax's exp, sub, amax) fold into the op. Where Inductor's origins list more than a kernel does (a
   kernel of a chain that feeds cuDNN attention lists every op of the chain), what the kernel reads and
   writes and its own source decide: a backward batch norm kernel that writes a full-size tensor computes
   the input gradient, one that writes per-channel values the weight and bias gradients; a kernel with
   no ``cos`` in its source does no rotary embedding;
2. the shapes and dtype come from the tensors the launch really passes: ``rows x cols`` of its largest
   tensor (the activations it writes for an embedding, not the table it reads), M/N/K of a matmul,
   batch/heads/seq/head_dim of q, N/C/H/W and the memory format of a convolution's or batch norm's
   activations (strides from the ``assert_size_stride`` and ``empty_strided`` lines of the output code),
   the window of a max-pool from its FX node. Under dynamic shapes symbolic sizes are taken at the
   graph's size hints, and the problem says so.

The vocabulary of step 1 is in concepts.py, the readers of step 2 in shapes.py; here each launch is sent to
them (``launch_problem``), and a kernel's own source and FX nodes settle what its origins leave open.
"""

from __future__ import annotations

import math

from ..bench.roofline import tensor_type
from ..parse.compat import SDPA_BACKWARD_CAUSAL_POSITION, SDPA_CAUSAL_POSITION
from ..records import GraphRecord, KernelRecord, Launch
from .concepts import (
    BATCHNORM_FORWARD,
    NORM_VECTORS,
    TEMPLATE_MARKERS,
    concepts_of,
    op_name,
    written_formulas,
)
from .shapes import (
    PassedTensor,
    Problem,
    attention_problem,
    channel_problem,
    convolution_problem,
    embedding_shape,
    matmul_from_output,
    matmul_shape,
    passed_tensors,
    rows_cols,
)


def _code_of(kernel: KernelRecord) -> str:
    """A kernel's source without its comments and its name: the ORIGIN tracebacks quote the model's code
    (``cos = emb.cos()``) for kernels that only copy a tensor the rotary embedding made, and the name lists
    every origin's op (``..._rsqrt_t_view``) wherever it ran."""
    lines = (line for line in kernel.source.splitlines() if not line.lstrip().startswith("#"))
    return "\n".join(lines).replace(kernel.name, "")


def launch_problem(graph: GraphRecord, kernel: KernelRecord | None, launch: Launch) -> Problem:
    """What the launch computes (an Inductor kernel, or an extern call when ``kernel`` is None)."""
    tensors, from_hints = passed_tensors(graph, kernel, launch)
    problem = Problem(hints=from_hints)
    if kernel is not None:
        _kernel_problem(graph, kernel, tensors, problem)
        return problem
    op = op_name(launch.aten_op or launch.target)
    if op in SDPA_CAUSAL_POSITION:
        attention_problem(op, tensors, launch, problem, SDPA_CAUSAL_POSITION[op])
    elif op in SDPA_BACKWARD_CAUSAL_POSITION:
        # q is the second argument (after grad_out)
        queries_on = [t for t in tensors if t.param != "arg0"]
        attention_problem(op, queries_on, launch, problem, SDPA_BACKWARD_CAUSAL_POSITION[op], backward=True)
    elif op in ("convolution", "convolution_backward"):
        convolution_problem(graph, op, tensors, launch, problem)
    else:
        problem.concepts = concepts_of((op,), template=False, extern=True)
        if op in ("mm", "addmm", "bias_addmm"):
            operands = [t for t in tensors if len(t.dims) >= 2]
            if len(operands) >= 2:
                matmul_shape(operands[-2], operands[-1], problem, b_is_kn=True)
            if op != "mm":
                problem.concepts.append("add")
    return problem


def _kernel_problem(graph: GraphRecord, kernel: KernelRecord, tensors: list[PassedTensor], problem: Problem) -> None:
    template = kernel.category == "template"
    code = _code_of(kernel)
    problem.concepts = concepts_of(kernel.aten_ops, template=template, source=code)
    if template:
        epilogue_inputs = any(not t.written and t.param not in ("arg_A", "arg_B") for t in tensors)
        problem.concepts = [
            c for c in problem.concepts
            if c == "matmul" or (TEMPLATE_MARKERS[c] in code if c in TEMPLATE_MARKERS else epilogue_inputs)
        ]  # fmt: skip
        named = {t.param: t for t in tensors}
        if "arg_A" in named and "arg_B" in named:
            matmul_shape(named["arg_A"], named["arg_B"], problem)
        elif "arg_B" in named and (out := next((t for t in tensors if t.written and len(t.dims) == 2), None)):
            matmul_from_output(out, named["arg_B"], problem)
        else:
            problem.note = "operand shapes not known"
        return
    if {"batchnorm_backward", "max_pool2d", "max_pool2d_backward"} & set(problem.concepts) or (
        BATCHNORM_FORWARD & set(problem.concepts)
    ):
        channel_problem(graph, kernel, tensors, problem)
        return
    if not problem.concepts and kernel.category == "pointwise" and any(t.written for t in tensors) and any(
        not t.written for t in tensors
    ):
        # it only moves data (a permute, a split, a repeat for grouped-query attention, a layout for cuDNN)
        problem.concepts = ["copy"]
    rows_cols(tensors, problem, by_written="embedding" in problem.concepts or problem.concepts == ["copy"])
    # a norm's own weight (and LayerNorm's bias) are rows of the width too, but not a bias add's
    problem.bias_inputs = max(0, problem.bias_inputs - sum(NORM_VECTORS.get(c, 0) for c in problem.concepts))
    if "embedding" in problem.concepts:
        embedding_shape(tensors, problem)
    if "rotary" in problem.concepts:
        # q or k as attention reads them: the 4-D [batch, heads, seq, head_dim] tensor the kernel writes
        rotated = [t for t in tensors if t.written and len(t.dims) == 4]
        if rotated:
            problem.shape = dict(zip(("batch", "heads", "seq", "head_dim"), rotated[0].dims, strict=True))
    # an add or mul that a decomposed op's pieces hid: the kernel's name still lists it. Where the model
    # wrote the decomposed op's formula out, the name lists the formula's own adds and muls: only the op that
    # brings in a second full-size input (a residual's add, a gate's mul: T5's gated NewGELU) is the kernel's
    # own work then, found in its FX nodes (an add where they are not recorded).
    if not written_formulas(kernel):
        wanted: tuple[str, ...] = ("mul", "add")
    elif joining := _joining_ops(graph, kernel):
        wanted = joining  # T5's final RMSNorm adds the residual its launch types do not show as full-size
    else:
        wanted = ("add",) if problem.full_inputs > 1 else ()
    problem.concepts[:0] = [op for op in kernel.name.split("_") if op in wanted and op not in problem.concepts]


def _joining_ops(graph: GraphRecord, kernel: KernelRecord) -> tuple[str, ...]:
    """The adds and muls of the kernel's post-grad FX nodes that join two full-size values computed from
    different inputs of the kernel (a residual's add, a gate's mul), not the steps of a formula on one input."""
    fx = graph.fx_graph("transformed")
    members = set(kernel.post_grad_nodes)
    if fx is None or not members:
        return ()
    types = {n.name: n.type for n in fx.nodes}
    sources: dict[str, frozenset[str]] = {}
    found: list[str] = []
    for node in fx.nodes:
        if node.name not in members:
            continue
        inputs = [sources.get(i, frozenset({i})) for i in node.inputs]
        sources[node.name] = frozenset().union(*inputs)
        op = op_name(node.target)
        if op in ("add", "mul") and len(inputs) == 2 and not (inputs[0] & inputs[1]) and op not in found:
            sizes = {_numel_of(types.get(i), graph) for i in (*node.inputs, node.name)}
            if len(sizes) == 1 and None not in sizes:
                found.append(op)
    return tuple(found)


def _numel_of(text: str | None, graph: GraphRecord) -> int | None:
    parsed = tensor_type(text, graph.hints) if text else None
    return math.prod(parsed[1]) if parsed is not None else None

