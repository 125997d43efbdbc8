"""Records, the run's Dynamo compiles: each compile of a Python frame (DynamoFrame) with its compile-time
phases, shape guards and specializations, IR stages and cache lookups, and the graph breaks that split the
model (GraphBreak). Part of the run document (records/run.py holds its schema history).
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import ShapeSymbol, SourceLine


@dataclass(frozen=True)
class CompilePhase:
    """One slice of a frame's compile time, from the trace's compilation metrics."""

    name: str
    seconds: float
    how: str
    # True for an item that is part of one of the other phases (not added to the total).
    within: bool = False


@dataclass(frozen=True)
class ShapeGuard:
    """A guard the frame's symbolic sizes added (``Eq(s70, s53)``, ``s27 >= 5``): a condition on the
    input sizes the compiled code relies on, and the user line being traced when it was added."""

    expr: str
    user_line: SourceLine | None = None


@dataclass(frozen=True)
class ShapeSpecialization:
    """A symbol Dynamo turned back into a constant (``s27`` -> 4096): that size is static after all."""

    symbol: str
    value: str
    reason: str  # torch's own words: "range_refined_to_singleton", "trivial_lhs", ...
    sources: tuple[str, ...] = ()  # what the symbol stood for: "L['x'].size()[1]"
    guard: str = ""  # the guard the specialization added: "Eq(s27, 4096)"
    user_line: SourceLine | None = None


@dataclass(frozen=True)
class IrStage:
    """One form of a compile's graph as the TORCH_TRACE log holds it (Dynamo's graph, the pre-grad graph, the
    AOT joint/forward/backward graphs, the post-grad graph...), in the order it was logged."""

    name: str  # the trace's name for it: "dynamo_output_graph", "aot_forward_graph", "before_pre_grad_graph"
    text: str
    lines: int
    cut_chars: int = 0  # characters left out past the parser's limit (0: whole)


@dataclass(frozen=True)
class CacheLookup:
    """One lookup of a compile's graph in a compile cache: AOTAutograd's or Inductor's FX graph cache (the
    trace's ``aotautograd_cache_*`` and ``fx_graph_cache_*`` artifacts), in the order logged."""

    cache: str  # "AOTAutograd" or "FX graph"
    result: str  # "hit", "miss" or "bypass"
    compile_id: str = ""  # the attempt that looked up (a restarted one may have, before it restarted)
    key: str | None = None  # None on a bypass: no key could be made
    detail: str = ""  # torch's cache_status_detailed: "full_miss", "guard_miss", "hit"
    bypass_reason: str = ""
    # A miss: the compile it cost (time_taken_ns); a hit: the compile it saved (time_saved_ns).
    seconds: float | None = None
    # What the key hashes ("[hash] name: value"), the first ones kept and each cut to a limit; components_total
    # is how many torch listed, components_cut how many of those kept were cut.
    components: tuple[str, ...] = ()
    components_total: int = 0
    components_cut: int = 0


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
    # Dynamic shapes (from the trace): symbols created, specializations, and the guards on sizes.
    symbols: tuple[ShapeSymbol, ...] = ()
    specializations: tuple[ShapeSpecialization, ...] = ()
    shape_guards: tuple[ShapeGuard, ...] = ()
    # CUDA graphs recorded for this compile's graphs (cudagraph trees), from the trace: how many recordings
    # (``CUDAGraphNode.record`` spans) and their time; None where the trace logged none.
    cudagraph_recordings: int | None = None
    cudagraph_record_s: float | None = None
    stages: tuple[IrStage, ...] = ()
    # The Python stack that triggered the compile (dynamo_start), outermost first.
    stack: tuple[SourceLine, ...] = ()
    # A failed compile (compilation_metrics): the exception's type and the user line it was raised at, if any.
    fail_type: str | None = None
    fail_user_frame: SourceLine | None = None
    # The attempts that restarted into this one (``0/0`` for ``0/0_1``); restart_reasons says why.
    restarted: tuple[str, ...] = ()
    # Dynamo's graph (compilation_metrics): its ops, nodes and inputs; how many compiled entries this code object
    # (cache_size) and all code objects of the frame (accumulated_cache_size) had before this compile.
    graph_op_count: int | None = None
    graph_node_count: int | None = None
    graph_input_count: int | None = None
    cache_size: int | None = None
    accumulated_cache_size: int | None = None
    non_compliant_ops: tuple[str, ...] = ()
    compliant_custom_ops: tuple[str, ...] = ()
    cache_lookups: tuple[CacheLookup, ...] = ()

    @property
    def frame_key(self) -> str:
        """The Python frame compiled: ``0`` for the compiles ``0/0``, ``0/1`` and ``0/1_1``."""
        head, _, _ = self.compile_id.rpartition("/")
        return head or self.compile_id


@dataclass(frozen=True)
class GraphBreak:
    """A place where Dynamo stopped tracing and split the model into several graphs."""

    compile_id: str
    reason: str
    detail: str = ""
    location: SourceLine | None = None
    # The frames that led to it: the user's own; for a break inside a library, with no user frame, the library's.
    user_stack: tuple[SourceLine, ...] = ()
    # Its entry in torch's graph-break registry: "GB0124", what it means and what to do.
    code: str | None = None
    explanation: str = ""
    hints: tuple[str, ...] = ()
