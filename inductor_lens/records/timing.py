"""Records, timing: what the bench stage measured (device ceilings, latency, per launch and per kernel)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .answers import StepPart


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
    # The spread over the profiled steps (None in reports written before it was kept).
    p10_us: float | None = None
    p90_us: float | None = None
    steps: int = 0
    # GPU: the device kernels it issued in the first step it ran, distinct, in order (a library call's own
    # kernels: "sm90_xmma_gemm_...", "cudnn_generated_fort_native_sdpa_...").
    device_kernels: tuple[str, ...] = ()

    @property
    def spread(self) -> str:
        """``p10-p90 1.2-1.4 µs over 20 steps``, or "" where not recorded."""
        if self.p10_us is None or self.p90_us is None:
            return ""
        return f"p10-p90 {self.p10_us:,.1f}-{self.p90_us:,.1f} µs over {self.steps} profiled steps"


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
    matmul_tf32_tflops: float | None = None  # the same float32 matmul with TF32 on (measured where it was off)
    matmul_bf16_tflops: float | None = None  # the same matmul in bfloat16 (measured on float32 runs)
    cudnn_tf32: bool | None = None  # torch.backends.cudnn.allow_tf32 in the model process (None: not recorded)
    float32_matmul_precision: str | None = None


@dataclass(frozen=True)
class EndToEnd:
    eager: Timing
    compiled: Timing
    speedup: float
    eager_peak_bytes: int | None = None
    compiled_peak_bytes: int | None = None
    cudagraphs: str | None = None  # "used", "skipped: <reason>", or None when the mode has none


@dataclass(frozen=True)
class CollectiveTime:
    """A collective op of the profiled steps, wherever it ran (DDP's and FSDP2's run in hooks, outside the graphs):
    its calls, bytes and time per step (bench/collectives.py)."""

    op: str  # as torch names it: "all_reduce", "reduce_scatter"
    backend: str  # "NCCL", "gloo"
    calls_per_step: float
    us_per_step: float
    method: str
    # The bytes of the calls' input messages per step (for an all-gather the rank's shard, for a reduce-scatter
    # its whole input); None where the trace gives no size for some call. ``bytes_method``: how they were
    # counted, or why there are none.
    bytes_per_step: float | None = None
    bytes_method: str = ""

    @property
    def bytes_per_s(self) -> float | None:
        """The algorithm bandwidth on a GPU: the bytes over NCCL's kernel time (which holds its wait for the last
        peer too). None on a CPU, where gloo's range is its thread's whole work, and without bytes or time."""
        if self.backend != "NCCL" or self.bytes_per_step is None or self.us_per_step <= 0:
            return None
        return self.bytes_per_step / (self.us_per_step * 1e-6)


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
    replayed_us: float | None = None  # GPU: of total_us, the device time inside CUDA-graph replays
    approximate_us: float | None = None  # of replayed_us, tied to a launch by its position only
    # The spread of ``total_us`` over the profiled steps (None in reports written before it was kept).
    total_p10_us: float | None = None
    total_p90_us: float | None = None
    # The whole step (bench/step_parts.py): forward, backward, optimizer and the rest, each with its share; the
    # median host wall time of a whole step (the step's range); how both were measured.
    parts: tuple[StepPart, ...] = ()
    step_wall_us: float | None = None
    parts_method: str = ""
    # The collectives of the profiled steps, in or outside the graphs (bench/collectives.py), the most time first.
    collectives: tuple[CollectiveTime, ...] = ()


@dataclass(frozen=True)
class CudaGraphUse:
    """A run whose compiled steps replayed CUDA graphs: what they cost and what they saved."""

    graphs_recorded: int | None  # cudagraph trees' recorded graphs (None: not readable in this torch)
    rerecords: int | None
    skips: int | None  # Inductor's cudagraph_skips counter
    recording_s: float | None  # the second compiled call, which records the graphs (wall seconds)
    with_graphs: Timing | None  # the compiled step as the model runs it (end to end)
    without_graphs: Timing | None  # the compiled graphs' code called directly, no CUDA graphs, no guards
    without_graphs_device_us: float | None  # its profiled device time per step
    graph_free_calls: int  # output-code modules called in that step
    tie: str  # how replayed kernels were tied to launches
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostLoad:
    """How busy the machine was while the model process timed one window (``worker/load.py``).

    ``cpu_s`` is this process's CPU time (user + system, all its threads) over the window's ``wall_s``:
    about ``threads`` when its threads ran undisturbed on a computing step. ``system_busy_s`` is the busy
    CPU time of the whole machine over the same window (Linux ``/proc/stat``, in clock ticks of 10 ms), so
    ``system_busy_s - cpu_s`` is what other processes took. Load averages are the 1-minute ones, a slow
    average: they tell of load that lasted, not of a short burst.
    """

    window: str  # "eager steps", "compiled steps", "profiled steps", "all measurements"
    wall_s: float
    cpu_s: float
    cpus: int  # CPUs this process may run on
    threads: int | None = None  # torch's intra-op threads
    load_before: float | None = None
    load_after: float | None = None
    system_busy_s: float | None = None


@dataclass(frozen=True)
class GraphJoin:
    """How the calls of one graph were recognised in a profiler trace recorded elsewhere."""

    graph: str  # the graph's id
    method: str  # "FX graph cache key", "launch-name sequence", "kernel names of its CUDA-graph replays", ...
    calls: int  # its calls joined, over the profiled steps


@dataclass(frozen=True)
class ProfileSource:
    """A profiler trace recorded elsewhere (``report --profile``): the in-context times come from it alone."""

    file: str  # the trace file as given
    steps_found: str  # how the profiled steps were delimited
    recorded: str | None = None  # when the trace began (UTC, from its own clock), where it says
    device_name: str | None = None  # the trace's deviceProperties (GPU), None on CPU
    device_detail: str = ""  # what else the trace says of the device (SMs, compute capability, memory)
    joins: tuple[GraphJoin, ...] = ()
    unjoined_calls: int = 0  # compiled-graph calls in the steps that no graph of the report explains
    unattributed_count: int = 0  # kernels (GPU) or ranges (CPU) in the steps tied to no launch, all steps
    outside_count: int = 0  # kernels (GPU) or top-level ATen ops (CPU) outside every profiled step
    outside_us: float = 0.0  # their total duration
    ceilings: str = ""  # where the roofline's ceilings come from, or why there are none
    replaced: str | None = None  # the report's earlier timings that these replace


@dataclass(frozen=True)
class BenchResult:
    device: str
    ceilings: DeviceCeilings | None = None
    end_to_end: EndToEnd | None = None
    step: StepTiming | None = None
    error: str | None = None
    cudagraphs: CudaGraphUse | None = None
    # The machine's load around each timed window (empty in reports written before it was recorded).
    host: tuple[HostLoad, ...] = ()
    # Set where the times come from a profiler trace recorded elsewhere (report --profile), not a capture.
    profile: ProfileSource | None = None
