"""The process boundary: every file that crosses it, declared once, and read back with its shape checked.

The parent writes what a worker needs, the worker writes what it found; both sides use these
declarations. A worker writes its result after every step that matters (atomically), so a crash or a
timeout still leaves what was done. The parent reads with ``read_json_file``: a file that is missing
is ``None``, one that is not JSON or not of the declared shape raises ``FileShapeError``, which the
reading stage turns into a warning (or an error under ``--strict``).

    capture/spec.json         parent -> model process   CompileSpec, or ScriptSpec for a script (options.py)
    capture/capture.json      model process -> parent   CaptureResult (with BenchData when timed)
    capture/capture.log       model process -> parent   everything it printed; ``PHASE_MARKER`` lines
    capture/profile_trace.json  model process -> parent   torch.profiler's Chrome trace of the timed steps
    capture/saved_inputs/index.json  model process -> parent   SavedInputs (``--save-inputs``: each kernel's
                              launch arguments, one .pt file each beside it, for ``inductor-lens repro``)
    capture/kernel_information.json  model process -> parent   KernelInformation (torch 2.14+: each compile's
                              create_kernel_information_json(), with the library calls' shapes and dtypes)
    capture/module_stacks.json  model process -> parent   ModuleStacks (each compiled graph's FX node -> the
                              nn.Module stack and stack trace Dynamo recorded on it)
    capture/handwritten_plan.json  parent -> check process   HandwrittenPlan
    capture/handwritten.json  check process -> parent   HandwrittenResults

Only the standard library and the record types are used here: a worker imports this module.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..records.codec import JsonValue, from_jsonable, to_jsonable
from ..records.graph import SourceLine
from ..records.handwritten import KernelConfig
from ..records.numerics import NumericDivergence
from ..records.outcome import Accuracy, CompileCall
from ..records.run import Environment
from ..records.timing import HostLoad, Timing

CAPTURE_DIR = "capture"
SPEC_FILE = "spec.json"
RESULT_FILE = "capture.json"
LOG_FILE = "capture.log"
PROFILE_TRACE_FILE = "profile_trace.json"
# The compiled graphs' code profiled again without CUDA graphs (worker/graph_free.py), when the steps replayed them.
GRAPH_FREE_TRACE_FILE = "profile_graph_free.json"
# On a CPU job of several ranks, one more compiled step profiled with record_shapes=True after the timed steps:
# gloo's ranges with their tensors' sizes, which give the collectives' bytes (the timed steps record no shapes,
# which cost 7-18% of a step: benchmarks/results/2026-11-28-cpu-record-shapes-cost.md).
COLLECTIVE_SIZES_TRACE_FILE = "profile_collective_sizes.json"
# --save-inputs: the arguments of each kernel's first launch, one torch.save'd list per launch, and their index.
SAVED_INPUTS_DIR = "saved_inputs"
SAVED_INPUTS_INDEX = f"{SAVED_INPUTS_DIR}/index.json"
KERNEL_INFORMATION_FILE = "kernel_information.json"
MODULE_STACKS_FILE = "module_stacks.json"
HANDWRITTEN_PLAN_FILE = "handwritten_plan.json"
HANDWRITTEN_RESULTS_FILE = "handwritten.json"
HANDWRITTEN_LOG_FILE = "handwritten.log"

# A worker announces each phase it enters with a line starting with this, on its output.
PHASE_MARKER = "[inductor-lens] phase: "
# Profiled steps are ranges in profile_trace.json named ``<mark><n>``: the model process marks its own
# steps; a script's steps are torch.profiler's (between two calls of its first compiled function).
STEP_MARKS = ("inductor_lens_step_", "ProfilerStep#")
# The profiler range around each call of a compiled graph: Inductor's own (``## Call CompiledFxGraph <FX cache
# key> ##``), and graph_free.py's around the generated code called directly (``... <md5 of output_code.py> ##``).
GRAPH_FREE_REGION = REGION_MARK = "## Call CompiledFxGraph"

T = TypeVar("T")


class FileShapeError(ValueError):
    """A boundary file that is not JSON, or not of its declared shape."""


# --- capture.json: what the model process found ------------------------------------------------------


@dataclass
class ReportedSettings:
    """How the model process called torch.compile, beyond what the spec asked for."""

    device: str | None = None
    dtype: str | None = None
    # What the mode turns on (torch._inductor.list_mode_options), and what inductor-lens added.
    mode_options: dict[str, JsonValue] = field(default_factory=dict)
    capture_options: dict[str, JsonValue] = field(default_factory=dict)
    backward: str = ""  # with --train: "outputs.loss" or "the sum of N outputs" (worker/capture.py)
    # The settings the spec set, as torch has them once applied (None and {}: the spec set none).
    matmul_precision: str | None = None  # torch.get_float32_matmul_precision()
    cudnn_allow_tf32: bool | None = None  # torch.backends.cudnn.allow_tf32
    autocast: str | None = None  # the dtype of the autocast entered around each call and step
    dynamo_options: dict[str, JsonValue] = field(default_factory=dict)  # read back from torch._dynamo.config


@dataclass
class CeilingsData:
    """The device's measured bandwidth (a large copy) and matmul throughput."""

    copy_bytes: int
    copy: Timing
    copy_gb_per_s: float
    matmul_flop: int
    matmul: Timing
    matmul_tflops: float
    dtype: str = ""
    tf32: bool = False
    # What the run's precision settings left on the table: the same matmul in TF32 (float32 runs with
    # TF32 off) and in bfloat16 (float32 runs), measured here; None where not measured.
    matmul_tf32_tflops: float | None = None
    matmul_bf16_tflops: float | None = None
    cudnn_tf32: bool | None = None  # torch.backends.cudnn.allow_tf32 (convolutions; on by default)
    float32_matmul_precision: str | None = None  # torch.get_float32_matmul_precision()


