"""Records, ranks (stragglers): the ranks slower than the others by more than the noise, each with where (its
compile, its first compiled call, its step, its profiled step in compiled code); the other ranks wait for a
straggler at every collective. Every rank has each value its capture holds, full report or not (the profiled step:
from the light pass over its profile trace, ranked_light.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from .ranks import TITLE_STRAGGLER, Divergence, RankSummary

# A rank is a straggler where it is slower than the ranks' median by this fraction and by more than the noise
# (_NOISE_SPREADS times the median absolute deviation), and by at least _STRAGGLER_FLOOR_S.
_STRAGGLER_FRACTION = 0.25
_NOISE_SPREADS = 3.0
_STRAGGLER_FLOOR_S = 0.005

# Where a straggler is slower: (what, its value in seconds).
_PHASES: tuple[tuple[str, Callable[[RankSummary], float | None]], ...] = (
    ("compile time", lambda s: s.compile_s),
    ("first call", lambda s: s.cold_compile_s),
    ("step time", lambda s: s.step_ms / 1000 if s.step_ms is not None else None),
    ("profiled step in compiled code", lambda s: s.step_device_us / 1e6 if s.step_device_us is not None else None),
)


def stragglers(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """Ranks slower than the others by more than the noise, each with where: its compile, its first compiled
    call, its step, its profiled step. The others wait for it at every collective."""
    slow: dict[int, list[str]] = {}
    for phase, value in _PHASES:
        times = {s.rank: v for s in summaries if (v := value(s)) is not None}
        if len(times) < 2:
            continue
        median = statistics.median(times.values())
        spread = statistics.median(abs(v - median) for v in times.values()) if len(times) >= 3 else 0.0
        for rank, seconds in times.items():
            over = seconds - median
            if over > max(_STRAGGLER_FRACTION * median, _NOISE_SPREADS * spread, _STRAGGLER_FLOOR_S):
                slow.setdefault(rank, []).append(
                    f"{phase} {_seconds(seconds)} against the ranks' median {_seconds(median)}"
                )
    return [
        Divergence(
            "stragglers", f"rank {rank} is slower than the others: {'; '.join(where)}", (rank,),
            details=tuple(where), title=TITLE_STRAGGLER,
            action="the other ranks wait for it at each collective: compare its report with the others' "
            "(its compile, its cache, its host and device)",
        )
        for rank, where in sorted(slow.items())
    ]  # fmt: skip


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
