"""Faults around a run lose nothing the user had (issue 36, part B): reports written beside the old one and
swapped in, one run per folder, default folders that tell runs apart, caches cleared only when no run uses
them, damaged cache entries rebuilt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inductor_lens import caches
from inductor_lens.errors import InUseError
from inductor_lens.handwritten import tuning
from inductor_lens.report import highlight, render_cache

from ..conftest import assert_one_line_error


def _tuning_key() -> tuning.TuningKey:
    return tuning.TuningKey(kernel="matmul", version="v1", shape_class={"M": 1024}, dtypes="float32",
                            device="NVIDIA H100 80GB HBM3", triton="3.6.0")  # fmt: skip


def test_deeply_nested_autotune_entry_reads_as_damaged(tmp_path: Path) -> None:
    key = _tuning_key()
    nested = "[" * 100_000 + "]" * 100_000
    (tmp_path / key.file_name).write_text(nested, encoding="utf-8")
    (tmp_path / "matmul-0123456789abcdef0123456789abcdef.json").write_text(nested, encoding="utf-8")
    assert tuning.load(key, tmp_path) is None
    assert tuning.nearest_config(key, tmp_path) is None


def test_damaged_render_cache_entries_are_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path))
    code = "def f(x):\n    return x + 1\r\n" * 40
    whole = str(highlight.highlight(code, "python", "k"))
    [entry] = (tmp_path / "render").iterdir()
    assert render_cache.read(entry.stem, "html") == whole
    for damage in (entry.read_bytes()[: entry.stat().st_size // 2], b"", whole.encode()):  # truncated, emptied, old
        entry.write_bytes(damage)
        assert render_cache.read(entry.stem, "html") is None
        assert not entry.exists()  # removed, so the next render writes it whole again
        assert str(highlight.highlight(code, "python", "k")) == whole
        assert render_cache.read(entry.stem, "html") == whole


@pytest.fixture
def private_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An Inductor cache with one header file, and a lens cache (where runs register), private to the test."""
    root = tmp_path / "torchinductor_test"
    (root / "precompiled_headers").mkdir(parents=True)
    (root / "precompiled_headers" / "h.gch").write_bytes(b"x" * 30)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path / "lens"))
    monkeypatch.chdir(tmp_path)
    return root


def test_cache_clear_refuses_while_a_run_uses_the_caches(run_cli, private_caches: Path) -> None:
    run = caches.register_run("compile samples/mlp.py")
    assert run is not None
    try:
        result = run_cli("cache", "clear", "--all", "--yes")
        assert result.code == InUseError.exit_code == 14
        assert_one_line_error(result, f"inductor-lens pid {os.getpid()} (compile samples/mlp.py, started ",
                              "nothing was removed")  # fmt: skip
        assert (private_caches / "precompiled_headers" / "h.gch").is_file()
        assert run_cli("cache", "clear", "--inductor", "--dry-run").code == 0  # looking is allowed
    finally:
        run.release()
    result = run_cli("cache", "clear", "--inductor", "--yes")  # the run ended: cleared
    assert result.code == 0, result.stderr
    assert not (private_caches / "precompiled_headers").exists()


def test_a_dead_runs_registration_does_not_block_clear(run_cli, private_caches: Path) -> None:
    runs = private_caches.parent / "lens" / caches.RUNS_FOLDER
    runs.mkdir(parents=True)
    (runs / "999999.lock").write_text('{"pid": 999999, "host": "h", "command": "compile x.py", "started": 0}')
    result = run_cli("cache", "clear", "--inductor", "--yes")
    assert result.code == 0, result.stderr
    assert list(runs.iterdir()) == []  # no process holds it: removed


def test_cache_clear_says_when_it_removed_nothing(run_cli, private_caches: Path) -> None:
    assert run_cli("cache", "clear", "--inductor", "--yes").code == 0
    result = run_cli("cache", "clear", "--inductor", "--triton", "--yes")
    assert result.code == 0, result.stderr
    assert f"inductor: nothing to remove in {private_caches}\n" in result.stdout
    assert "triton: nothing to remove in " in result.stdout and "(not there)" in result.stdout


def test_cache_clear_of_a_read_only_cache_fails_in_one_line(
    run_cli, private_caches: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = private_caches / "precompiled_headers"
    unlink = Path.unlink

    def read_only(path: Path, missing_ok: bool = False) -> None:  # what a read-only folder does, even to root
        if headers in path.parents:
            raise PermissionError(13, "Permission denied", str(path))
        unlink(path, missing_ok)

    monkeypatch.setattr(Path, "unlink", read_only)
    result = run_cli("cache", "clear", "--inductor", "--yes")
    assert result.code == caches.CacheError.exit_code
    assert_one_line_error(result, f"inductor: 2 entries not removed from {private_caches}", "Permission denied",
                          "permissions")  # fmt: skip
    assert (headers / "h.gch").is_file()
