"""Stage 3 of the pipeline (capture -> parse -> records -> bench -> report): the one data model.

Parsers build these frozen dataclasses; the report, ``lens.json`` and later stages read them and
never look at Inductor's files again. ``CompileRun.to_json()`` / ``CompileRun.from_json()``
round-trip the whole model, so a report can be re-rendered or compared without recompiling.

Schema history (bump SCHEMA_VERSION on any change that an older reader would misread):
  1: first version: run settings, environment, capture outcome, Dynamo frames, graphs with
     kernels, launches, FX graphs, IR dumps, provenance, and parse diagnostics.
  2: source lines (SourceLine) on FX nodes and kernels; placeholder roles; buffers read and written
     by each launch; kernel line origins; Dynamo frame details (call site, compile-time phases,
     guards, recompile reasons); graph breaks; AUTOTUNE tables; per-kernel autotune info; the user's
     source files.
  3: timings (BenchResult): device ceilings, end-to-end latency and memory, the profiled step, and per
     launch and per kernel: in-context and isolated times, bytes, FLOPs and the roofline.
  4: hand-written equivalents (HandwrittenMatch, HandwrittenRun): the match of every generated kernel
     and extern matmul/attention call, and each hand-written kernel's check and timing.
  5: comparisons (Comparison): one model under several configurations, or two reports; a lens.json
     holds either a "run" or a "comparison". CompileRun itself is unchanged from 4.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA_VERSION = 5

GraphKind = Literal["forward", "backward", "inference", "unknown"]
KernelBackend = Literal["triton", "cpp"]
LaunchKind = Literal["triton", "cpp", "extern"]
CaptureStatus = Literal["ok", "failed", "timeout"]
DiagnosticLevel = Literal["warning", "note"]
MatchKind = Literal["exact", "composed", "partial", "none"]
ChangeKind = Literal["unchanged", "changed", "regrouped", "added", "removed"]


@dataclass(frozen=True)
class Environment:
    """Versions and device of the machine that compiled the model."""

    torch_version: str | None = None
    triton_version: str | None = None
    python_version: str | None = None
    cuda_version: str | None = None
    device_type: str | None = None
    device_name: str | None = None
    device_capability: str | None = None
    multiprocessor_count: int | None = None
    platform: str | None = None
    # "capture": measured in the child process; "debug folder": inferred from the files.
    source: str = "debug folder"


@dataclass(frozen=True)
class CompileSettings:
    """How torch.compile was called."""

    mode: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)
    mode_options: Mapping[str, Any] = field(default_factory=dict)
    train: bool = False
    device: str | None = None
    dtype: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    # Options inductor-lens itself set for the capture (they change comments, not code).
    capture_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Accuracy:
    """Agreement of the compiled model with eager on the same inputs."""

    compared: str
    tensors: int
    max_abs_error: float
    max_rel_error: float  # max |compiled - eager| / max |eager|
    within_tolerance: bool
    rtol: float
    atol: float
    grad_max_abs_error: float | None = None
    grad_max_rel_error: float | None = None


@dataclass(frozen=True)
class CaptureOutcome:
    """What happened in the child process that ran the model."""

    model_path: str
    model_name: str
    status: CaptureStatus
    phase: str
    error: str | None = None
    error_kind: str | None = None
    exit_code: int | None = None
    wall_s: float | None = None
    cold_compile_s: float | None = None
    eager_first_call_s: float | None = None
    second_call_s: float | None = None
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    parameters: int | None = None
    accuracy: Accuracy | None = None
    log_file: str | None = None


@dataclass(frozen=True)
class SourceLine:
    """A line of user code: where an op, a kernel or a graph break came from."""

    filename: str
    line: int
    function: str | None = None
    code: str | None = None

    @property
    def label(self) -> str:
        return f"{self.filename}:{self.line}"


@dataclass(frozen=True)
class CompilePhase:
    """One slice of a frame's compile time, from the trace's compilation metrics."""

    name: str
    seconds: float
    how: str
    # True for an item that is part of one of the other phases (not added to the total).
    within: bool = False


@dataclass(frozen=True)
class DynamoFrame:
    """One Dynamo compile of a Python frame (a compile id such as ``0/0`` or ``1/0``)."""

    compile_id: str
    function: str | None = None
    filename: str | None = None
    line: int | None = None
    compile_time_s: float | None = None
    graph_breaks: int | None = None
    fail_reason: str | None = None
    call_site: SourceLine | None = None
    phases: tuple[CompilePhase, ...] = ()
    guard_count: int | None = None
    guards: str = ""
    recompile_reasons: tuple[str, ...] = ()
    restart_reasons: tuple[str, ...] = ()
    cache: str | None = None
    cudagraph_skip_reason: str | None = None


@dataclass(frozen=True)
class GraphBreak:
    """A place where Dynamo stopped tracing and split the model into several graphs."""

    compile_id: str
    reason: str
    detail: str = ""
    location: SourceLine | None = None
    user_stack: tuple[SourceLine, ...] = ()


@dataclass(frozen=True)
class AutotuneChoice:
    name: str
    ms: float
    percent: float | None = None
    kind: Literal["extern", "triton", "other"] = "other"
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AutotuneTable:
    """One ``AUTOTUNE op(shapes)`` table Inductor printed while choosing an implementation."""

    op: str
    shapes: tuple[str, ...]
    choices: tuple[AutotuneChoice, ...]
    strides: str = ""
    dtypes: str = ""
    num_choices: int | None = None
    benchmark_s: float | None = None
    precompile_s: float | None = None
    graph_id: str | None = None
    # What the winner became in the graph: a kernel name (Triton template) or a launch position.
    chosen_kernel: str | None = None
    chosen_launch: int | None = None

    @property
    def winner(self) -> AutotuneChoice | None:
        return min(self.choices, key=lambda c: c.ms) if self.choices else None


@dataclass(frozen=True)
class SourceFile:
    """The text of a user source file the graphs refer to (read where the report was built)."""

    path: str
    text: str


@dataclass(frozen=True)
class Timing:
    """A distribution of repeated measurements, and how it was measured."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    samples: int
    method: str


