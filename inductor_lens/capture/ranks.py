"""Stage 1 of the pipeline (capture), several ranks: a model file run by torch.distributed.run, once per rank.

``capture_ranks(spec, report_dir, nproc)`` launches ``python -m torch.distributed.run --standalone
--nproc-per-node N -m inductor_lens.worker capture ...`` under the supervisor (one timeout, one process
group for the launcher). Each rank's worker joins the job's process group and captures into
``report_dir/rank<r>/capture/`` (worker/ranked.py); the launcher's own output goes to
``report_dir/capture/launch.log``. What each rank reported becomes its own Capture; the job's failure is
one line naming the rank that failed (its own error, or the exit code torchrun saw), or the ranks a
timeout caught and where: shortly before the kill each rank is asked for its Python stacks (``dump_stacks``),
which it writes to its log, and the line names the collective or the line of the user's code each waited in.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import sysconfig
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from ..errors import CaptureTimeout, CompileError, LensError, UsageError
from ..exchange.files import (
    CAPTURE_DIR,
    LOG_FILE,
    RESULT_FILE,
    SPEC_FILE,
    CaptureResult,
    FileShapeError,
    read_capture_result,
)
from ..exchange.shared import (
    CACHES_VARIABLE,
    PID_FILE,
    PROCESS_GROUP_VARIABLE,
    REPORT_VARIABLE,
    STACKS_SIGNAL,
    rank_capture_dir,
)
from ..options import _PYTHON, CompileSpec, ScriptSpec
from ..parse.ranks import RANK_FOLDER
from . import (
    _ERROR_KINDS,
    Capture,
    _outcome,
    _settings,
    capture_environment,
    private_cache_folder,
    remove_stale_caches,
    script_capture,
)
from .supervisor import Finished, PhaseCallback, run_worker
from .triton_cache import keep_compiled

__all__ = [
    "LAUNCH_LOG",
    "RankedCapture",
    "capture_ranks",
    "capture_script_ranks",
    "check_launcher",
    "launcher_module",
    "split_torchrun",
]

LAUNCH_LOG = "launch.log"
LAUNCHER = "torch.distributed.run"
# torchrun's account of a rank that failed: "failed (exitcode: -6) local_rank: 0 (pid: 10477) of binary: ..."
_RANK_EXIT = re.compile(r"exitcode\s*:\s*(?P<code>-?\d+)\)?\s+local_rank\s*:\s*(?P<rank>\d+)")
# For tests and experiments: the ranks' private caches in this folder (rank<r>/inductor, rank<r>/triton), kept
# for the next job given it rather than fresh ones deleted after; remove one rank's folder between two jobs and
# that rank compiles cold while the others hit their caches (a warm cache on some ranks only).
KEEP_CACHES_VARIABLE = "INDUCTOR_LENS_RANK_CACHES"
# A hung job: each rank is asked for its Python stacks this long before the timeout's kill.
STACKS_LEAD_S = 1.5
# faulthandler's dump: a header per thread (newest first, so the main thread's is the last), then its frames
_STACK_HEADER = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$", re.MULTILINE)
_STACK_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)$')
_LIBRARY_FOLDERS = ("/site-packages/", "/dist-packages/")


@dataclass(frozen=True)
class RankedCapture:
    captures: tuple[Capture, ...]  # one per rank, in rank order
    launch: str  # the launch, as the report names it
    error: LensError | None = None  # the job's failure, naming the rank


def launcher_module(nproc: int) -> list[str]:
    """What goes between ``python -m`` and the worker module: torchrun on this machine alone."""
    return [LAUNCHER, "--standalone", f"--nproc-per-node={nproc}", "--module"]


def split_torchrun(command: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """``torchrun OPTIONS script.py ARGS`` (or ``python -m torch.distributed.run ...``) as torchrun's own
    options and the script's command (``script.py ARGS``, ``-m module ARGS``); None for any other command."""
    argv = list(command)
    if argv and Path(argv[0]).name == "torchrun":
        rest = argv[1:]
    elif len(argv) >= 3 and _PYTHON.match(Path(argv[0]).name) and argv[1] == "-m" and argv[2] == LAUNCHER:
        rest = argv[3:]
    else:
        return None
    check_launcher(1)
    from torch.distributed.run import get_args_parser

    try:
        parsed = get_args_parser().parse_args(rest)
    except SystemExit:  # argparse printed what is wrong
        raise UsageError(f"run -- torchrun: torchrun does not accept {' '.join(rest)}") from None
    if parsed.no_python:
        raise UsageError("run -- torchrun --no-python: only a Python script or module can be captured")
    options = [
        o for o in rest[: len(rest) - len(parsed.training_script_args) - 1] if o not in ("-m", "--module")
    ]
    script = ["-m", parsed.training_script] if parsed.module else [parsed.training_script]
    return options, [*script, *parsed.training_script_args]


