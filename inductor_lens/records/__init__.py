"""Stage 3 of the pipeline (capture -> parse -> records -> bench -> report): the one data model.

Parsers build these frozen dataclasses; the bench stage adds measurements; the report, ``lens.json``
and ``compare`` read them and never look at Inductor's files again. A lens.json holds one of two
documents, each with its own schema version:

    answers.py      Answers: the first page's answers (operation groups, module and line time, bound verdict,
                    findings), built from the other records
    run.py          CompileRun: one model compiled once (settings, environment, source files, parse
                    diagnostics, and the parts below), RUN_SCHEMA_VERSION and the run's schema history
    outcome.py      CaptureOutcome: what the child process that ran the model did; Accuracy against eager;
                    CompileCall, each torch.compile call of a script
    frames.py       DynamoFrame: each Dynamo compile (phases, shape guards, IR stages, cache lookups);
                    GraphBreak
    autotune.py     AutotuneTable: each AUTOTUNE table Inductor printed, its choices and failed choices
    graph.py        GraphRecord: one compiled graph's kernels, launches, FX graphs, IR, provenance
    timing.py       BenchResult and the timings of launches and kernels
    timeline.py     CompileTimeline: the compile's chromium_event spans, per process and thread
    stages.py       KernelStages: a Triton kernel's compiler stages (TTIR to SASS), resources and line map
    handwritten.py  HandwrittenMatch / HandwrittenRun: hand-written kernels next to Inductor's (with the
                    launch configurations they ran with, KernelConfig), and HandwrittenKernel: each
                    hand-written kernel as the report shows it
    trials.py       Trials: the diagnosis's suggestions run and measured (--try), SettingChange
    comparison.py   Comparison: several configurations or two reports, COMPARISON_SCHEMA_VERSION
    codec.py        the JSON codec both documents use, and JsonValue for content kept as JSON
    pages.py        where the report shows a kernel, a launch or a compiled frame: the paths records link to
"""

from __future__ import annotations

from .answers import (
    ANSWERS_VERSION,
    Answers,
    BoundVerdict,
    Finding,
    GroupMember,
    LineTime,
    ModuleTime,
    OperationGroup,
    StepPart,
)
from .autotune import AutotuneChoice, AutotuneFailure, AutotuneTable, ChoiceKind
from .codec import (
    JsonScalar,
    JsonValue,
    from_jsonable,
    lens_document,
    to_jsonable,
)
from .comparison import (
    COMPARISON_SCHEMA_VERSION,
    AgainstBaseline,
    AutotuneWinner,
    ChangeKind,
    Comparison,
    ConfigDiff,
    ConfigResult,
    DiagnosisLine,
    DiffSide,
    Evidence,
    FactDifference,
    GraphPairing,
    Judgement,
    KernelChange,
    RoundMeasure,
    Verdict,
)
from .frames import (
    CacheLookup,
    CompilePhase,
    DynamoFrame,
    GraphBreak,
    IrStage,
    ShapeGuard,
    ShapeSpecialization,
)
from .graph import (
    FxGraph,
    FxNode,
    GraphKind,
    GraphRecord,
    InductorBenchmark,
    IRDump,
    IRNode,
    KernelArg,
    KernelBackend,
    KernelRecord,
    Launch,
    LaunchKind,
    LaunchTensors,
    NodeMapping,
    OriginSegment,
    Provenance,
    ShapeSymbol,
    SourceLine,
)
from .handwritten import (
    ConfigOrigin,
    HandwrittenKernel,
    HandwrittenMatch,
    HandwrittenRun,
    KernelConfig,
    MatchKind,
    shape_text,
)
from .outcome import Accuracy, CaptureOutcome, CaptureStatus, CompileCall, TensorCheck
from .run import (
    RUN_SCHEMA_VERSION,
    CompileRun,
    CompileSettings,
    Diagnostic,
    DiagnosticLevel,
    Environment,
    HandwrittenStatus,
    ParseStats,
    SourceFile,
)
from .stages import KernelStages, LineSpans, Occupancy, StageText
from .timeline import CompileTimeline, SpanKind, TimelineProcess, TimelineSpan
from .timing import (
    BenchResult,
    CollectiveTime,
    CudaGraphUse,
    DeviceCeilings,
    EndToEnd,
    GraphJoin,
    HostLoad,
    KernelTiming,
    LaunchTiming,
    ProfileSource,
    Roofline,
    StepTiming,
    Timing,
)
from .trials import TRIALS_VERSION, SettingChange, Trial, Trials, TryVerdict, UntriedSuggestion

__all__ = [
    "ANSWERS_VERSION",
    "COMPARISON_SCHEMA_VERSION",
    "RUN_SCHEMA_VERSION",
    "TRIALS_VERSION",
    "Accuracy",
    "AgainstBaseline",
    "Answers",
    "AutotuneChoice",
    "AutotuneFailure",
    "AutotuneTable",
    "AutotuneWinner",
    "BenchResult",
    "BoundVerdict",
    "CacheLookup",
    "CaptureOutcome",
    "CaptureStatus",
    "ChangeKind",
    "ChoiceKind",
    "CollectiveTime",
    "Comparison",
    "CompileCall",
    "CompilePhase",
    "CompileRun",
    "CompileSettings",
    "CompileTimeline",
    "ConfigDiff",
    "ConfigOrigin",
    "ConfigResult",
    "CudaGraphUse",
    "DeviceCeilings",
    "DiagnosisLine",
    "Diagnostic",
    "DiagnosticLevel",
    "DiffSide",
    "DynamoFrame",
    "EndToEnd",
    "Environment",
    "Evidence",
    "FactDifference",
    "Finding",
    "FxGraph",
    "FxNode",
    "GraphBreak",
    "GraphJoin",
    "GraphKind",
    "GraphPairing",
    "GraphRecord",
    "GroupMember",
    "HandwrittenKernel",
    "HandwrittenMatch",
    "HandwrittenRun",
    "HandwrittenStatus",
    "HostLoad",
    "IRDump",
    "IRNode",
    "InductorBenchmark",
    "IrStage",
    "JsonScalar",
    "JsonValue",
    "Judgement",
    "KernelArg",
    "KernelBackend",
    "KernelChange",
    "KernelConfig",
    "KernelRecord",
    "KernelStages",
    "KernelTiming",
    "Launch",
    "LaunchKind",
    "LaunchTensors",
    "LaunchTiming",
    "LineSpans",
    "LineTime",
    "MatchKind",
    "ModuleTime",
    "NodeMapping",
    "Occupancy",
    "OperationGroup",
    "OriginSegment",
    "ParseStats",
    "ProfileSource",
    "Provenance",
    "Roofline",
    "RoundMeasure",
    "SettingChange",
    "ShapeGuard",
    "ShapeSpecialization",
    "ShapeSymbol",
    "SourceFile",
    "SourceLine",
    "SpanKind",
    "StageText",
    "StepPart",
    "StepTiming",
    "TensorCheck",
    "TimelineProcess",
    "TimelineSpan",
    "Timing",
    "Trial",
    "Trials",
    "TryVerdict",
    "UntriedSuggestion",
    "Verdict",
    "from_jsonable",
    "lens_document",
    "shape_text",
    "to_jsonable",
]
