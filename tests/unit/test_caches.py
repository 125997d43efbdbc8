"""`inductor-lens cache info|clear` on temporary cache folders: sizes, dry runs, refusals, symlinks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inductor_lens import caches
from inductor_lens.caches import contents

from ..conftest import assert_one_line_error


@pytest.fixture
def inductor_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small Inductor cache (180 bytes in 3 files) and an empty Triton cache, both private to the test."""
    root = tmp_path / "torchinductor_test"
    for relative, size in (
        ("fxgraph/ab/entry", 100),
        ("xy/kernel.py", 50),
        ("precompiled_headers/h.gch", 30),
    ):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(b"x" * size)
    (tmp_path / "triton").mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.chdir(tmp_path)
    return root


def test_info_sizes(run_cli, inductor_cache: Path) -> None:
    result = run_cli("cache", "info", "--json")
    assert result.code == 0, result.stderr
    found = {c["name"]: c for c in json.loads(result.stdout)}
    inductor = found["inductor"]
    assert (inductor["path"], inductor["source"]) == (str(inductor_cache), "TORCHINDUCTOR_CACHE_DIR")
    assert (inductor["bytes"], inductor["files"]) == (180, 3)
    assert {k: (v["bytes"], v["files"]) for k, v in inductor["parts"].items()} == {
        "fxgraph": (100, 1), "kernels": (50, 1), "precompiled_headers": (30, 1)}  # fmt: skip
    assert found["triton"]["exists"] and found["triton"]["bytes"] == 0
    assert not found["reports"]["exists"]
    text = run_cli("cache", "info").stdout
    assert "fxgraph" in text and "generated kernel code" in text and "180 B in 3 files" in text


def test_default_paths_follow_torch_and_triton(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_HOME", str(tmp_path))
    assert caches.triton_dir() == (tmp_path / ".triton" / "cache", "TRITON_HOME")
    path, source = caches.inductor_dir()
    assert source == "default" and path.name.startswith("torchinductor_")
    torch_utils = pytest.importorskip("torch._inductor.runtime.cache_dir_utils")
    assert str(path) == torch_utils.default_cache_dir()


def test_dry_run_deletes_nothing(run_cli, inductor_cache: Path) -> None:
    result = run_cli("cache", "clear", "--inductor", "--dry-run")
    assert result.code == 0, result.stderr
    assert "would delete 3 entries, 180 B" in result.stdout
    assert caches.usage(inductor_cache).files == 3


def test_clear_deletes_only_the_content(run_cli, inductor_cache: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("do not delete")
    (inductor_cache / "fxgraph" / "link").symlink_to(outside)  # a link inside the cache pointing out of it
    (inductor_cache / "xy" / "file-link").symlink_to(outside / "keep.txt")
    result = run_cli("cache", "clear", "--inductor", "--yes")
    assert result.code == 0, result.stderr
    assert "inductor: freed" in result.stdout
    assert inductor_cache.is_dir() and list(inductor_cache.iterdir()) == []
    assert (outside / "keep.txt").read_text() == "do not delete"


@pytest.mark.parametrize("case", ["root", "home", "project", "stranger", "cwd"])
def test_refuses_what_is_not_a_cache(
    run_cli, inductor_cache: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    target = {"root": Path("/"), "home": Path.home(), "cwd": Path.cwd()}.get(case, inductor_cache)
    if case == "project":
        (inductor_cache / "pyproject.toml").write_text("[project]\n")
    if case == "stranger":
        (inductor_cache / "thesis.tex").write_text("years of work")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(target))
    before = caches.usage(inductor_cache).files
    result = run_cli("cache", "clear", "--inductor", "--yes")
    assert result.code == 12
    assert_one_line_error(result, "refusing to clear it")
    assert caches.usage(inductor_cache).files == before


def test_clear_needs_a_choice_and_a_confirmation(run_cli, inductor_cache: Path) -> None:
    assert_one_line_error(run_cli("cache", "clear"), "choose what to clear")
    result = run_cli("cache", "clear", "--all")  # stdin is not a terminal under pytest
    assert_one_line_error(result, "add --yes")
    assert caches.usage(inductor_cache).files == 3


def test_vanishing_files_are_not_errors(tmp_path: Path) -> None:
    result = caches.ClearResult("inductor", tmp_path)
    contents._unlink(tmp_path / "gone", result)
    contents._rmdir(tmp_path / "gone-dir", result)
    contents._remove(tmp_path / "gone-tree", result)
    assert (result.removed, result.failed) == (0, [])