def check_launcher(nproc: int) -> None:
    """A clear error, before anything starts, for a bad process count or a torch without torchrun."""
    if nproc < 1:
        raise UsageError(f"--nproc {nproc}: give the number of processes (ranks) to start, 1 or more")
    try:
        torch_spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        torch_spec = None
    origin = torch_spec.origin if torch_spec is not None else None
    if origin is None or not (Path(origin).parent / "distributed" / "run.py").is_file():
        raise UsageError(f"--nproc needs {LAUNCHER} (torchrun), which this Python's torch does not have")


def capture_ranks(
    spec: CompileSpec,
    report_dir: Path,
    nproc: int,
    *,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
) -> RankedCapture:
    """Run the model file in ``nproc`` ranks; each rank's capture lands in ``report_dir/rank<r>/capture``."""
    placed = replace(spec, model_path=spec.model_path.resolve())
    report_dir = report_dir.resolve()
    launcher = launcher_module(nproc)
    finished = _launch("capture", placed.to_json(), report_dir, report_dir / CAPTURE_DIR, launcher, spec.bench,
                       spec.timeout_s, progress, echo, process_group=True)  # fmt: skip
    launch = f"compile --nproc {nproc}: python -m {' '.join(launcher)} inductor_lens.worker"

    def rank_capture(result: CaptureResult, rank_finished: Finished, folder: Path) -> Capture:
        outcome = _outcome(
            str(spec.model_path), spec.model_name, spec.timeout_s, result, rank_finished, folder
        )
        return Capture(outcome, result.environment, _settings(spec, result), folder)

    return _ranked_capture(range(nproc), report_dir, finished, launch, spec.timeout_s, rank_capture)


def capture_script_ranks(
    spec: ScriptSpec,
    report_dir: Path,
    launcher_options: Sequence[str],
    *,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
) -> RankedCapture:
    """``run -- torchrun OPTIONS script.py ARGS``: the script process once per rank, under torchrun with the
    user's own options; the script sets up its process group itself."""
    report_dir = report_dir.resolve()
    launcher = [LAUNCHER, *launcher_options, "--module"]
    finished = _launch("script", spec.to_json(), report_dir, spec.cwd, launcher, spec.bench, spec.timeout_s,
                       progress, echo, process_group=False)  # fmt: skip
    launch = f"torchrun {' '.join(launcher_options)} {spec.command}".strip()

    def rank_capture(result: CaptureResult, rank_finished: Finished, folder: Path) -> Capture:
        return script_capture(spec, result, rank_finished, folder)

    numbers = sorted(
        int(m["rank"]) for d in report_dir.iterdir() if (m := RANK_FOLDER.match(d.name)) and d.is_dir()
    )
    return _ranked_capture(numbers, report_dir, finished, launch, spec.timeout_s, rank_capture)


