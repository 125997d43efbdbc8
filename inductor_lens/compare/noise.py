"""The comparison stage, the noise model: how far measurements of one step land apart, and when a gap counts.

``compare`` measures every configuration in R warm rounds, interleaved: in round k each configuration's
warm process runs once, in an order rotated every round (A, B, C; then B, C, A; ...), so machine drift
hits all of them alike. Each process gives the median of its compiled steps: the *round median*.

- A configuration's **step** is the median of its round medians. A median of two is their mean, which one
  bad round would set: with fewer than ``ROBUST_ROUNDS`` rounds the cold process's median (the same
  measurement, in the configuration's own report) joins them, so one bad process of three cannot set it.
- Its **own noise** is the spread of those medians: (max - min) / step, at least ``NOISE_FLOOR``.
- Its **eager step** is worked out from the eager medians of the same processes in the same way, and its
  **speed-up** is the eager step over the step: one source for every "faster/slower than eager".
- Between two configurations A and B the **paired ratios** are B's round median over A's, round by round
  (both measured minutes apart in the same round). The **noise of the pair** is the largest of: the spread
  of those ratios (max - min), the two configurations' own noise, and ``NOISE_FLOOR``.
- A gap (B's step / A's step - 1) **counts** only when it is larger than the noise of the pair *and*
  every round puts B on the same side of A; otherwise it is "within noise".

Two reports (``diff``) have one process each: the p10-p90 half-width of each run's own samples stands
in for its noise, with the higher floor ``SINGLE_PROCESS_FLOOR`` (processes differ by more than their
own spread), and nothing is paired. Comparisons saved before rounds existed have a cold and a warm
process per configuration: their two medians are treated as two unpaired measurements.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..records import AgainstBaseline, ConfigResult, Judgement, RoundMeasure, Timing
from ..units import format_ms

# Below this, two medians of one step are not told apart, however quiet the machine looked.
NOISE_FLOOR = 0.02
# With one process per configuration (``diff``), the spread inside a run understates the noise between
# processes (2-12% between processes of one configuration in this project's compares).
SINGLE_PROCESS_FLOOR = 0.05
DEFAULT_ROUNDS = 3
MIN_ROUNDS = 2
# From this many medians on, one bad process cannot set their median.
ROBUST_ROUNDS = 3

RULE = (
    "a configuration is named the fastest only when the next one's step is slower by more than the noise of "
    "the pair and, with rounds, every round puts it behind; never where the two run the same code"
)


def round_medians(rounds: Sequence[RoundMeasure]) -> list[float]:
    return [r.compiled.median_ms for r in rounds if r.error is None and r.compiled.median_ms > 0]


@dataclass(frozen=True)
class Basis:
    """The medians a step is worked out from, and how: ``rule`` in general words (the page's method text),
    ``how`` with this configuration's numbers (its step cell)."""

    values: tuple[float, ...]
    rule: str
    how: str

    @property
    def step_ms(self) -> float | None:
        return statistics.median(self.values) if self.values else None


def basis(latency: Timing | None, again: Timing | None, rounds: Sequence[RoundMeasure], *, eager: bool = False) -> Basis:
    """What a configuration's step (``eager``: its eager step) is worked out from: its round medians, joined by
    the cold process's where there are fewer than ``ROBUST_ROUNDS``; older comparisons: the cold and the warm
    process; ``diff``: one process."""
    if eager:
        medians = [r.eager.median_ms for r in rounds if r.error is None and r.eager is not None and r.eager.median_ms > 0]
    else:
        medians = round_medians(rounds)
    cold = latency.median_ms if latency is not None and latency.median_ms > 0 else None
    if len(medians) >= ROBUST_ROUNDS or (medians and cold is None):
        values, what = tuple(medians), f"{len(medians)} warm round{'s' if len(medians) > 1 else ''} (interleaved)"
    elif medians and cold is not None:
        values, what = (cold, *medians), f"the cold process and {len(medians)} warm round{'s' if len(medians) > 1 else ''}"
    else:
        values = tuple(t.median_ms for t in (latency, again) if t is not None and t.median_ms > 0)
        what = "the cold and the warm process" if len(values) == 2 else "one process"
    shown = ", ".join(format_ms(v) for v in values)
    if len(values) >= ROBUST_ROUNDS:
        rule = f"the median of {len(values)} medians: {what}"
        if len(medians) < ROBUST_ROUNDS:
            rule += f" (the cold process joins fewer than {ROBUST_ROUNDS} rounds: a median of two is their mean, which one bad round would set)"
        return Basis(values, rule, f"median of {len(values)}: {what} ({shown})")
    if len(values) == 2:
        rule = f"the mean of {what} (a median of two; one bad measurement moves it half-way, so the spread is the two values)"
        return Basis(values, rule, f"mean of {what} ({shown}); the spread is these two")
    if values:
        return Basis(values, f"the median of the steps of {what}", f"median of the steps of {what}")
    return Basis((), "", "")


def own_noise(latency: Timing | None, again: Timing | None = None, rounds: Sequence[RoundMeasure] = ()) -> float | None:
    """How far measurements of one configuration's step land apart, as a fraction of its step.

    Rounds (or an older comparison's two processes): (max - min) of their medians over the step, at least
    ``NOISE_FLOOR``. One process (``diff``): the half-width of its p10-p90 spread, at least ``SINGLE_PROCESS_FLOOR``.
    """
    values = basis(latency, again, rounds).values
    if not values:
        return None
    if len(values) >= 2:
        return max(spread(values), NOISE_FLOOR)
    # the one process measured: the cold one, else the one round that did not fail
    one = latency if latency is not None else next(r.compiled for r in rounds if r.error is None and r.compiled.median_ms > 0)
    half = (one.p90_ms - one.p10_ms) / 2 / one.median_ms if one.median_ms else 0.0
    return max(half, SINGLE_PROCESS_FLOOR)


def spread(values: Sequence[float]) -> float:
    """(max - min) / median of positive numbers."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle > 0 else 0.0


def paired_ratios(base: ConfigResult, other: ConfigResult) -> tuple[float, ...]:
    """``other``'s round median over ``base``'s, for every round both measured."""
    mine = {r.round: r.compiled.median_ms for r in base.rounds if r.error is None}
    theirs = {r.round: r.compiled.median_ms for r in other.rounds if r.error is None}
    return tuple(theirs[k] / mine[k] for k in sorted(mine.keys() & theirs.keys()) if mine[k] > 0)


def versus(base: ConfigResult, other: ConfigResult) -> AgainstBaseline | None:
    """``other``'s step against ``base``'s, judged against the noise of the pair (the rule above)."""
    if not base.step_ms or not other.step_ms:
        return None
    fraction = other.step_ms / base.step_ms - 1
    ratios = paired_ratios(base, other)
    paired = len(ratios) >= 2
    noise = max(base.noise or NOISE_FLOOR, other.noise or NOISE_FLOOR, spread(ratios) if paired else 0.0)
    agree = (all(r > 1 for r in ratios) or all(r < 1 for r in ratios)) if paired else None
    return AgainstBaseline(fraction, noise, judge(fraction, noise, agree), ratios, agree, base.name)


def judge(fraction: float, noise: float, rounds_agree: bool | None = None) -> Judgement:
    """A difference in time (fraction, + = slower) counts only beyond the noise, and where the rounds agree."""
    if abs(fraction) <= noise or rounds_agree is False:
        return "within noise"
    return "slower" if fraction > 0 else "faster"


def noise_how(configs: Sequence[ConfigResult]) -> str:
    """How the noise was measured, in words, for the page and the record."""
    rounds = max((len(round_medians(c.rounds)) for c in configs), default=0)
    if rounds >= 2:
        joined = (f" (with fewer than {ROBUST_ROUNDS} rounds the cold process's median joins them)"
                  if rounds < ROBUST_ROUNDS else "")  # fmt: skip
        return (f"each configuration was measured in {rounds} warm rounds, interleaved (every round runs each "
                "configuration's warm process once, in an order rotated each round, so drift of the machine hits "
                "all alike); a configuration's noise is the spread (max - min) of the medians its step is the "
                f"median of{joined}, over its step; "
                "the noise of two configurations is the largest of the spread (max - min) of their round-by-round "
                f"ratios and the two configurations' own noise, at least {NOISE_FLOOR:.0%}")  # fmt: skip
    if any(c.latency_again is not None for c in configs):
        return ("each configuration was timed in a cold and a warm process (a comparison from before interleaved "
                "rounds): its noise is the gap between the two medians, at least "
                f"{NOISE_FLOOR:.0%}; the noise of two configurations is the larger of their own")  # fmt: skip
    return (f"one process per configuration, so each one's noise is the half-width of its p10-p90 spread, at "
            f"least {SINGLE_PROCESS_FLOOR:.0%}, since processes differ by more than their own spread; the noise "
            "of two configurations is the larger of their own")  # fmt: skip


def rotated(names: Sequence[str], round_number: int) -> list[str]:
    """The order of round ``round_number`` (1-based): the names rotated left by ``round_number - 1``."""
    if not names:
        return []
    shift = (round_number - 1) % len(names)
    return [*names[shift:], *names[:shift]]
