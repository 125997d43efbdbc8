"""Compiler stages of the Triton kernels, a step of the pipeline after records (capture -> parse -> records ->
bench -> stages -> report): each generated Triton kernel's TTIR, TTGIR, LLVM IR, PTX and SASS, with its
registers, spills, shared memory and occupancy, and its Python lines tied to PTX and SASS lines.

``attach_stages(run, capture_dir, compile_missing=...)`` adds a KernelStages per Triton kernel to the run:

1. from the capture's own Triton cache, kept by the capture in ``capture/triton_cache`` (``capture/
   triton_cache.py``): what the GPU really ran, compiled by the capture's Triton; the entry of the config
   the run chose, known from the trace, the timing, or the ``.best_config`` files of Inductor's autotune
   cache kept beside it (``cache.chosen_config``, ``cache.autotune_choice``); the entries are read side by side
   in threads (each runs cuobjdump and nvdisasm), into the same run as one read in turn;
2. with ``compile_missing``, for the kernels step 1 did not find (a debug folder or a bare trace from
   elsewhere): compiled here from the output code for the capture's GPU (``aot.py``), and said so, with both
   Triton versions where they differ. The Triton functions a kernel inlines (``triton_helpers``) are those
   of the torch that generated it where the capture kept them (``capture/triton_runtime``), else this
   torch's; a kernel that does not compile against another torch's helpers gets one line saying so
   ("captured with torch 2.11.0+cu130; its Triton helpers were not kept in this capture; torch 2.14.1+cu130's
   triton_helpers.online_softmax_combine takes other arguments (...)"), and one that does, a note.

Kernels that already have stages in the run (read back from lens.json) keep them. Registers and local memory
come from the cubin (``cuobjdump -res-usage``): what the driver reports as ``CU_FUNC_ATTRIBUTE_NUM_REGS`` and
``LOCAL_SIZE_BYTES``, from which Triton's ``n_regs`` and ``n_spills`` (local bytes / 4) come.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ..capture.triton_cache import KEPT_CACHE_DIR, KeptHelpers, kept_runtime_helpers
from ..records import CompileRun, GraphRecord, KernelRecord
from ..records.codec import JsonScalar, int_or_none
from ..records.stages import KernelStages, StagesOrigin, StageText
from . import linemap, tools
from .aot import CompileOutcome, CompileRequest, compile_kernels
from .cache import (
    STAGE_FILES,
    AutotuneChoice,
    CacheEntry,
    autotune_choice,
    chosen_config,
    pick_entry,
    read_autotune_choices,
    read_cache,
)
from .occupancy import capability, occupancy

__all__ = ["attach_stages", "stages_from_entry", "stages_to_attach"]

# Threads reading the capture cache's entries at once (each mostly waits on a subprocess).
MAX_WORKERS = 32


def stages_to_attach(run: CompileRun, capture_dir: Path) -> int:
    """How many Triton kernels of ``run`` lack stages that the capture's Triton cache may hold (0 without one): what
    ``attach_stages`` would read, counted without reading it."""
    return len(_without_stages(run)) if (capture_dir / KEPT_CACHE_DIR).is_dir() else 0


def _without_stages(run: CompileRun) -> list[tuple[GraphRecord, KernelRecord]]:
    done = {(s.graph_id, s.kernel) for s in run.kernel_stages if not s.error}
    return [(g, k) for g, k in run.all_kernels() if k.backend == "triton" and (g.id, k.name) not in done]


def attach_stages(run: CompileRun, capture_dir: Path | None, *, compile_missing: bool = False) -> CompileRun:
    """``run`` with the compiler stages of its Triton kernels (see the module docstring)."""
    wanted = _without_stages(run)
    if not wanted:
        return run
    found: dict[tuple[str, str], KernelStages] = {}
    cache = capture_dir / KEPT_CACHE_DIR if capture_dir is not None else None
    entries = read_cache(cache) if cache is not None and cache.is_dir() else []
    choices = read_autotune_choices(capture_dir) if capture_dir is not None else []
    autotuned = {(g.id, k.name): autotune_choice(k, choices, entries) for g, k in wanted}
    jobs: list[tuple[CacheEntry, GraphRecord, KernelRecord, dict[str, JsonScalar], tuple[str, ...]]] = []
    for graph, kernel in wanted:
        choice = autotuned[graph.id, kernel.name]
        config, how = chosen_config(kernel, choice)
        entry, note = pick_entry(entries, kernel, config, choice.cache_hash if choice is not None else None)
        if entry is not None:
            jobs.append((entry, graph, kernel, config, (how,) + ((note,) if note else ())))
    # each entry runs cuobjdump and nvdisasm (seconds on a large kernel): side by side, in threads, as the
    # subprocesses release the GIL; map keeps the order, so the run is the same as one made in turn
    with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1, MAX_WORKERS) or 1) as pool:
        done_jobs = pool.map(
            lambda job: stages_from_entry(job[0], job[1].id, job[2], "capture cache", run, job[3], job[4]), jobs
        )
        for (_, graph, kernel, _, _), stages in zip(jobs, done_jobs, strict=True):
            found[graph.id, kernel.name] = stages
    missing = [(g, k) for g, k in wanted if (g.id, k.name) not in found]
    if compile_missing and missing:
        helpers = kept_runtime_helpers(capture_dir) if capture_dir is not None else None
        found.update(_compile_here(run, missing, autotuned, helpers))
    if not found:
        return run
    kept = tuple(s for s in run.kernel_stages if (s.graph_id, s.kernel) not in found)
    return replace(run, kernel_stages=kept + tuple(found.values()))


def _target_of(run: CompileRun, kernel: KernelRecord) -> int | None:
    """The compute capability the kernel was generated for: its own triton_meta's, else the run's device's."""
    device = kernel.launch_config.get("device")
    cc = device.get("cc") if isinstance(device, dict) else None
    if isinstance(cc, int):
        return cc
    return capability(run.environment.device_capability)


