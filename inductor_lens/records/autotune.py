"""Records, the run's autotuning: each ``AUTOTUNE op(shapes)`` table Inductor printed (AutotuneTable), its
choices and the choices that failed. Part of the run document (records/run.py holds its schema history).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .codec import JsonScalar

ChoiceKind = Literal["extern", "triton", "other"]


@dataclass(frozen=True)
class AutotuneChoice:
    name: str
    ms: float
    percent: float | None = None
    kind: ChoiceKind = "other"
    config: Mapping[str, JsonScalar] = field(default_factory=dict)  # a Triton template's BLOCK_M=64, ...


@dataclass(frozen=True)
class AutotuneFailure:
    """A choice that could not be compiled or run while autotuning (Inductor logs it and ignores it)."""

    reason: str  # short: "out of shared memory: needs 262144 bytes, the limit is 232448"
    message: str = ""  # torch's own words
    stage: Literal["precompile", "benchmark"] = "precompile"
    config: Mapping[str, JsonScalar] = field(default_factory=dict)  # the failed template config, where named


@dataclass(frozen=True)
class AutotuneTable:
    """One ``AUTOTUNE op(shapes)`` table Inductor printed while choosing an implementation."""

    op: str
    shapes: tuple[str, ...]
    choices: tuple[AutotuneChoice, ...]
    strides: str = ""
    dtypes: str = ""
    num_choices: int | None = None
    benchmark_s: float | None = None
    precompile_s: float | None = None
    graph_id: str | None = None
    # What the winner became in the graph: a kernel name (Triton template) or a launch position.
    chosen_kernel: str | None = None
    chosen_launch: int | None = None
    # Choices that failed (logged before the table, never in it): their reasons.
    failed: tuple[AutotuneFailure, ...] = ()

    @property
    def winner(self) -> AutotuneChoice | None:
        return min(self.choices, key=lambda c: c.ms) if self.choices else None
