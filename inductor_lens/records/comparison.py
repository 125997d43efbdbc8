"""Records, comparisons: one model under several configurations (``compare``), or two reports (``diff``).

Schema history of the comparison document (bump COMPARISON_SCHEMA_VERSION on any change an older
reader would misread); its numbers continue the run document's, which it shared until 5:
  5: first version: configurations with their timings and noise, kernel diffs, verdict, evidence.
  6: the judgements the pages show, made where the comparison is built: each configuration's step time
     (ConfigResult.step_ms) and its difference from the baseline against the noise of the two
     (ConfigResult.against_baseline), each kernel change's time against that noise (KernelChange.judgement,
     ConfigDiff.noise). A version 5 document has none: its pages show the numbers without a judgement.
  7: interleaved warm
     rounds (ConfigResult.rounds, RoundMeasure; Comparison.rounds), each configuration against the fastest
     (ConfigResult.against_fastest) with the paired round ratios behind a judgement (AgainstBaseline.ratios,
     .rounds_agree), what the runs differ in beyond the mode and options (Comparison.differences,
     FactDifference; ConfigResult.facts), and what the verdict compares (Verdict.runner_up, .same_code,
     .rule, .compares), and each configuration's diagnosis (ConfigResult.diagnosis, DiagnosisLine). A version 6
     document reads with none of them: its verdict keeps its own noise.
  8: one source for each number the page words: how a step is worked out in general words
     (ConfigResult.step_rule), the eager step measured by the same processes as the step and the speed-up
     made of the two (ConfigResult.eager_step_ms; speedup = eager_step_ms / step_ms), the reasons the
     configuration's own report calls its measurements unstable (ConfigResult.unstable), a diagnosis line's
     change measured by another configuration of the comparison (DiagnosisLine.tried_by, .tried), and a
     kernel change that is the same code under another autotuner pick (KernelChange.same_code). A version 7
     document reads with none of them.
  9: the settings of a configuration beyond its mode and options (ConfigResult.settings: autocast, the float32
     matmul precision, cuDNN's TF32, dynamic, Dynamo's config, in words), and the facts of those settings
     (FactDifference.fact "autocast", "cudnn tf32", "dynamo config"). A version 8 document reads with none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .autotune import ChoiceKind
from .codec import JsonValue, dumps, from_jsonable, lens_document, to_jsonable
from .graph import GraphKind
from .outcome import CaptureStatus
from .timing import Timing

COMPARISON_SCHEMA_VERSION = 9

ChangeKind = Literal["unchanged", "changed", "regrouped", "added", "removed"]
# A difference in time against the run-to-run noise (compare/summary.py): slower or faster only beyond it.
Judgement = Literal["slower", "faster", "within noise"]


@dataclass(frozen=True)
class AutotuneWinner:
    """What the autotuner picked for one op and shape, and what came second."""

    op: str
    shapes: str
    winner: str
    winner_ms: float
    winner_kind: ChoiceKind
    runner_up: str | None = None
    runner_up_ms: float | None = None
    choices: int = 0


@dataclass(frozen=True)
class AgainstBaseline:
    """A configuration's compiled step against the baseline's, judged against the noise of the two."""

    fraction: float  # step_ms / the baseline's step_ms - 1: + = slower
    noise: float  # what the difference had to beat (fraction; compare/noise.py says how)
    judgement: Judgement
    # Interleaved rounds: this configuration's round median over the other's, round by round.
    ratios: tuple[float, ...] = ()
    # Whether every round puts the two on the same side (None: not measured in paired rounds).
    rounds_agree: bool | None = None
    against: str = ""  # the configuration it is measured against


@dataclass(frozen=True)
class RoundMeasure:
    """One warm process of one configuration in one interleaved round (``compare``)."""

    round: int  # 1, 2, ...
    position: int  # its place in that round's order (1 = first); the order rotates every round
    compiled: Timing  # the compiled step in that process (its median is the round's number)
    eager: Timing | None = None
    compile_s: float | None = None  # the first call of that process, on the caches the cold one filled
    error: str | None = None


@dataclass(frozen=True)
class FactDifference:
    """Something other than the mode and options that differs between the baseline and a configuration."""

    fact: str  # compare/comparability.py FACTS: "device", "dtype", "autocast", "matmul precision", "train", ...
    config: str  # the configuration that differs from the baseline
    base: str  # the baseline's value, as shown
    other: str  # the configuration's value
    effect: str  # what such a difference does to the numbers


@dataclass(frozen=True)
class DiagnosisLine:
    """One finding of a configuration's diagnosis, as the comparison page lists it."""

    title: str
    at_stake_us: float | None
    change: str
    url: str  # into the configuration's report, relative to it
    # Where another configuration of the comparison ran the change: its name and its step against this one's.
    tried_by: str | None = None
    tried: AgainstBaseline | None = None