def _compile_here(
    run: CompileRun,
    kernels: list[tuple[GraphRecord, KernelRecord]],
    autotuned: Mapping[tuple[str, str], AutotuneChoice | None],
    kept: KeptHelpers | None = None,
) -> dict[tuple[str, str], KernelStages]:
    requests: dict[str, CompileRequest] = {}
    wanted: dict[tuple[str, str], tuple[str, dict[str, JsonScalar], str, KernelRecord]] = {}
    failed: dict[tuple[str, str], KernelStages] = {}
    for graph, kernel in kernels:
        cc = _target_of(run, kernel)
        if cc is None:
            failed[graph.id, kernel.name] = KernelStages(graph.id, kernel.name, "compiled here",
                                                         error="the capture names no GPU target to compile for")  # fmt: skip
            continue
        config, how = chosen_config(kernel, autotuned.get((graph.id, kernel.name)))
        # the same source and config compile once (a kernel shared by the forward and inference graphs)
        key = f"{kernel.name}|{cc}|{sorted(config.items())}|{hash(kernel.source)}"
        requests.setdefault(key, CompileRequest(key, kernel.name, kernel.source, config, cc))
        wanted[graph.id, kernel.name] = (key, config, how, kernel)
    with tempfile.TemporaryDirectory(prefix="inductor-lens-stages-") as work:
        outcomes = compile_kernels(list(requests.values()), Path(work), kept.folder if kept else None)
        for (graph_id, name), (key, config, how, kernel) in wanted.items():
            outcome = outcomes[key]
            error, helpers_note = _helpers_said(run, outcome, kept)
            if outcome.folder is None:
                failed[graph_id, name] = KernelStages(graph_id, name, "compiled here", error=error or "not compiled")
                continue
            entries = [e for e in read_cache(outcome.folder.parent) if e.folder == outcome.folder]
            if not entries:
                failed[graph_id, name] = KernelStages(
                    graph_id, name, "compiled here", error="the compiler left no cache entry"
                )
                continue
            notes = tuple(n for n in (how if not outcome.note else "", outcome.note) if n)
            stages = stages_from_entry(entries[0], graph_id, kernel, "compiled here", run,
                                       dict(outcome.config or config), notes)  # fmt: skip
            failed[graph_id, name] = replace(stages, notes=stages.notes + ((helpers_note,) if helpers_note else ()))
    return failed


