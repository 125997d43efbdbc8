"""Stage 4 of the pipeline (bench), hand-written side: which hand-written kernel does the job of each Inductor kernel.

Matching works on the records alone (no torch), so a report built on a laptop shows it too:
1. the ATen ops a kernel (or an extern call) computes become *concepts* ("softmax", "layernorm",
   "add", "matmul", ...): layout ops (views, transposes, dtype conversions) are dropped and the
   pieces of a decomposed op (softmax's exp, sub, amax) fold into the op;
2. an equivalent that covers exactly those concepts is an *exact* match; otherwise hand-written
   kernels are combined, in the order Inductor's kernel computes them, into a *composed* match
   (several launches where Inductor made one) or, when something stays uncovered, a *partial* one;
3. the shapes and dtype come from the tensors the Inductor kernel's launch really passes
   (``rows x cols`` of its largest tensor, M/N/K of a matmul, batch/heads/seq/head_dim of q); under
   dynamic shapes their symbolic sizes are taken at the graph's size hints, and the match says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..bench.roofline import argument_type, hinted, tensor_type
from ..parse.compat import SDPA_CAUSAL_POSITION
from ..parse.fx_graph import FX_DTYPES
from ..records import CompileRun, GraphRecord, HandwrittenMatch, KernelRecord, Launch
from .catalog import EQUIVALENTS, Equivalent, get

# ATen ops that only move or reinterpret data, and dtype conversions: nothing to hand-write.
LAYOUT_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "t", "permute", "transpose", "select", "slice", "expand",
    "unsqueeze", "squeeze", "clone", "as_strided", "alias", "contiguous", "convert_element_type",
    "_to_copy", "copy", "copy_", "detach", "lift_fresh_copy", "full", "empty", "zeros",
})  # fmt: skip
CONCEPTS = {
    "_softmax": "softmax", "softmax": "softmax", "prepare_softmax_online": "softmax", "amax": "softmax",
    "_softmax_backward_data": "softmax_backward",
    "native_layer_norm": "layernorm", "layer_norm": "layernorm", "var_mean": "layernorm",
    "native_layer_norm_backward": "layernorm_backward",
    "_fused_rms_norm": "rmsnorm", "rms_norm": "rmsnorm",
    "gelu": "gelu", "relu": "relu", "add": "add",
    "mm": "matmul", "addmm": "matmul", "bias_addmm": "matmul",
}  # fmt: skip
# Ops that are steps of a decomposed op when that op is in the kernel too.
PARTS_OF = {"softmax": {"exp", "sub", "sum", "div", "amax"}, "rmsnorm": {"pow", "mean", "rsqrt", "mul", "add"},
            "softmax_backward": {"mul", "sum", "sub"}}  # fmt: skip
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
}
# A formula the model wrote out (GPT-2's NewGELU: 0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3))); Llama's
# RMSNorm with its eps add) leaves its own adds and muls among the kernel's source nodes and name. Per marker
# op found in the source nodes: the adds that belong to the formula rather than to a residual.
FORMULA_ADDS = {"tanh": 2, "erf": 1, "rsqrt": 1}
# Elementwise equivalents that read two full-size tensors (the others read one, and at most a bias row).
TWO_FULL_INPUTS = frozenset({"residual", "bias_residual", "silu_mul"})
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
class _Problem:
    """What a kernel computes and on what: the input to choosing equivalents."""

    concepts: list[str] = field(default_factory=list)
    shape: dict[str, int] = field(default_factory=dict)
    dtype: str | None = None
    full_inputs: int = 0
    bias_inputs: int = 0
    note: str = ""
    hints: str = ""  # "from size hints s53=24" where symbolic sizes were worked out


def concepts_of(
    aten_ops: tuple[str, ...], *, template: bool, source: str = "", extern: bool = False
) -> list[str]:
    names = [op_name(op) for op in aten_ops]
    for marker, (activation, parts) in DECOMPOSED.items():
        if marker in names and not any(CONCEPTS.get(n) == activation for n in names if n != marker):
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
    absorbed = set().union(*(PARTS_OF.get(c, set()) for c in found))
    kept = [c for c in found if c not in absorbed or c in PARTS_OF]
    if template and "addmm" in names and "add" not in kept:
        kept.append("add")  # the addmm template fuses its bias add
    return kept


def _dtype(text: str | None) -> str | None:
    parsed = tensor_type(text)
    return _DTYPES.get(parsed[0]) if parsed else None


def _tensor_args(
    graph: GraphRecord, kernel: KernelRecord | None, launch: Launch
) -> tuple[list[tuple[str, str]], str]:
    """(parameter name, tensor type with its sizes as numbers) of each tensor the launch passes, and
    which size hints made those numbers ("" for a static graph)."""
    names = [a.name for a in kernel.args] if kernel else [f"arg{i}" for i in range(len(launch.args))]
    hints = graph.hints
    found, types = [], []
    for name, argument in zip(names, launch.args, strict=False):
        text = argument_type(graph, argument)
        if (parsed := tensor_type(text, hints)) is not None:
            found.append((name, f"{parsed[0]}[{', '.join(map(str, parsed[1]))}]"))
            types.append(text)
    return found, hinted("", hints, types).removeprefix("; ")


def _rows_cols(tensors: list[tuple[str, str]], problem: _Problem, *, by_written: bool = False) -> None:
    """Rows x cols of the work: the largest tensor, or (``by_written``: a kernel that indexes a table, such as an
    embedding) the largest tensor it writes, the activations rather than the table it looks rows up in."""
    shapes = [(n, *tensor_type(t)) for n, t in tensors]  # type: ignore[misc]
    if not shapes:
        return
    written = [s for s in shapes if s[0].startswith(("out_ptr", "in_out_ptr"))]
    _, dtype, dims = max(written if by_written and written else shapes, key=lambda s: math.prod(s[2]))
    numel = math.prod(dims)
    vectors = [d[0] for _, _, d in shapes if len(d) == 1 and 1 < d[0] < numel and numel % d[0] == 0]
    cols = vectors[0] if vectors else dims[-1] if dims else 1
    problem.shape = {"rows": max(1, numel // max(cols, 1)), "cols": cols}
    tables = [d[0] for n, _, d in shapes if by_written and len(d) == 2 and d[1] == cols and not n.startswith("out_ptr")]
    if tables:  # the rows of the largest table it looks up (an embedding's vocabulary)
        problem.shape["vocab"] = max(tables)
    problem.dtype = _DTYPES.get(dtype)
    fulls = {t for n, t in tensors if math.prod(tensor_type(t)[1]) == numel and not n.startswith("out_ptr")}  # type: ignore[index]
    problem.full_inputs = sum(1 for n, t in tensors if t in fulls and not n.startswith("out_ptr"))
    problem.bias_inputs = sum(1 for _, _, d in shapes if len(d) == 1 and d[0] == cols and cols != numel)


def _problem(graph: GraphRecord, kernel: KernelRecord | None, launch: Launch) -> _Problem:
    tensors, from_hints = _tensor_args(graph, kernel, launch)
    problem = _Problem(hints=from_hints)
    if kernel is not None:
        template = kernel.category == "template"
        problem.concepts = concepts_of(kernel.aten_ops, template=template, source=kernel.source)
        if template:
            _matmul_shape(dict(tensors), problem, a="arg_A", b="arg_B")
        else:
            _rows_cols(tensors, problem, by_written=any(op_name(op) == "embedding" for op in kernel.aten_ops))
        # an add or mul that a decomposed op's pieces hid: the kernel's name still lists it. Where the model
        # wrote the decomposed op's formula out, the name lists the formula's own adds and muls: only an add
        # of a second full-size input (a residual) is the kernel's own work then.
        if not _written_formulas(kernel):
            wanted: tuple[str, ...] = ("mul", "add")
        else:
            wanted = ("add",) if problem.full_inputs > 1 else ()
        problem.concepts[:0] = [op for op in kernel.name.split("_") if op in wanted and op not in problem.concepts]
        return problem
    op = op_name(launch.aten_op or launch.target)
    if op in SDPA_CAUSAL_POSITION:
        _attention(op, tensors, launch, problem)
    else:
        problem.concepts = concepts_of((op,), template=False, extern=True)
        if op in ("mm", "addmm", "bias_addmm"):
            operands = [name for name, text in tensors if len(tensor_type(text)[1]) >= 2]  # type: ignore[index]
            if len(operands) >= 2:
                _matmul_shape(dict(tensors), problem, a=operands[-2], b=operands[-1], b_is_kn=True)
            if op != "mm":
                problem.concepts.append("add")
    return problem


def _matmul_shape(
    tensors: dict[str, str], problem: _Problem, *, a: str, b: str, b_is_kn: bool = False
) -> None:
    a_type, b_type = tensor_type(tensors.get(a)), tensor_type(tensors.get(b))
    if a_type is None or b_type is None or len(a_type[1]) != 2 or len(b_type[1]) != 2:
        problem.note = "operand shapes not known"
        return
    m, k = a_type[1]
    # A template's B is the weight as stored ([N, K] for nn.Linear); an extern mm's is the [K, N] view.
    n = b_type[1][1] if b_is_kn or (b_type[1][0] == k and b_type[1][1] != k) else b_type[1][0]
    problem.shape = {"M": m, "N": n, "K": k}
    problem.dtype = _DTYPES.get(a_type[0]) or _DTYPES.get(b_type[0])


def _attention(op: str, tensors: list[tuple[str, str]], launch: Launch, problem: _Problem) -> None:
    position = SDPA_CAUSAL_POSITION[op]
    causal = len(launch.args) > position and launch.args[position].strip() == "True"
    causal = causal or bool(re.search(r"is_causal\s*=\s*True", launch.code))
    problem.concepts = ["attention_causal" if causal else "attention"]
    q = tensor_type(tensors[0][1]) if tensors else None
    if q is not None and len(q[1]) == 4:
        problem.shape = dict(zip(("batch", "heads", "seq", "head_dim"), q[1], strict=True))
        problem.dtype = _DTYPES.get(q[0])
        k = tensor_type(tensors[1][1]) if len(tensors) > 1 else None
        if k is not None and k[1][2] != q[1][2]:
            problem.note = f"keys are {k[1][2]} long and queries {q[1][2]}; run with both {q[1][2]} long"


def _variant(candidate: Equivalent, problem: _Problem) -> Equivalent:
    """Among equivalents of the same job, the one that reads what Inductor's kernel reads."""
    if candidate.name == "add" and problem.full_inputs >= 2:
        return get("bias_residual")
    if candidate.family == "matmul" and "add" not in problem.concepts:
        return get("matmul")
    return candidate


