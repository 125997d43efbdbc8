"""Records, trials: the diagnosis's suggestions run and measured (``--try N``, ``inductor-lens try REPORT``).

A ``SettingChange`` is a suggestion that applies without touching the model's code: a mode, Inductor
options, the float32 matmul precision, cuDNN's TF32, an autocast dtype, ``dynamic``, Dynamo's config. The
diagnosis attaches the ones a finding can be tried as (``Finding.settings``). ``compare/trials.py`` runs
each as a configuration of a comparison (the report's ``tries/`` folder: a cold process each, then
interleaved warm rounds with the run's own settings as the baseline) and keeps, per suggestion, what the
comparison measured (``Trial``); findings that need a code change are listed with the line they concern
(``UntriedSuggestion``). The whole set is ``Trials``, kept in the capture folder (``capture/trials.json``)
so that a report built again from the folder, or copied elsewhere, keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .codec import JsonValue

TRIALS_VERSION = 1

# faster / slower: beyond the pair's noise, every round on the same side; "no gain": within it.
TryVerdict = Literal["faster", "no gain", "slower", "failed"]


@dataclass(frozen=True)
class SettingChange:
    """One change of the run's settings (everything not given stays as the run had it)."""

    label: str  # in a few words: "TF32 matmuls", "mode reduce-overhead", "cpp_wrapper"
    mode: str | None = None
    options: Mapping[str, JsonValue] = field(default_factory=dict)  # Inductor options, added to the run's
    matmul_precision: str | None = None  # torch.set_float32_matmul_precision: "high" (TF32), "medium"
    cudnn_allow_tf32: bool | None = None
    autocast: str | None = None  # the dtype of torch.autocast around each step ("bfloat16")
    dynamic: bool | None = None  # torch.compile(dynamic=...)
    dynamo_options: Mapping[str, JsonValue] = field(default_factory=dict)  # torch._dynamo.config
    # The time per step the diagnosis expects the change to save (its finding's time at stake), and how.
    predicted_us: float | None = None

    def key(self) -> str:
        """What is changed, without the label and prediction: two suggestions with one key are the same run."""
        fields = {
            "mode": self.mode,
            "options": dict(sorted(self.options.items())),
            "matmul_precision": self.matmul_precision,
            "cudnn_allow_tf32": self.cudnn_allow_tf32,
            "autocast": self.autocast,
            "dynamic": self.dynamic,
            "dynamo_options": dict(sorted(self.dynamo_options.items())),
        }
        return json.dumps({k: v for k, v in fields.items() if v not in (None, {})}, sort_keys=True)

    def describe(self) -> str:
        """The change as settings: ``mode reduce-overhead; float32 matmul precision "high"``."""
        parts = []
        if self.mode is not None:
            parts.append(f"mode {self.mode}")
        parts += [f"{k}={v}" for k, v in self.options.items()]
        if self.matmul_precision is not None:
            parts.append(f'float32 matmul precision "{self.matmul_precision}"')
        if self.cudnn_allow_tf32 is not None:
            parts.append(f"cudnn.allow_tf32={self.cudnn_allow_tf32}")
        if self.autocast is not None:
            parts.append(f"autocast {self.autocast}")
        if self.dynamic is not None:
            parts.append(f"dynamic={self.dynamic}")
        parts += [f"torch._dynamo.config.{k}={v}" for k, v in self.dynamo_options.items()]
        return "; ".join(parts) or "no change"


@dataclass(frozen=True)
class Trial:
    """One suggestion run as a configuration and measured against the run's own settings."""

    name: str  # its configuration's name in the comparison (``tries/configs/<name>/``)
    finding: str  # the title of the finding it comes from ("" for a change the user asked for)
    kind: str  # the finding's kind ("precision", "host-bound", ...; "asked" for the user's own)
    setting: SettingChange
    verdict: TryVerdict
    reason: str  # one line: the numbers behind the verdict, or why it failed
    report: str = ""  # its report, relative to the run's report folder
    step_ms: float | None = None  # its step (median of the round medians)
    base_step_ms: float | None = None  # the run's own settings, measured in the same rounds
    change: float | None = None  # step_ms / base_step_ms - 1 (+ = slower)
    noise: float | None = None  # what the change had to beat: the noise of the pair (compare/noise.py)
    rounds_agree: bool | None = None
    ratios: tuple[float, ...] = ()  # its round median over the base's, round by round
    speedup: float | None = None  # base_step_ms / step_ms
    measured_us: float | None = None  # time saved per step: (base_step_ms - step_ms) in µs (+ = saved)
    predicted_us: float | None = None  # what the diagnosis expected it to save
    cold_compile_s: float | None = None  # its first call on empty caches
    base_cold_compile_s: float | None = None
    peak_bytes: int | None = None  # the compiled step's peak device memory (GPU)
    base_peak_bytes: int | None = None
    # Accuracy under the change: its accuracy verdict, and the worst output's RMSE against the float64 run
    # beside the same output's in the run's own settings.
    accuracy_within: bool | None = None
    accuracy_tensor: str = ""
    rmse: float | None = None
    base_rmse: float | None = None
    accuracy_note: str = ""  # in words, or why it was not measured
    error: str | None = None  # the failed configuration's error, one line

    @property
    def estimate_ratio(self) -> float | None:
        """Measured over predicted saving: 1.0 = the estimate was right; None where either is missing."""
        if self.measured_us is None or not self.predicted_us:
            return None
        return self.measured_us / self.predicted_us


@dataclass(frozen=True)
class UntriedSuggestion:
    """A finding whose change is a change of code: listed, not run."""

    kind: str
    title: str
    change: str
    why: str  # why it was not run ("a code change: ...", "the --try budget ran out", "beyond --try N")
    where: str = ""  # the user line it concerns ("model.py:12"), where the finding names one
    url: str = ""  # its evidence in the report


@dataclass(frozen=True)
class Trials:
    """Every suggestion tried for one run, and those that were not."""

    version: int
    created: str
    command: str  # how they were asked for: "compile --try 2", "try --top 1"
    base: str  # the baseline configuration's name (the run's own settings, measured again)
    comparison: str  # the comparison's page, relative to the report folder ("tries/index.html")
    rounds: int  # interleaved warm rounds done
    rounds_asked: int
    method: str  # how each step was measured and judged (the noise rule), in words
    wall_s: float  # the whole of the trying, start to end
    budget_s: float | None = None
    trials: tuple[Trial, ...] = ()
    untried: tuple[UntriedSuggestion, ...] = ()
    estimates: str = ""  # how far the diagnosis's estimates were from the measured gains, in words
    notes: tuple[str, ...] = ()

    def of(self, settings: Sequence[SettingChange]) -> tuple[Trial, ...]:
        """The trials of a finding's settings (``Finding.settings``), in the finding's order."""
        by_key = {t.setting.key(): t for t in self.trials}
        return tuple(by_key[s.key()] for s in settings if s.key() in by_key)
