"""``--threads N`` (compile, compare, run): the CPU threads the model process compiles and times with, carried in
the spec to the model process, which sets them before anything compiles (``worker/measure.use_threads``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inductor_lens import api
from inductor_lens.errors import UsageError
from inductor_lens.options import CompileSpec, ScriptSpec
from inductor_lens.worker.measure import use_threads

pytestmark = pytest.mark.unit


class _Stop(Exception):
    """Raised by the stand-in for the capture, once it has the spec (the CLI reports it as an internal error)."""


def _capture_spec(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    seen: list[Any] = []

    def stop(spec: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(spec)
        raise _Stop

    monkeypatch.setattr(api, name, stop)
    return seen


def test_compile_passes_threads(run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("def get_model(): ...\ndef get_inputs(): ...\n", encoding="utf-8")
    seen = _capture_spec(monkeypatch, "compile_model")
    assert "_Stop" in run_cli("compile", model, "--device", "cpu", "--threads", "1", "--out", tmp_path / "o").stderr
    assert seen[0].threads == 1
    assert "_Stop" in run_cli("compile", model, "--device", "cpu", "--out", tmp_path / "o").stderr
    assert seen[1].threads is None


def test_run_passes_threads(run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    seen = _capture_spec(monkeypatch, "run_script")
    assert "_Stop" in run_cli("run", "--threads", "2", "--out", tmp_path / "out", "--", "python", "train.py").stderr
    assert seen[0].threads == 2


def test_bad_thread_counts(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("", encoding="utf-8")
    result = run_cli("compile", model, "--threads", "0")
    assert result.code != 0 and "--threads" in result.stderr
    with pytest.raises(UsageError):
        CompileSpec(model_path=model, threads=0)
    with pytest.raises(UsageError):
        ScriptSpec(argv=("x.py",), cwd=tmp_path, model_path=tmp_path / "x.py", threads=-1)


def test_spec_carries_threads(tmp_path: Path) -> None:
    spec = CompileSpec(model_path=tmp_path / "m.py", threads=3)
    assert CompileSpec.from_json(spec.to_json()).threads == 3
    script = ScriptSpec(argv=("x.py",), cwd=tmp_path, model_path=tmp_path / "x.py", threads=2)
    assert ScriptSpec.from_json(script.to_json()).threads == 2
    # a spec.json written before --threads existed
    older = spec.to_json().replace(', "threads": 3', "")
    assert '"threads"' not in older and CompileSpec.from_json(older).threads is None


def test_use_threads_sets_torch_and_openmp(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        use_threads(1)
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    finally:
        torch.set_num_threads(before)
    use_threads(None)  # torch's default: nothing set
    assert torch.get_num_threads() == before


def test_real_capture_ran_with_its_threads(unpacked: Callable[[str], Path]) -> None:
    """``run --threads 1`` on CPU (cpu-torch2.13-run-sgd-train): the spec carried 1 to the script's process, and
    Inductor built its C++ kernels for one thread (no OpenMP parallel region), where a capture with torch's default
    threads on the same 2-CPU machine (cpu-torch2.13-repeated-layers-train) has them."""
    root = unpacked("cpu-torch2.13-run-sgd-train") / "capture"
    assert ScriptSpec.from_json((root / "spec.json").read_text(encoding="utf-8")).threads == 1

    def parallel_regions(folder: Path) -> int:
        return sum(p.read_text(encoding="utf-8").count("#pragma omp parallel") for p in folder.rglob("output_code.py"))

    assert list(root.rglob("output_code.py"))
    assert parallel_regions(root) == 0
    assert parallel_regions(unpacked("cpu-torch2.13-repeated-layers-train") / "capture") > 0