@dataclass
class EndToEndData:
    eager: Timing | None = None
    compiled: Timing | None = None
    eager_peak_bytes: int | None = None
    compiled_peak_bytes: int | None = None


@dataclass
class ProfileData:
    """The profiled compiled steps; the trace itself is ``PROFILE_TRACE_FILE`` beside capture.json."""

    steps: int
    trace: str
    device: str


@dataclass
class IsolatedKernel:
    """One Triton kernel replayed alone on a copy of its real launch's arguments."""

    isolated: Timing | None = None
    error: str | None = None
    config: str | None = None  # the launcher's config, as Triton prints it
    n_regs: int | None = None
    n_spills: int | None = None
    shared: int | None = None
    # Graphs of one run can reuse a kernel name: the kernel text's hash tells them apart.
    fingerprint: str | None = None


@dataclass
class CudaGraphData:
    """The compiled graphs' code run without CUDA graphs, when the profiled steps replayed them (graph_free.py)."""

    trace: str = ""  # GRAPH_FREE_TRACE_FILE, when profiled
    steps: int = 0
    graphs: int = 0  # output-code modules called
    step: Timing | None = None  # one call of each, do_bench: the step without CUDA graphs or Dynamo's guards
    graphs_recorded: int | None = None  # cudagraph trees' recorded nodes
    rerecords: int | None = None
    skips: int | None = None  # Inductor's cudagraph_skips counter
    isolated: dict[str, list[IsolatedKernel]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


@dataclass
class BenchData:
    """What ``worker/measure.py`` measured; ``error`` when timing failed (the capture still counts)."""

    device: str
    error: str | None = None
    ceilings: CeilingsData | None = None
    end_to_end: EndToEndData | None = None
    profile: ProfileData | None = None
    isolated: dict[str, list[IsolatedKernel]] = field(default_factory=dict)
    cudagraph: CudaGraphData | None = None
    # The machine's load around each timed window (worker/load.py).
    host: list[HostLoad] = field(default_factory=list)


@dataclass
class CaptureResult:
    """capture.json: the model process's outcome, written after every phase."""

    status: str = "failed"  # "ok" once every phase ran
    phase: str = "start"
    error: str | None = None
    # The LensError class the parent reports the failure as (errors.py), e.g. "ModelFileError".
    error_kind: str | None = None
    wall_s: float | None = None
    environment: Environment = field(default_factory=lambda: Environment(source="capture"))
    settings: ReportedSettings = field(default_factory=ReportedSettings)
    eager_first_call_s: float | None = None
    cold_compile_s: float | None = None
    second_call_s: float | None = None
    calls: int = 1  # how many calls get_inputs() asked for
    call_seconds: list[float] = field(default_factory=list)  # each call of the first compiled pass
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    parameters: int | None = None
    # Where get_model() built the model and its modules (worker/model_file.py module_sites).
    model_built: list[SourceLine] = field(default_factory=list)
    accuracy: Accuracy | None = None
    divergence: NumericDivergence | None = None  # --find-divergence
    bench: BenchData | None = None
    # A script run unchanged (worker/script.py): its torch.compile calls and the profiled window.
    command: str = ""
    compile_calls: list[CompileCall] = field(default_factory=list)
    profiled: str = ""


# --- saved_inputs/index.json: the kernels' real arguments (--save-inputs) ------------------------------


@dataclass
class SavedLaunch:
    """The first launch of one kernel of one graph: its arguments as a list in ``file`` (torch.save)."""

    graph: str  # md5 of the output-code module (what graph_free.py names a graph by; the parent's graph.output_code)
    kernel: str
    file: str = ""  # under SAVED_INPUTS_DIR; "" when skipped
    arguments: int = 0  # how many arguments the launch passed (tensors and scalars)
    bytes: int = 0  # the tensors' storage
    skipped: str = ""  # why it was not saved (the size cap, an argument torch.save cannot write)


@dataclass
class SavedInputs:
    cap_bytes: int
    launches: list[SavedLaunch] = field(default_factory=list)
    error: str | None = None


# --- kernel_information.json: Inductor's own record of each kernel (torch 2.14+) ------------------------


@dataclass
class CompileKernelInformation:
    """One Inductor compile's ``create_kernel_information_json()``, as torch returned it: ``"<kernel>:<debug
    handle>"`` -> stack traces, post- and pre-grad nodes, and for a library call its input_shapes,
    input_dtypes, output_shape and output_dtype."""

    compile_id: str | None  # None: compiled outside a compile's own scope (a lazily compiled backward graph)
    kernels: dict[str, JsonValue] = field(default_factory=dict)


@dataclass
class KernelInformation:
    compiles: list[CompileKernelInformation] = field(default_factory=list)


# --- module_stacks.json: the nn.Module each FX node ran under (worker/module_stacks.py) --------------------


@dataclass
class GraphModuleStacks:
    """One graph as Inductor received it: node name -> [index into ``ModuleStacks.stacks``, into ``traces``]."""

    compile_id: str | None
    nodes: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class ModuleStacks:
    # Each a module stack, outermost first: [path as Dynamo wrote it ("L['self'].layers[0].mlp"), class name].
    stacks: list[list[list[str]]] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)  # the user's stack traces, as Dynamo recorded them
    graphs: list[GraphModuleStacks] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# --- the hand-written kernels' check process ---------------------------------------------------------


