"""Records, numerics: the first kernel whose output goes wrong (``inductor-lens compile --find-divergence``).

The model process compiles the model again with every kernel's output buffers recorded as ``call()``
writes them, runs the graph Inductor received (before its post-grad passes) node by node in the model's
dtype and in float64 on the same inputs, and judges each buffer against the node that produced it with
the accuracy verdict's rule (worker/accuracy.py). ``worker/divergence.py`` fills these records.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from .codec import JsonScalar
from .graph import SourceLine

DivergenceStatus = Literal["diverged", "agrees", "failed"]
TrialOutcome = Literal["fixes", "still diverges", "failed", "not tried"]


def output_code_hash(text: str) -> str:
    """The identity of a graph's ``output_code.py``, the same for two compiles of one graph in one process
    (the ``# AOT ID`` header counts compiles, so it is left out)."""
    kept = "\n".join(line for line in text.strip().splitlines() if not line.startswith("# AOT ID"))
    return hashlib.sha1(kept.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class BufferCheck:
    """One buffer a launch wrote, against the FX node that produced it (run in the model's dtype and float64).

    Judged as TensorCheck is: within ``tolerance`` of the node's value in the model's dtype, or an RMSE
    against float64 at most ``multiplier`` times that value's own, plus ``tolerance / 10``.
    """

    graph: int  # index into NumericDivergence.graphs
    launch: int  # the launch's position in the graph's call() (1-based, as Launch.position)
    target: str  # the kernel's name, or the extern call (``extern_kernels.addmm``)
    kind: str  # "triton", "cpp" or "extern"
    buffer: str  # "buf3"
    node: str  # the post-grad FX node whose value the buffer holds ("mul_2")
    tensor: str  # "float32[16, 128]"
    within: bool
    tolerance: float
    max_abs_error: float | None = None  # max |compiled - node in the model's dtype|
    compiled_rmse: float | None = None  # against float64
    eager_rmse: float | None = None  # the node in the model's dtype, against float64
    multiplier: float | None = None
    note: str = ""
    source: SourceLine | None = None  # the model line the node was traced from
    call: int = 1  # which call of get_inputs()

    @property
    def limit(self) -> float | None:
        if self.eager_rmse is None or self.multiplier is None:
            return None
        return self.multiplier * self.eager_rmse + self.tolerance / 10

    @property
    def place(self) -> str:
        """The check in a few words: ``cpp_fused_mul_0 (buf1 = mul, model.py:21)``."""
        line = f", {self.source.label.rsplit('/', 1)[-1]}" if self.source else ""
        return f"{self.target} ({self.buffer} = {self.node}{line})"


@dataclass(frozen=True)
class DivergenceGraph:
    """A graph the search compiled; ``code_hash`` (output_code_hash) finds it among the report's graphs."""

    index: int
    code_hash: str
    kernels: tuple[str, ...] = ()
    launches: int = 0


@dataclass(frozen=True)
class OptionTrial:
    """The search run again with one Inductor option changed: does the divergence go away?"""

    option: str
    value: JsonScalar
    outcome: TrialOutcome
    detail: str = ""  # the first buffer that still diverges, the error, or why it was not tried
    seconds: float | None = None


@dataclass(frozen=True)
class NumericDivergence:
    """The outcome of ``--find-divergence``: the first buffer out of bounds in launch order, if any."""

    status: DivergenceStatus
    method: str = ""
    graphs: tuple[DivergenceGraph, ...] = ()
    # In launch order, up to and including the first divergent buffer (``earlier`` more before them were
    # within bounds and are left out); with no divergence, the buffers closest to their limit.
    checks: tuple[BufferCheck, ...] = ()
    earlier: int = 0
    compared: int = 0  # buffers judged
    skipped: tuple[str, ...] = ()  # "2 buffers: their node gives several tensors (var_mean)"
    options: tuple[OptionTrial, ...] = ()
    budget_s: float | None = None  # the time the option re-runs were given
    seconds: float | None = None
    error: str | None = None

    @property
    def first(self) -> BufferCheck | None:
        """The first buffer out of bounds."""
        return self.checks[-1] if self.status == "diverged" and self.checks else None

    @property
    def fixes(self) -> tuple[OptionTrial, ...]:
        return tuple(t for t in self.options if t.outcome == "fixes")


def divergence_headline(found: NumericDivergence) -> str:
    """One line for the CLI and the overview's verdict card."""
    if found.status == "failed":
        return f"the divergence search failed: {found.error}"
    first = found.first
    if first is None:
        return f"no kernel output diverges ({found.compared} buffers judged against their FX nodes)"
    text = f"first diverging kernel: {first.place}: {first.note}"
    fixes = ", ".join(f"{t.option}={t.value}" for t in found.fixes)
    return text + (f"; made to agree by {fixes}" if fixes else "")
