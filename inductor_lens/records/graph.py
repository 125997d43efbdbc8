"""Records, graphs: one compiled graph's kernels, launches, FX graphs, IR and provenance."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .codec import JsonValue
from .timing import KernelTiming, LaunchTiming

GraphKind = Literal["forward", "backward", "inference", "unknown"]
KernelBackend = Literal["triton", "cpp"]
LaunchKind = Literal["triton", "cpp", "extern"]


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
class ShapeSymbol:
    """A symbolic size of dynamic shapes (``s53``) and its *hint*: its value when the graph was compiled.

    Sizes written with symbols (``f32[2, s53, 32]``) are worked out at the hints wherever a number is
    needed (bytes, FLOPs, hand-written shapes); what is computed that way says so.
    """

    name: str
    hint: int | float | None = None  # None: unbacked (data-dependent) or not recorded
    # Where the hint was read: "trace" (create_symbol's val), "benchmark harness" (output_code.py's
    # get_args()), "call()" (an expression of other sizes the wrapper computes).
    hint_from: str = ""
    source: str = ""  # what Dynamo made it from: "L['input_ids'].size()[1]"
    range: str = ""  # the values the compiled code accepts: "[2, int_oo]"
    user_line: SourceLine | None = None  # the user line whose tracing created it


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
    # What the kernel's decorator says, as Inductor wrote it (calls become {"_call": name, ...}; see
    # parse/pyliteral.py): the launch settings (num_warps, grid_type, config_args, device, ...) and
    # Inductor's inductor_meta.
    launch_config: Mapping[str, JsonValue] = field(default_factory=dict)
    inductor_meta: Mapping[str, JsonValue] = field(default_factory=dict)
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
    # (its keys change between torch versions, so it is kept as the trace wrote it)
    autotune_info: Mapping[str, JsonValue] = field(default_factory=dict)
    launches: tuple[int, ...] = ()
    inductor_benchmark: InductorBenchmark | None = None
    timing: KernelTiming | None = None


@dataclass(frozen=True)
class LaunchTensors:
    """A library call's tensors as Inductor recorded them when it compiled the call, typed as FX prints them
    (``f32[256, 1024]``): its tensor inputs in order, and its output."""

    inputs: tuple[str, ...]
    output: str | None = None
    # Where they come from: "kernel_information" (torch 2.14+'s create_kernel_information_json, kept by the
    # model process in capture/kernel_information.json).
    source: str = "kernel_information"


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
    # A library call's tensors as Inductor recorded them (torch 2.14+); None: read from call()'s code.
    tensors: LaunchTensors | None = None
    # The key of its operation group (records/answers.py OperationGroup.key), set when the answers are built.
    group: str | None = None
    # The nn.Module paths its ops ran under, innermost, normalized ("layers.0.mlp.fc1"; several for a kernel
    # fusing ops of several modules), from capture/module_stacks.json (parse/module_stacks.py). A backward
    # launch is tied through stack traces, which cannot tell repeated instances apart: it holds the folded path
    # ("layers.*.mlp.fc1") where its trace ran in several.
    modules: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """What the report calls the launch: the kernel's name, or the ATen op of a library call. An
        extern helper that is an autotune choice of its own (``bias_addmm``, which runs ``aten.addmm``)
        keeps its name, so it is never mistaken for the plain ``addmm`` choice it beat; a custom op
        (``torch.library``) is its namespace and name, ``transformers::grouped_mm_fallback``."""
        if self.kind != "extern":
            return self.target
        from ..parse.compat import custom_op  # parse imports records: read at call time

        if (custom := custom_op(self.target)) is not None:
            return custom
        op = self.aten_op or self.target
        helper = self.target.removeprefix("extern_kernels.")
        if self.target.startswith("extern_kernels.") and helper != op.removeprefix("aten.").split(".")[0]:
            return f"{helper} ({op})"
        return op


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
    # Dynamic shapes: the symbols its sizes are written in, with their hints (empty for a static graph).
    symbols: tuple[ShapeSymbol, ...] = ()
    # Its key in Inductor's FX graph cache: the profiler names each call of the graph after it
    # (``## Call CompiledFxGraph <key> ##``), which tells apart graphs that launch the same kernels.
    fx_cache_key: str | None = None
    # Served from Inductor's FX graph cache (the trace's fx_graph_cache_hit): not compiled again, so its debug
    # folder is empty and its output code, kernels and provenance were read from the TORCH_TRACE log.
    cache_hit: bool = False
    # Every nn.Module path of its compile's module stacks, normalized and unfolded ("layers.0.mlp"), and the
    # module's class ("LlamaMLP"); empty where the capture recorded no module stacks.
    module_classes: Mapping[str, str] = field(default_factory=dict)

    @property
    def hints(self) -> dict[str, int | float]:
        """Each symbol's value when the graph was compiled: what symbolic sizes are worked out with."""
        return {s.name: s.hint for s in self.symbols if s.hint is not None}

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