def choose(concepts: list[str], problem: _Problem | None = None) -> tuple[str, list[Equivalent], list[str]]:
    """(kind, equivalents in the order the kernel computes their work, concepts left uncovered)."""
    wanted = set(concepts)
    if not wanted:
        return "none", [], []
    exact = [e for e in EQUIVALENTS if e.covers == wanted]
    if exact:
        best = exact[0] if problem is None else _variant(exact[0], problem)
        return "exact", [best], []
    chosen: list[Equivalent] = []
    left = set(wanted)
    for candidate in sorted(EQUIVALENTS, key=lambda e: -len(e.covers)):
        if candidate.covers <= wanted and candidate.covers & left:
            chosen.append(candidate if problem is None else _variant(candidate, problem))
            left -= candidate.covers
    if not chosen:
        return "none", [], [c for c in concepts if c in left]
    order = {c: i for i, c in enumerate(concepts)}
    chosen.sort(key=lambda e: min(order[c] for c in e.covers))
    uncovered = [c for c in concepts if c in left]
    return ("partial" if uncovered else "composed"), chosen, uncovered


def match_launch(graph: GraphRecord, launch: Launch, default_dtype: str | None = None) -> HandwrittenMatch:
    kernel = graph.kernel(launch.target) if launch.kind != "extern" else None
    problem = _problem(graph, kernel, launch)
    kind, chosen, uncovered = choose(problem.concepts, problem)
    dtype = problem.dtype or default_dtype or "float32"
    note = problem.note
    if chosen and not problem.shape:
        kind, note = "none", note or "the shapes of its tensors are not known"
    elif chosen and problem.hints:
        note = "; ".join(n for n in (note, f"shapes {problem.hints} (dynamic shapes)") if n)
    if kernel is not None and chosen:
        residuals = _more_adds(kernel, chosen)
        chosen += [get("residual")] * residuals
        uncovered += _more_inputs(problem, chosen)
        kind = "partial" if uncovered else "composed" if len(chosen) > 1 else kind
    return HandwrittenMatch(
        graph_id=graph.id,
        target=launch.target,
        launch=launch.position,
        kind=kind,  # type: ignore[arg-type]
        equivalents=tuple(e.name for e in chosen),
        concepts=tuple(problem.concepts),
        not_covered=tuple(uncovered),
        shape=problem.shape if chosen else {},
        dtype=dtype,
        note=note,
    )


