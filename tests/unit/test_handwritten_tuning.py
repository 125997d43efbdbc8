"""The hand-written kernels' autotune cache (handwritten/tuning.py), on CPU: Triton's real autotuner runs
under the interpreter with a counting fake for its benchmark, so a tuning, a memoised launch and a cache
hit can be told apart by how many times the benchmark ran."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inductor_lens import caches
from inductor_lens.handwritten import tuning
from inductor_lens.handwritten.kernels import interpreter

pytest.importorskip("triton")
torch = pytest.importorskip("torch")


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path / "lens-cache"))
    return tmp_path / "lens-cache" / "handwritten-autotune"


@pytest.fixture
def benchmarked(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each benchmarked configuration's fake median: the smaller BLOCK wins (measured 1.0 ms, then 2.0)."""
    timings: list[float] = []

    def fake(kernel_call: Callable[[], Any], quantiles: Any = None) -> list[float]:
        kernel_call()
        timings.append(float(len(timings) + 1))
        return [timings[-1], timings[-1], timings[-1]]

    monkeypatch.setattr(tuning, "BENCHMARK", fake)
    return timings


def _doubling_kernel() -> tuning.TunedKernel:
    """A fresh TunedKernel (as a new process has) over a tiny kernel: y = 2x, in blocks."""
    import triton
    import triton.language as tl

    with interpreter(True):

        @triton.jit
        def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)

    configs = [triton.Config({"BLOCK": 16}, num_warps=4), triton.Config({"BLOCK": 32}, num_warps=2)]
    return tuning.TunedKernel(double_kernel, configs, key=["n"])


def _double(kernel: tuning.TunedKernel, n: int, dtype: Any = None) -> None:
    import triton

    x = torch.arange(n, dtype=dtype or torch.float32)
    y = torch.empty_like(x)
    with interpreter(True):
        kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    assert torch.equal(y, 2 * x)


def test_shape_class_rounds_sizes_up_to_powers_of_two() -> None:
    assert tuning.shape_class({"M": 1000, "N": 1024, "K": 1025, "one": 1, "stride": 0}) == {
        "M": 1024, "N": 1024, "K": 2048, "one": 1, "stride": 0}  # fmt: skip
    assert tuning.shape_class({"HAS_BIAS": True, "ACTIVATION": "gelu", "eps": 1e-5}) == {
        "HAS_BIAS": True, "ACTIVATION": "gelu", "eps": 1e-5}  # fmt: skip


def test_nearby_shapes_share_a_key_and_dtype_or_device_do_not() -> None:
    kernel = _doubling_kernel()
    x = torch.empty(4)

    def key(n: int, tensor: Any = x) -> tuning.TuningKey:
        return kernel.tuning_key({"x_ptr": tensor, "y_ptr": tensor, "n": n})

    assert key(1000).file_name == key(600).file_name != key(1100).file_name
    assert key(1000).file_name != key(1000, torch.empty(4, dtype=torch.float16)).file_name
    assert key(1000).dtypes == "float32,float32" and key(1000).device == "cpu"
    assert key(1000).file_name.startswith("double_kernel-")
    assert caches.HANDWRITTEN_ENTRY.match(key(1000).file_name)
    other_device = tuning.TuningKey(**{**key(1000).__dict__, "device": "NVIDIA H100 80GB HBM3"})
    assert other_device.file_name != key(1000).file_name


