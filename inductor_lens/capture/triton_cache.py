"""Stage 1 of the pipeline (capture): keep what the model process's private Triton cache holds.

The model process compiles every Triton kernel into a fresh ``TRITON_CACHE_DIR`` that is deleted when it
ends. Before that, ``keep_triton_cache`` copies each compiled kernel's artifacts (``<name>.ttir``, ``.ttgir``,
``.llir``, ``.ptx``, ``.cubin`` and the metadata ``<name>.json``: hash, target, num_warps, num_stages,
shared memory) into ``capture/triton_cache/<hash folder>/``, so the compiler-stages pages (``inductor_lens/
stages``) show what the GPU really ran. Inductor's kernels (``triton_*``) go first, then the others
(hand-written, user kernels), each folder whole or not at all, until ``KEEP_LIMIT_BYTES``; a max-autotune
capture compiles hundreds of template configurations, of which the report needs a few.
"""

from __future__ import annotations

import shutil
from pathlib import Path

KEPT_CACHE_DIR = "triton_cache"
KEEP_LIMIT_BYTES = 256 * 1024 * 1024
_KEPT = (".json", ".ttir", ".ttgir", ".llir", ".ptx", ".cubin")


def keep_triton_cache(cache: Path, capture_dir: Path, limit_bytes: int = KEEP_LIMIT_BYTES) -> int:
    """Copy the kernel entries of the Triton cache ``cache`` into ``capture_dir/triton_cache``; returns how
    many were kept. Never raises: a capture without its kernels' stages is still a capture."""
    try:
        folders = [f for f in cache.iterdir() if f.is_dir()] if cache.is_dir() else []
    except OSError:
        return 0
    entries = []
    for folder in folders:
        try:
            files = [f for f in folder.iterdir() if f.suffix in _KEPT and not f.name.startswith("__grp__")]
            size = sum(f.stat().st_size for f in files)
        except OSError:
            continue
        names = {f.stem for f in files if f.suffix == ".json"}
        if names:
            inductor = any(name.startswith("triton_") for name in names)
            entries.append((not inductor, size, folder, files))
    kept, used = 0, 0
    for _, size, folder, files in sorted(entries, key=lambda e: (e[0], e[1])):
        if used + size > limit_bytes:
            continue
        target = capture_dir / KEPT_CACHE_DIR / folder.name
        try:
            target.mkdir(parents=True, exist_ok=True)
            for file in files:
                shutil.copy2(file, target / file.name)
        except OSError:
            continue
        kept, used = kept + 1, used + size
    return kept
