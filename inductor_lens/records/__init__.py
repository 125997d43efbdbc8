"""Stage 3 of the pipeline (capture -> parse -> records -> bench -> report): the one data model.

Parsers build these frozen dataclasses; the bench stage adds measurements; the report, ``lens.json``
and ``compare`` read them and never look at Inductor's files again. A lens.json holds one of two
documents, each with its own schema version:

    run.py          CompileRun: one model compiled once (settings, environment, capture outcome, Dynamo
                    frames, graph breaks, autotuning, parse diagnostics), RUN_SCHEMA_VERSION
    graph.py        GraphRecord: one compiled graph's kernels, launches, FX graphs, IR, provenance
    timing.py       BenchResult and the timings of launches and kernels
    handwritten.py  HandwrittenMatch / HandwrittenRun: hand-written kernels next to Inductor's, and
                    HandwrittenKernel: each hand-written kernel as the report shows it
    comparison.py   Comparison: several configurations or two reports, COMPARISON_SCHEMA_VERSION
    codec.py        the JSON codec both documents use, and JsonValue for content kept as JSON
"""

from __future__ import annotations

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
    DiffSide,
    Evidence,
    GraphPairing,
    Judgement,
    KernelChange,
    Verdict,
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
    NodeMapping,
    OriginSegment,
    Provenance,
    ShapeSymbol,
    SourceLine,
)
from .handwritten import (
    HandwrittenKernel,
    HandwrittenMatch,
    HandwrittenRun,
    MatchKind,
    shape_text,
)
from .run import (
    RUN_SCHEMA_VERSION,
    Accuracy,
    AutotuneChoice,
    AutotuneTable,
    CaptureOutcome,
    CaptureStatus,
    ChoiceKind,
    CompilePhase,
    CompileRun,
    CompileSettings,
    Diagnostic,
    DiagnosticLevel,
    DynamoFrame,
    Environment,
    GraphBreak,
    ParseStats,
    ShapeGuard,
    ShapeSpecialization,
    SourceFile,
    TensorCheck,
)
from .timing import (
    BenchResult,
    DeviceCeilings,
    EndToEnd,
    KernelTiming,
    LaunchTiming,
    Roofline,
    StepTiming,
    Timing,
)

__all__ = [
    "COMPARISON_SCHEMA_VERSION",
    "RUN_SCHEMA_VERSION",
    "Accuracy",
    "AgainstBaseline",
    "AutotuneChoice",
    "AutotuneTable",
    "AutotuneWinner",
    "BenchResult",
    "CaptureOutcome",
    "CaptureStatus",
    "ChangeKind",
    "ChoiceKind",
    "Comparison",
    "CompilePhase",
    "CompileRun",
    "CompileSettings",
    "ConfigDiff",
    "ConfigResult",
    "DeviceCeilings",
    "Diagnostic",
    "DiagnosticLevel",
    "DiffSide",
    "DynamoFrame",
    "EndToEnd",
    "Environment",
    "Evidence",
    "FxGraph",
    "FxNode",
    "GraphBreak",
    "GraphKind",
    "GraphPairing",
    "GraphRecord",
    "HandwrittenKernel",
    "HandwrittenMatch",
    "HandwrittenRun",
    "IRDump",
    "IRNode",
    "InductorBenchmark",
    "JsonScalar",
    "JsonValue",
    "Judgement",
    "KernelArg",
    "KernelBackend",
    "KernelChange",
    "KernelRecord",
    "KernelTiming",
    "Launch",
    "LaunchKind",
    "LaunchTiming",
    "MatchKind",
    "NodeMapping",
    "OriginSegment",
    "ParseStats",
    "Provenance",
    "Roofline",
    "ShapeGuard",
    "ShapeSpecialization",
    "ShapeSymbol",
    "SourceFile",
    "SourceLine",
    "StepTiming",
    "TensorCheck",
    "Timing",
    "Verdict",
    "from_jsonable",
    "lens_document",
    "shape_text",
    "to_jsonable",
]
