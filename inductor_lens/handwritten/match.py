"""Stage 4 of the pipeline (bench), hand-written side: which hand-written kernel does the job of each Inductor kernel.

Matching works on the records alone (no torch), so a report built on a laptop shows it too. What each launch
computes, and on what shapes, is ``problem.py``'s; here:
1. an equivalent that covers exactly a launch's concepts is an *exact* match; otherwise hand-written
   kernels are combined, in the order Inductor's kernel computes them, into a *composed* match
   (several launches where Inductor made one) or, when something stays uncovered, a *partial* one;
   the smallest composition wins (one kernel that does the job beats a chain);
2. ``coverage`` says what share of the profiled device time has an exact or composed equivalent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..parse.compat import SDPA_BACKWARD_CAUSAL_POSITION, SDPA_CAUSAL_POSITION
from ..records import CompileRun, GraphRecord, HandwrittenMatch, KernelRecord, Launch
from ..records.analysis import Coverage
from .catalog import EQUIVALENTS, get
from .concepts import FORMULA_ADDS, concepts_of, op_name, written_formulas
from .equivalent import Equivalent
from .problem import launch_problem
from .shapes import Problem

__all__ = [
    "LaunchMatches", "agrees", "choose", "concepts_of", "coverage", "match_launch", "match_run", "op_name", "shape_for",
    "timed_launches",
]  # fmt: skip

# Elementwise equivalents that read two full-size tensors (the others read one, and at most a bias row).
TWO_FULL_INPUTS = frozenset({"residual", "bias_residual", "silu_mul", "gelu_mul", "gelu_tanh_mul"})
# Extern calls with hand-written equivalents (the others, such as cuBLAS's own bmm, are not matched).
MATCHED_EXTERN = frozenset({"convolution", "convolution_backward"})


def _variant(candidate: Equivalent, problem: Problem) -> Equivalent:
    """Among equivalents of the same job, the one that reads what Inductor's kernel reads."""
    if candidate.name == "add" and problem.full_inputs >= 2:
        # two full-size tensors: a residual add, with a bias row only where the kernel reads one
        return get("bias_residual" if problem.bias_inputs else "residual")
    if candidate.family == "matmul" and "add" not in problem.concepts:
        return get("matmul")
    return candidate


def choose(concepts: list[str], problem: Problem | None = None) -> tuple[str, list[Equivalent], list[str]]:
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
    problem = launch_problem(graph, kernel, launch)
    kind, chosen, uncovered = choose(problem.concepts, problem)
    dtype = problem.dtype or default_dtype or "float32"
    note = problem.note
    if chosen and not problem.shape:
        # named in the note, not run: there is nothing to run them on
        kind, note = "none", note or "the shapes of its tensors are not known"
        uncovered, chosen = list(problem.concepts), []
    elif chosen and problem.hints:
        note = "; ".join(n for n in (note, f"shapes {problem.hints} (dynamic shapes)") if n)
    if kernel is not None and chosen:
        residuals = _more_adds(kernel, chosen)
        chosen += [get("residual")] * residuals
        if more := _more_batchnorms(problem, chosen):
            chosen[:0] = [get("batchnorm")] * more
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


def _more_adds(kernel: KernelRecord, chosen: list[Equivalent]) -> int:
    """Adds in the model's code (``x + y`` nodes) that the chosen kernels do not do: residual adds (not the
    adds inside a formula the model wrote out)."""
    in_source = sum(1 for node in kernel.source_nodes if re.fullmatch(r"i?add(_\d+)?", node))
    in_source -= sum(FORMULA_ADDS[m] for m in written_formulas(kernel))
    done = sum(1 + (e.name == "bias_residual") for e in chosen if "add" in e.covers and e.name != "residual")
    return max(0, in_source - done)


