"""Tooling beside the pipeline: the caches torch.compile and Triton keep on this machine, and inductor-lens's
own autotune cache of its hand-written kernels, shown and cleared safely.

    folders.py    where each cache is, resolved as torch, Triton and inductor-lens resolve theirs; writing one
                  entry of inductor-lens's own caches
    contents.py   what each cache holds (size, parts) and clearing it, only from a folder that looks like it
    runs.py       the inductor-lens runs going on now (a lock file each): ``cache clear`` refuses while one is held
"""

from __future__ import annotations

from .contents import (
    HANDWRITTEN_ENTRY,
    CacheError,
    CacheInfo,
    ClearResult,
    Usage,
    cache_info,
    check_cache,
    check_clearable,
    clear,
    usage,
)
from .folders import (
    CACHE_DEFAULTS,
    CLEARABLE,
    cache_dir,
    handwritten_dir,
    inductor_dir,
    lens_cache_dir,
    render_dir,
    triton_dir,
    write_entry,
)
from .runs import RUNS_FOLDER, FileLock, LockHolder, check_no_runs, held_by, register_run, running_runs

__all__ = [
    "CACHE_DEFAULTS",
    "CLEARABLE",
    "HANDWRITTEN_ENTRY",
    "RUNS_FOLDER",
    "CacheError",
    "CacheInfo",
    "ClearResult",
    "FileLock",
    "LockHolder",
    "Usage",
    "cache_dir",
    "cache_info",
    "check_cache",
    "check_clearable",
    "check_no_runs",
    "clear",
    "handwritten_dir",
    "held_by",
    "inductor_dir",
    "lens_cache_dir",
    "register_run",
    "render_dir",
    "running_runs",
    "triton_dir",
    "usage",
    "write_entry",
]
