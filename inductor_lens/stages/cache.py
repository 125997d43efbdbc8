"""Compiler stages: a Triton cache folder, and the entry of it that is one of Inductor's kernels.

A Triton cache (``TRITON_CACHE_DIR``) holds one folder per compiled kernel and configuration, named by
Triton's hash, with ``<name>.ttir``, ``.ttgir``, ``.llir``, ``.ptx``, ``.cubin`` and the metadata
``<name>.json`` (hash, target, num_warps, num_stages, shared memory, Triton version, ...). The entry of a
kernel of the report is found by (1) the metadata's name, (2) the source file its TTIR's first location names
(Inductor compiles each kernel from its own file, ``KernelRecord.kernel_path``, so same-named kernels of two
graphs are told apart), (3) the folder Inductor's autotune cache names for the winner (``autotune_choice``),
(4) the config the run chose (num_warps and num_stages from the metadata; block sizes from the ranges of the
TTIR), each step applied only where it leaves an entry.

Inductor's autotune cache: the capture keeps the ``<key>.best_config`` files of Inductor's cache
(``capture/triton_cache.py`` ``keep_best_configs``). torch writes each in the kernel file's folder, named
``sha256(sha256("<kernel file>:<tag>") + torch_key())``, and torch_key hashes the capture's torch sources: the
capture, which ran that torch, records each file's kernel file; the report matches a file to a kernel by that,
else (a capture whose torch named them otherwise) by its ``triton_cache_hash`` (written where the winner was
benchmarked among several configs), else, where coordinate descent or combo tuning wrote none, by the kernel
file's folder and the configs compiled there (``autotune_choice``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..capture.triton_cache import BEST_CONFIGS_FILE, KERNEL_FILE_KEY
from ..records import KernelRecord
from ..records.codec import JsonScalar, int_or_none
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

    @cached_property
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


# What AutotuneCache.save writes beside the config itself (torch 2.13: configs_hash, found_by_coordesc,
# time_taken_ms, triton_cache_hash; extra_options where the config has them).
_BOOKKEEPING = frozenset(
    {"configs_hash", "found_by_coordesc", "time_taken_ms", "triton_cache_hash", "extra_options", KERNEL_FILE_KEY}
)


@dataclass(frozen=True)
class AutotuneChoice:
    """One ``.best_config`` file of the capture's Inductor cache: the config autotuning kept for a kernel."""

    folder: str  # the Inductor cache folder it was in, the kernel file's: "ab" of ".../inductor/ab/cab....py"
    values: Mapping[str, Any]

    @property
    def config(self) -> dict[str, JsonScalar]:
        return {
            k: v
            for k, v in self.values.items()
            if k not in _BOOKKEEPING and isinstance(v, (int, float, str)) and not isinstance(v, bool)
        }

    @property
    def cache_hash(self) -> str | None:
        """The Triton cache folder of the winner's binary (None where coordinate descent chose it)."""
        value = self.values.get("triton_cache_hash")
        return value if isinstance(value, str) and value else None

    @property
    def kernel_file(self) -> str | None:
        """``<2 chars>/<kernel>.py``, the kernel file it is the choice of, where the capture's torch could tell."""
        value = self.values.get(KERNEL_FILE_KEY)
        return value if isinstance(value, str) and value else None