def _written_formulas(kernel: KernelRecord) -> list[str]:
    """The decomposed ops (FORMULA_ADDS' markers) whose formula the model's own code wrote out."""
    return [m for m in FORMULA_ADDS if any(re.fullmatch(rf"{m}(_\d+)?", node) for node in kernel.source_nodes)]


def _more_adds(kernel: KernelRecord, chosen: list[Equivalent]) -> int:
    """Adds in the model's code (``x + y`` nodes) that the chosen kernels do not do: residual adds (not the
    adds inside a formula the model wrote out)."""
    in_source = sum(1 for node in kernel.source_nodes if re.fullmatch(r"i?add(_\d+)?", node))
    in_source -= sum(FORMULA_ADDS[m] for m in _written_formulas(kernel))
    done = sum(1 + (e.name == "bias_residual") for e in chosen if "add" in e.covers and e.name != "residual")
    return max(0, in_source - done)


def _more_inputs(problem: _Problem, chosen: list[Equivalent]) -> list[str]:
    """Full-size tensors an elementwise Inductor kernel reads beyond what the hand-written one reads."""
    if chosen[0].family != "elementwise":
        return []
    extra = problem.full_inputs - max(2 if e.name in TWO_FULL_INPUTS else 1 for e in chosen)
    return [f"{extra} more full-size input{'s' if extra > 1 else ''}"] if extra > 0 else []