def _launch(
    job: str,
    spec_json: str,
    report_dir: Path,
    cwd: Path,
    launcher: Sequence[str],
    bench: bool,
    timeout_s: float,
    progress: PhaseCallback | None,
    echo: TextIO | None,
    *,
    process_group: bool,
) -> Finished:
    """torchrun with the worker module, on fresh private caches (one folder per rank, deleted after; kept in
    $INDUCTOR_LENS_RANK_CACHES where it is set)."""
    launch_dir = report_dir / CAPTURE_DIR
    launch_dir.mkdir(parents=True, exist_ok=True)
    spec_path = launch_dir / SPEC_FILE
    spec_path.write_text(spec_json, encoding="utf-8")
    kept = os.environ.get(KEEP_CACHES_VARIABLE)
    if not kept:
        remove_stale_caches()  # a killed job's (its owner file names a dead process)
    caches = Path(kept).resolve() if kept else private_cache_folder()
    caches.mkdir(parents=True, exist_ok=True)
    env = capture_environment(launch_dir, caches, bench=bench)
    env.update({REPORT_VARIABLE: str(report_dir), CACHES_VARIABLE: str(caches)})
    if process_group:
        env[PROCESS_GROUP_VARIABLE] = "1"
    stacks = threading.Timer(max(timeout_s - STACKS_LEAD_S, timeout_s / 2), dump_stacks, (report_dir,))
    stacks.daemon = True
    stacks.start()
    try:
        return run_worker(
            job,
            [str(spec_path), str(launch_dir / RESULT_FILE)],
            cwd=cwd,
            env=env,
            log_path=launch_dir / LAUNCH_LOG,
            timeout_s=timeout_s,
            on_phase=progress,
            echo=echo,
            launcher=launcher,
        )
    finally:
        stacks.cancel()
        # each rank's kernels' compiler stages (TTIR ... cubin) and the configs autotuning kept, kept in its
        # capture folder
        for rank_caches in caches.glob("rank*"):
            number = rank_caches.name.removeprefix("rank")
            if number.isdecimal():
                keep_compiled(rank_caches, rank_capture_dir(report_dir, int(number)))
        if not kept:
            shutil.rmtree(caches, ignore_errors=True)


def _ranked_capture(
    numbers: Iterable[int],
    report_dir: Path,
    finished: Finished,
    launch: str,
    timeout_s: float,
    rank_capture: Callable[[CaptureResult, Finished, Path], Capture],
) -> RankedCapture:
    ranks = list(numbers)
    results = {n: _read_result(rank_capture_dir(report_dir, n)) for n in ranks}
    exits = _rank_exits(report_dir / CAPTURE_DIR / LAUNCH_LOG)
    failing = next((n for n in ranks if results[n].status != "ok" and results[n].error), None)
    if failing is None:
        failing = next((n for n in sorted(exits) if exits[n] != 0), None)
    captures = []
    for number in ranks:
        result = results[number]
        code = 0 if result.status == "ok" else exits.get(number, finished.exit_code or 1)
        rank_finished = Finished(
            exit_code=code, timed_out=finished.timed_out, wall_s=result.wall_s or finished.wall_s
        )
        capture = rank_capture(result, rank_finished, rank_capture_dir(report_dir, number))
        if (
            capture.outcome.status == "failed"
            and not result.error
            and failing is not None
            and failing != number
        ):
            capture = replace(
                capture,
                outcome=replace(capture.outcome, error=f"stopped by torchrun when rank {failing} failed"),
            )
        captures.append(capture)
    error = _job_error(ranks, captures, finished, failing, timeout_s, report_dir)
    return RankedCapture(tuple(captures), launch, error)


def _read_result(folder: Path) -> CaptureResult:
    try:
        return read_capture_result(folder / RESULT_FILE) or CaptureResult()
    except FileShapeError as exc:
        return CaptureResult(error=f"the worker left an unreadable result: {exc}")


