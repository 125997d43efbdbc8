"""Stage 4 of the pipeline (bench), hand-written side: which configuration each kernel ran with, for the report.

A ``tuning.TunedKernel`` notes every (kernel, configuration) it launches inside a ``recording()`` block once, as
first used, with where its winner came from (a search, the cache, the shipped table, or reused in this process)
and how a search went; ``FIRST_USES`` counts how this process served each key the first time.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...records import ConfigOrigin, KernelConfig

# How this process served each key the first time: "tuned" (a search), "cache" or "table".
FIRST_USES: Counter[str] = Counter()
# The configurations noted by the innermost ``recording`` block; None outside one.
recorded: list[KernelConfig] | None = None


@contextlib.contextmanager
def recording() -> Iterator[list[KernelConfig]]:
    """The configurations launched inside the block: each (kernel, configuration) once, as first used."""
    global recorded
    outer, recorded = recorded, []
    try:
        yield recorded
    finally:
        recorded = outer


@dataclass(frozen=True)
class Choice:
    """A kernel's winner for one key, and how this process first got it."""

    config: Any  # a triton.Config of the kernel's list
    origin: ConfigOrigin  # "tuned", "cache" or "table": how this process first got it
    time_ms: float | None
    text: str  # config_text(config)
    note: str = ""  # how the search went: "12 of 16 configurations timed (8 s budget); 1.9 s"


def note(kernel: str, choice: Choice, origin: ConfigOrigin) -> None:
    """Note a launch of ``kernel`` with ``choice`` in the current recording (once per configuration)."""
    if recorded is not None and not any(r.kernel == kernel and r.config == choice.text for r in recorded):
        text = choice.note if origin == choice.origin else ""
        recorded.append(KernelConfig(kernel, choice.text, origin, choice.time_ms, text))


def later(choice: Choice) -> ConfigOrigin:
    """The origin noted when this process launches a winner again."""
    return "reused" if choice.origin == "tuned" else choice.origin
