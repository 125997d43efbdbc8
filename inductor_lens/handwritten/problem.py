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
"""

from __future__ import annotations

import ast
import functools
import math
import re
from dataclasses import dataclass, field

from ..bench.roofline import argument_type, hinted, tensor_type
from ..parse.call_layouts import written_layouts
from ..parse.compat import SDPA_BACKWARD_CAUSAL_POSITION, SDPA_CAUSAL_POSITION
from ..parse.fx_graph import FX_DTYPES
from ..records import GraphRecord, KernelRecord, Launch

# ATen ops that only move or reinterpret data, and dtype conversions: nothing to hand-write.
LAYOUT_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "t", "permute", "transpose", "select", "slice", "expand",
    "unsqueeze", "squeeze", "clone", "as_strided", "alias", "contiguous", "convert_element_type",
    "_to_copy", "copy", "copy_", "detach", "lift_fresh_copy", "full", "empty", "zeros", "split", "cat",
    "split_with_sizes", "arange",
})  # fmt: skip
CONCEPTS = {
    "_softmax": "softmax", "softmax": "softmax", "prepare_softmax_online": "softmax", "amax": "softmax",
    "_softmax_backward_data": "softmax_backward",
    "native_layer_norm": "layernorm", "layer_norm": "layernorm", "var_mean": "layernorm",
    "native_layer_norm_backward": "layernorm_backward",
    "_fused_rms_norm": "rmsnorm", "rms_norm": "rmsnorm",
    "gelu": "gelu", "relu": "relu", "add": "add", "silu": "silu",
    "gelu_backward": "gelu_backward", "threshold_backward": "relu_backward",
    "mm": "matmul", "addmm": "matmul", "bias_addmm": "matmul",
    "_native_batch_norm_legit_no_training": "batchnorm", "_native_batch_norm_legit_functional": "batchnorm_train",
    "_native_batch_norm_legit": "batchnorm_train", "native_batch_norm": "batchnorm_train",
    "native_batch_norm_backward": "batchnorm_backward",
    "max_pool2d_with_indices": "max_pool2d", "max_pool2d_with_indices_backward": "max_pool2d_backward",
    "_low_memory_max_pool_with_offsets": "max_pool2d", "_low_memory_max_pool_offsets_to_indices": "max_pool2d",
    "embedding": "embedding", "embedding_dense_backward": "embedding_backward",
}  # fmt: skip
# Ops that are steps of a decomposed op when that op is in the kernel too.
PARTS_OF = {"softmax": {"exp", "sub", "sum", "div", "amax"}, "rmsnorm": {"pow", "mean", "rsqrt", "mul", "add"},
            "softmax_backward": {"mul", "sum", "sub"},
            "rotary": {"bmm", "cat", "cos", "sin", "mul", "neg", "add"}}  # fmt: skip
# Ops that give a decomposed op away, and the ops around them that belong to it. torch 2.13's C++ kernels
# record GELU and LayerNorm as their pieces (mul, add, erf; var_mean, sub, rsqrt, ...), where Triton kernels
# (torch 2.11) record aten.gelu and aten.native_layer_norm. An add next to them (a residual) is then hidden.
DECOMPOSED = {
    "erf": ("gelu", {"mul", "add"}),
    "tanh": ("gelu_tanh", {"mul", "add", "pow"}),
    "var_mean": ("layernorm", {"sub", "rsqrt", "mul", "add"}),
    # RMSNorm as models write it (HF Llama: w * x * rsqrt(mean(x**2) + eps)); after var_mean, which takes a
    # LayerNorm's rsqrt first
    "rsqrt": ("rmsnorm", {"pow", "mean", "mul", "add"}),
    # rotary embedding as HF models write it: x * cos + cat(-x2, x1) * sin, with cos and sin of positions x
    # inverse frequencies (a bmm Inductor computes inside the pointwise kernel)
    "cos": ("rotary", {"sin", "cat", "neg", "mul", "add", "bmm"}),
    # SiLU as torch 2.13's C++ kernels record it (seen 2.13.0, CPU): x / (1 + exp(-x)), its mul kept (SwiGLU's gate)
    "neg": ("silu", {"exp", "add", "div", "reciprocal"}),
}
# Ops that must come with a marker for it to give its op away: a negation alone is no SiLU, a tanh or erf alone
# (``torch.tanh(linear(x))``) no GELU.
DECOMPOSED_WITH = {"neg": frozenset({"exp"}), "tanh": frozenset({"mul", "add"}), "erf": frozenset({"mul", "add"})}
# A formula the model wrote out (GPT-2's NewGELU: 0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3))); Llama's
# RMSNorm with its eps add) leaves its own adds and muls among the kernel's source nodes and name. Per marker
# op found in the source nodes: the adds that belong to the formula rather than to a residual.
FORMULA_ADDS = {"tanh": 2, "erf": 1, "rsqrt": 1, "cos": 1}
# Ops a generated kernel's origins name although the work is an extern call's (a convolution's input made
# in the layout cuDNN wants, the ops of a chain that feeds attention): the kernel only moves data for them.
EXTERN_ORIGINS = frozenset({
    "convolution", "convolution_backward", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
})  # fmt: skip
# Building a mask from indices (arange, compare, where): part of the attention it feeds.
MASK_OPS = frozenset({
    "arange", "le", "lt", "ge", "gt", "scalar_tensor", "where",
    "new_ones", "bitwise_and", "bitwise_or", "index",  # transformers 5's vmapped mask functions
})  # fmt: skip
# What a matmul template's code computes besides the product: a concept its origins name stays only where
# its math is in the code (the origins of the view A is read through name the ops that made A, such as the
# RMSNorm or SwiGLU before a projection, which ran in a kernel of their own).
TEMPLATE_MARKERS = {"gelu": "erf", "gelu_tanh": "tanh", "silu": "sigmoid", "relu": "maximum", "rmsnorm": "rsqrt",
                    "layernorm": "rsqrt", "softmax": "exp", "rotary": "cos("}  # fmt: skip
# Math a concept needs in a Triton kernel's source: a kernel whose source lacks it does not compute it.
SOURCE_MARKERS = {"rotary": "cos(", "gelu": "erf", "gelu_tanh": "tanh"}
# Ops of batch norm that the concept of a backward kernel absorbs (the saved statistics recomputed).
BATCHNORM_FORWARD = frozenset({"batchnorm", "batchnorm_train"})
# The FX ops of a max-pool whose arguments give its window (kernel, stride, padding lists after the tensors).
POOL_OPS = r"(?:max_pool2d_with_indices(?:_backward)?|_low_memory_max_pool_with_offsets)"
# Vectors of the row width that a norm reads for itself (its weight, and LayerNorm's bias).
NORM_VECTORS = {"rmsnorm": 1, "layernorm": 2}
# the FX dtypes the hand-written kernels take
_DTYPES = {short: name for short, name in FX_DTYPES.items() if name in ("float32", "float16", "bfloat16")}


def op_name(aten_op: str) -> str:
    """``aten.native_layer_norm.default`` -> ``native_layer_norm``."""
    parts = aten_op.split(".")
    if parts[0] in ("aten", "prims", "torch", "ops") and len(parts) > 1:
        parts = parts[1:] if parts[0] != "torch" else parts[2:] if parts[1] == "ops" else parts[1:]
    if parts and parts[0] in ("aten", "prims"):
        parts = parts[1:]
    return parts[0] if parts else aten_op


@dataclass
class Problem:
    """What a launch computes and on what: the input to choosing equivalents."""

    concepts: list[str] = field(default_factory=list)
    shape: dict[str, int] = field(default_factory=dict)
    dtype: str | None = None
    full_inputs: int = 0
    bias_inputs: int = 0
    note: str = ""
    hints: str = ""  # "from size hints s53=24" where symbolic sizes were worked out


@dataclass(frozen=True)
class _Tensor:
    param: str  # the kernel's parameter (in_ptr0, out_ptr1, ...) or argN of an extern call
    argument: str  # as the launch passes it (buf3, primals_2, reinterpret_tensor(...))
    dtype: str
    dims: tuple[int, ...]

    @property
    def written(self) -> bool:
        return self.param.startswith(("out_ptr", "in_out_ptr"))

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def text(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.dims))}]"


def concepts_of(
    aten_ops: tuple[str, ...], *, template: bool, source: str = "", extern: bool = False
) -> list[str]:
    names = [op_name(op) for op in aten_ops]
    if not extern:
        names = [n for n in names if n not in EXTERN_ORIGINS]
        if "where" in names and "arange" in names:
            names = [n for n in names if n not in MASK_OPS]
    for marker, (activation, parts) in DECOMPOSED.items():
        if (marker in names and DECOMPOSED_WITH.get(marker, frozenset()) <= set(names)
                and not any(CONCEPTS.get(n) == activation for n in names if n != marker)):
            names = [activation if n == marker else n for n in names if n not in parts]
    found: list[str] = []
    for name in names:
        if name in LAYOUT_OPS:
            continue
        concept = CONCEPTS.get(name, name)
        if concept == "matmul" and not (template or extern):
            concept = "add"  # a pointwise kernel fused with an addmm does its bias add
        if concept == "gelu" and "tanh" in source and "erf" not in source:
            concept = "gelu_tanh"
        if concept not in found:
            found.append(concept)
    if source and not template:
        found = [c for c in found if c not in SOURCE_MARKERS or SOURCE_MARKERS[c] in source]
    absorbed = set().union(*(PARTS_OF.get(c, set()) for c in found))
    kept = [c for c in found if c not in absorbed or c in PARTS_OF]
    if template and "addmm" in names and "add" not in kept:
        kept.append("add")  # the addmm template fuses its bias add
    return kept


def _code_of(kernel: KernelRecord) -> str:
    """A kernel's source without its comments and its name: the ORIGIN tracebacks quote the model's code
    (``cos = emb.cos()``) for kernels that only copy a tensor the rotary embedding made, and the name lists
    every origin's op (``..._rsqrt_t_view``) wherever it ran."""
    lines = (line for line in kernel.source.splitlines() if not line.lstrip().startswith("#"))
    return "\n".join(lines).replace(kernel.name, "")