@dataclass(frozen=True)
class Roofline:
    """Where a kernel stands against the device's measured ceilings."""

    bytes: int | None
    flops: int | None
    cost_source: str  # where bytes and FLOPs come from
    seconds: float  # the time the rates are computed from (per launch)
    time_source: str  # "in context" or "isolated"
    gb_per_s: float | None = None
    tflops: float | None = None
    intensity: float | None = None  # FLOP per byte
    percent: float | None = (
        None  # of the roofline at this intensity (of bandwidth when FLOPs are not counted)
    )
    bound: str | None = None  # "memory" or "compute"


@dataclass(frozen=True)
class LaunchTiming:
    """One launch's device time in the profiled steps (median over steps)."""

    median_us: float
    calls: float  # device kernels (GPU) or ranges (CPU) per step
    share: float  # of the step's total device time
    roofline: Roofline | None = None


@dataclass(frozen=True)
class KernelTiming:
    in_context_us: float  # per step, all its launches
    launches: int
    isolated: Timing | None = None
    roofline: Roofline | None = None
    isolated_roofline: Roofline | None = None
    config: str | None = None  # the launch config the autotuner kept
    registers: int | None = None
    spills: int | None = None
    shared_mem: int | None = None
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceCeilings:
    """The 100% lines: measured on this device, not taken from a datasheet."""

    copy_gb_per_s: float
    copy: Timing
    copy_bytes: int
    matmul_tflops: float
    matmul: Timing
    matmul_dtype: str
    matmul_size: int
    tf32: bool = False


@dataclass(frozen=True)
class EndToEnd:
    eager: Timing
    compiled: Timing
    speedup: float
    eager_peak_bytes: int | None = None
    compiled_peak_bytes: int | None = None
    cudagraphs: str | None = None  # "used", "skipped: <reason>", or None when the mode has none


@dataclass(frozen=True)
class StepTiming:
    """The profiled compiled steps."""

    steps: int
    total_us: float  # GPU: all kernel time per step; CPU: time inside compiled graphs
    attributed_us: float  # the part tied to launches of the graphs
    span_us: float | None = None  # GPU: first kernel start to last kernel end
    busy_us: float | None = None  # GPU: time with a kernel running
    unattributed: Mapping[str, float] = field(default_factory=dict)
    method: str = ""


@dataclass(frozen=True)
class BenchResult:
    device: str
    ceilings: DeviceCeilings | None = None
    end_to_end: EndToEnd | None = None
    step: StepTiming | None = None
    error: str | None = None


@dataclass(frozen=True)
class KernelArg:
    name: str
    type: str


@dataclass(frozen=True)
class NodeMapping:
    """One line of Inductor's ``# Source node to ATen node mapping`` comment."""

    source_node: str
    aten_nodes: tuple[str, ...]


@dataclass(frozen=True)
class InductorBenchmark:
    """One line of ``python output_code.py -k`` output found beside the graph (``bench_k.txt``)."""

    ms: float
    gb: float | None = None
    gb_per_s: float | None = None
    registers: int | None = None
    spills: int | None = None
    shared_mem: int | None = None


