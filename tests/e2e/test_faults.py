"""End to end on CPU: faults of the machine around a run of ``compile samples/mlp.py`` (issue 36, part A).

Each test starts the tool as a real process in a session of its own, with a TMPDIR of its own, and stops it or
starves it at the right moment (the "compile" progress line): Ctrl-C, SIGTERM and SIGHUP end it with their exit
codes (130, 143, 129) and one line; SIGKILL leaves nothing running (the worker ends with the tool); a full disk
under --out or in TMPDIR is one line naming it (exit 13), never a hang; an --out that cannot be made is exit 9.
No orphan: 10 s after, no process of the worker's group and none whose command line names the report folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from inductor_lens.capture import PRIVATE_CACHE_PREFIX, remove_stale_caches

from ..conftest import SAMPLES, CliResult, assert_one_line_error, run_cli_process

ORPHAN_WAIT_S = 10.0
FAST = ("--device", "cpu", "--no-bench", "--no-handwritten", "--accuracy", "off")


def start_compile(out: Path, temp: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TMPDIR"] = str(temp)
    return subprocess.Popen(
        [sys.executable, "-m", "inductor_lens", "compile", str(SAMPLES / "mlp.py"), "--out", str(out), *FAST, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip


def wait_for_phase(process: subprocess.Popen[str], phase: str) -> list[str]:
    """The progress lines up to the one announcing ``phase`` (``  [   4.8s] compile``)."""
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.rstrip().endswith(f"] {phase}"):
            return lines
    raise AssertionError(f"the run ended before '{phase}': {''.join(lines)}")


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (process group, command line) of every process still running (zombies left out)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields and fields[0] not in ("Z", "X"):
            found[int(entry.name)] = (int(fields[2]), command)
    return found


def worker_groups(out: Path) -> set[int]:
    """The process groups of the model processes writing into ``out`` (their command line names it)."""
    return {group for group, command in processes().values() if "inductor_lens.worker" in command and str(out) in command}


def orphans(out: Path, groups: set[int]) -> list[str]:
    """What still runs ORPHAN_WAIT_S after the tool ended: of the worker's groups, or naming ``out``."""
    deadline = time.monotonic() + ORPHAN_WAIT_S
    while True:
        left = [f"{pid}: {command}" for pid, (group, command) in processes().items()
                if group in groups or str(out) in command]  # fmt: skip
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def private_caches(temp: Path) -> list[Path]:
    return list(temp.glob(f"{PRIVATE_CACHE_PREFIX}*"))


def finish(process: subprocess.Popen[str], lines: list[str]) -> CliResult:
    stdout, stderr = process.communicate(timeout=120)
    return CliResult(process.returncode, stdout, "".join(lines) + stderr)


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)])
def test_a_stopping_signal_mid_compile_ends_everything_with_its_code(tmp_path: Path, name: str, code: int) -> None:
    out, temp = tmp_path / "report", tmp_path / "tmp"
    temp.mkdir()
    process = start_compile(out, temp)
    lines = wait_for_phase(process, "compile")
    time.sleep(1.0)  # inside the compile: Inductor's compile workers and the C++ compiler running
    groups = worker_groups(out)
    assert groups, "no model process found"
    assert private_caches(temp), "the model process has no private cache"
    process.send_signal(getattr(signal, name))
    result = finish(process, lines)
    assert result.code == code, result.stderr
    assert_one_line_error(result, "whatever was captured so far is kept")
    assert orphans(out, groups) == []
    assert private_caches(temp) == []
    assert (out / "capture" / "capture.log").is_file()  # what was captured is kept


def test_a_killed_tool_leaves_no_process_and_its_folder_reads_as_incomplete(tmp_path: Path) -> None:
    out, temp = tmp_path / "report", tmp_path / "tmp"
    temp.mkdir()
    process = start_compile(out, temp)
    wait_for_phase(process, "compile")
    deadline = time.monotonic() + 120
    while not list(out.glob("capture/torch_compile_debug/*/torchinductor/*/output_code.py")):  # a graph to report
        assert process.poll() is None and time.monotonic() < deadline, "no graph compiled before the kill"
        time.sleep(0.05)
    groups = worker_groups(out)
    assert groups, "no model process found"
    process.kill()
    process.communicate(timeout=60)
    assert orphans(out, groups) == []  # the worker, its compile workers and compilers ended with the tool
    (leaked,) = private_caches(temp)  # nobody was left to delete it: the next run does
    assert remove_stale_caches(temp) == [leaked] and not leaked.exists()
    report = run_cli_process("report", out, "--out", tmp_path / "again")
    assert report.code == 0, report.stderr
    assert "the capture is incomplete: the model process stopped during 'compile'" in report.stderr


@contextmanager
def small_disk(folder: Path, size: str, left_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``folder`` with ``left_bytes`` free; skips where mounting is not permitted."""
    folder.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (and mount)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        filler = shutil.disk_usage(folder).free - left_bytes
        (folder / "filler").write_bytes(b"\0" * max(filler, 0))
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_under_out_is_one_line_not_a_hang(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    with small_disk(tmp_path / "disk", "1m", 100_000) as disk:
        out = disk / "report"
        started = time.monotonic()
        process = start_compile(out, temp, "--timeout", "300")
        result = finish(process, [])
        assert time.monotonic() - started < 200, "the run waited for its timeout"
        assert result.code == 13, result.stderr
        assert_one_line_error(result, "no space left on the disk of", str(out), "free of")
        assert private_caches(temp) == []


def test_a_full_tmpdir_is_named_not_a_compile_error(tmp_path: Path) -> None:
    with small_disk(tmp_path / "tmp", "1m", 300_000) as temp:
        process = start_compile(tmp_path / "report", temp)
        result = finish(process, [])
        assert result.code == 13, result.stderr
        assert_one_line_error(result, "TMPDIR", f"no space left on the disk of {temp}", "free of")
        assert private_caches(temp) == []


def test_an_out_folder_that_cannot_be_made_is_exit_9(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    result = run_cli_process("compile", SAMPLES / "mlp.py", "--out", tmp_path / "afile" / "report", *FAST)
    assert result.code == 9, result.stderr
    assert_one_line_error(result, str(tmp_path / "afile"), "is a file, not a folder")