def _tensors(graph: GraphRecord, kernel: KernelRecord | None, launch: Launch) -> tuple[list[_Tensor], str]:
    """Each tensor the launch passes, its sizes as numbers, and which size hints made those numbers ("" for a
    static graph)."""
    names = [a.name for a in kernel.args] if kernel else [f"arg{i}" for i in range(len(launch.args))]
    hints = graph.hints
    found, types = [], []
    for name, argument in zip(names, launch.args, strict=False):
        text = argument_type(graph, argument)
        if (parsed := tensor_type(text, hints)) is not None:
            found.append(_Tensor(name, argument, parsed[0], tuple(parsed[1])))
            types.append(text)
    return found, hinted("", hints, types).removeprefix("; ")


@functools.lru_cache(maxsize=16)
def _strides_in(output_code: str) -> dict[str, tuple[int, ...]]:
    """Buffer and input name -> strides, as call() checks or allocates them (``parse/call_layouts.py``: single
    and grouped ``assert_size_stride``, ``assert_tensor_metadata``, ``empty_strided_<device>``); numbers only."""
    strides: dict[str, tuple[int, ...]] = {}
    for name, written in written_layouts(output_code).items():
        if written.base is None and all(d.isdecimal() for d in written.stride):
            strides[name] = tuple(int(d) for d in written.stride)
    return strides


