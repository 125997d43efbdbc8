"""Stage "analysis" of the pipeline (records -> analysis -> report): what the report's views read besides
the records.

``inductor_lens.analysis.analyze(run) -> RunAnalysis`` works these out from the records alone (a saved
lens.json re-renders with them), before any page is rendered: the diagnosis, the first page's answers, the
bound verdict, time per module and per source line, the FX graphs of the pre-grad stages, the nesting of the
compile's spans, symbolic sizes with their hints, kernels' bytes, the hand-written coverage.
``analyze_comparison(comparison) -> ComparisonAnalysis`` does the same for a comparison's pages. None of
this is written to lens.json: it is computed again on every render.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .answers import Answers, BoundVerdict, Finding, LineTime, ModuleTime
from .comparison import AgainstBaseline
from .graph import FxGraph, SourceLine

# The compile's IR stages that hold the pre-grad graph, in the order preferred (tlparse's order).
PRE_GRAD_STAGES = ("before_pre_grad_graph", "inductor_pre_grad_graph", "after_pre_grad_graph")

StabilityRule = Literal["spread", "shares", "part over whole", "busy machine"]


@dataclass(frozen=True)
class StabilityReason:
    rule: StabilityRule
    text: str  # the reason, worded with its numbers


@dataclass(frozen=True)
class Stability:
    """The judgement of one run's measurements: ``stable`` only when there were timings and no reason."""

    judged: bool  # there were timings to judge
    reasons: tuple[StabilityReason, ...] = ()
    notes: tuple[str, ...] = ()  # facts that do not make the run unstable (GPU runs on a busy machine)
    speedup_within_noise: bool = False
    load: str = ""  # the machine's load while the steps were timed, in one line ("" when not recorded)

    @property
    def stable(self) -> bool:
        return self.judged and not self.reasons

    @property
    def verdict(self) -> str:
        """How the speed-up may be read: "unstable", "within the noise", "judged" or "not measured"."""
        if not self.judged:
            return "not measured"
        if self.reasons:
            return "unstable"
        return "within the noise" if self.speedup_within_noise else "judged"


@dataclass(frozen=True)
class Diagnosis:
    device: str | None
    eager_us: float | None
    compiled_us: float | None
    headline: str
    findings: tuple[Finding, ...]  # ranked by time at stake, untimed ones last ("nothing to gain" first)
    stability: Stability
    noisy: bool = False  # the times are too noisy to be read (CPU, unstable)
    bound: BoundVerdict | None = None  # the verdict the host-bound finding rests on
    noise_us: float | None = None  # a time at stake under this is within the step's noise

    @property
    def timed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.at_stake_us is not None)


@dataclass(frozen=True)
class Coverage:
    """How much of the profiled device time has a hand-written equivalent, by kind of match."""

    total_us: float  # per step, every timed launch of the run's graphs
    # "exact", "composed", "partial", "none" (no match recorded: "none"), "rejected" (computes something else)
    by_kind_us: dict[str, float]
    launches: int
    # of the exact and composed ones, those whose every hand-written kernel agrees with torch
    agreeing_us: float

    @property
    def matched_share(self) -> float:
        """Exact or composed: the share the hand-written side can stand in for whole."""
        matched = self.by_kind_us.get("exact", 0.0) + self.by_kind_us.get("composed", 0.0)
        return matched / self.total_us if self.total_us else 0.0

    @property
    def agreeing_share(self) -> float:
        return self.agreeing_us / self.total_us if self.total_us else 0.0


@dataclass(frozen=True)
class DiagnosisRules:
    """The thresholds the diagnosis applies, for the page that words its rules."""

    bound_rule_gpu: str  # the bound verdict's rule in words (bench/bound.py ``rule_text``)
    bound_rule_cpu: str
    overhead_share: float
    precision_share: float
    autotune_under: float
    close_call: float
    noise_share: float
    far_from_roof: float
    tiny_kernel_s: float


@dataclass(frozen=True)
class KernelCost:
    """A generated kernel's bytes for its first launch (bench/roofline.py ``kernel_cost``, ``passed_bytes``)."""

    moved: int | None  # the bytes the roofline counts, None where unknown
    source: str  # where that count comes from
    passed: int | None  # the bytes of the tensors the first launch passes (None: never launched)


@dataclass(frozen=True)
class GraphAnalysis:
    """One graph's: its types with their symbolic sizes' hints, each launch's user lines, its kernels' bytes."""

    annotated: Mapping[str, str]  # a type as recorded -> with each symbolic size's hint (``f32[s0=24, 8]``)
    launch_lines: Mapping[int, tuple[SourceLine, ...]]  # launch position -> the user lines of its ops
    kernel_costs: Mapping[str, KernelCost]  # by kernel name

    def annotate(self, text: str | None) -> str:
        return self.annotated.get(text, text) if text else ""


@dataclass(frozen=True)
class RunAnalysis:
    """A run's analysis (``inductor_lens.analysis.analyze``): what its pages read besides the run itself."""

    diagnosis: Diagnosis
    rules: DiagnosisRules
    graphs: Mapping[str, GraphAnalysis]  # by graph id
    answers: Answers
    line_times: tuple[LineTime, ...]
    module_times: tuple[ModuleTime, ...]
    bound: BoundVerdict | None
    # per (frame compile id, stage position from 1): the FX graph of each pre-grad IR stage
    pre_grad_graphs: Mapping[tuple[str, int], FxGraph]
    span_nesting: Mapping[int, tuple[int, int | None]]  # timeline span index -> (row, innermost parent)
    guard_symbols: Mapping[str, tuple[str, ...]]  # a shape guard's expression -> the symbols in it
    custom_ops: frozenset[str]  # the extern launch targets that are custom ops
    coverage: Coverage | None  # None where no launch was timed
    device: str  # "cuda" or "cpu": where the hand-written checks run
    wrapped_forward: bool  # a frame compiled the model through torch's wrap_inline frame

    def graph(self, graph_id: str) -> GraphAnalysis:
        return self.graphs[graph_id]


@dataclass(frozen=True)
class ComparisonAnalysis:
    headline: str  # what the runs differ in besides mode and options ("" when nothing)
    against_eager: tuple[AgainstBaseline | None, ...]  # per configuration, in order
    change_thresholds: tuple[str, ...]  # per kernel diff, in order: the rule its changes were judged by