def _more_batchnorms(problem: Problem, chosen: list[Equivalent]) -> int:
    """Eval-mode batch norms beyond the chosen kernels' own: four per-channel vectors each (a bottleneck's two
    branches normalised in one kernel before their sum)."""
    if "batchnorm" not in problem.concepts or not problem.shape.get("channels"):
        return 0
    done = sum(1 for e in chosen if "batchnorm" in e.covers)
    return max(0, problem.bias_inputs // 4 - done)


def _more_inputs(problem: Problem, chosen: list[Equivalent]) -> list[str]:
    """Full-size tensors an elementwise Inductor kernel reads beyond what the hand-written one reads."""
    if chosen[0].family != "elementwise":
        return []
    extra = problem.full_inputs - max(2 if e.name in TWO_FULL_INPUTS else 1 for e in chosen)
    return [f"{extra} more full-size input{'s' if extra > 1 else ''}"] if extra > 0 else []


def matched_extern(launch: Launch) -> bool:
    """Whether an extern call is one the hand-written kernels stand in for (matmul, attention, convolution)."""
    op = op_name(launch.aten_op or launch.target)
    return (
        op in SDPA_CAUSAL_POSITION
        or op in SDPA_BACKWARD_CAUSAL_POSITION
        or op in MATCHED_EXTERN
        or concepts_of((op,), template=False, extern=True) == ["matmul"]
    )


def match_run(run: CompileRun) -> tuple[HandwrittenMatch, ...]:
    """A match for every generated kernel (first launch of each) and every extern matmul, attention or
    convolution call."""
    default_dtype = run.settings.dtype if run.settings else None
    matches = []
    for graph in run.graphs:
        seen: set[str] = set()
        for launch in graph.launches:
            if launch.kind == "extern":
                if not matched_extern(launch):
                    continue
            elif launch.target in seen or graph.kernel(launch.target) is None:
                continue
            seen.add(launch.target)
            matches.append(match_launch(graph, launch, default_dtype))
    return tuple(matches)


class LaunchMatches:
    """The match of each launch: a generated kernel's every launch takes its first launch's match, an extern call
    its own."""

    def __init__(self, matches: tuple[HandwrittenMatch, ...]) -> None:
        self._by_kernel = {(m.graph_id, m.target): m for m in matches}
        self._by_position = {(m.graph_id, m.launch): m for m in matches}

    def of(self, graph: GraphRecord, launch: Launch) -> HandwrittenMatch | None:
        if launch.kind == "extern":
            return self._by_position.get((graph.id, launch.position))
        return self._by_kernel.get((graph.id, launch.target))


def timed_launches(
    run: CompileRun, matches: tuple[HandwrittenMatch, ...] | None = None
) -> Iterator[tuple[Launch, HandwrittenMatch | None, float]]:
    """Every timed launch of the run's graphs, with its match (``run.handwritten``'s unless ``matches`` are
    given) and its profiled median in µs per step."""
    lookup = LaunchMatches(run.handwritten if matches is None else matches)
    for graph in run.graphs:
        for launch in graph.launches:
            if launch.timing is not None:
                yield launch, lookup.of(graph, launch), launch.timing.median_us


def agrees(match: HandwrittenMatch) -> bool:
    """Every hand-written kernel of the match ran and agreed with torch, and the match was not rejected
    (found to compute something else than Inductor's kernel)."""
    return not match.rejected and bool(match.runs) and all(r.ok for r in match.runs)


def run_device(run: CompileRun) -> str:
    """Where the run's hand-written checks run: "cuda" or "cpu"."""
    device = (run.bench.device if run.bench else None) or (run.settings.device if run.settings else None)
    return "cuda" if (device or run.environment.device_type or "cpu").startswith("cuda") else "cpu"


def coverage(run: CompileRun, matches: tuple[HandwrittenMatch, ...] | None = None) -> Coverage | None:
    """The device time of every timed launch, split by the kind of its match. None when no launch was timed."""
    by_kind: dict[str, float] = {}
    total, agreeing, timed = 0.0, 0.0, 0
    for _, match, time_us in timed_launches(run, matches):
        kind = "none" if match is None else "rejected" if match.rejected else match.kind
        by_kind[kind] = by_kind.get(kind, 0.0) + time_us
        if match is not None and kind in ("exact", "composed") and agrees(match):
            agreeing += time_us
        total += time_us
        timed += 1
    return Coverage(total, by_kind, timed, agreeing) if timed else None


def shape_for(equivalent: Equivalent, shape: dict[str, int]) -> dict[str, int] | None:
    """The match's shape in this equivalent's dimensions (an epilogue after a matmul runs on M x N)."""
    if all(d in shape for d in equivalent.dims):
        return {d: shape[d] for d in equivalent.dims}
    if equivalent.dims == ("rows", "cols") and "M" in shape:
        return {"rows": shape["M"], "cols": shape["N"]}
    if equivalent.dims == ("rows", "cols") and "channels" in shape:
        # an elementwise step of a batch norm kernel: the activations as (N x C) rows of H x W
        return {"rows": shape["batch"] * shape["channels"], "cols": shape["height"] * shape["width"]}
    if equivalent.dims == ("rows", "vocab") and {"rows", "cols"} <= set(shape):
        return {"rows": shape["rows"], "vocab": shape["cols"]}  # the logits: a row per token
    return None
