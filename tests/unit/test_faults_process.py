"""Faults of the machine around a run, piece by piece (issue 36): the output pump on a full disk, the worker's
watch of the tool, stale private caches, a full disk named, SIGTERM/SIGHUP as Ctrl-C, --out checked, OS faults
mapped to their exit codes. The whole runs on samples/mlp.py are in tests/e2e/test_faults.py."""

from __future__ import annotations

import errno
import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from inductor_lens import capture as capture_stage
from inductor_lens.capture import (
    OWNER_FILE,
    PRIVATE_CACHE_PREFIX,
    full_disk,
    private_cache_folder,
    remove_stale_caches,
)
from inductor_lens.capture.supervisor import PACKAGE_ROOT, Finished, Pump
from inductor_lens.cli.common import check_out_dir, lens_command, os_fault, signals_as_interrupts
from inductor_lens.errors import NoSpaceError, RenderError, Terminated
from inductor_lens.exchange.files import PHASE_MARKER, CaptureResult
from inductor_lens.exchange.shared import SUPERVISOR_VARIABLE, alive
from inductor_lens.options import CompileSpec

from ..conftest import SAMPLES

LINES = 20_000  # ~1.4 MB of output: many times a pipe's buffer


class FullDisk(io.StringIO):
    """A log on a full disk: every write fails."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_the_pump_keeps_draining_after_a_failed_log_write() -> None:
    script = f"import sys\nfor i in range({LINES}): print('x' * 64, i)\nprint('{PHASE_MARKER}compile', file=sys.stderr)"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    phases: list[str] = []
    pump = Pump(FullDisk(), time.perf_counter(), lambda phase, _: phases.append(phase), None)
    reader = threading.Thread(target=pump.drain, args=(process,), daemon=True)
    reader.start()
    assert process.wait(timeout=60) == 0  # not blocked on a pipe nobody reads
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert isinstance(pump.log_error, OSError) and pump.log_error.errno == errno.ENOSPC
    assert phases == ["compile"]  # the progress kept coming after the log stopped


def test_a_full_report_disk_ends_the_capture_with_one_line_naming_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_log(job: str, args: list[str], **kwargs: object) -> Finished:
        return Finished(exit_code=1, timed_out=False, wall_s=1.0, log_error=OSError(errno.ENOSPC, "No space"))

    monkeypatch.setattr(capture_stage, "run_worker", full_log)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(capture_stage.tempfile, "tempdir", None)
    spec = CompileSpec(model_path=SAMPLES / "mlp.py", mode="default", options={})
    with pytest.raises(NoSpaceError) as raised:
        capture_stage.capture(spec, tmp_path / "out" / "capture")
    assert raised.value.exit_code == 13
    assert str(tmp_path / "out" / "capture" / "capture.log") in raised.value.one_line()
    assert "free of" in raised.value.one_line()
    assert list((tmp_path / "tmp").iterdir()) == []  # its private caches removed all the same


def test_a_compiler_meeting_a_full_tmpdir_is_named_with_its_space(tmp_path: Path) -> None:
    capture_dir, temp = tmp_path / "capture", tmp_path / "tmp"
    (capture_dir / "trace").mkdir(parents=True)
    temp.mkdir()
    (capture_dir / "capture.log").write_text("[inductor-lens] error (CompileError): C++ compile error\n")
    (capture_dir / "trace" / "dedicated_log_torch_trace_x.log").write_text(
        '{"fail_reason": "Output:\\n<built-in>: fatal error: when writing output to '
        f'{temp}/tmpab/header.i: No space left on device\\ncompilation terminated."}}\n'
    )
    failed = CaptureResult(error="torch.compile raised InductorError: CppCompileError: C++ compile error")
    message = full_disk(failed, Finished(1, False, 1.0), capture_dir, temp / f"{PRIVATE_CACHE_PREFIX}x")
    assert message is not None
    assert f"{temp}/tmpab/header.i" in message and "free of" in message
    assert full_disk(CaptureResult(error="C++ compile error"), Finished(1, False, 1.0), tmp_path, temp) is None
    ok = CaptureResult(status="ok")
    assert full_disk(ok, Finished(0, False, 1.0), capture_dir, temp) is None  # a tolerated write: no failure


def test_the_outcome_of_a_full_disk_exits_13(tmp_path: Path) -> None:
    result = CaptureResult(error="TMPDIR: no space left", error_kind="NoSpaceError")
    outcome = capture_stage._outcome("m.py", "m", 60, result, Finished(1, False, 1.0), tmp_path)
    error = capture_stage.Capture(outcome, result.environment, None, tmp_path).error()  # type: ignore[arg-type]
    assert isinstance(error, NoSpaceError) and error.exit_code == 13


def test_stale_private_caches_are_removed_and_live_ones_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{PRIVATE_CACHE_PREFIX}stale"
    stale.mkdir()
    (stale / OWNER_FILE).write_text(f"{dead.pid} 1")
    reused = tmp_path / f"{PRIVATE_CACHE_PREFIX}reused"  # a live pid, but another process than the owner
    reused.mkdir()
    (reused / OWNER_FILE).write_text(f"{os.getpid()} 1")
    unowned = tmp_path / f"{PRIVATE_CACHE_PREFIX}being-made"
    unowned.mkdir()
    other = tmp_path / "not-ours"
    other.mkdir()
    (other / OWNER_FILE).write_text(f"{dead.pid} 1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(capture_stage.tempfile, "tempdir", None)
    live = private_cache_folder()
    assert live.parent == tmp_path
    assert sorted(remove_stale_caches(tmp_path)) == sorted([stale, reused])
    assert live.is_dir() and unowned.is_dir() and other.is_dir()


def test_a_full_tmpdir_before_the_run_is_named_and_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(capture_stage.tempfile, "tempdir", None)
    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(NoSpaceError, match=f"TMPDIR: .*no space left on the disk of {tmp_path}"):
        private_cache_folder()
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_alive_tells_a_zombie_and_a_reaped_process_from_a_running_one() -> None:
    assert alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while alive(child.pid) and time.monotonic() < deadline:  # exited, not yet reaped: a zombie
        time.sleep(0.05)
    assert not alive(child.pid)
    child.wait()
    assert not alive(child.pid)


# The tool (here: a stand-in) starts a worker that calls watch_supervisor and starts a process of its own in its
# group (a compile worker, a compiler); SIGKILL to the tool must end both.
WORKER = textwrap.dedent("""
    import subprocess, sys, time
    sys.path.insert(0, {root!r})
    from inductor_lens.worker.supervised import watch_supervisor
    watch_supervisor()
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print(grandchild.pid, flush=True)
    time.sleep(120)
