"""Records, wording: the fixed words, limits and naming rules that records carry in their text, shared by the
stages that write them (parse, bench) and the report that reads them (which imports no stage but records).

A word here is matched in a record's text (``FROM_HINTS`` in a cost source, a flag's start), a limit is what a
record was cut at (``CACHE_COMPONENT_CHARS``), a rule names what a record's path or id is (``is_user_file``).
"""

from __future__ import annotations

import re

from .timing import Roofline

# The ids of graphs rebuilt from a bare TORCH_TRACE log (a folder's name never starts so).
TRACE_GRAPH_PREFIX = "trace-"

# A cache lookup keeps the first components of its key, each cut to this many characters (an FX graph's first
# component is the whole graph's code; its key has some 600 of them).
CACHE_COMPONENTS_KEPT = 100
CACHE_COMPONENT_CHARS = 1000

# How a number worked out at the hints is marked (Roofline.cost_source, the pages).
FROM_HINTS = "from size hints"

# Below this, a launch is bound by launch overhead rather than by the roofline.
TINY_KERNEL_S = 5e-6
FAR_FROM_ROOF = 0.3
REPEATED_LOADS = "repeated loads counted"  # marks such a count in a cost source
REPEATED_LOADS_WHY = (
    "Inductor counts each distinct load of an input larger than the output at the output's size "
    "(each window's loads of a pooling)"
)
# The flags (bench/roofline.py ``flags``) that explain a rate over the measured copy bandwidth: none is an alarm.
OVERCOUNTED = "the byte count overestimates (repeated loads: each window's loads are counted)"
AT_MEMORY_ROOF = "at the memory roof: faster than the measured copy even with L2 cleared"
FROM_L2 = "above the copy bandwidth in the step: inputs served from L2"
LESS_TIME = "less time in the step than"
MORE_TIME = "more time in the step than"
_FAR_UNDER = re.compile(r"^at \d+% of the roofline")

# inductor-lens's own model process, which calls the user's model: worker/*.py, and capture/child.py in
# captures made before 0.2 (the H100 real-model fixtures).
_TOOL_PATH = re.compile(r"/inductor_lens/(capture/child|worker/\w+)\.py$")
# Library code, and the tool's.
_LIBRARY_PATH = re.compile(r"(/site-packages/|/dist-packages/|/lib/python3[\d.]*/|^<)")


def far_under_roof(roofline: Roofline | None) -> bool:
    """Long enough to be bound by the roofline rather than by launch overhead, and far under it."""
    return (
        roofline is not None
        and roofline.percent is not None
        and roofline.seconds >= TINY_KERNEL_S
        and roofline.percent < 100 * FAR_FROM_ROOF
    )


def flag_tone(flag: str) -> str:
    """How a flag is shown: "bad" for time to win (far under the roofline), "warn" for slower in the step
    than alone, "" (neutral) for an explanation or good news (above the copy bandwidth, faster in the step)."""
    if _FAR_UNDER.match(flag):
        return "bad"
    return "warn" if MORE_TIME in flag else ""


def is_user_file(path: str) -> bool:
    return not _LIBRARY_PATH.search(path) and not is_tool_file(path)


def is_tool_file(path: str) -> bool:
    """inductor-lens's own code in the model process (or Python's runpy/importlib internals, as ``<...>``)."""
    return bool(_TOOL_PATH.search(path)) or path.startswith("<")
