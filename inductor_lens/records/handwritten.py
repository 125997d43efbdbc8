"""Records, hand-written equivalents: which hand-written Triton kernels do each Inductor kernel's job, and how they fared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .timing import Roofline, Timing

MatchKind = Literal["exact", "composed", "partial", "none"]
# Where a launch configuration came from: searched for this shape in the run; searched earlier in the run
# for a shape of the same class; read from the hand-written autotune cache, or from the table shipped for
# the GPU's architecture (worker/handwritten/tuned/sm_90.json): nothing benchmarked.
ConfigOrigin = Literal["tuned", "reused", "cache", "table"]


def shape_text(shape: Mapping[str, int], dims: Sequence[str]) -> str:
    """``1000x777``: a hand-written kernel's shape, its sizes in the order of its dimensions."""
    return "x".join(str(shape[d]) for d in dims)


@dataclass(frozen=True)
class HandwrittenKernel:
    """A hand-written kernel as the report shows it, recorded when the matches were made.

    The catalog and the kernels' code change between versions of inductor-lens: a saved report keeps
    the ones it was built with.
    """

    name: str
    summary: str
    formula: str  # what it computes, in torch terms
    dims: tuple[str, ...]  # the names of its shape's dimensions, in order
    source: str  # the @triton.jit functions it launches, as written ("" where they could not be read)


@dataclass(frozen=True)
class KernelConfig:
    """The launch configuration one of a hand-written kernel's ``@triton.jit`` functions ran with on a GPU."""

    kernel: str  # the @triton.jit function
    config: str  # "BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3"
    origin: ConfigOrigin
    tuned_ms: float | None = None  # the autotuner's median for it, when it was tuned (now or for the cache)
    note: str = ""  # how its search went, where it was searched now: "cut short: 5 of 14 configurations timed ..."


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
    # The configurations its autotuned kernels launched with (GPU only: the interpreter's are fixed, not recorded).
    configs: tuple[KernelConfig, ...] = ()
    # Why it was not checked, or not to the end, though nothing failed: the hand-written stage's budget spent
    # before it started, or the check cut short by its time limit under the interpreter ("" when it ran).
    skipped: str = ""


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
    # Whether the equivalents compute what Inductor's kernel computes: run in float64 on the launch's input
    # shapes against the kernel's own post-grad FX nodes (handwritten/verify.py). False: rejected, not timed;
    # None: not verified (``verify_note`` says why).
    verified: bool | None = None
    verify_error: float | None = None  # max |equivalent - FX| / max |FX| of the best pairing of inputs
    verify_tolerance: float | None = None
    verify_note: str = ""

    @property
    def rejected(self) -> bool:
        return self.verified is False

    @property
    def key(self) -> str:
        return f"{self.graph_id}:{self.launch}:{self.target}"