def strides_of(graph: GraphRecord, argument: str) -> tuple[int, ...] | None:
    """A launch argument's strides: a view's as written (``reinterpret_tensor(buf, sizes, strides, offset)``),
    else its buffer's (following reuses)."""
    if argument.startswith("reinterpret_tensor("):
        try:
            call = ast.parse(argument, mode="eval").body
            value = ast.literal_eval(call.args[2]) if isinstance(call, ast.Call) and len(call.args) > 2 else None
        except (SyntaxError, ValueError):
            return None
        return tuple(value) if isinstance(value, tuple) and all(isinstance(v, int) for v in value) else None
    known = _strides_in(graph.output_code)
    seen: set[str] = set()
    while argument not in known and argument in graph.aliases and argument not in seen:
        seen.add(argument)
        argument = graph.aliases[argument]
    return known.get(argument)


def _channels_last(graph: GraphRecord, tensor: _Tensor) -> int | None:
    """1 for an N, C, H, W tensor stored channels-last, 0 for contiguous, None when its strides are unknown."""
    strides = strides_of(graph, tensor.argument)
    if strides is None or len(strides) != 4 or len(tensor.dims) != 4:
        return None
    return int(strides[1] == 1 and tensor.dims[1] > 1)


def launch_problem(graph: GraphRecord, kernel: KernelRecord | None, launch: Launch) -> Problem:
    """What the launch computes (an Inductor kernel, or an extern call when ``kernel`` is None)."""
    tensors, from_hints = _tensors(graph, kernel, launch)
    problem = Problem(hints=from_hints)
    if kernel is not None:
        _kernel_problem(graph, kernel, tensors, problem)
        return problem
    op = op_name(launch.aten_op or launch.target)
    if op in SDPA_CAUSAL_POSITION:
        _attention(op, tensors, launch, problem, SDPA_CAUSAL_POSITION[op])
    elif op in SDPA_BACKWARD_CAUSAL_POSITION:
        # q is the second argument (after grad_out)
        queries_on = [t for t in tensors if t.param != "arg0"]
        _attention(op, queries_on, launch, problem, SDPA_BACKWARD_CAUSAL_POSITION[op], backward=True)
    elif op in ("convolution", "convolution_backward"):
        _convolution(graph, op, tensors, launch, problem)
    else:
        problem.concepts = concepts_of((op,), template=False, extern=True)
        if op in ("mm", "addmm", "bias_addmm"):
            operands = [t for t in tensors if len(t.dims) >= 2]
            if len(operands) >= 2:
                _matmul_shape(operands[-2], operands[-1], problem, b_is_kn=True)
            if op != "mm":
                problem.concepts.append("add")
    return problem