def _rank_exits(launch_log: Path) -> dict[int, int]:
    """Each failed rank's exit code, as torchrun reported it (a rank killed by a signal writes no error)."""
    try:
        text = launch_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return {int(m["rank"]): int(m["code"]) for m in _RANK_EXIT.finditer(text)}


def _job_error(
    ranks: list[int],
    captures: list[Capture],
    finished: Finished,
    failing: int | None,
    timeout_s: float,
    report_dir: Path,
) -> LensError | None:
    if finished.timed_out:
        where = "; ".join(
            f"rank {n} during '{c.outcome.phase}'" + (f", {at}" if (at := waited_at(c.capture_dir / LOG_FILE)) else "")
            for n, c in zip(ranks, captures, strict=True)
        )
        stacks = f", their Python stacks at the end of rank<r>/{CAPTURE_DIR}/{LOG_FILE}" if " in " in where else ""
        return CaptureTimeout(f"timed out after {timeout_s:g} s ({where or 'no rank started'}); every rank was stopped"
                              f"{stacks} (raise --timeout to wait longer)")  # fmt: skip
    if failing is not None and failing in ranks:
        outcome = captures[ranks.index(failing)].outcome
        kind = _ERROR_KINDS.get(outcome.error_kind or "", CompileError)
        return kind(f"rank {failing}: {outcome.error or 'failed'}")
    if finished.exit_code != 0 or not captures or any(c.outcome.status != "ok" for c in captures):
        log = report_dir / CAPTURE_DIR / LAUNCH_LOG
        return CompileError(
            f"{LAUNCHER} exited with code {finished.exit_code} before the ranks reported (see {log})"
        )
    return None


def dump_stacks(report_dir: Path) -> None:
    """Ask each rank still running for its Python stacks, which it writes to its log (worker/ranked.py)."""
    for pid_file in report_dir.glob(f"rank*/{CAPTURE_DIR}/{PID_FILE}"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text(encoding="utf-8"))
            command = Path(f"/proc/{pid}/cmdline")
            if command.parent.parent.is_dir() and b"inductor_lens.worker" not in command.read_bytes():
                continue  # the rank ended and its pid went to another process (Linux: /proc says so)
            os.kill(pid, STACKS_SIGNAL)


def waited_at(log: Path) -> str:
    """Where a rank's main thread was when it wrote its stacks (``dump_stacks``): ``waiting in all_reduce
    (torch/distributed/distributed_c10d.py:3252) from model.py:30 in forward``, ``at model.py:33 in forward``
    where it was in the user's code, or "" where the log holds no stacks."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    headers = list(_STACK_HEADER.finditer(text))
    if not headers:
        return ""
    frames = []
    for line in text[headers[-1].end() :].lstrip("\n").splitlines():
        if (frame := _STACK_FRAME.match(line)) is None:
            break
        frames.append(frame)
    if not frames:
        return ""
    own = next((f for f in frames if not _in_library(f["path"])), None)
    if own is frames[0]:
        return f"at {Path(own['path']).name}:{own['line']} in {own['function']}"
    top = frames[0]
    waiting = f"waiting in {top['function']} ({_library_path(top['path'])}:{top['line']})"
    return f"{waiting} from {Path(own['path']).name}:{own['line']} in {own['function']}" if own else waiting


def _in_library(path: str) -> bool:
    """Whether a frame is torch's, Python's or inductor-lens's own rather than the user's."""
    if path.startswith("<") or any(folder in path for folder in _LIBRARY_FOLDERS):
        return True
    resolved = Path(path).resolve()
    package = Path(__file__).resolve().parents[1]
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    return resolved.is_relative_to(package) or resolved.is_relative_to(stdlib)


def _library_path(path: str) -> str:
    """A library's file as its import path names it: ``torch/distributed/distributed_c10d.py``."""
    for folder in _LIBRARY_FOLDERS:
        if folder in path:
            return path.split(folder, 1)[1]
    return Path(path).name