def match_run(run: CompileRun) -> tuple[HandwrittenMatch, ...]:
    """A match for every generated kernel (first launch of each) and every extern matmul or attention call."""
    default_dtype = run.settings.dtype if run.settings else None
    matches = []
    for graph in run.graphs:
        seen: set[str] = set()
        for launch in graph.launches:
            if launch.kind == "extern":
                op = op_name(launch.aten_op or launch.target)
                if op not in SDPA_CAUSAL_POSITION and CONCEPTS.get(op) != "matmul":
                    continue
            elif launch.target in seen or graph.kernel(launch.target) is None:
                continue
            seen.add(launch.target)
            matches.append(match_launch(graph, launch, default_dtype))
    return tuple(matches)


def shape_for(equivalent: Equivalent, shape: dict[str, int]) -> dict[str, int] | None:
    """The match's shape in this equivalent's dimensions (an epilogue after a matmul runs on M x N)."""
    if all(d in shape for d in equivalent.dims):
        return {d: shape[d] for d in equivalent.dims}
    if equivalent.dims == ("rows", "cols") and "M" in shape:
        return {"rows": shape["M"], "cols": shape["N"]}
    if equivalent.dims == ("tokens", "vocab", "dim") and {"rows", "cols", "vocab"} <= set(shape):
        return {"tokens": shape["rows"], "vocab": shape["vocab"], "dim": shape["cols"]}
    if equivalent.dims == ("rows", "vocab") and {"rows", "cols"} <= set(shape):
        return {"rows": shape["rows"], "vocab": shape["cols"]}  # the logits: a row per token
    return None