def test_store_and_load_round_trip(cache_dir: Path) -> None:
    import triton

    key = _doubling_kernel().tuning_key({"x_ptr": torch.empty(1), "y_ptr": torch.empty(1), "n": 100})
    config = triton.Config({"BLOCK": 32}, num_warps=2, num_stages=3)
    tuning.store(key, cache_dir, config, 0.25, {"n": 100})
    (written,) = cache_dir.iterdir()
    data = json.loads(written.read_text())
    assert (data["kernel"], data["shape_class"], data["dtypes"], data["device"]) == (
        "double_kernel", {"n": 128}, "float32,float32", "cpu")  # fmt: skip
    assert data["triton"] == triton.__version__ and data["time_ms"] == 0.25 and data["tuned_on"] == {"n": 100}
    loaded = tuning.load(key, cache_dir)
    assert loaded == tuning.CachedConfig(tuning.config_fields(config), 0.25)
    assert tuning.config_text(config) == "BLOCK=32, num_warps=2, num_stages=3"


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # cut off mid-write
        lambda text: "[1, 2, 3]",
        lambda text: text.replace('"triton": "', '"triton": "0.0-'),  # written by another Triton
        lambda text: text.replace('"format": 1', '"format": 99'),
        lambda text: text.replace('"kwargs": {', '"kwargs": {"UNKNOWN": 1, '),  # a configuration not in the list
    ],
)
def test_a_corrupt_or_foreign_file_is_ignored_and_tuned_afresh(
    cache_dir: Path, benchmarked: list[float], damage: Callable[[str], str]
) -> None:
    _double(_doubling_kernel(), 100)
    (entry,) = cache_dir.iterdir()
    entry.write_text(damage(entry.read_text()))
    benchmarked.clear()
    _double(_doubling_kernel(), 100)  # a new process: tunes again, no crash
    assert len(benchmarked) == 2
    assert tuning.load(_doubling_kernel().tuning_key({"x_ptr": torch.empty(1), "y_ptr": torch.empty(1), "n": 100}),
                       cache_dir) is not None  # fmt: skip


def test_tuned_once_then_memoised_then_read_from_the_cache(cache_dir: Path, benchmarked: list[float]) -> None:
    kernel = _doubling_kernel()
    before = dict(tuning.FIRST_USES)
    with tuning.recording() as first:
        _double(kernel, 100)
        _double(kernel, 100)
    assert len(benchmarked) == 2  # both configurations, once
    assert [(c.kernel, c.config, c.origin, c.tuned_ms) for c in first] == [
        ("double_kernel", "BLOCK=16, num_warps=4, num_stages=3", "tuned", 1.0)]  # fmt: skip
    with tuning.recording() as nearby:
        _double(kernel, 120)  # same shape class, same process: no tuning
    assert len(benchmarked) == 2 and [c.origin for c in nearby] == ["reused"]

    fresh = _doubling_kernel()  # another process, the same cache folder
    with tuning.recording() as later:
        _double(fresh, 110)
    assert len(benchmarked) == 2  # the autotuner never benchmarked: a cache hit
    assert [(c.config, c.origin, c.tuned_ms) for c in later] == [("BLOCK=16, num_warps=4, num_stages=3", "cache", 1.0)]
    assert tuning.FIRST_USES["tuned"] - before.get("tuned", 0) == 1
    assert tuning.FIRST_USES["cache"] - before.get("cache", 0) == 1

    _double(fresh, 1000)  # another shape class: tuned
    assert len(benchmarked) == 4 and len(list(cache_dir.iterdir())) == 2


def test_an_unwritable_cache_costs_nothing_but_the_next_tuning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, benchmarked: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(blocker))
    _double(_doubling_kernel(), 100)
    assert len(benchmarked) == 2 and "hand-written autotune cache: not written" in capsys.readouterr().err


def test_the_cache_command_lists_and_clears_the_tuned_configs(run_cli, cache_dir: Path, benchmarked: list[float],
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    _double(_doubling_kernel(), 100)
    _double(_doubling_kernel(), 1000)
    result = run_cli("cache", "info", "--json")
    assert result.code == 0, result.stderr
    found = {c["name"]: c for c in json.loads(result.stdout)}["handwritten"]
    assert (found["path"], found["source"], found["files"]) == (str(cache_dir), "INDUCTOR_LENS_CACHE_DIR", 2)
    assert list(found["parts"]) == ["double_kernel"] and found["parts"]["double_kernel"]["files"] == 2
    text = run_cli("cache", "info").stdout
    assert "tuned configurations of the hand-written double_kernel" in text

    assert "handwritten: would delete 2 entries" in run_cli("cache", "clear", "--handwritten", "--dry-run").stdout
    result = run_cli("cache", "clear", "--handwritten", "--yes")
    assert result.code == 0, result.stderr
    assert "handwritten: freed" in result.stdout and list(cache_dir.iterdir()) == []

    (cache_dir / "notes.txt").write_text("mine")  # not something the cache writes: refused
    result = run_cli("cache", "clear", "--handwritten", "--yes")
    assert result.code == 12 and (cache_dir / "notes.txt").exists()


def test_the_default_folder_is_under_the_users_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INDUCTOR_LENS_CACHE_DIR", raising=False)
    path, source = caches.handwritten_dir()
    assert source == "default" and path == Path.home() / ".cache" / "inductor-lens" / "handwritten-autotune"