""")
TOOL = textwrap.dedent("""
    import os, subprocess, sys, threading
    env = dict(os.environ, {variable}=f"{{os.getpid()}}:{{sys.argv[1]}}")
    def start():
        worker = subprocess.Popen([sys.executable, "-c", sys.argv[2]], env=env, stdout=subprocess.PIPE, text=True,
                                  start_new_session=True)
        print(worker.pid, worker.stdout.readline().strip(), flush=True)
    if sys.argv[1] == "main":
        start()
    else:  # started from a thread that ends: the parent-death signal would fire early, so none is set
        thread = threading.Thread(target=start)
        thread.start()
        thread.join()
    import time
    time.sleep(120)
""")


@pytest.mark.parametrize("spawner", ["main", "thread"])
def test_the_worker_and_what_it_started_end_when_the_tool_is_killed(spawner: str) -> None:
    tool = subprocess.Popen(
        [sys.executable, "-c", TOOL.format(variable=SUPERVISOR_VARIABLE), spawner, WORKER.format(root=PACKAGE_ROOT)],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert tool.stdout is not None
        worker, grandchild = (int(pid) for pid in tool.stdout.readline().split())
        time.sleep(0.5)
        assert alive(worker) and alive(grandchild)  # a thread-started worker is not killed when its thread ends
    finally:
        tool.kill()
        tool.wait()
    deadline = time.monotonic() + 10
    while (alive(worker) or alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker) and not alive(grandchild)


def test_sigterm_and_sighup_raise_a_keyboard_interrupt_once_and_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    for number in (signal.SIGTERM, signal.SIGHUP):
        with pytest.raises(Terminated) as raised, signals_as_interrupts():
            os.kill(os.getpid(), number)
            time.sleep(5)  # the handler raises in this thread before the sleep ends
        assert raised.value.signal_number == number and isinstance(raised.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_ignored_at_start_stays_ignored() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with signals_as_interrupts():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.2)
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_stopping_signal_exits_as_a_shell_reports_it_with_one_line(name: str, code: int) -> None:
    @click.command()
    @lens_command
    def stopped(verbose: bool) -> None:
        os.kill(os.getpid(), getattr(signal, name))
        time.sleep(5)

    result = CliRunner().invoke(stopped, [])
    assert result.exit_code == code
    assert result.output.strip() == f"error: stopped by {name}; whatever was captured so far is kept"


def test_an_out_folder_that_cannot_be_made_is_a_render_error(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(RenderError, match="is a file, not a folder"):
        check_out_dir(afile / "out")
    with pytest.raises(RenderError, match="is a file, not a folder"):
        check_out_dir(afile)
    check_out_dir(tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()  # checked, not left behind
    check_out_dir(tmp_path)


def test_os_faults_get_their_own_exit_codes_and_bugs_stay_internal(tmp_path: Path) -> None:
    full = os_fault(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x")))
    assert isinstance(full, NoSpaceError) and str(tmp_path) in full.one_line()
    unnamed = os_fault(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert isinstance(unnamed, NoSpaceError) and str(tmp_path) in unnamed.one_line()
    denied = os_fault(PermissionError(errno.EACCES, "Permission denied", "/root/x"))
    assert isinstance(denied, RenderError) and denied.exit_code == 9
    assert os_fault(ValueError("a bug")) is None
    assert os_fault(FileNotFoundError(errno.ENOENT, "No such file", "x")) is None
