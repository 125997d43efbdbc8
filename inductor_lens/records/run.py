"""Records, the run: one model compiled once under one configuration (the document of a report's lens.json):
CompileRun, its settings and environment, its source files and parse diagnostics. Its parts each have a
module: the capture's outcome (outcome.py), the Dynamo compiles and graph breaks (frames.py), the autotune
tables (autotune.py), the graphs (graph.py), the timings (timing.py) and the rest named below.

Schema history of the run document (bump RUN_SCHEMA_VERSION on any change an older reader would misread):
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
  5: the comparison document appeared beside it (one number for both documents); the run unchanged.
  6: the hand-written kernels the matches name, as the report shows them (HandwrittenKernel: summary,
     formula, dimensions and source), so a saved report never shows a later version's kernels; a
     version 5 run has none, and its page says their source was not recorded. Option values, a
     template's autotune config and kernel metadata typed (JsonValue, JsonScalar): their JSON unchanged.
  7: the accuracy verdict against a float64 run (Accuracy.method, .checks: TensorCheck per output and
     gradient, worst first, .findings for outputs of another structure or shape); several calls per
     capture (CaptureOutcome.calls, .call_seconds); scripts run unchanged (CaptureOutcome.command, each
     torch.compile call they made in .compile_calls, the profiled window in .profiled). A version 6
     run reads with none of them.
  8: dynamic shapes: the symbols of each graph with their hints and sources (GraphRecord.symbols,
     ShapeSymbol), and per Dynamo frame the symbols it created, its specializations and the guards
     they added (DynamoFrame.symbols, .specializations, .shape_guards); byte counts of symbolic sizes
     come from the hints (Roofline.cost_source says so). A version 7 run reads as static.
  9: honest numbers: the machine's load around each timed window (BenchResult.host, HostLoad) and the
     profiled step's spread (StepTiming.total_p10_us, .total_p90_us) and each launch's (LaunchTiming.p10_us,
     .p90_us, .steps); CUDA-graph replays tied to launches
     (StepTiming.replayed_us, .approximate_us) and what the graphs cost and saved (BenchResult.cudagraphs,
     CudaGraphUse); per compile: its own graph breaks, CUDA-graph recordings (DynamoFrame.cudagraph_recordings,
     .cudagraph_record_s), failed autotune choices (AutotuneTable.failed), the mode inferred from
     options (CompileSettings.mode_inferred). A version 8 run reads with none of them.
  10: the launch configuration each autotuned hand-written kernel ran with on a GPU, and whether it was
     tuned in the run or read from the hand-written autotune cache (HandwrittenRun.configs, KernelConfig).
     A version 9 run reads with none.
  11: graph breaks' entries in torch's graph-break registry (GraphBreak.code, .explanation, .hints),
     Environment.source "TORCH_TRACE log" for a report of a bare trace (graphs rebuilt from the log), and
     each compile's IR stages from the trace (DynamoFrame.stages, IrStage). A version 10 run reads with none
     of them.
  12: what tlparse shows from the trace (issue 17): each part names its fields below; a version 11 run reads
     with none of them.
     - the compile timeline: every chromium_event span of every trace log, per process and thread, nested
       (CompileRun.timeline, CompileTimeline, TimelineSpan, TimelineProcess).
     - each compile's outcome and lookups: the stack that triggered it, its failure, restarts, graph counts and
       cache size, its cache lookups (DynamoFrame.stack, .fail_type, .fail_user_frame, .restarted,
       .graph_op_count, .graph_node_count, .graph_input_count, .cache_size, .accumulated_cache_size,
       .non_compliant_ops, .compliant_custom_ops, .cache_lookups, CacheLookup).
     - timings from a profiler trace recorded elsewhere (report --profile): where they came from and how each
       graph was joined (BenchResult.profile, ProfileSource, GraphJoin).
     - compiler stages per Triton kernel (issue 18): TTIR, TTGIR, LLVM IR, PTX and SASS (compressed), registers,
       spills, shared memory, occupancy and the Python-line map, from the capture's Triton cache or compiled
       here (CompileRun.kernel_stages, KernelStages, StageText, LineSpans, Occupancy).
     - a CPU preview of a GPU's code (compile --preview-gpu, issue 18): Environment.preview_of, .preview_check.
     - the first kernel whose output diverges (compile --find-divergence, issue 18): each buffer judged against
       its FX node, the option re-runs (CaptureOutcome.divergence, NumericDivergence, BufferCheck,
       DivergenceGraph, OptionTrial).
  13: right on every model and torch 2.14 (issue 30); a version 12 run reads with none of them, and a version 12
     reader would misread a version 13 run (a rejected hand-written match read as a good one):
     - graphs served from Inductor's FX graph cache, read from the trace (GraphRecord.cache_hit);
     - each hand-written match checked against the kernel's own FX nodes (HandwrittenMatch.verified,
       .verify_note, .verify_error, .verify_tolerance);
     - output leaves that hold no tensor (Accuracy.skipped); what --train backpropagated
       (CompileSettings.backward); where get_model() built the model and its modules (CaptureOutcome.model_built);
     - a library call's tensors as torch 2.14+ recorded them when it compiled the call (Launch.tensors,
       LaunchTensors).
  14: the first page's answers (issue 31): operation groups, time per module and line, the bound verdict, the
     findings (CompileRun.answers, records/answers.py); the device kernels each launch ran (LaunchTiming.
     device_kernels); the precision settings and the TF32 / bfloat16 matmul ceilings (DeviceCeilings.
     matmul_tf32_tflops, .matmul_bf16_tflops, .cudnn_tf32, .float32_matmul_precision). A version 13 run reads
     with none of them (answers are built again when it is rendered).
  15: suggestions tried (issue 32): each finding's change as settings (Finding.settings, .where, SettingChange),
     the trials and their measurements (CompileRun.trials, records/trials.py); the float32 matmul precision,
     cuDNN's TF32, autocast and Dynamo config a run was made with (CompileSettings.matmul_precision,
     .cudnn_allow_tf32, .autocast, .dynamo_options). A version 14 run reads with none of them.
  16: the report written before the slow stages and rewritten after them (issue 33): where the hand-written stage
     stood when the run was written (CompileRun.handwritten_status: "running" in the first report, "done" in the
     second; a run read back still "running" reads as "stopped"). A version 15 run reads as "" (not said).
  17: the collectives of the profiled steps, wherever they ran (StepTiming.collectives: DDP's all-reduce, FSDP2's
     all-gathers, from NCCL's kernels or gloo's ranges; issue 34). A version 16 run reads with none.
  18: the collectives' bytes per step (CollectiveTime.bytes_per_step, .bytes_method: each call's input message,
     from torch's record_param_comms metadata on NCCL's kernels or a gloo range's recorded shapes; issue 34). A
     version 17 run reads with no bytes, said as not measured.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from .answers import Answers
from .autotune import AutotuneTable
from .codec import JsonValue, dumps, from_jsonable, lens_document, to_jsonable
from .frames import DynamoFrame, GraphBreak
from .graph import GraphRecord, KernelRecord
from .handwritten import HandwrittenKernel, HandwrittenMatch
from .outcome import CaptureOutcome
from .stages import KernelStages
from .timeline import CompileTimeline
from .timing import BenchResult
from .trials import Trials

RUN_SCHEMA_VERSION = 18

DiagnosticLevel = Literal["warning", "note"]
# Where the hand-written stage stood when the run was written: "running" (the first report, written before it
# ran; the second replaces it), "done" (it ran for this run), "stopped" (read back still "running": the process
# that was to rewrite it ended first), "" (not run for this run: off, or its results read from the capture).
HandwrittenStatus = Literal["", "running", "done", "stopped"]


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
    # "capture": measured in the child process; "debug folder" or "TORCH_TRACE log": inferred from the files.
    source: str = "debug folder"
    # compile --preview-gpu: the GPU whose Triton code Inductor generated on this CPU-only machine (nothing ran
    # on it), and how its kernels were checked (worker/gpu_preview.py).
    preview_of: str | None = None
    preview_check: str | None = None


@dataclass(frozen=True)
class CompileSettings:
    """How torch.compile was called."""

    mode: str = "default"
    # Inductor config values: mostly scalars, but a few options take a list or a dict (and the values read
    # back from fx_graph_runnable.py are whatever literal Inductor printed).
    options: Mapping[str, JsonValue] = field(default_factory=dict)
    mode_options: Mapping[str, JsonValue] = field(default_factory=dict)
    train: bool = False
    device: str | None = None
    dtype: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    # Options inductor-lens itself set for the capture (they change comments, not code).
    capture_options: Mapping[str, JsonValue] = field(default_factory=dict)
    # With --train, what the capture backpropagated: "outputs.loss" (the model returned a loss), or "the sum
    # of N outputs" (every floating output); "" in reports from before issue 30.
    backward: str = ""
    # True where no record named the mode and it was inferred from the options torch wrote (the
    # options a mode sets are then in mode_options, not options).
    mode_inferred: bool = False
    # Set for the whole model process (--matmul-precision, --cudnn-tf32, --autocast, --dynamo-option); None
    # and {}: left as torch has them.
    matmul_precision: str | None = None
    cudnn_allow_tf32: bool | None = None
    autocast: str | None = None
    dynamo_options: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceFile:
    """The text of a user source file the graphs refer to (read where the report was built)."""

    path: str
    text: str


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
    handwritten_kernels: tuple[HandwrittenKernel, ...] = ()  # each one the matches name, once
    log_text: str = ""
    stats: ParseStats = field(default_factory=ParseStats)
    timeline: CompileTimeline = field(default_factory=CompileTimeline)
    # Each Triton kernel's compiler stages (inductor_lens/stages), by graph id and kernel name.
    kernel_stages: tuple[KernelStages, ...] = ()
    # The first page's answers (bench/answers.py): built from the records above, before rendering.
    answers: Answers | None = None
    # The suggestions tried (--try N, ``inductor-lens try``): records/trials.py, from capture/trials.json.
    trials: Trials | None = None
    handwritten_status: HandwrittenStatus = ""

    @property
    def recompiles(self) -> tuple[DynamoFrame, ...]:
        return tuple(f for f in self.frames if f.recompile_reasons)

    @property
    def python_frames(self) -> tuple[str, ...]:
        """The distinct Python frames Dynamo compiled (a frame compiled twice, ``0/0`` and ``0/1``, once)."""
        return tuple(dict.fromkeys(f.frame_key for f in self.frames))

    def all_kernels(self) -> Iterator[tuple[GraphRecord, KernelRecord]]:
        for graph in self.graphs:
            for kernel in graph.kernels:
                yield graph, kernel

    def graph(self, graph_id: str) -> GraphRecord | None:
        return next((g for g in self.graphs if g.id == graph_id), None)

    def handwritten_for(self, graph_id: str, target: str) -> HandwrittenMatch | None:
        return next((m for m in self.handwritten if m.graph_id == graph_id and m.target == target), None)

    def stages_of(self, graph_id: str, kernel: str) -> KernelStages | None:
        return next((s for s in self.kernel_stages if s.graph_id == graph_id and s.kernel == kernel), None)

    def handwritten_kernel(self, name: str) -> HandwrittenKernel | None:
        return next((k for k in self.handwritten_kernels if k.name == name), None)

    def to_json(self) -> str:
        document = {"schema_version": RUN_SCHEMA_VERSION, "run": to_jsonable(self)}
        return dumps(document)

    @classmethod
    def from_json(cls, text: str) -> CompileRun:
        """The run of a lens.json; one written while its hand-written stage was running reads as stopped: the
        process that was to rewrite it is gone (or, read while it runs, has not rewritten it yet)."""
        run: CompileRun = from_jsonable(cls, lens_document(text, "run", RUN_SCHEMA_VERSION))
        return replace(run, handwritten_status="stopped") if run.handwritten_status == "running" else run
