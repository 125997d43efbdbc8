"""Stage 1 of the pipeline (capture), in the model process: save each kernel's real launch arguments
(``inductor-lens compile --save-inputs[=MB]``) for ``inductor-lens repro``.

After the compiled model has run (compile, second call), every output-code module this process loaded
(``PyCodeCache.modules``) has its kernels as module globals, which its ``call()`` looks up at each launch:
a Triton kernel is Inductor's ``CachingAutotuner`` (launched by ``.run(*args, stream=...)``), a C++ kernel
the function ``cpp_pybinding`` built. For two more compiled steps each such global is swapped for a thin
wrapper (and put back after), nothing else changes:

1. a first step measures the storage each kernel's first launch passes;
2. the kernels that fit the size cap are chosen, smallest first (so the largest are the ones skipped, and
   the index says so), and a second step copies their arguments just before each runs (the storages, once
   each, so views and in-place arguments keep sharing them) into ``saved_inputs/<n>.pt`` (``torch.save``
   of the argument list, tensors on the CPU), indexed in ``saved_inputs/index.json`` (``files.SavedInputs``),
   keyed by the md5 of the module's source, as graph_free.py names graphs.

The two steps make the same launches as the compiled calls before them (same inputs and weights): what is
saved is what the kernels received there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from ..exchange.files import SAVED_INPUTS_DIR, SAVED_INPUTS_INDEX, SavedInputs, SavedLaunch, write_json_file
from .compat import output_code_modules
from .graph_free import _source_md5

DEFAULT_CAP_MB = 256.0
_KERNEL_PREFIXES = ("triton_", "cpp_fused_")


def save_inputs(one_step: Callable[[], Any], folder: Path, cap_mb: float) -> SavedInputs:
    """Run ``one_step`` twice with the kernels wrapped; write the chosen launches' arguments and the index.
    Never raises: a failure is the index's ``error``."""
    cap = int(cap_mb * 1e6)  # decimal megabytes, as the report counts memory (units.format_bytes)
    index = SavedInputs(cap_bytes=cap)
    out = folder / SAVED_INPUTS_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
        sizes: dict[tuple[str, str], int] = {}
        with _wrapped(lambda key, args: sizes.setdefault(key, _storage_bytes(args))):
            one_step()
        chosen, left = set(), cap
        for key, size in sorted(sizes.items(), key=lambda item: item[1]):
            if size <= left:
                chosen.add(key)
                left -= size
        saved: dict[tuple[str, str], SavedLaunch] = {}

        def keep(key: tuple[str, str], args: tuple[Any, ...]) -> None:
            if key in saved or key not in chosen:
                return
            entry = SavedLaunch(graph=key[0], kernel=key[1], arguments=len(args), bytes=sizes.get(key, 0))
            entry.file = f"{len(saved):04d}-{key[1]}.pt"
            try:
                torch.save(_cpu_copy(args), out / entry.file)
            except Exception as exc:  # an argument torch.save cannot write: that kernel goes unsaved
                entry.file, entry.skipped = "", f"torch.save failed: {type(exc).__name__}: {exc}"[:300]
            saved[key] = entry

        with _wrapped(keep):
            one_step()
        for key, size in sizes.items():
            if key in saved:
                index.launches.append(saved[key])
            else:
                why = (f"over the size cap ({size / 1e6:.1f} MB; the cap of {cap_mb:g} MB went to smaller kernels)"
                       if key not in chosen else "its launch was not seen again")  # fmt: skip
                index.launches.append(SavedLaunch(graph=key[0], kernel=key[1], bytes=size, skipped=why))
        if not sizes:
            index.error = (
                "no kernel launch went through Python (CUDA graphs replay them), or none was compiled"
            )
    except Exception as exc:
        index.error = f"{type(exc).__name__}: {exc}"[:300]
    try:
        write_json_file(folder / SAVED_INPUTS_INDEX, index)
    except OSError as exc:
        index.error = f"the index could not be written: {exc}"
    return index


Record = Callable[[tuple[str, str], tuple[Any, ...]], Any]


@contextlib.contextmanager
def _wrapped(record: Record) -> Iterator[None]:
    """Every kernel global of every loaded output-code module wrapped to call ``record`` before it runs."""
    swapped: list[tuple[Any, str, Any]] = []
    try:
        for module in output_code_modules():
            if not callable(getattr(module, "call", None)):
                continue
            md5 = _source_md5(module)
            for name, value in list(vars(module).items()):
                if not name.startswith(_KERNEL_PREFIXES):
                    continue
                wrapper = _wrapper(value, (md5, name), record)
                if wrapper is not None:
                    swapped.append((module, name, value))
                    setattr(module, name, wrapper)
        yield
    finally:
        for module, name, value in swapped:
            setattr(module, name, value)


def _wrapper(value: Any, key: tuple[str, str], record: Record) -> Any:
    if callable(getattr(value, "run", None)):  # Inductor's CachingAutotuner

        class Launcher:
            def run(self, *args: Any, **kwargs: Any) -> Any:
                record(key, args)
                return value.run(*args, **kwargs)

            def __getattr__(self, attribute: str) -> Any:
                return getattr(value, attribute)

        return Launcher()
    if callable(value) and not isinstance(value, type):

        def call(*args: Any) -> Any:
            record(key, args)
            return value(*args)

        return call
    return None


def _storage_bytes(args: tuple[Any, ...]) -> int:
    seen: dict[int, int] = {}
    for value in args:
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _cpu_copy(args: tuple[Any, ...]) -> list[Any]:
    """The arguments with each tensor's storage copied to the CPU once, views kept as views of it."""
    copies: dict[int, torch.UntypedStorage] = {}
    copied: list[Any] = []
    for value in args:
        if not isinstance(value, torch.Tensor):
            copied.append(value)
            continue
        storage = value.untyped_storage()
        if storage.data_ptr() not in copies:
            copies[storage.data_ptr()] = storage.cpu() if storage.device.type != "cpu" else storage.clone()
        view = torch.empty(0, dtype=value.dtype)
        view.set_(copies[storage.data_ptr()], value.storage_offset(), value.size(), value.stride())
        copied.append(view)
    return copied
