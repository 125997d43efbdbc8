"""Records, answers: the four questions a performance engineer asks first, answered from the other records.

``bench/answers.py`` builds them after the bench stage (analysis before rendering); the report's first page,
the terminal summary and scripts (``lens.json``'s ``run.answers``) read them. Stable for scripts: fields are
only ever added (``ANSWERS_VERSION`` counts additions that change a meaning).

    speed-up      compiled vs eager (medians, spread)                          Answers.speedup...
    where         operation groups (every launch in a group of the same work)  OperationGroup
                  nn.Module paths, repeated layers folded                     ModuleTime
                  user source lines                                           LineTime
    bound         GPU-bound, host-bound or mixed, from one rule                BoundVerdict
    what to try   findings ranked by time at stake, one per root cause         Finding
                  (measured gains first where they were tried: records/trials.py)
    the step      forward, backward, optimizer and the rest of a step          StepPart
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .trials import SettingChange

ANSWERS_VERSION = 1
# the names of a step's parts (``StepPart.name``)
FORWARD, BACKWARD, OPTIMIZER, REST = "forward", "backward", "optimizer", "the rest"
OUTSIDE = "(outside any module)"  # the ``ModuleTime.path`` of the time no module ran
NO_MODULE_STACKS = (
    "No time per module: this capture has no module stacks (capture/module_stacks.json, which the model process "
    "writes since issue 31; older captures and debug folders without a capture have none)"
)

Confidence = Literal["high", "medium", "low"]
Bound = Literal["GPU-bound", "host-bound", "mixed", "unknown", "kernel-bound"]  # kernel-bound: CPU, time in kernels
GroupKind = Literal["triton", "template", "library", "custom op", "cpp"]


@dataclass(frozen=True)
class GroupMember:
    """One launch of a group: the graph it is in and its position in that graph's ``call()``."""

    graph_id: str
    position: int


@dataclass(frozen=True)
class OperationGroup:
    """Launches doing the same work (same kernel, or same library op on the same shapes, dtypes and backend)."""

    key: str  # stable within the report: its page is ``ops/<key>.html``
    kind: GroupKind
    name: str  # kernel name, or the library op with its backend: "aten.mm", "attention (cuDNN)"
    op: str | None  # the ATen op of a library call ("aten._scaled_dot_product_cudnn_attention")
    backend: str | None  # attention: "cuDNN", "flash", "efficient", "math"; a library: "cuBLAS", "cuDNN", ...
    shapes: str  # its tensors as FX prints them: "f32[4096, 768], f32[768, 2304]"; "" where unknown
    launches_per_step: float
    per_step_us: float  # in context: all its launches, per profiled step (median over steps)
    share: float  # of the device time per step (GPU) or of the time in kernels (CPU)
    per_launch_us: float
    members: tuple[GroupMember, ...]
    device_kernels: tuple[str, ...] = ()  # the device kernels the profiler saw for it (library kernel names)
    flops: int | None = None  # per launch
    bytes: int | None = None  # per launch
    roofline_percent: float | None = None  # in context, of the measured roofline at its intensity
    bound: str | None = None  # "memory" or "compute"
    module: str | None = None  # folded nn.Module path of its launches ("transformer.h.*.mlp.c_fc")
    source: str | None = None  # the user line ("modeling_gpt2.py:239")
    graphs: tuple[str, ...] = ()  # graph ids it appears in
    dtype: str | None = None  # the dtype of its main inputs ("float32") where known


@dataclass(frozen=True)
class ModuleTime:
    """The time of the launches an ``nn.Module`` path ran, repeated instances folded (``layers.*.mlp``)."""

    path: str  # folded: "layers.*.mlp"; "(outside any module)" for the rest
    class_name: str
    depth: int  # dots in the folded path
    instances: int  # distinct unfolded paths behind it ("layers.0.mlp" ... "layers.3.mlp")
    per_step_us: float
    share: float
    instance_min_us: float | None = None  # the spread across instances (None: one instance or backward only)
    instance_max_us: float | None = None
    method: str = ""  # how launches were tied to modules ("module stacks of the FX nodes", "stack traces")


@dataclass(frozen=True)
class LineTime:
    """The time of the launches one user source line produced (a launch from several lines is split evenly)."""

    filename: str
    line: int
    code: str | None
    per_step_us: float
    share: float
    launches_per_step: float


@dataclass(frozen=True)
class BoundVerdict:
    """Where the step waits: on the GPU's work, on the host feeding it, or both."""

    verdict: Bound
    step_us: float | None  # the benchmarked compiled step (do_bench median), the reference for idle time
    busy_us: float | None  # time with a kernel running, per profiled step
    idle_us: float | None  # step_us - busy_us (never negative)
    idle_share: float | None  # idle_us / step_us
    rule: str  # the rule, as applied: thresholds and the numbers it compared
    detail: str  # what the host spends where host-bound or mixed; "" otherwise
    profiled_span_us: float | None = None  # first kernel start to last kernel end, under the profiler
    span_note: str = ""  # how the profiled span relates to the benchmarked step


@dataclass(frozen=True)
class Finding:
    """One thing to try, with the time at stake per step and the facts it rests on."""

    kind: str  # "precision", "host-bound", "graph break", "recompile", "autotune", "memory-bound", ...
    title: str
    at_stake_us: float | None  # per step; None where the records cannot put a time on it
    estimate: str  # how the time at stake was estimated (or why there is none)
    evidence: str  # the facts behind it, with their numbers
    evidence_url: str  # into the report, relative to its root ("compile.html#breaks")
    change: str  # the one change to try; "" for a finding that says there is nothing to gain
    confidence: Confidence
    caveat: str = ""  # what the change may cost (accuracy, memory, compile time)
    occurrences: int = 1  # findings of the same root cause folded into this one
    root_cause: str = ""  # what they share ("data-dependent scalar aten._local_scalar_dense")
    # The change as settings that ``--try`` can run, best first (TF32, then bfloat16 autocast); () where the
    # change is one of code.
    settings: tuple[SettingChange, ...] = ()
    where: str = ""  # the user line the change concerns ("model.py:12"), where the finding names one


@dataclass(frozen=True)
class StepPart:
    """A part of the whole step (forward, backward, optimizer, the rest) and its share of it."""

    name: str
    per_step_us: float
    share: float
    note: str = ""


@dataclass(frozen=True)
class Answers:
    version: int
    device: str | None
    eager_ms: float | None
    compiled_ms: float | None
    speedup: float | None  # eager / compiled medians
    speedup_note: str  # the spread and how measured, or why there is none
    bound: BoundVerdict | None
    groups: tuple[OperationGroup, ...]  # ranked by per-step time
    modules: tuple[ModuleTime, ...]  # ranked by per-step time
    lines: tuple[LineTime, ...]  # ranked by per-step time
    findings: tuple[Finding, ...]  # ranked by time at stake, untimed last
    step_parts: tuple[StepPart, ...] = ()
    time_basis: str = ""  # what the shares are of ("device time per step", "time in C++ kernels per step")
    shares_note: str = ""  # where shares do not add up, why