def _kernel_problem(graph: GraphRecord, kernel: KernelRecord, tensors: list[_Tensor], problem: Problem) -> None:
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
            _matmul_shape(named["arg_A"], named["arg_B"], problem)
        elif "arg_B" in named and (out := next((t for t in tensors if t.written and len(t.dims) == 2), None)):
            _matmul_from_output(out, named["arg_B"], problem)
        else:
            problem.note = "operand shapes not known"
        return
    if {"batchnorm_backward", "max_pool2d", "max_pool2d_backward"} & set(problem.concepts) or (
        BATCHNORM_FORWARD & set(problem.concepts)
    ):
        _channel_problem(graph, kernel, tensors, problem)
        return
    if not problem.concepts and kernel.category == "pointwise" and any(t.written for t in tensors) and any(
        not t.written for t in tensors
    ):
        # it only moves data (a permute, a split, a repeat for grouped-query attention, a layout for cuDNN)
        problem.concepts = ["copy"]
    _rows_cols(tensors, problem, by_written="embedding" in problem.concepts or problem.concepts == ["copy"])
    # a norm's own weight (and LayerNorm's bias) are rows of the width too, but not a bias add's
    problem.bias_inputs = max(0, problem.bias_inputs - sum(NORM_VECTORS.get(c, 0) for c in problem.concepts))
    if "embedding" in problem.concepts:
        _embedding_shape(tensors, problem)
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


def written_formulas(kernel: KernelRecord) -> list[str]:
    """The decomposed ops (FORMULA_ADDS' markers) whose formula the model's own code wrote out, once per time
    it is written (a kernel launched once per layer lists every layer's nodes)."""
    return [m for m in FORMULA_ADDS for node in kernel.source_nodes if re.fullmatch(rf"{m}(_\d+)?", node)]


