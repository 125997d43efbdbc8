"""Faults around a run lose nothing the user had (issue 36, part B): reports written beside the old one and
swapped in, one run per folder, default folders that tell runs apart, caches cleared only when no run uses
them, damaged cache entries rebuilt."""

from __future__ import annotations

from pathlib import Path

from inductor_lens.handwritten import tuning


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