@dataclass(frozen=True)
class OriginSegment:
    """Lines of a kernel's source that Inductor marked (``# ORIGIN:``) as generated for these ops."""

    first_line: int
    last_line: int
    ops: tuple[str, ...]
    source: tuple[SourceLine, ...] = ()


@dataclass(frozen=True)
class KernelRecord:
    """A kernel Inductor generated: Triton (GPU) or C++ (CPU)."""

    name: str
    backend: KernelBackend
    category: str
    source: str
    definition_line: int
    args: tuple[KernelArg, ...] = ()
    size_hints: Mapping[str, int] = field(default_factory=dict)
    num_load: int | None = None
    num_store: int | None = None
    num_reduction: int | None = None
    bytes_accessed: int | None = None
    flops: int | None = None
    launch_config: Mapping[str, Any] = field(default_factory=dict)
    inductor_meta: Mapping[str, Any] = field(default_factory=dict)
    source_nodes: tuple[str, ...] = ()
    aten_ops: tuple[str, ...] = ()
    node_mappings: tuple[NodeMapping, ...] = ()
    graph_fragment: str = ""
    kernel_path: str | None = None
    post_grad_nodes: tuple[str, ...] = ()
    user_stack: tuple[str, ...] = ()
    source_lines: tuple[SourceLine, ...] = ()
    origins: tuple[OriginSegment, ...] = ()
    # What the trace's triton_kernel_info recorded: configs tried, coordinate descent, cache state...
    autotune_info: Mapping[str, Any] = field(default_factory=dict)
    launches: tuple[int, ...] = ()
    inductor_benchmark: InductorBenchmark | None = None
    timing: KernelTiming | None = None


@dataclass(frozen=True)
class Launch:
    """One kernel launch or extern call in the compiled graph's ``call()``, in order."""

    position: int
    kind: LaunchKind
    target: str
    line: int
    code: str
    aten_op: str | None = None
    source_nodes: tuple[str, ...] = ()
    aten_ops: tuple[str, ...] = ()
    handle: str | None = None
    # Index of the graph partition (CUDA-graph-able region) the launch runs in, if any.
    partition: int | None = None
    # Buffers and graph inputs the launch reads and writes (``buf3``, ``arg0_1``, ``primals_2``).
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    # The positional arguments as written, matching the kernel's parameters one by one.
    args: tuple[str, ...] = ()
    timing: LaunchTiming | None = None


@dataclass(frozen=True)
class FxNode:
    name: str
    op: str
    target: str
    type: str | None = None
    inputs: tuple[str, ...] = ()
    source: SourceLine | None = None
    line: int = 0
    # Placeholders: "input", "parameter", "buffer" (from Dynamo's graph), "tangent" or "saved" (backward).
    role: str | None = None
    # Placeholders that are parameters or buffers: their name in the model (``self.fc1.weight``).
    origin: str | None = None


@dataclass(frozen=True)
class FxGraph:
    """``fx_graph_readable.py`` (before Inductor's post-grad passes) or ``fx_graph_transformed.py`` (after)."""

    stage: Literal["readable", "transformed"]
    nodes: tuple[FxNode, ...]
    code: str


@dataclass(frozen=True)
class IRNode:
    """A scheduler node of ``ir_pre_fusion.txt`` / ``ir_post_fusion.txt``; fused nodes list their members."""

    name: str
    node_type: str
    detail: str = ""
    members: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    extern_kernel: str | None = None
    device: str | None = None


@dataclass(frozen=True)
class IRDump:
    stage: Literal["pre_fusion", "post_fusion"]
    nodes: tuple[IRNode, ...]
    text: str


@dataclass(frozen=True)
class Provenance:
    """Inductor's provenance tracking: pre-grad <-> post-grad nodes <-> kernels (by debug handle)."""

    source: str
    pre_to_post: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    post_to_pre: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kernel_to_post: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kernel_stack_traces: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class GraphRecord:
    """One graph Inductor compiled (one ``model__<aot>_<kind>_<n>.<k>`` debug folder)."""

    id: str
    name: str
    folder: str
    kind: GraphKind
    aot_id: int | None = None
    nth: int | None = None
    compile_id: str | None = None
    files: tuple[str, ...] = ()
    output_code: str = ""
    kernels: tuple[KernelRecord, ...] = ()
    launches: tuple[Launch, ...] = ()
    fx_graphs: tuple[FxGraph, ...] = ()
    ir: tuple[IRDump, ...] = ()
    provenance: Provenance | None = None
    # Buffer or input name -> its tensor type ("bf16[1024, 8192]"), from call()'s allocations and the FX graph.
    buffers: Mapping[str, str] = field(default_factory=dict)
    # Names in call() that reuse or view another's storage, mapped to it (``buf1 = buf0  # reuse``).
    aliases: Mapping[str, str] = field(default_factory=dict)
    # What call() returns.
    outputs: tuple[str, ...] = ()

    def kernel(self, name: str) -> KernelRecord | None:
        return next((k for k in self.kernels if k.name == name), None)

    def launch_category(self, launch: Launch) -> str:
        """``extern`` for a library call, else the launched kernel's category (``pointwise``, ...)."""
        if launch.kind == "extern":
            return "extern"
        kernel = self.kernel(launch.target)
        return kernel.category if kernel is not None else "other"

    def fx_graph(self, stage: str) -> FxGraph | None:
        return next((g for g in self.fx_graphs if g.stage == stage), None)

    def ir_dump(self, stage: str) -> IRDump | None:
        return next((d for d in self.ir if d.stage == stage), None)