@dataclass(frozen=True)
class ConfigResult:
    """One configuration of a comparison: how it was compiled, where its report is, what it measured."""

    name: str
    mode: str
    options: Mapping[str, JsonValue] = field(default_factory=dict)  # as CompileSettings.options
    # Its settings beyond the mode and options, in words (compare/configs.py settings_text): "autocast bfloat16"
    settings: str = ""
    report: str = ""  # its report folder, relative to the comparison's folder where possible
    status: CaptureStatus = "ok"  # the capture's status
    error: str | None = None
    cold_compile_s: float | None = None  # first call on fresh, empty caches
    # first call of a warm process on the caches the cold one filled (the median over the rounds)
    warm_compile_s: float | None = None
    warm_error: str | None = None
    latency: Timing | None = None  # compiled step, measured in the cold process (the report's number)
    latency_again: Timing | None = None  # older comparisons: the same, measured again in one warm process
    noise: float | None = (
        None  # how far measurements of its step land apart (fraction; see compare/noise.py)
    )
    # The step time comparisons use: the median of the round medians (older: of the cold and warm process).
    step_ms: float | None = None
    against_baseline: AgainstBaseline | None = None  # None for the baseline itself, or where not timed
    against_fastest: AgainstBaseline | None = None  # None for the fastest itself, or where not timed
    rounds: tuple[RoundMeasure, ...] = ()  # the interleaved warm rounds (compare); none for diff
    measured: str = ""  # how step_ms was measured, in words
    facts: Mapping[str, str] = field(default_factory=dict)  # dtype, train, dynamic, device, ... as shown
    eager: Timing | None = None  # the eager step in the cold process (the configuration's own report)
    speedup: float | None = None  # eager_step_ms / step_ms (older: the cold process's eager / compiled medians)
    # The eager step, worked out from the same processes as step_ms, the same way.
    eager_step_ms: float | None = None
    step_rule: str = ""  # how step_ms is worked out, in general words (the page's method text)
    # Why the configuration's own report calls its measurements unstable (bench/stability.py); () when stable.
    unstable: tuple[str, ...] = ()
    peak_bytes: int | None = None  # compiled step's peak device memory (GPU)
    graphs: int = 0
    graph_breaks: int = 0
    recompiles: int = 0
    kernels: Mapping[str, int] = field(default_factory=dict)  # launches per kind, e.g. "triton pointwise"
    cudagraphs: str | None = None  # "used", "skipped: <reason>", or None when the mode has none
    autotune: tuple[AutotuneWinner, ...] = ()
    device: str | None = None
    torch_version: str | None = None
    # Its report's diagnosis (bench/diagnosis.py), top findings first: what to try for this configuration.
    diagnosis: tuple[DiagnosisLine, ...] = ()


@dataclass(frozen=True)
class DiffSide:
    """One side of a kernel change: the launches of one graph that do the work, their time and code."""

    graph_id: str
    launches: tuple[int, ...]
    targets: tuple[str, ...]  # kernel names or extern call targets, in launch order
    kinds: tuple[str, ...]  # "triton pointwise", "extern", ... per launch
    time_us: float | None  # per step, all of them (None when not timed)
    source: str  # the kernels' code (extern calls: the call line)


@dataclass(frozen=True)
class KernelChange:
    """Work matched across two configurations by the FX nodes it computes."""

    kind: ChangeKind
    nodes: tuple[str, ...]  # the post-grad FX nodes both sides compute (union)
    ops: tuple[str, ...]  # their ATen ops
    before: DiffSide | None
    after: DiffSide | None
    note: str = ""
    judgement: Judgement | None = None  # delta_us against the noise; None where a side was not timed
    # The same code on both sides (names aside) under another launch config the run-time autotuner kept.
    same_code: bool = False

    @property
    def delta_us(self) -> float | None:
        before = self.before.time_us if self.before else 0.0
        after = self.after.time_us if self.after else 0.0
        return None if before is None or after is None else after - before


@dataclass(frozen=True)
class GraphPairing:
    """Which graph of the baseline was compared with which graph of the other configuration."""

    before: str | None
    after: str | None
    kind: GraphKind


@dataclass(frozen=True)
class ConfigDiff:
    """The kernel diff of one configuration against the baseline."""

    base: str
    other: str
    graphs: tuple[GraphPairing, ...] = ()
    changes: tuple[KernelChange, ...] = ()
    noise: float | None = None  # the run-to-run noise its changes were judged against (fraction)

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind == kind)


@dataclass(frozen=True)
class Evidence:
    """Why a configuration is slower than the baseline or than eager: what the captures show."""

    config: str
    against: str  # a configuration's name, or "eager"
    slower_by: float  # fraction: 0.25 = 25% slower
    findings: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    fastest: str | None
    text: str
    significant: bool
    margin: float | None = None  # how much faster than the next configuration (fraction)
    noise: float | None = None  # the run-to-run noise it was judged against (fraction)
    noise_how: str = ""
    runner_up: str | None = None  # the configuration the fastest was judged against
    # Whether the fastest and the runner-up run the same code (kernels, wrapper, graphs, CUDA graphs).
    same_code: bool | None = None
    rule: str = ""  # the rule that names a winner, in words
    compares: str = ""  # what the verdict compares: the mode and options alone, or more


@dataclass(frozen=True)
class Comparison:
    """One model compiled under several configurations (``compare``), or two reports (``diff``)."""

    title: str
    created: str
    tool_version: str
    kind: Literal["compare", "diff"]
    model_path: str
    configs: tuple[ConfigResult, ...]
    diffs: tuple[ConfigDiff, ...] = ()
    verdict: Verdict | None = None
    evidence: tuple[Evidence, ...] = ()
    notes: tuple[str, ...] = ()
    # What the runs differ in besides mode and options, most likely cause of a gap first.
    differences: tuple[FactDifference, ...] = ()
    rounds: int = 0  # interleaved warm rounds per configuration (compare); 0 for diff and older comparisons

    @property
    def baseline(self) -> ConfigResult:
        return self.configs[0]

    def to_json(self) -> str:
        document = {"schema_version": COMPARISON_SCHEMA_VERSION, "comparison": to_jsonable(self)}
        return dumps(document)

    @classmethod
    def from_json(cls, text: str) -> Comparison:
        return from_jsonable(cls, lens_document(text, "comparison", COMPARISON_SCHEMA_VERSION))
