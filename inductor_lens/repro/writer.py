"""Reproducer, step 3: a report (or any capture ``inductor-lens report`` reads) and a kernel's name ->
``DIR/repro.py``, with the kernel's saved inputs copied beside it where the capture saved them
(``inductor-lens compile --save-inputs``, ``worker/saved_inputs.py``)."""

from __future__ import annotations

import difflib
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputFolderError, UsageError
from ..exchange.files import SAVED_INPUTS_DIR, SAVED_INPUTS_INDEX, FileShapeError, SavedInputs, read_json_file
from ..records import CompileRun, GraphRecord, KernelRecord
from .parts import ReproError
from .plan import ReproPlan, plan_repro
from .script import render_script

SCRIPT_NAME = "repro.py"
INPUTS_NAME = "inputs.pt"


@dataclass(frozen=True)
class ReproResult:
    script: Path
    plan: ReproPlan
    saved_inputs: Path | None  # the real arguments copied beside the script
    saved_note: str  # why the real arguments are not there, where the capture tried


def load_capture(folder: Path, strict: bool = False) -> tuple[CompileRun, Path | None]:
    """The run of a report folder (its lens.json) or of any capture ``report`` reads, and its capture/ folder."""
    from ..capture import find_capture_dir
    from ..pipeline import build_run, load_run
    from ..report.folders import LENS_JSON

    if not folder.exists():
        raise InputFolderError(f"{folder}: no such report or capture")
    capture_dir = find_capture_dir(folder) if folder.is_dir() else None
    if folder.is_dir() and (folder / LENS_JSON).is_file():
        return load_run(folder), capture_dir
    return build_run(folder, capture_dir, strict=strict), capture_dir


def find_kernel(run: CompileRun, wanted: str) -> tuple[GraphRecord, KernelRecord]:
    """``KERNEL`` or ``GRAPH/KERNEL`` (GRAPH: a graph's id or name) -> the kernel; a one-line error otherwise."""
    graph_part, _, name = wanted.rpartition("/")
    found = [(g, k) for g in run.graphs if not graph_part or graph_part in (g.id, g.name)
             for k in g.kernels if k.name == name]  # fmt: skip
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        choices = ", ".join(f"{g.id}/{k.name}" for g, k in found)
        raise UsageError(f"{len(found)} graphs have a kernel {name}: name one as GRAPH/KERNEL ({choices})")
    names = sorted({k.name for g in run.graphs for k in g.kernels})
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    where = f" in graph {graph_part}" if graph_part else ""
    hint = (
        f"did you mean: {', '.join(close)}"
        if close
        else f"the report has {len(names)} kernels, e.g. {', '.join(names[:5])}"
    )
    raise UsageError(
        f"no generated kernel {name}{where}; {hint}"
        if names
        else f"no generated kernel {name}: the report has none"
    )


def write_repro(
    folder: Path, wanted: str, out_dir: Path | None = None, *, strict: bool = False
) -> ReproResult:
    run, capture_dir = load_capture(folder, strict=strict)
    graph, kernel = find_kernel(run, wanted)
    try:
        plan = plan_repro(graph, kernel)
    except ReproError as exc:
        raise UsageError(f"cannot write a reproducer of {graph.id}/{kernel.name}: {exc}") from None
    out_dir = out_dir if out_dir is not None else Path(f"repro-{kernel.name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    saved, note = _saved_inputs(capture_dir, graph, kernel, len(plan.args))
    copied = None
    if saved is not None:
        copied = out_dir / INPUTS_NAME
        shutil.copyfile(saved, copied)
    elif (out_dir / INPUTS_NAME).exists():
        (out_dir / INPUTS_NAME).unlink()  # an earlier reproducer's inputs are not this kernel's
    origin = run.title or folder.name
    text = render_script(plan, origin=origin, saved_inputs=INPUTS_NAME if copied else None, saved_note=note)
    script = out_dir / SCRIPT_NAME
    script.write_text(text, encoding="utf-8")
    script.chmod(0o755)
    return ReproResult(script=script, plan=plan, saved_inputs=copied, saved_note=note)


def _saved_inputs(
    capture_dir: Path | None, graph: GraphRecord, kernel: KernelRecord, params: int
) -> tuple[Path | None, str]:
    """The .pt file of the kernel's first launch in this graph, or (None, why not) where the capture saved inputs."""
    if capture_dir is None:
        return None, ""
    try:
        index = read_json_file(capture_dir / SAVED_INPUTS_INDEX, SavedInputs)
    except FileShapeError as exc:
        return None, f"The capture's saved inputs are unreadable ({exc}): random inputs instead."
    if index is None:
        return None, ""
    md5 = hashlib.md5(graph.output_code.encode()).hexdigest()
    entries = [e for e in index.launches if e.kernel == kernel.name and e.graph == md5]
    if not entries:
        return (
            None,
            f"The capture saved inputs (--save-inputs) but none of {kernel.name} in this graph: random inputs instead.",
        )
    entry = entries[0]
    if entry.skipped:
        return None, f"The capture did not save this kernel's inputs: {entry.skipped}. Random inputs instead."
    path = capture_dir / SAVED_INPUTS_DIR / entry.file
    if not path.is_file() or entry.arguments != params:
        return (
            None,
            f"The saved inputs of {kernel.name} are missing or do not match its parameters: random inputs instead.",
        )
    return path, ""