@dataclass(frozen=True)
class HandwrittenRun:
    """One hand-written kernel checked against its torch reference (and, on a GPU, timed) on given shapes."""

    name: str
    shape: Mapping[str, int]
    dtype: str
    device: str
    # The shape really checked: smaller than ``shape`` under the Triton interpreter (CPU).
    checked_shape: Mapping[str, int] = field(default_factory=dict)
    interpreter: bool = False
    ok: bool | None = None
    max_rel_error: float | None = None  # max |out - ref| / max |ref| over its outputs
    tolerance: float | None = None
    timing: Timing | None = None
    eager: Timing | None = None  # torch's own op(s) on the same inputs
    # The kernel replayed from a CUDA graph: its GPU time without the launcher's Python overhead.
    gpu_alone: Timing | None = None
    roofline: Roofline | None = None
    error: str | None = None


@dataclass(frozen=True)
class HandwrittenMatch:
    """The hand-written kernel(s) that do the job of one Inductor kernel or extern call."""

    graph_id: str
    target: str  # the kernel's name, or the extern call's target
    launch: int | None  # position of the launch whose shapes were used
    kind: MatchKind
    equivalents: tuple[str, ...] = ()  # in the order the Inductor kernel computes their work
    concepts: tuple[str, ...] = ()  # what the Inductor kernel computes (see handwritten/match.py)
    not_covered: tuple[str, ...] = ()
    shape: Mapping[str, int] = field(default_factory=dict)
    dtype: str = "float32"
    note: str = ""
    runs: tuple[HandwrittenRun, ...] = ()  # one per equivalent, once run

    @property
    def key(self) -> str:
        return f"{self.graph_id}:{self.launch}:{self.target}"


@dataclass(frozen=True)
class Diagnostic:
    """Something a parser met and did not understand (``warning``) or wants to point out (``note``)."""

    level: DiagnosticLevel
    where: str
    message: str
    count: int = 1


@dataclass(frozen=True)
class ParseStats:
    files_seen: int = 0
    files_parsed: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.level == "warning")


