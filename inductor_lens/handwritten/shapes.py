"""Stage 4 of the pipeline (bench), hand-written side: on what shapes one launch computes (step 2 of
problem.py's), read from the tensors the launch really passes.

``rows x cols`` of its largest tensor (the activations it writes for an embedding, not the table it reads),
M/N/K of a matmul, batch/heads/seq/head_dim of q, N/C/H/W and the memory format of a convolution's or batch
norm's activations (strides from the ``assert_size_stride`` and ``empty_strided`` lines of the output code), the
window of a max-pool from its FX node. Under dynamic shapes symbolic sizes are taken at the graph's size hints.
Each reader fills a ``Problem``.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from dataclasses import dataclass, field

from ..bench.roofline import argument_type, hinted, tensor_type
from ..parse.call_layouts import written_layouts
from ..parse.fx_graph import FX_DTYPES
from ..records import GraphRecord, KernelRecord, Launch
from .concepts import BATCHNORM_FORWARD

# The FX ops of a max-pool whose arguments give its window (kernel, stride, padding lists after the tensors).
POOL_OPS = r"(?:max_pool2d_with_indices(?:_backward)?|_low_memory_max_pool_with_offsets)"
# the FX dtypes the hand-written kernels take
_DTYPES = {short: name for short, name in FX_DTYPES.items() if name in ("float32", "float16", "bfloat16")}


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
class PassedTensor:
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


def passed_tensors(graph: GraphRecord, kernel: KernelRecord | None, launch: Launch) -> tuple[list[PassedTensor], str]:
    """Each tensor the launch passes, its sizes as numbers, and which size hints made those numbers ("" for a
    static graph)."""
    names = [a.name for a in kernel.args] if kernel else [f"arg{i}" for i in range(len(launch.args))]
    hints = graph.hints
    found, types = [], []
    for name, argument in zip(names, launch.args, strict=False):
        text = argument_type(graph, argument)
        if (parsed := tensor_type(text, hints)) is not None:
            found.append(PassedTensor(name, argument, parsed[0], tuple(parsed[1])))
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


def _channels_last(graph: GraphRecord, tensor: PassedTensor) -> int | None:
    """1 for an N, C, H, W tensor stored channels-last, 0 for contiguous, None when its strides are unknown."""
    strides = strides_of(graph, tensor.argument)
    if strides is None or len(strides) != 4 or len(tensor.dims) != 4:
        return None
    return int(strides[1] == 1 and tensor.dims[1] > 1)


def rows_cols(tensors: list[PassedTensor], problem: Problem, *, by_written: bool = False) -> None:
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


def embedding_shape(tensors: list[PassedTensor], problem: Problem) -> None:
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


def channel_problem(graph: GraphRecord, kernel: KernelRecord, tensors: list[PassedTensor], problem: Problem) -> None:
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


def convolution_problem(graph: GraphRecord, op: str, tensors: list[PassedTensor], launch: Launch, problem: Problem) -> None:
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


def matmul_shape(a: PassedTensor, b: PassedTensor, problem: Problem, *, b_is_kn: bool = False) -> None:
    if len(a.dims) < 2 or len(b.dims) != 2:
        problem.note = "operand shapes not known"
        return
    # A may be the [batch, seq, K] activations a linear layer's template reads as [batch * seq, K]
    m, k = math.prod(a.dims[:-1]), a.dims[-1]
    # A template's B is the weight as stored ([N, K] for nn.Linear); an extern mm's is the [K, N] view.
    n = b.dims[1] if b_is_kn or (b.dims[0] == k and b.dims[1] != k) else b.dims[0]
    problem.shape = {"M": m, "N": n, "K": k}
    problem.dtype = _DTYPES.get(a.dtype) or _DTYPES.get(b.dtype)


def matmul_from_output(out: PassedTensor, b: PassedTensor, problem: Problem) -> None:
    """M x N from the [M, N] output, K from B's other side, where A's type is not known (a view of a buffer
    the output code reinterprets)."""
    m, n = out.dims
    if len(b.dims) != 2 or n not in b.dims:
        problem.note = "operand shapes not known"
        return
    problem.shape = {"M": m, "N": n, "K": b.dims[1] if b.dims[0] == n else b.dims[0]}
    problem.dtype = _DTYPES.get(out.dtype) or _DTYPES.get(b.dtype)


def attention_problem(
    op: str, tensors: list[PassedTensor], launch: Launch, problem: Problem, position: int, *, backward: bool = False
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
