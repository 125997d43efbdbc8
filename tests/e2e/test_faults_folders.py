"""End to end on CPU (samples/mlp.py): faults around a run lose nothing the user had (issue 36, part B). One
compile runs in a real process while a second into the same --out and a `cache clear` are refused; then runs
that fail before the model runs leave its report as it was. About 20-40 s on 2 cores."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inductor_lens.errors import InUseError
from inductor_lens.report import LENS_JSON, folders

from ..conftest import SAMPLES, assert_one_line_error

MLP = SAMPLES / "mlp.py"


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time: what "untouched" means."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def test_one_run_per_folder_and_failed_reruns_keep_the_report(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "report"
    headers = tmp_path / "torchinductor_test" / "precompiled_headers"
    headers.mkdir(parents=True)
    (headers / "h.gch").write_bytes(b"in use")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    first = subprocess.Popen(
        [sys.executable, "-m", "inductor_lens", "compile", str(MLP), "--device", "cpu", "--no-bench",
         "--no-handwritten", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (out / folders.OUT_LOCK).exists():
            assert first.poll() is None and time.monotonic() < deadline, "the first compile never took its folder"
            time.sleep(0.02)
        second = run_cli("compile", MLP, "--device", "cpu", "--out", out)
        assert second.code == InUseError.exit_code
        assert_one_line_error(second, f"{out} is in use by inductor-lens pid {first.pid} (compile ", "mlp.py, started ",
                              "wait for it or pass another --out")  # fmt: skip
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(headers.parent))  # never the user's own caches
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
        cleared = run_cli("cache", "clear", "--inductor", "--yes")
        assert cleared.code == InUseError.exit_code
        assert_one_line_error(cleared, f"inductor-lens pid {first.pid} (compile ", "nothing was removed")
        assert (headers / "h.gch").is_file()
    finally:
        _, errors = first.communicate(timeout=600)
    assert first.returncode == 0, errors
    assert not (out / folders.OUT_LOCK).exists()
    before = _listing(out)
    assert LENS_JSON in before and "capture/spec.json" in before

    no_model = tmp_path / "no_model.py"
    no_model.write_text("import torch\n")
    for model, device, code in ((MLP, "cuda", 2), (no_model, "cpu", 3)):  # no CUDA here; a file without get_model
        result = run_cli("compile", model, "--no-bench", "--no-handwritten", "--device", device, "--out", out)
        assert result.code == code, result
        assert_one_line_error(result, f"{out} keeps its earlier report")
        assert _listing(out) == before  # the report, its lens.json and its capture as they were
