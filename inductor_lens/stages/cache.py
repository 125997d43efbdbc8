"""Compiler stages: a Triton cache folder, and the entry of it that is one of Inductor's kernels.

A Triton cache (``TRITON_CACHE_DIR``) holds one folder per compiled kernel and configuration, named by
Triton's hash, with ``<name>.ttir``, ``.ttgir``, ``.llir``, ``.ptx``, ``.cubin`` and the metadata
``<name>.json`` (hash, target, num_warps, num_stages, shared memory, Triton version, ...). The entry of a
kernel of the report is found by (1) the metadata's name, (2) the source file its TTIR's first location names
(Inductor compiles each kernel from its own file, ``KernelRecord.kernel_path``, so same-named kernels of two
graphs are told apart), (3) the config the run chose (num_warps and num_stages from the metadata; block sizes
from the ranges of the TTIR), each step applied only where it leaves an entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records import KernelRecord
from ..records.codec import JsonScalar
from ..records.stages import StageName

STAGE_FILES: tuple[StageName, ...] = ("ttir", "ttgir", "llir", "ptx")
_FIRST_LOC = re.compile(r'loc\("([^"]+)":\d+:\d+\)')
_RANGE_END = re.compile(r"tt\.make_range\s*\{end\s*=\s*(\d+)")


@dataclass(frozen=True)
class CacheEntry:
    folder: Path
    name: str
    metadata: Mapping[str, Any]

    def file(self, extension: str) -> Path:
        return self.folder / f"{self.name}.{extension}"

    def read(self, extension: str) -> str | None:
        try:
            return self.file(extension).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    @property
    def source_file(self) -> str | None:
        """The Python file the kernel was compiled from (its TTIR's first location)."""
        ttir = self.read("ttir") or self.read("source") or ""
        found = _FIRST_LOC.search(ttir)
        return found.group(1) if found else None


def read_cache(folder: Path) -> list[CacheEntry]:
    """Every kernel entry of a Triton cache folder (a folder per hash with ``<name>.json`` metadata)."""
    entries = []
    for metadata_file in sorted(folder.glob("*/*.json")):
        if metadata_file.name.startswith("__grp__"):
            continue
        try:
            metadata = json.loads(metadata_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(metadata, dict) and isinstance(metadata.get("name"), str) and "hash" in metadata:
            entries.append(CacheEntry(metadata_file.parent, metadata_file.stem, metadata))
    return entries


_CONFIG_ITEM = re.compile(r"(\w+): (-?\d+)\b")


def chosen_config(kernel: KernelRecord) -> tuple[dict[str, JsonScalar], str]:
    """The launch configuration the run used for ``kernel`` (block sizes, num_warps, num_stages), and how it
    is known; ({}, why) where the report does not know it."""
    for key, how in (
        ("best_config", "the config the run's autotuning chose"),
        ("only_config", "the kernel's only config"),
    ):
        pairs = kernel.autotune_info.get(key)
        if isinstance(pairs, list) and pairs:
            config: dict[str, JsonScalar] = {
                str(p[0]): p[1]
                for p in pairs
                if isinstance(p, list) and len(p) == 2 and isinstance(p[1], (int, float, str))
            }
            return config, how
    kept = kernel.timing.config if kernel.timing is not None else None
    if kept:
        # the launcher the run kept, as Triton prints its config: "XBLOCK: 256, num_warps: 4, ..., maxnreg: None"
        config = {name: int(value) for name, value in _CONFIG_ITEM.findall(kept)}
        if config:
            return config, "the launcher the run kept (read in the model process after autotuning)"
    fixed = {k: v for k in ("num_warps", "num_stages") if isinstance(v := kernel.launch_config.get(k), int)}
    if fixed:
        return dict(fixed), "the config in the kernel's decorator"
    return {}, "the report does not record the config the run chose"


def pick_entry(
    entries: list[CacheEntry], kernel: KernelRecord, config: Mapping[str, JsonScalar]
) -> tuple[CacheEntry | None, str]:
    """The cache entry of ``kernel`` compiled with ``config``, and a note where it is a guess."""
    candidates = [e for e in entries if e.name == kernel.name]
    if not candidates:
        return None, ""
    if kernel.kernel_path:
        wanted = Path(kernel.kernel_path).name
        same_file = [e for e in candidates if (e.source_file or "").rsplit("/", 1)[-1] == wanted]
        candidates = same_file or candidates
    for narrow in (_same_launch, _same_blocks):
        narrowed = [e for e in candidates if narrow(e, config)]
        if narrowed:
            candidates = narrowed
    if len(candidates) == 1:
        return candidates[0], ""
    return candidates[0], (
        f"the cache holds {len(candidates)} compiled configurations of this kernel that the report cannot tell "
        "apart; the first is shown"
    )


def _same_launch(entry: CacheEntry, config: Mapping[str, JsonScalar]) -> bool:
    return all(entry.metadata.get(key) == config[key] for key in ("num_warps", "num_stages") if key in config)


def _same_blocks(entry: CacheEntry, config: Mapping[str, JsonScalar]) -> bool:
    blocks = {v for k, v in config.items() if k.endswith("BLOCK") and isinstance(v, int) and v > 1}
    if not blocks:
        return True
    ends = {int(v) for v in _RANGE_END.findall(entry.read("ttir") or "")}
    return blocks <= ends