def read_autotune_choices(capture_dir: Path) -> list[AutotuneChoice]:
    """The ``.best_config`` files the capture kept (``capture_dir/best_configs.json``), less those that are no
    config (without an integer num_warps and num_stages)."""
    try:
        kept = json.loads((capture_dir / BEST_CONFIGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(kept, dict):
        return []
    return [
        AutotuneChoice(key.split("/", 1)[0], values)
        for key, values in kept.items()
        if "/" in key
        and isinstance(values, dict)
        and all(int_or_none(values.get(k)) is not None for k in ("num_warps", "num_stages"))
    ]


def autotune_choice(
    kernel: KernelRecord, choices: Sequence[AutotuneChoice], entries: Sequence[CacheEntry]
) -> AutotuneChoice | None:
    """The config Inductor's autotune cache kept for ``kernel``: (1) the choice the capture matched to the
    kernel's file by torch's own key (no cache entries needed); else (2) the choice whose ``triton_cache_hash``
    names the folder of one of the kernel's cache entries; else (3) of the choices without a hash in the kernel
    file's Inductor folder, the one only this kernel's file, of the files of that folder, has an entry compiled
    with (num_warps, num_stages and block sizes); else None."""
    if kernel.kernel_path:
        path = Path(kernel.kernel_path)
        wanted = f"{path.parent.name}/{path.name}"
        if found := next((c for c in choices if c.kernel_file == wanted), None):
            return found
    own = _kernel_entries(entries, kernel)
    folders = {e.folder.name for e in own}
    if found := next((c for c in choices if c.cache_hash is not None and c.cache_hash in folders), None):
        return found
    if not kernel.kernel_path or not own:
        return None
    kernel_file = Path(kernel.kernel_path)
    unhashed = [c for c in choices if c.cache_hash is None and c.folder == kernel_file.parent.name]
    if not unhashed:
        return None
    beside = [
        (e, file.name)
        for e in entries
        if (file := Path(e.source_file or "")).parent.name == kernel_file.parent.name
    ]
    mine = [
        choice
        for choice in unhashed
        if {name for e, name in beside if _compiled_with(e, choice.config)} == {kernel_file.name}
    ]
    return mine[0] if len(mine) == 1 else None


_CONFIG_ITEM = re.compile(r"(\w+): (-?\d+)\b")


def chosen_config(
    kernel: KernelRecord, autotuned: AutotuneChoice | None = None
) -> tuple[dict[str, JsonScalar], str]:
    """The launch configuration the run used for ``kernel`` (block sizes, num_warps, num_stages), and how it
    is known; ({}, why) where the report does not know it. In order: the trace's autotune info (a config
    read from a warm autotune cache, or the only config); the launcher the model process saw kept after
    autotuning (a timed capture); ``autotuned``, the ``.best_config`` Inductor's autotune cache wrote for it
    (``autotune_choice``); the num_warps and num_stages of the kernel's decorator."""
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
    if autotuned is not None and autotuned.config:
        if autotuned.kernel_file:
            found = "matched to the kernel's file by torch's own key"
        else:
            found = "which names the winner's binary" if autotuned.cache_hash else "matched by the kernel's folder"
        return autotuned.config, f"the config the run's autotuning chose (Inductor's autotune cache, {found})"
    fixed = {k: v for k in ("num_warps", "num_stages") if isinstance(v := kernel.launch_config.get(k), int)}
    if fixed:
        return dict(fixed), "the config in the kernel's decorator"
    return {}, "the report does not record the config the run chose"


def pick_entry(
    entries: Sequence[CacheEntry],
    kernel: KernelRecord,
    config: Mapping[str, JsonScalar],
    cache_hash: str | None = None,
) -> tuple[CacheEntry | None, str]:
    """The cache entry of ``kernel`` compiled with ``config``, and a note where it is a guess; ``cache_hash``:
    the folder Inductor's autotune cache names for the winner (``AutotuneChoice.cache_hash``), which decides
    where it is one of the kernel's entries."""
    candidates = _kernel_entries(entries, kernel)
    if not candidates:
        return None, ""
    for narrow in (
        lambda e: e.folder.name == cache_hash,
        lambda e: _same_launch(e, config),
        lambda e: _same_blocks(e, config),
    ):
        narrowed = [e for e in candidates if narrow(e)]
        if narrowed:
            candidates = narrowed
    if len(candidates) == 1:
        return candidates[0], ""
    return candidates[0], (
        f"the cache holds {len(candidates)} compiled configurations of this kernel that the report cannot tell "
        "apart; the first is shown"
    )


def _kernel_entries(entries: Sequence[CacheEntry], kernel: KernelRecord) -> list[CacheEntry]:
    """The entries named as ``kernel``; of those, the ones compiled from its own file where there are any."""
    candidates = [e for e in entries if e.name == kernel.name]
    if kernel.kernel_path and candidates:
        wanted = Path(kernel.kernel_path).name
        same_file = [e for e in candidates if (e.source_file or "").rsplit("/", 1)[-1] == wanted]
        candidates = same_file or candidates
    return candidates


def _compiled_with(entry: CacheEntry, config: Mapping[str, JsonScalar]) -> bool:
    return _same_launch(entry, config) and _same_blocks(entry, config)


def _same_launch(entry: CacheEntry, config: Mapping[str, JsonScalar]) -> bool:
    return all(entry.metadata.get(key) == config[key] for key in ("num_warps", "num_stages") if key in config)


def _same_blocks(entry: CacheEntry, config: Mapping[str, JsonScalar]) -> bool:
    blocks = {v for k, v in config.items() if k.endswith("BLOCK") and isinstance(v, int) and v > 1}
    if not blocks:
        return True
    ends = {int(v) for v in _RANGE_END.findall(entry.read("ttir") or "")}
    return blocks <= ends

