"""Stage 4 of the pipeline (bench), the suggestions tried: the Trials kept in the capture folder, read back.

``compare/trials.py`` runs the suggestions (``--try N``, ``inductor-lens try``) and writes what it measured to
``capture/trials.json``; ``attach_trials`` puts it on the run whenever the report is built from the capture
folder, so a report built again, or from a copied capture, keeps the measured suggestions. A file that cannot be
read is counted as a parse warning and left out (``--strict``: an error), never a crash.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ..parse.diagnostics import unreadable_capture_file
from ..records import CompileRun, Trials
from ..records.codec import dumps, from_jsonable, to_jsonable
from ..records.trials import TRIALS_VERSION

TRIALS_FILE = "trials.json"


def write_trials(capture_dir: Path, trials: Trials) -> None:
    (capture_dir / TRIALS_FILE).write_text(dumps({"version": TRIALS_VERSION, "trials": to_jsonable(trials)}),
                                           encoding="utf-8")  # fmt: skip


def attach_trials(run: CompileRun, capture_dir: Path | None, *, strict: bool = False) -> CompileRun:
    """The run with the Trials of ``capture_dir/trials.json``, where there are any."""
    path = capture_dir / TRIALS_FILE if capture_dir is not None else None
    if path is None or not path.is_file():
        return run
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        trials = from_jsonable(Trials, data["trials"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return unreadable_capture_file(run, path, exc, "the suggestions tried are left out", strict)
    return replace(run, trials=trials)
