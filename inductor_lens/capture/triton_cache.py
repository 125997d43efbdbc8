"""Stage 1 of the pipeline (capture): keep what the model process's private Triton cache holds.

The model process compiles every Triton kernel into a fresh ``TRITON_CACHE_DIR`` that is deleted when it
ends. Before that, ``keep_triton_cache`` copies each compiled kernel's artifacts (``<name>.ttir``, ``.ttgir``,
``.llir``, ``.ptx``, ``.cubin`` and the metadata ``<name>.json``: hash, target, num_warps, num_stages,
shared memory) into ``capture/triton_cache/<hash folder>/``, so the compiler-stages pages (``inductor_lens/
stages``) show what the GPU really ran. Inductor's kernels (``triton_*``) go first, then the others
(hand-written, user kernels), each folder whole or not at all, until ``KEEP_LIMIT_BYTES``; a max-autotune
capture compiles hundreds of template configurations, of which the report needs a few.

Which of a kernel's configurations the run kept, Inductor's autotuner writes beside the kernel's ``.py`` in
its own cache (``TORCHINDUCTOR_CACHE_DIR/<2 chars>/<key>.best_config``, a small JSON object: the config and,
for a benchmarked choice, ``triton_cache_hash``, the Triton cache folder of the winner; torch's
``runtime/autotune_cache.py`` ``AutotuneCache.save``). The key hashes the kernel file's name with
``torch_key()``, which only this torch can compute: ``keep_best_configs`` keeps them all in one index,
``capture/best_configs.json`` (``{"<2 chars>/<key>.best_config": {..., "kernel_file": "<2 chars>/<kernel>.py"}}``,
beside the Triton cache so a capture copied without it still knows each kernel's config), for
``stages.cache.autotune_choice``.

Inductor's Triton kernels inline Triton functions of the torch that generated them (``triton_helpers.maximum``,
``online_softmax_combine``, ``welford``; ``libdevice`` and ``math`` through ``triton_compat``), and these change
between torch versions (2.14 added a required ``strict_signed_zero`` to ``online_softmax_combine``). Where the
capture generated Triton kernels, ``keep_runtime_helpers`` keeps those modules, as the model process's torch
(the same Python as this process) has them, with that torch's version, in ``capture/triton_runtime/``: the
stages compiled later, by another torch, compile each kernel against the helpers it was generated for.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..exchange.files import AUTOTUNE_KEY_FILE
from ..parse.compat import TRITON_HELPER_MODULES

KEPT_CACHE_DIR = "triton_cache"
KEEP_LIMIT_BYTES = 256 * 1024 * 1024
BEST_CONFIGS_FILE = "best_configs.json"  # in the capture folder
KERNEL_FILE_KEY = "kernel_file"  # added to each kept best_config: the kernel file it is the choice of
BEST_CONFIG_LIMIT = 20_000  # files; each is a few hundred bytes
_BEST_CONFIG_MAX_BYTES = 64 * 1024
_KEPT = (".json", ".ttir", ".ttgir", ".llir", ".ptx", ".cubin")
RUNTIME_HELPERS_DIR = "triton_runtime"  # in the capture folder
RUNTIME_HELPERS_INDEX = "kept.json"  # in it: {"torch_version": ..., "modules": [...]}
# The modules of torch._inductor.runtime whose Triton functions the kernels inline (compat.py says which change):
# hints and triton_heuristics, which the kernels import too, only build the launcher: the stages compile with the
# installed torch's (``worker/compile_child.py``).
RUNTIME_HELPER_MODULES = TRITON_HELPER_MODULES
_KERNEL_FILE_LIMIT = 5_000  # files read to tell whether the capture generated Triton kernels


def keep_compiled(caches: Path, capture_dir: Path) -> None:
    """Before the model process's private caches (``caches/triton``, ``caches/inductor``) are deleted: its
    kernels' compiler stages and the configs autotuning kept, into ``capture_dir``."""
    keep_triton_cache(caches / "triton", capture_dir)
    keep_best_configs(caches / "inductor", capture_dir)
    keep_runtime_helpers(caches / "inductor", capture_dir)


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