@dataclass(frozen=True)
class CompileRun:
    """Everything one report shows: one model compiled once under one configuration."""

    title: str
    created: str
    tool_version: str
    source_dir: str
    environment: Environment = field(default_factory=Environment)
    settings: CompileSettings | None = None
    capture: CaptureOutcome | None = None
    frames: tuple[DynamoFrame, ...] = ()
    graphs: tuple[GraphRecord, ...] = ()
    graph_breaks: tuple[GraphBreak, ...] = ()
    autotune: tuple[AutotuneTable, ...] = ()
    sources: tuple[SourceFile, ...] = ()
    bench: BenchResult | None = None
    handwritten: tuple[HandwrittenMatch, ...] = ()
    log_text: str = ""
    stats: ParseStats = field(default_factory=ParseStats)

    @property
    def recompiles(self) -> tuple[DynamoFrame, ...]:
        return tuple(f for f in self.frames if f.recompile_reasons)

    def all_kernels(self) -> Iterator[tuple[GraphRecord, KernelRecord]]:
        for graph in self.graphs:
            for kernel in graph.kernels:
                yield graph, kernel

    def graph(self, graph_id: str) -> GraphRecord | None:
        return next((g for g in self.graphs if g.id == graph_id), None)

    def handwritten_for(self, graph_id: str, target: str) -> HandwrittenMatch | None:
        return next((m for m in self.handwritten if m.graph_id == graph_id and m.target == target), None)

    def to_json(self) -> str:
        document = {"schema_version": SCHEMA_VERSION, "run": to_jsonable(self)}
        return json.dumps(document, indent=1, sort_keys=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> CompileRun:
        return from_jsonable(cls, _lens_document(text, "run"))


# --- comparisons: one model under several configurations (or two reports) ---------------------


@dataclass(frozen=True)
class AutotuneWinner:
    """What the autotuner picked for one op and shape, and what came second."""

    op: str
    shapes: str
    winner: str
    winner_ms: float
    winner_kind: str  # "extern", "triton" or "other"
    runner_up: str | None = None
    runner_up_ms: float | None = None
    choices: int = 0


@dataclass(frozen=True)
class ConfigResult:
    """One configuration of a comparison: how it was compiled, where its report is, what it measured."""

    name: str
    mode: str
    options: Mapping[str, Any] = field(default_factory=dict)
    report: str = ""  # its report folder, relative to the comparison's folder where possible
    status: str = "ok"  # the capture's status: "ok", "failed", "timeout"
    error: str | None = None
    cold_compile_s: float | None = None  # first call on fresh, empty caches
    warm_compile_s: float | None = None  # first call of a second process on the caches the first filled
    warm_error: str | None = None
    latency: Timing | None = None  # compiled step, measured in the cold process (the report's number)
    latency_again: Timing | None = None  # the same, measured again in the warm process
    noise: float | None = (
        None  # how far two measurements of its step land apart (fraction; see compare/summary.py)
    )
    eager: Timing | None = None
    speedup: float | None = None  # eager median / compiled median
    peak_bytes: int | None = None  # compiled step's peak device memory (GPU)
    graphs: int = 0
    graph_breaks: int = 0
    recompiles: int = 0
    kernels: Mapping[str, int] = field(default_factory=dict)  # launches per kind, e.g. "triton pointwise"
    cudagraphs: str | None = None  # "used", "skipped: <reason>", or None when the mode has none
    autotune: tuple[AutotuneWinner, ...] = ()
    device: str | None = None
    torch_version: str | None = None


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
    kind: str


@dataclass(frozen=True)
class ConfigDiff:
    """The kernel diff of one configuration against the baseline."""

    base: str
    other: str
    graphs: tuple[GraphPairing, ...] = ()
    changes: tuple[KernelChange, ...] = ()

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

    @property
    def baseline(self) -> ConfigResult:
        return self.configs[0]

    def to_json(self) -> str:
        document = {"schema_version": SCHEMA_VERSION, "comparison": to_jsonable(self)}
        return json.dumps(document, indent=1, sort_keys=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Comparison:
        return from_jsonable(cls, _lens_document(text, "comparison"))


def _lens_document(text: str, key: str) -> Any:
    """The ``key`` part of a lens.json document, after checking that this version can read it."""
    document = json.loads(text)
    if not isinstance(document, dict) or key not in document:
        other = next((k for k in ("run", "comparison") if isinstance(document, dict) and k in document), None)
        what = f"it holds a {other}" if other else f"no {key!r} key"
        raise ValueError(f"not a lens.json document of a {key} ({what})")
    version = document.get("schema_version")
    if not isinstance(version, int):
        raise ValueError("lens.json has no schema_version")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"lens.json has schema version {version}, newer than this inductor-lens reads "
            f"({SCHEMA_VERSION}); upgrade inductor-lens"
        )
    return document[key]


# --- JSON codec --------------------------------------------------------------------------
# Generic over the dataclasses above, driven by their type hints, so adding a field needs no
# codec change. Non-finite floats become the strings "nan"/"inf"/"-inf" (JSON has no NaN).


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def from_jsonable(tp: Any, data: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin is Literal:
        if data not in typing.get_args(tp):
            raise ValueError(f"{data!r} is not one of {typing.get_args(tp)}")
        return data
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return from_jsonable(option, data)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"{data!r} matches none of {options}")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {tp.__name__}, got {type(data).__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = from_jsonable(hints[f.name], data[f.name])
        return tp(**kwargs)
    if origin is tuple:
        args = typing.get_args(tp)
        item_type = args[0] if args else Any
        return tuple(from_jsonable(item_type, v) for v in data)
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        args = typing.get_args(tp)
        value_type = args[1] if len(args) == 2 else Any
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        return {k: from_jsonable(value_type, v) for k, v in data.items()}
    if tp is float:
        if isinstance(data, str):
            return float(data)
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise TypeError(f"expected a number, got {data!r}")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise TypeError(f"expected an integer, got {data!r}")
        return data
    if tp is bool:
        if not isinstance(data, bool):
            raise TypeError(f"expected true/false, got {data!r}")
        return data
    if tp is str:
        if not isinstance(data, str):
            raise TypeError(f"expected a string, got {data!r}")
        return data
    return data
