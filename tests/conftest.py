"""Shared test fixtures: unpacked real captures, the CLI, a fixed clock, and the tiers.

The tiers are the folders: ``unit/`` (parsers, records, views, the CLI on frozen captures: seconds),
``golden/`` (whole pages against tests/golden/), ``e2e/`` (real compiles in model processes: minutes),
``browser/`` (pages in headless Chromium), ``gpu/`` (skipped without CUDA). Each test gets its tier as a
marker, so ``-m "unit or golden"`` is the fast loop (``make test-fast``).
"""

from __future__ import annotations

import os
import tempfile

# The hand-written kernel tests run on CPU tensors under Triton's interpreter, which must be on before
# Triton is first imported in this process. Child processes (captures, the kernel checks of a compile,
# the CLI run as a process) get it removed again unless they need it.
os.environ.setdefault("TRITON_INTERPRET", "1")

import atexit
import contextlib
import datetime as dt
import io
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from inductor_lens.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SAMPLES = ROOT / "samples"
GPU_CASES = (
    "block_default",
    "block_reduce_overhead",
    "mlp_bf16_max_autotune_nocg",
    "mlp_default",
    "mlp_epilogue",
    "mlp_max_autotune_nocg",
    "softmax_ln_coord",
    "softmax_ln_default",
)
CPU_CASE = "cpu-torch2.13-mlp-train"
TIMED_CASE = "h200-block-autotune-timed"  # a capture/ folder with measurements
FIXED_TIME = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden", action="store_true", help="Rewrite tests/golden/ from the current output."
    )


TIERS = ("unit", "golden", "e2e", "browser", "gpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cuda = _cuda_available()
    for item in items:
        tier = item.path.parent.name
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: tests live in one of the tier folders {', '.join(TIERS)}")
        item.add_marker(getattr(pytest.mark, tier))
        if tier == "gpu" and not cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


# The report's own caches (Graphviz layouts, hand-written autotuning) go to a folder of this test session,
# never the user's: tests stay independent of what earlier runs left, and leave nothing behind (the folder
# goes when this process exits; each xdist worker has its own).
_TEST_CACHE_DIR = tempfile.mkdtemp(prefix="inductor-lens-test-cache-")
os.environ["INDUCTOR_LENS_CACHE_DIR"] = _TEST_CACHE_DIR
atexit.register(shutil.rmtree, _TEST_CACHE_DIR, ignore_errors=True)


def require_graphviz() -> None:
    """Skip where Graphviz's ``dot`` is missing, unless INDUCTOR_LENS_REQUIRE_GRAPHVIZ=1 (``make test`` and CI):
    there a missing ``dot`` is a failure, not a silent skip."""
    from inductor_lens.report import dot_layout

    if dot_layout.dot_binary() is None:
        if os.environ.get("INDUCTOR_LENS_REQUIRE_GRAPHVIZ") == "1":
            pytest.fail("Graphviz dot is not installed (INDUCTOR_LENS_REQUIRE_GRAPHVIZ=1)")
        pytest.skip("Graphviz dot is not installed")


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


# The real H100 captures behind the first page's answers (issue 31; tests/fixtures/PROVENANCE.md).
H100_ANSWER_CAPTURES = (
    "h100-gpt2-fp32-default",
    "h100-llama-bf16-max-autotune-nocg",
    "h100-vit-s16-reduce-overhead",
    "h100-resnet50-train",
)


def unpack_fixture(name: str, target: Path) -> Path:
    """Extract tests/fixtures/<name>.tar.gz into ``target``; returns the archive's top folder. The "data"
    filter (no links out, no devices) where this Python's tarfile has it (3.10.12+, 3.11.4+; Debian 12's
    3.11.2 has not): the archives are the project's own, so older Pythons extract them as they are."""
    with tarfile.open(FIXTURES / f"{name}.tar.gz") as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(target, filter="data")
        else:
            archive.extractall(target)
    (child,) = target.iterdir()
    return child


@pytest.fixture(scope="session")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """unpacked(name) -> a read-only-by-convention folder with the archive's content (shared per session)."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = unpack_fixture(name, tmp_path_factory.mktemp(f"fixture-{name}"))
        return cache[name]

    return get


@pytest.fixture
def fixture_copy(unpacked: Callable[[str], Path], tmp_path: Path) -> Callable[[str], Path]:
    """fixture_copy(name) -> a private, writable copy of an unpacked archive (for corrupting)."""

    def get(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(unpacked(name), target)
        return target

    return get


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def stubbed_specs(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The specs ``compile`` and ``run`` would capture, the capture itself stubbed (no model process): each call
    ends in a UsageError, exit 2."""
    from inductor_lens import api
    from inductor_lens.errors import UsageError

    seen: list[object] = []

    def stop(spec: object, *args: object, **kwargs: object) -> None:
        seen.append(spec)
        raise UsageError("stubbed")

    monkeypatch.setattr(api, "compile_model", stop)
    monkeypatch.setattr(api, "run_script", stop)
    return seen


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``inductor-lens ARGS`` in-process through the real entry point."""

    def invoke(*args: str | Path) -> CliResult:
        code = 0
        try:
            main([str(a) for a in args])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


@pytest.fixture(scope="session")
def run_cli_shared() -> Callable[..., CliResult]:
    """Run ``inductor-lens ARGS`` in-process, for module- or session-scoped fixtures (``run_cli`` needs the
    function-scoped ``capsys``): many compiles in one pytest process, each still in its own model process."""

    def invoke(*args: str | Path) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
        return CliResult(code, out.getvalue(), err.getvalue())

    return invoke


@pytest.fixture(scope="session")
def large_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of samples/transformer24.py compiled with --train on CPU, once: its size is what the tests
    look at (pages, drawings in parts), so the hand-written checks are left out."""
    out = tmp_path_factory.mktemp("large") / "report"
    result = run_cli_process(
        "compile", SAMPLES / "transformer24.py", "--device", "cpu", "--train", "--no-handwritten", "--out", out
    )
    assert result.code == 0, result.stderr
    written = re.search(r"report written in ([\d.]+) s", result.stderr)
    assert written is not None, result.stderr
    print(f"\n24-layer transformer (forward + backward): report written in {written.group(1)} s")
    return out


def run_cli_process(*args: str | Path, cwd: Path | None = None, timeout: float = 600) -> CliResult:
    """Run ``python -m inductor_lens ARGS`` as a real process (exit codes, no tracebacks)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    completed = subprocess.run(
        [sys.executable, "-m", "inductor_lens", *[str(a) for a in args]],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
    )
    return CliResult(completed.returncode, completed.stdout, completed.stderr)


def assert_one_line_error(result: CliResult, *fragments: str) -> None:
    """A failure is one ``error:`` line naming the cause: no traceback, non-zero exit."""
    __tracebackhide__ = True
    assert result.code != 0, result
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