@dataclass
class HandwrittenTask:
    name: str
    shape: dict[str, int]
    dtype: str
    # The matches it stands in for (VerifyTask.match): not timed when every one of them was rejected.
    matches: list[str] = field(default_factory=list)
    # The launch configuration Inductor's own autotuner chose for a kernel it stands in for (a template's
    # BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): a search of the hand-written kernel times it first.
    start_config: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return task_key(self.name, self.shape, self.dtype)


@dataclass
class VerifyInput:
    """One input of an Inductor kernel's FX nodes: a tensor (dtype, sizes at the hints, how its values are made,
    as the reproducer makes them) or a size (``value``)."""

    node: str
    dtype: str = ""  # torch's name; "" for a size
    size: list[int] = field(default_factory=list)
    values: str = "randn"
    value: int | float | None = None


@dataclass
class VerifyTask:
    """Does a match compute what Inductor's kernel computes: its equivalents, in order, against the kernel's own
    post-grad FX nodes (``code``, from ``repro/plan.reference_of``), both in float64 on the same inputs."""

    match: str  # the match's key and its equivalents (verify.verify_key)
    steps: list[HandwrittenTask]
    code: str
    inputs: list[VerifyInput]
    outputs: list[str]  # the FX nodes the kernel hands on
    views: list[str] = field(default_factory=list)  # its nodes that reorder an input (permute, transpose)


@dataclass
class VerifyResult:
    agrees: bool | None = None  # None: not verified (see note)
    max_rel_error: float | None = None  # of the best pairing of the kernel's inputs with the equivalents'
    tolerance: float | None = None
    note: str = ""


@dataclass
class HandwrittenPlan:
    device: str  # "cuda", or "cpu" (Triton's interpreter, reduced shapes, no timing)
    tasks: list[HandwrittenTask] = field(default_factory=list)
    verify: list[VerifyTask] = field(default_factory=list)  # run first, on the CPU, in float64
    # Seconds the verification and the tasks may take in all (None: the device's default; 0 or less: no
    # limit); a task not started when they are spent is a result with ``skipped`` set.
    budget_s: float | None = None