def _rows_cols(tensors: list[_Tensor], problem: Problem, *, by_written: bool = False) -> None:
    """Rows x cols of the work: the largest tensor, or (``by_written``: a kernel that indexes a table, such as an
    embedding) the largest tensor it writes, the activations rather than the table it looks rows up in."""
    if not tensors:
        return
    written = [t for t in tensors if t.written]
    largest = max(written if by_written and written else tensors, key=lambda t: t.numel)
    numel = largest.numel
    vectors = [t.dims[0] for t in tensors if len(t.dims) == 1 and 1 < t.dims[0] < numel and numel % t.dims[0] == 0]
    cols = vectors[0] if vectors else largest.dims[-1] if largest.dims else 1
    problem.shape = {"rows": max(1, numel // max(cols, 1)), "cols": cols}
    problem.dtype = _DTYPES.get(largest.dtype)
    fulls = {t.text for t in tensors if t.numel == numel and not t.param.startswith("out_ptr")}
    problem.full_inputs = sum(1 for t in tensors if t.text in fulls and not t.param.startswith("out_ptr"))
    problem.bias_inputs = sum(1 for t in tensors if len(t.dims) == 1 and t.dims[0] == cols and cols != numel)


def _embedding_shape(tensors: list[_Tensor], problem: Problem) -> None:
    """Tokens, vocabulary and width of an embedding lookup: its index tensor and the table read right after it
    (Inductor loads the indices, then the table at them)."""
    ids_at = next((i for i, t in enumerate(tensors) if t.dtype in ("i64", "i32") and not t.written), None)
    cols = problem.shape.get("cols")
    if ids_at is None or cols is None:
        return
    table = next(
        (t for t in tensors[ids_at + 1 :] if len(t.dims) == 2 and not t.written and t.dims[1] == cols), None
    )
    if table is None:
        return
    problem.shape.update(tokens=tensors[ids_at].numel, vocab=table.dims[0], dim=table.dims[1])
    if not any(t.written for t in tensors):
        # what it writes is not known (an in-place buffer of unknown type): its rows are the tokens looked up,
        # not the table's
        problem.shape["rows"] = tensors[ids_at].numel
    if table.numel == problem.shape["rows"] * cols:
        # read at the looked-up rows only: not a full-size input although it is as large as one
        problem.full_inputs = max(problem.full_inputs - 1, 0)


def _channel_problem(graph: GraphRecord, kernel: KernelRecord, tensors: list[_Tensor], problem: Problem) -> None:
    """Batch norm, ReLU's gradient and max-pool kernels: N, C, H, W and the memory format of the activations."""
    concepts = problem.concepts
    images = [t for t in tensors if len(t.dims) == 4]
    writes_image = any(t.written for t in images)
    if "batchnorm_backward" in concepts:
        if writes_image:
            form = "batchnorm_backward_input" if "batchnorm" in concepts else "batchnorm_train_backward_input"
        else:
            form = "batchnorm_backward_reduce"
        concepts[:] = [form if c == "batchnorm_backward" else c for c in concepts if c not in BATCHNORM_FORWARD]
    if "max_pool2d_backward" in concepts:
        concepts[:] = [c for c in concepts if c != "max_pool2d"]  # the saved window offsets, not a new pool
    if any(c.endswith("_backward") or "_backward_" in c for c in concepts):
        # the gradient of the average pool (expanded, divided by H x W) that Inductor folds into the kernel after
        concepts[:] = [c for c in concepts if c != "div"]
    if not images:
        problem.note = (
            "finishes a per-channel reduction split over several launches (partial sums in, one value per "
            "channel out): the hand-written kernel does the whole reduction in the launch before"
        )
        concepts[:] = ["reduction_finish"]
        return
    # the activations the work is sized by: the largest image (a read one on a tie); a max-pool's input, which is
    # the gradient it writes in its backward
    source = max(images, key=lambda t: (t.numel, not t.written))
    if "max_pool2d_backward" in concepts:
        source = max((t for t in images if t.written), key=lambda t: t.numel, default=images[0])
    elif "max_pool2d" in concepts:
        source = max((t for t in images if not t.written), key=lambda t: t.numel, default=source)
    n, c, h, w = source.dims
    problem.shape = {"batch": n, "channels": c, "height": h, "width": w}
    channels_last = _channels_last(graph, next((t for t in images if t.written), source))
    if channels_last is None:
        channels_last = _channels_last(graph, source)
    problem.shape["channels_last"] = channels_last or 0
    if channels_last is None:
        problem.note = "memory format not known (strides not in the output code): taken as contiguous"
    problem.dtype = _DTYPES.get(source.dtype)
    full = [t for t in images if not t.written and t.numel == source.numel and t.dtype in _DTYPES]
    problem.full_inputs = len(full)
    # per-channel vectors: an eval-mode batch norm reads four (running mean and variance, weight, bias); a
    # bottleneck's end normalises its two branches in one kernel and reads eight
    problem.bias_inputs = sum(1 for t in tensors if t.dims == (c,))
    if {"max_pool2d", "max_pool2d_backward"} & set(concepts):
        window = _pool_window(graph, kernel)
        if window is None:
            problem.note = "max-pool window not found in the FX graph"
            problem.shape = {}
            return
        problem.shape.update(kernel=window[0], stride=window[1], padding=window[2])
    if "add" in concepts and "batchnorm" in concepts and "relu" not in concepts:
        problem.note = "batch norm then an add without ReLU"


def _pool_window(graph: GraphRecord, kernel: KernelRecord) -> tuple[int, int, int] | None:
    """(kernel, stride, padding) of the max-pool the kernel computes (or differentiates), from its FX node."""
    code = "\n".join(g.code for g in graph.fx_graphs)
    for node in kernel.post_grad_nodes or kernel.source_nodes:
        found = re.search(
            rf"\b{re.escape(node)}\b[^=\n]*= torch\.ops\.\w+\.{POOL_OPS}\.default\(([^\n]*)\)",
            code,
        )
        if found is None:
            continue
        lists = [ast.literal_eval(x) for x in re.findall(r"\[[\d, ]*\]", found[1])]
        if len(lists) >= 2 and all(len(v) == 2 and v[0] == v[1] for v in lists[:3]):
            kernel_size, stride = lists[0][0], lists[1][0]
            padding = lists[2][0] if len(lists) > 2 else 0
            return kernel_size, stride, padding
    return None


def _convolution(graph: GraphRecord, op: str, tensors: list[_Tensor], launch: Launch, problem: Problem) -> None:
    """A cuDNN convolution (or its backward): the activations' N, C, H, W, the weight's K, R, S, the
    stride, padding, dilation and groups as the call passes them, and the memory format."""
    arguments = _call_arguments(launch.code)
    names: tuple[str, ...]
    if op == "convolution":
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
        x_at, w_at = 0, 1
    else:
        names = ("grad_output", "input", "weight", "bias_sizes", "stride", "padding", "dilation", "transposed",
                 "output_padding", "groups", "output_mask")  # fmt: skip
        x_at, w_at = 1, 2
    values = dict(zip(names, arguments.positional, strict=False)) | arguments.keywords
    problem.concepts = [op]
    if values.get("transposed") is True:
        problem.concepts = ["convolution_transposed"]
        return
    if op == "convolution_backward":
        mask = values.get("output_mask")
        if isinstance(mask, list) and len(mask) == 3:
            grads = {0: "input", 1: "weight"}
            wanted = [grads[i] for i in (0, 1) if mask[i]]
            problem.concepts = [f"convolution_backward_{wanted[0]}"] if len(wanted) == 1 else [op]
            if mask[2]:
                problem.concepts.append("bias_grad")
    by_param = {t.param: t for t in tensors}
    x, weight = by_param.get(f"arg{x_at}"), by_param.get(f"arg{w_at}")
    if x is None or weight is None or len(x.dims) != 4 or len(weight.dims) != 4:
        problem.note = "tensor shapes not known"
        return
    settings = {}
    for key in ("stride", "padding", "dilation"):
        value = values.get(key, [1, 1] if key != "padding" else [0, 0])
        pair = list(value) if isinstance(value, (list, tuple)) else [value, value]
        if len(pair) != 2 or pair[0] != pair[1] or not isinstance(pair[0], int):
            problem.note = f"{key} {value} differs between height and width: the hand-written kernels take one"
            return
        settings[key] = pair[0]
    groups = values.get("groups", 1)
    n, c, h, w = x.dims
    k, _, r, s = weight.dims
    channels_last = _channels_last(graph, x)
    problem.shape = {
        "batch": n, "in_channels": c, "height": h, "width": w, "out_channels": k, "kernel_h": r, "kernel_w": s,
        **settings, "groups": groups if isinstance(groups, int) else 1, "channels_last": channels_last or 0,
    }  # fmt: skip
    problem.dtype = _DTYPES.get(x.dtype)
    if channels_last is None:
        problem.note = "memory format not known (strides not in the output code): taken as contiguous"


@dataclass(frozen=True)
class _Arguments:
    positional: tuple[object, ...]
    keywords: dict[str, object]


def _call_arguments(code: str) -> _Arguments:
    """The arguments of the call on a launch's line, literals evaluated (names and views kept as None)."""
    try:
        tree = ast.parse(code.strip().split("\n")[0].strip(), mode="exec")
    except SyntaxError:
        return _Arguments((), {})
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call)), None)
    if call is None:
        return _Arguments((), {})

    def value(node: ast.expr) -> object:
        try:
            return ast.literal_eval(node)
        except ValueError:
            return None

    return _Arguments(tuple(value(a) for a in call.args), {k.arg: value(k.value) for k in call.keywords if k.arg})


