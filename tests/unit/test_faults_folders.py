"""Faults around a run lose nothing the user had (issue 36, part B): reports written beside the old one and
swapped in, one run per folder, default folders that tell runs apart, caches cleared only when no run uses
them, damaged cache entries rebuilt."""

from __future__ import annotations

from pathlib import Path

import pytest

from inductor_lens.handwritten import tuning
from inductor_lens.report import highlight, render_cache


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