def keep_best_configs(cache: Path, capture_dir: Path) -> int:
    """Index every ``<key>.best_config`` of the Inductor cache ``cache`` (a JSON object each), with the kernel
    file it belongs to where torch can tell, into ``capture_dir/best_configs.json``; returns how many were kept.
    Unreadable files are left out; never raises."""
    kept: dict[str, object] = {}
    try:
        files = sorted(cache.glob("*/*.best_config")) if cache.is_dir() else []
    except OSError:
        return 0
    kernel_of = _kernel_files(cache) if files else {}
    for file in files[:BEST_CONFIG_LIMIT]:
        try:
            if file.stat().st_size > _BEST_CONFIG_MAX_BYTES:
                continue
            content = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(content, dict):
            name = f"{file.parent.name}/{file.name}"
            kept[name] = {**content, KERNEL_FILE_KEY: kernel_of[name]} if name in kernel_of else content
    if not kept:
        return 0
    try:
        capture_dir.mkdir(parents=True, exist_ok=True)
        (capture_dir / BEST_CONFIGS_FILE).write_text(json.dumps(kept), encoding="utf-8")
    except OSError:
        return 0
    return len(kept)


def _kernel_files(cache: Path) -> dict[str, str]:
    """{"<2 chars>/<key>.best_config": "<2 chars>/<kernel>.py"} for the kernel files of ``cache``. The key, as
    torch's ``AutotuneCache`` makes it (2.11: ``_setup_local_cache``; 2.13: ``_make_local_cache_key``, the same
    hashes): sha256(sha256("<kernel file name>:<torch.compiler.config.cache_key_tag>") + ``torch_key()``), where
    ``torch_key()`` hashes the model process's torch's sources (``_autotune_key``). {} where torch lacks it."""
    written = _autotune_key(cache)
    if written is None:
        return {}
    salt, tag = written
    kernels: dict[str, str] = {}
    for source in sorted(cache.glob("*/*.py"))[:BEST_CONFIG_LIMIT]:
        key = hashlib.sha256(f"{source.name}:{tag}".encode()).hexdigest()
        name = hashlib.sha256(key.encode() + salt).hexdigest()
        kernels[f"{source.parent.name}/{name}.best_config"] = f"{source.parent.name}/{source.name}"
    return kernels


def _autotune_key(cache: Path) -> tuple[bytes, str] | None:
    """(``torch_key()``, ``cache_key_tag``) as the model process wrote them into its cache (``AUTOTUNE_KEY_FILE``),
    else as this process's torch computes them (the same torch: seconds to import it and hash its sources)."""
    try:
        written = json.loads((cache / AUTOTUNE_KEY_FILE).read_text(encoding="utf-8"))
        return bytes.fromhex(written["torch_key"]), str(written["cache_key_tag"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        from torch._inductor.codecache import torch_key
        from torch.compiler import config as compiler_config

        return torch_key(), compiler_config.cache_key_tag
    except Exception:  # a torch without them: the files are kept, unmatched
        return None


@dataclass(frozen=True)
class KeptHelpers:
    folder: Path  # holds <module>.py for each of RUNTIME_HELPER_MODULES the torch had
    torch_version: str


def keep_runtime_helpers(cache: Path, capture_dir: Path) -> KeptHelpers | None:
    """If a kernel file of the Inductor cache ``cache`` imports the Triton helpers: the installed torch's
    helper modules and version, into ``capture_dir/triton_runtime``. Never raises."""
    try:
        files = sorted(cache.glob("*/*.py"))[:_KERNEL_FILE_LIMIT] if cache.is_dir() else []
        triton = any("triton_helpers" in f.read_text(encoding="utf-8", errors="replace") for f in files)
        spec = importlib.util.find_spec("torch") if triton else None
    except (OSError, ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    torch_dir = Path(next(iter(spec.submodule_search_locations)))
    try:  # torch/version.py, read rather than imported: this process need not load torch
        found = re.search(r"^__version__ = '([^']+)'", (torch_dir / "version.py").read_text(), re.MULTILINE)
        target = capture_dir / RUNTIME_HELPERS_DIR
        target.mkdir(parents=True, exist_ok=True)
        kept = []
        for module in RUNTIME_HELPER_MODULES:
            source = torch_dir / "_inductor" / "runtime" / f"{module}.py"
            if source.is_file():
                shutil.copy2(source, target / source.name)
                kept.append(module)
        version = found.group(1) if found else "unknown"
        index = {"torch_version": version, "modules": kept}
        (target / RUNTIME_HELPERS_INDEX).write_text(json.dumps(index), encoding="utf-8")
    except OSError:
        return None
    return KeptHelpers(target, version) if kept else None


def kept_runtime_helpers(capture_dir: Path) -> KeptHelpers | None:
    """The Triton helpers kept with the capture in ``capture_dir``, or None."""
    folder = capture_dir / RUNTIME_HELPERS_DIR
    try:
        index = json.loads((folder / RUNTIME_HELPERS_INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = index.get("torch_version") if isinstance(index, dict) else None
    if not isinstance(version, str) or not (folder / "triton_helpers.py").is_file():
        return None
    return KeptHelpers(folder, version)