def _matmul_shape(a: _Tensor, b: _Tensor, problem: Problem, *, b_is_kn: bool = False) -> None:
    if len(a.dims) < 2 or len(b.dims) != 2:
        problem.note = "operand shapes not known"
        return
    # A may be the [batch, seq, K] activations a linear layer's template reads as [batch * seq, K]
    m, k = math.prod(a.dims[:-1]), a.dims[-1]
    # A template's B is the weight as stored ([N, K] for nn.Linear); an extern mm's is the [K, N] view.
    n = b.dims[1] if b_is_kn or (b.dims[0] == k and b.dims[1] != k) else b.dims[0]
    problem.shape = {"M": m, "N": n, "K": k}
    problem.dtype = _DTYPES.get(a.dtype) or _DTYPES.get(b.dtype)


def _matmul_from_output(out: _Tensor, b: _Tensor, problem: Problem) -> None:
    """M x N from the [M, N] output, K from B's other side, where A's type is not known (a view of a buffer
    the output code reinterprets)."""
    m, n = out.dims
    if len(b.dims) != 2 or n not in b.dims:
        problem.note = "operand shapes not known"
        return
    problem.shape = {"M": m, "N": n, "K": b.dims[1] if b.dims[0] == n else b.dims[0]}
    problem.dtype = _DTYPES.get(out.dtype) or _DTYPES.get(b.dtype)


def _attention(
    op: str, tensors: list[_Tensor], launch: Launch, problem: Problem, position: int, *, backward: bool = False
) -> None:
    """Attention (``tensors`` from q on) or its backward: batch, heads, seq, head_dim of q, causal or not."""
    causal = len(launch.args) > position and launch.args[position].strip() == "True"
    causal = causal or bool(re.search(r"is_causal\s*=\s*True", launch.code))
    problem.concepts = [("attention_causal" if causal else "attention") + ("_backward" if backward else "")]
    q = tensors[0] if tensors else None
    if q is not None and len(q.dims) == 4:
        problem.shape = dict(zip(("batch", "heads", "seq", "head_dim"), q.dims, strict=True))
        problem.dtype = _DTYPES.get(q.dtype)
        k = tensors[1] if len(tensors) > 1 else None
        if k is not None and len(k.dims) == 4 and k.dims[2] != q.dims[2]:
            problem.note = f"keys are {k.dims[2]} long and queries {q.dims[2]}; run with both {q.dims[2]} long"