@dataclass
class HandwrittenTaskResult:
    checked_shape: dict[str, int] = field(default_factory=dict)
    interpreter: bool = False
    ok: bool | None = None
    max_rel_error: float | None = None
    tolerance: float | None = None
    timing: Timing | None = None  # the hand-written kernel, do_bench
    eager: Timing | None = None  # torch's own op(s) on the same inputs
    gpu_alone: Timing | None = None  # the kernel replayed from a CUDA graph
    error: str | None = None
    seconds: float | None = None
    # The configurations its autotuned kernels launched with, and where each came from (GPU only).
    configs: list[KernelConfig] = field(default_factory=list)
    # Why it was not checked, or not to the end, though nothing failed: the stage's budget spent before it
    # started, or the check cut short by its own time limit under the interpreter ("" when it ran).
    skipped: str = ""


@dataclass
class HandwrittenResults:
    device: str = ""
    results: dict[str, HandwrittenTaskResult] = field(default_factory=dict)
    verified: dict[str, VerifyResult] = field(default_factory=dict)  # by VerifyTask.match
    # Set by the parent when the check process died or ran out of time.
    error: str | None = None


def task_key(name: str, shape: Mapping[str, int], dtype: str) -> str:
    return f"{name}:{'x'.join(str(v) for v in shape.values())}:{dtype}"


# --- reading and writing -------------------------------------------------------------------------------


def write_json_file(path: Path, value: object) -> None:
    """Write a declared value (a dataclass) as JSON, atomically: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_jsonable(value), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json_file(path: Path, declared: type[T]) -> T | None:
    """The file as its declared type; ``None`` when it is not there."""
    data = load_json_file(path)
    return None if data is None else decode(declared, data, path.name)


def read_capture_result(path: Path) -> CaptureResult | None:
    """capture.json without its measurements (``read_bench_data`` reads those): a damaged
    measurement section must not hide how the model process ended."""
    data = load_json_file(path)
    if data is None:
        return None
    if not isinstance(data, dict):
        raise FileShapeError(f"{path.name}: not a CaptureResult (a JSON {type(data).__name__})")
    return decode(CaptureResult, {k: v for k, v in data.items() if k != "bench"}, path.name)


def read_bench_data(path: Path) -> BenchData | None:
    """The measurements in capture.json, if the model process took any."""
    data = load_json_file(path)
    if data is not None and not isinstance(data, dict):
        raise FileShapeError(f"{path.name}: not a CaptureResult (a JSON {type(data).__name__})")
    if data is None or data.get("bench") is None:
        return None
    return decode(BenchData, data["bench"], f"{path.name}: bench")


def load_json_file(path: Path) -> object | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileShapeError(f"{path.name}: cannot read ({exc})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileShapeError(f"{path.name}: not JSON ({exc})") from exc


def decode(declared: type[T], data: object, where: str) -> T:
    try:
        return from_jsonable(declared, data)
    except (TypeError, ValueError, KeyError) as exc:
        raise FileShapeError(f"{where}: not a {declared.__name__} ({type(exc).__name__}: {exc})") from exc


# In the model process's Inductor cache: what names its autotuner's ``<key>.best_config`` files
# (``{"torch_key": hex, "cache_key_tag": str}``), so the tool can tell each file's kernel without importing torch
# and hashing its sources (``capture/triton_cache._kernel_files``: 10 s of an H100 run's first report).
AUTOTUNE_KEY_FILE = "inductor_lens_autotune_key.json"


class ResultWriter:
    """The model process's side of capture.json: each phase announced on stderr (the parent's progress line
    reads ``PHASE_MARKER``) and the file rewritten after it, so a crash still leaves how far it got."""

    def __init__(self, result_path: Path, result: CaptureResult) -> None:
        self.result_path = result_path
        self.started = time.perf_counter()
        self.result = result

    def phase(self, name: str) -> None:
        self.result.phase = name
        print(f"{PHASE_MARKER}{name}", file=sys.stderr, flush=True)
        self.write()

    def write(self) -> None:
        self.result.wall_s = time.perf_counter() - self.started
        write_json_file(self.result_path, self.result)