def _helpers_said(run: CompileRun, outcome: CompileOutcome, kept: KeptHelpers | None) -> tuple[str, str]:
    """(the error to show, a note) on the Triton helpers a kernel was compiled against here."""
    captured = run.environment.torch_version or "an unknown torch"
    here = outcome.torch_version or "this torch"
    if outcome.helpers == "kept" and kept is not None:
        used = f"the Triton helpers kept with the capture (torch {kept.torch_version})"
    elif captured != here:  # another torch's helpers: said, as is why they were
        not_kept = "its Triton helpers were not kept in this capture"
        used = f"captured with torch {captured}; {not_kept if outcome.helpers == 'installed' else outcome.helpers}"
    else:  # the torch that generated the kernels: its helpers are the right ones
        return outcome.error, ""
    if not outcome.helper:
        if outcome.helpers == "kept":
            return outcome.error, f"compiled against {used}"
        return outcome.error, f"{used}; compiled against torch {here}'s helpers"
    if outcome.cause_type == "TypeError":
        why = "takes other arguments" + (f" ({outcome.cause})" if outcome.cause else "")
    else:
        why = f"fails ({outcome.cause_type or 'error'}: {outcome.cause})" if outcome.cause else "fails"
    if outcome.helpers == "kept":
        return f"compiled against {used}: {outcome.helper} {why}", ""
    return f"{used}; torch {here}'s {outcome.helper} {why}", ""


def stages_from_entry(
    entry: CacheEntry,
    graph_id: str,
    kernel: KernelRecord,
    origin: StagesOrigin,
    run: CompileRun,
    config: Mapping[str, JsonScalar],
    notes: tuple[str, ...] = (),
) -> KernelStages:
    """The KernelStages of one Triton cache entry: texts, SASS, resources, occupancy and the line map."""
    metadata = entry.metadata
    texts = [StageText.of(stage, text) for stage in STAGE_FILES if (text := entry.read(stage)) is not None]
    notes_list = list(notes)
    registers = local = None
    sass_map: dict[int, int] = {}
    ptx = entry.read("ptx")
    ptx_map = linemap.ptx_lines(ptx) if ptx else None
    try:
        cubin = entry.file("cubin").read_bytes()
    except OSError:
        cubin = None
        notes_list.append("the cache entry has no cubin: no SASS, registers or spills")
    if cubin is not None:
        sass = tools.disassemble(cubin)
        if sass is None:
            notes_list.append("this machine has neither nvdisasm nor cuobjdump: no SASS")
        else:
            sass_text, sass_map = linemap.sass_lines(sass, ptx_map)
            texts.append(StageText.of("sass", sass_text))
        usage = tools.resource_usage(cubin, entry.name)
        if usage is None:
            notes_list.append("this machine has no cuobjdump: registers and spills unknown")
        else:
            registers, local = usage.registers, usage.local_bytes
    lines = linemap.line_spans(ptx_map.lines if ptx_map else {}, sass_map)
    target = metadata.get("target")
    arch = target.get("arch") if isinstance(target, dict) else None
    cc = capability(arch if isinstance(arch, (int, str)) else None)
    num_warps, num_stages, shared = (int_or_none(metadata.get(k)) for k in ("num_warps", "num_stages", "shared"))
    fits = cc is not None and registers is not None and shared is not None and num_warps is not None
    return KernelStages(
        graph_id=graph_id,
        kernel=kernel.name,
        origin=origin,
        target=f"sm_{cc}" if cc is not None else "",
        triton_version=_str(metadata.get("triton_version")),
        capture_triton_version=run.environment.triton_version,
        config=dict(config),
        config_note="; ".join(notes_list[:1]),
        num_warps=num_warps,
        num_stages=num_stages,
        shared_bytes=shared,
        registers=registers,
        spills=local // 4 if local is not None else None,
        local_bytes=local,
        occupancy=occupancy(cc, registers, shared, num_warps) if fits else None,  # type: ignore[arg-type]
        texts=tuple(texts),
        lines=lines,
        cache_hash=_str(metadata.get("hash")),
        notes=tuple(notes_list[1:]),
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
