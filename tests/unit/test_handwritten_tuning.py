"""The hand-written kernels' autotune cache (worker/handwritten/tuning.py), on CPU: Triton's real autotuner runs
under the interpreter with a counting fake for its benchmark, so a tuning, a memoised launch and a cache
hit can be told apart by how many times the benchmark ran."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from inductor_lens import caches
from inductor_lens.worker.handwritten import tuning, tuning_record, tuning_search, tuning_store
from inductor_lens.worker.handwritten.kernels import interpreter

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

    monkeypatch.setattr(tuning_search, "BENCHMARK", fake)
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
    assert tuning_store.shape_class({"M": 1000, "N": 1024, "K": 1025, "one": 1, "stride": 0}) == {
        "M": 1024, "N": 1024, "K": 2048, "one": 1, "stride": 0}  # fmt: skip
    assert tuning_store.shape_class({"HAS_BIAS": True, "ACTIVATION": "gelu", "eps": 1e-5}) == {
        "HAS_BIAS": True, "ACTIVATION": "gelu", "eps": 1e-5}  # fmt: skip


def test_nearby_shapes_share_a_key_and_dtype_or_device_do_not() -> None:
    kernel = _doubling_kernel()
    x = torch.empty(4)

    def key(n: int, tensor: Any = x) -> tuning_store.TuningKey:
        return kernel.tuning_key({"x_ptr": tensor, "y_ptr": tensor, "n": n})

    assert key(1000).file_name == key(600).file_name != key(1100).file_name
    assert key(1000).file_name != key(1000, torch.empty(4, dtype=torch.float16)).file_name
    assert key(1000).dtypes == "float32,float32" and key(1000).device == "cpu"
    assert key(1000).file_name.startswith("double_kernel-")
    assert caches.HANDWRITTEN_ENTRY.match(key(1000).file_name)
    other_device = tuning_store.TuningKey(**{**key(1000).__dict__, "device": "NVIDIA H100 80GB HBM3"})
    assert other_device.file_name != key(1000).file_name


def test_store_and_load_round_trip(cache_dir: Path) -> None:
    import triton

    key = _doubling_kernel().tuning_key({"x_ptr": torch.empty(1), "y_ptr": torch.empty(1), "n": 100})
    config = triton.Config({"BLOCK": 32}, num_warps=2, num_stages=3)
    tuning_store.store(key, cache_dir, config, 0.25, {"n": 100})
    (written,) = cache_dir.iterdir()
    data = json.loads(written.read_text())
    assert (data["kernel"], data["shape_class"], data["dtypes"], data["device"]) == (
        "double_kernel", {"n": 128}, "float32,float32", "cpu")  # fmt: skip
    assert data["triton"] == triton.__version__ and data["time_ms"] == 0.25 and data["tuned_on"] == {"n": 100}
    loaded = tuning_store.load(key, cache_dir)
    assert loaded == tuning_store.CachedConfig(tuning_store.config_fields(config), 0.25)
    assert tuning_store.config_text(config) == "BLOCK=32, num_warps=2, num_stages=3"


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
    assert tuning_store.load(_doubling_kernel().tuning_key({"x_ptr": torch.empty(1), "y_ptr": torch.empty(1), "n": 100}),
                       cache_dir) is not None  # fmt: skip


def test_tuned_once_then_memoised_then_read_from_the_cache(cache_dir: Path, benchmarked: list[float]) -> None:
    kernel = _doubling_kernel()
    before = dict(tuning_record.FIRST_USES)
    with tuning_record.recording() as first:
        _double(kernel, 100)
        _double(kernel, 100)
    assert len(benchmarked) == 2  # both configurations, once
    assert [(c.kernel, c.config, c.origin, c.tuned_ms) for c in first] == [
        ("double_kernel", "BLOCK=16, num_warps=4, num_stages=3", "tuned", 1.0)]  # fmt: skip
    with tuning_record.recording() as nearby:
        _double(kernel, 120)  # same shape class, same process: no tuning
    assert len(benchmarked) == 2 and [c.origin for c in nearby] == ["reused"]

    fresh = _doubling_kernel()  # another process, the same cache folder
    with tuning_record.recording() as later:
        _double(fresh, 110)
    assert len(benchmarked) == 2  # the autotuner never benchmarked: a cache hit
    assert [(c.config, c.origin, c.tuned_ms) for c in later] == [("BLOCK=16, num_warps=4, num_stages=3", "cache", 1.0)]
    assert tuning_record.FIRST_USES["tuned"] - before.get("tuned", 0) == 1
    assert tuning_record.FIRST_USES["cache"] - before.get("cache", 0) == 1

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


# -- the fast path: a launch key seen before launches the compiled kernel directly (no GPU: fakes) --


class FakeCompiled:
    """A CompiledKernel as JITFunction.run returns it: ``run`` is its launcher, and keeps every launch."""

    def __init__(self, specialisation: tuple[Any, ...], backend: str) -> None:
        self.specialisation = specialisation
        self.metadata = SimpleNamespace(target=SimpleNamespace(backend=backend))
        self.function, self.packed_metadata = "function", "packed metadata"
        self.launches: list[tuple[tuple[int, int, int], Any, tuple[Any, ...]]] = []

    def run(self, g0: int, g1: int, g2: int, stream: Any, function: Any, packed: Any, *rest: Any) -> None:
        assert (function, packed) == (self.function, self.packed_metadata)
        self.launches.append(((g0, g1, g2), stream, rest[3:]))  # after launch_metadata and the two hooks


class FakeJit:
    """A JITFunction: binds its arguments, specialises them with Triton's own native_specialize_impl and
    compiles one FakeCompiled per specialisation and options; upper-case parameters are constexprs."""

    def __init__(self, fn: Callable[..., Any], backend: str = "cuda", returns: bool = True) -> None:
        self.fn, self.backend, self.returns = fn, backend, returns
        signature = inspect.signature(fn).parameters.values()
        self.params = [
            SimpleNamespace(name=p.name, is_constexpr=p.name.isupper(), default=p.default,
                            has_default=p.default is not inspect.Parameter.empty)
            for p in signature
        ]  # fmt: skip
        self.arg_names = [p.name for p in self.params]
        self.pre_run_hooks: list[Callable[..., Any]] = []
        self.compiled: dict[Any, FakeCompiled] = {}
        self.runs = 0

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> FakeCompiled | None:
        self.runs += 1
        given = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        options = {k: v for k, v in kwargs.items() if k not in self.arg_names}
        bound = {p.name: given.get(p.name, p.default) for p in self.params}
        kernel = self.compiled.setdefault((triton_specialisation(self, bound), str(sorted(options.items()))),
                                          FakeCompiled(triton_specialisation(self, bound), self.backend))  # fmt: skip
        grid = grid(bound) if callable(grid) else grid
        kernel.run(*grid, *[1] * (3 - len(grid)), "jit's stream", kernel.function, kernel.packed_metadata,
                   None, None, None, *bound.values())  # fmt: skip
        return kernel if self.returns else None


def triton_specialisation(jit: FakeJit, bound: dict[str, Any]) -> tuple[Any, ...]:
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    return tuple(
        ("constexpr", bound[p.name]) if p.is_constexpr else native_specialize_impl(BaseBackend, bound[p.name], False, True, True)
        for p in jit.params
    )  # fmt: skip


def scale_kernel(x_ptr, y_ptr, n, stride, scale, BLOCK, EVEN, ACTIVATION="none"):  # type: ignore[no-untyped-def]
    """Never run: FakeJit only binds and specialises its arguments."""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> SimpleNamespace:
    """A TunedKernel over a FakeJit on device 0 of a fake driver; its tuner, tuning key and cache files
    counted (the tuner picks the first configuration and launches it)."""
    import triton

    calls: Counter[str] = Counter()
    jit = FakeJit(scale_kernel)
    configs = [triton.Config({"BLOCK": 16}, num_warps=4), triton.Config({"BLOCK": 32}, num_warps=2)]
    kernel = tuning.TunedKernel(jit, configs, key=["n"], heuristics={"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})

    def counted(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)

        return call

    def tune(grid: Any, args: Any, switches: Any, *_: Any) -> Any:
        best = configs[0]
        return tuning_record.Choice(best, "tuned", 1.0, tuning_store.config_text(best)), kernel.launch_config(best, grid, args, switches)

    monkeypatch.setattr(kernel, "_tune", counted("tune", tune))
    monkeypatch.setattr(kernel, "tuning_key", counted("tuning_key", kernel.tuning_key))
    monkeypatch.setattr(kernel, "launch_config", counted("launch_config", kernel.launch_config))
    for name in ("load", "store", "handwritten_dir", "note"):
        monkeypatch.setattr(tuning, name, counted(name, getattr(tuning, name)))
    runtime = tuning._Runtime(lambda: 0, lambda device: f"stream {device}", triton.knobs)
    monkeypatch.setattr(tuning, "_runtime", lambda: runtime)
    return SimpleNamespace(kernel=kernel, jit=jit, calls=calls)


def _scale(kernel: tuning.TunedKernel, x: Any, n: int = 64, stride: int = 16, **switches: Any) -> None:
    import triton

    kernel[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, torch.empty_like(x), n, stride, 0.5, **switches)


def _launches(jit: FakeJit) -> list[tuple[FakeCompiled, Any]]:
    return [(kernel, launch) for kernel in jit.compiled.values() for launch in kernel.launches]


def test_a_repeated_launch_skips_the_key_the_files_and_the_tuner_and_launches_the_compiled_kernel(
    fake: SimpleNamespace,
) -> None:
    x = torch.zeros(64)
    _scale(fake.kernel, x, ACTIVATION="relu")
    first = dict(fake.calls)
    assert first == {"tuning_key": 1, "handwritten_dir": 1, "load": 1, "tune": 1, "launch_config": 1, "store": 1, "note": 1}
    _scale(fake.kernel, x, ACTIVATION="relu")  # a full launch, which returns the compiled kernel to keep
    assert fake.jit.runs == 2 and dict(fake.calls) == {**first, "launch_config": 2}
    for _ in range(3):
        _scale(fake.kernel, x, ACTIVATION="relu")
    assert fake.jit.runs == 2 and dict(fake.calls) == {**first, "launch_config": 2}
    (compiled,) = fake.jit.compiled.values()
    by_jit, direct = compiled.launches[1], compiled.launches[2]
    assert direct[0] == by_jit[0] == (4, 1, 1) and direct[1] == "stream 0"
    assert direct[2][2:] == by_jit[2][2:] == (64, 16, 0.5, 16, True, "relu")  # every parameter, in order
    assert direct[2][0] is x


@pytest.mark.parametrize(
    "variant",
    [
        {"stride": 17},  # not divisible by 16
        {"stride": 1},  # Triton makes a 1 a constant
        {"stride": 2**31},  # an i64
        {"x": "misaligned"},  # a pointer not 16-byte aligned
        {"x": torch.float16},  # another dtype
        {"n": 40},  # the autotune key's value, and EVEN with it
        {"ACTIVATION": "gelu"},  # a constexpr
    ],
    ids=str,
)
def test_another_specialisation_is_never_served_by_the_wrong_compiled_kernel(
    fake: SimpleNamespace, variant: dict[str, Any]
) -> None:
    base = torch.zeros(80)
    other = dict(variant)
    if other.get("x") == "misaligned":
        other["x"] = base[1:65]
    elif "x" in other:
        other["x"] = torch.zeros(64, dtype=other["x"])
    for arguments in ({}, other, {}, other):
        for _ in range(3):
            _scale(fake.kernel, **{"x": base[:64], **arguments})
    assert len(fake.jit.compiled) == 2 and fake.jit.runs == 4  # each launch key: two full launches, four direct
    assert [stream for _, (_, stream, _) in _launches(fake.jit)].count("stream 0") == 8
    for compiled, (_, _, values) in _launches(fake.jit):
        bound = dict(zip(fake.jit.arg_names, values, strict=True))
        assert triton_specialisation(fake.jit, bound) == compiled.specialisation


def test_recording_lists_each_key_once_a_session(fake: SimpleNamespace) -> None:
    x = torch.zeros(64)
    with tuning_record.recording() as first:
        for _ in range(4):
            _scale(fake.kernel, x)
            _scale(fake.kernel, x, stride=17)  # another launch key, the same configuration
    assert [(c.kernel, c.config, c.origin) for c in first] == [("scale_kernel", "BLOCK=16, num_warps=4, num_stages=3", "tuned")]
    noted = fake.calls["note"]
    assert noted == 2  # the tuning, the other key's first launch (a memo hit): never on the fast path
    for _ in range(4):
        _scale(fake.kernel, x)  # outside any recording
    noted = fake.calls["note"]
    with tuning_record.recording() as second:
        for _ in range(4):
            _scale(fake.kernel, x)
    assert [c.origin for c in second] == ["reused"] and fake.calls["note"] == noted + 1


def test_a_configurations_own_fields_reach_the_heuristics_and_never_the_kernel(cache_dir: Path) -> None:
    """A field that names no parameter (the weight gradient's programs per SM) is the launcher's: the
    heuristics read it, and Triton never gets it as a compile option (one compile per value)."""
    import triton

    jit = FakeJit(scale_kernel)
    configs = [triton.Config({"BLOCK": 16, "waves": waves}, num_warps=4) for waves in (1, 2, 3)]
    kernel = tuning.TunedKernel(jit, configs, key=["n"], heuristics={"EVEN": lambda a: a["waves"] == 2})
    x = torch.zeros(64)
    for config in configs:
        kernel.launch_config(config, (1,), (x, torch.empty_like(x), 64, 16, 0.5), {})
    assert len(jit.compiled) == 2 and not any("waves" in options for _, options in jit.compiled)
    assert sorted(specialisation[6] for specialisation, _ in jit.compiled) == [("constexpr", False), ("constexpr", True)]


def test_the_launch_key_is_never_coarser_than_tritons_specialisation() -> None:
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    buffer = torch.zeros(64)
    values = [0, 1, 2, 16, 17, -16, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63, 2**64 - 1, 0.5, 1.0,
              True, False, None, buffer, buffer[1:], buffer[4:], buffer.half(), buffer.to(torch.int64)]  # fmt: skip
    for a in values:
        for b in values:
            if tuning._specialisation(a) == tuning._specialisation(b):
                assert native_specialize_impl(BaseBackend, a, False, True, True) == native_specialize_impl(
                    BaseBackend, b, False, True, True), (a, b)  # fmt: skip


@pytest.mark.parametrize("reason", ["no driver", "hip", "hook", "pre-run hook", "not compiled", "switched off", "unkeyed"])
def test_the_full_launch_is_taken_where_the_direct_one_is_unavailable(
    fake: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    import triton

    x = torch.zeros(64)
    if reason in ("hip", "not compiled"):  # what a full launch returns cannot be launched directly
        monkeypatch.setattr(fake.jit, "backend" if reason == "hip" else "returns", "hip" if reason == "hip" else False)
    for _ in range(2):
        _scale(fake.kernel, x)  # the second keeps the compiled kernel where it can
    if reason == "no driver":
        monkeypatch.setattr(tuning, "_runtime", lambda: None)
    elif reason == "hook":  # a profiler's: JITFunction.run passes it the launch's metadata
        monkeypatch.setattr(triton.knobs.runtime.launch_enter_hook, "calls", [lambda metadata: None])
    elif reason == "pre-run hook":
        fake.jit.pre_run_hooks.append(lambda *args, **kwargs: None)
    elif reason == "switched off":
        monkeypatch.setattr(tuning, "FAST_LAUNCH", False)
    elif reason == "unkeyed":  # an argument of a type the launch key does not describe

        def refuse(value: Any) -> Any:
            raise tuning._Unkeyed(type(value).__name__)

        monkeypatch.setattr(tuning, "_specialisation", refuse)
    for _ in range(2):
        _scale(fake.kernel, x)
    assert fake.jit.runs == 4 and fake.calls["tune"] == 1
    assert all(stream == "jit's stream" for _, (_, stream, _) in _launches(fake.jit))


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[list[dict[str, Any]]], None]]:
    """A shipped table for "sm_90" (the CPU device stands for an H100 here), written from its entries."""
    monkeypatch.setattr(tuning_store, "TABLE_DIR", tmp_path / "tuned")
    monkeypatch.setattr(tuning_store, "architecture", lambda device: "sm_90")
    tuning_store.shipped_table.cache_clear()

    def write(entries: list[dict[str, Any]]) -> None:
        (tmp_path / "tuned").mkdir(exist_ok=True)
        (tmp_path / "tuned" / "sm_90.json").write_text(json.dumps({"format": tuning_store.FORMAT, "entries": entries}))
        tuning_store.shipped_table.cache_clear()

    yield write
    tuning_store.shipped_table.cache_clear()


def _entry(n_class: int, block: int, warps: int) -> dict[str, Any]:
    config = {"kwargs": {"BLOCK": block}, "num_warps": warps, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
    return {"kernel": "double_kernel", "shape_class": {"n": n_class}, "dtypes": "float32,float32", "config": config,
            "time_ms": 0.5, "device": "NVIDIA H100 80GB HBM3"}  # fmt: skip


def test_a_shape_in_the_shipped_table_is_never_searched(
    cache_dir: Path, benchmarked: list[float], table: Callable[[list[dict[str, Any]]], None]
) -> None:
    table([_entry(128, 32, 2)])
    with tuning_record.recording() as used:
        _double(_doubling_kernel(), 100)
    assert benchmarked == []
    assert [(c.config, c.origin, c.tuned_ms) for c in used] == [("BLOCK=32, num_warps=2, num_stages=3", "table", 0.5)]
    assert not cache_dir.exists() or not list(cache_dir.iterdir())  # the table is read each time, not copied


def test_a_table_entry_the_kernel_no_longer_lists_is_searched_and_a_damaged_table_ignored(
    cache_dir: Path, benchmarked: list[float], table: Callable[[list[dict[str, Any]]], None]
) -> None:
    table([_entry(128, 64, 8)])  # BLOCK=64 is not in the kernel's list
    with tuning_record.recording() as used:
        _double(_doubling_kernel(), 100)
    assert len(benchmarked) == 2 and [c.origin for c in used] == ["tuned"]
    (tuning_store.TABLE_DIR / "sm_90.json").write_text("{not json")
    tuning_store.shipped_table.cache_clear()
    assert tuning_store.shipped_table("sm_90") == {}


def test_a_search_starts_from_the_nearest_shape_class_of_the_table(
    cache_dir: Path, benchmarked: list[float], table: Callable[[list[dict[str, Any]]], None]
) -> None:
    table([_entry(4096, 32, 2), _entry(128, 16, 4)])  # 1024 is two powers of two from 4096, three from 128
    with tuning_record.recording() as used:
        _double(_doubling_kernel(), 1000)  # class 1024: not in the table
    # the fake benchmark makes the first configuration timed the fastest: the table's neighbour went first
    assert [c.config for c in used] == ["BLOCK=32, num_warps=2, num_stages=3"] and len(benchmarked) == 2
    assert used[0].note.startswith("2 of 2 configurations timed; searched ")


def test_a_search_past_its_budget_says_it_was_cut_short(
    cache_dir: Path, benchmarked: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuning_search, "TUNE_BUDGET_S", 1e-9)
    with tuning_record.recording() as used:
        _double(_doubling_kernel(), 100)
    assert len(benchmarked) == 1  # at least one configuration is always timed
    assert used[0].origin == "tuned"
    assert used[0].note.startswith("cut short: 1 of 2 configurations timed within the 1e-09 s budget; searched ")


def test_a_configuration_that_does_not_fit_is_skipped_and_one_that_fails_otherwise_is_raised(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class OutOfResources(Exception):
        pass

    calls: list[int] = []

    def fussy(kernel_call: Callable[[], Any], quantiles: Any = None) -> list[float]:
        calls.append(1)
        if len(calls) == 1:
            raise OutOfResources("shared memory")
        return [3.0, 3.0, 3.0]

    monkeypatch.setattr(tuning_search, "BENCHMARK", fussy)
    with tuning_record.recording() as used:
        _double(_doubling_kernel(), 100)
    assert [c.config for c in used] == ["BLOCK=32, num_warps=2, num_stages=3"]

    def broken(kernel_call: Callable[[], Any], quantiles: Any = None) -> list[float]:
        raise ValueError("a bug")

    monkeypatch.setattr(tuning_search, "BENCHMARK", broken)
    with pytest.raises(ValueError, match="a bug"):
        _double(_doubling_kernel(), 5000)


def test_every_entry_of_the_shipped_tables_names_a_configuration_its_kernel_still_lists() -> None:
    """A table written before a kernel's list changed would be ignored entry by entry (searched instead):
    this says so when it happens, so the table is made again (benchmarks/tuning_table.py)."""
    from inductor_lens.handwritten.catalog import EQUIVALENTS
    from inductor_lens.worker.handwritten.kernels import load

    tuned: dict[str, tuning.TunedKernel] = {}
    for module in {e.module for e in EQUIVALENTS}:
        load(module, interpret=True)
        found = vars(__import__(f"inductor_lens.worker.handwritten.kernels.{module}", fromlist=["_"]))
        tuned.update({k.name: k for k in found.values() if isinstance(k, tuning.TunedKernel)})
    tables = sorted(tuning_store.TABLE_DIR.glob("sm_*.json"))
    assert tables, "no shipped table"
    for path in tables:
        tuning_store.shipped_table.cache_clear()
        entries = tuning_store.shipped_table(path.stem)
        assert entries, f"{path.name}: no readable entry"
        stale = [(e.kernel, e.shape_class) for e in entries.values()
                 if e.kernel not in tuned or tuned[e.kernel].known(e.config) is None]  # fmt: skip
        assert not stale, f"{path.name}: {len(stale)} of {len(entries)} entries name no listed configuration: {stale[:3]}"
    tuning_store.shipped_table.cache_clear()


def test_the_matmul_search_keeps_tiles_that_fit_and_pay_off() -> None:
    from inductor_lens.worker.handwritten.kernels import load

    load("matmul", interpret=True)
    from inductor_lens.worker.handwritten.kernels import matmul

    def kept(m: int, n: int, k: int, dtype: Any) -> set[tuple[int, int, int, int]]:
        a = torch.empty(1, 1, dtype=dtype)
        configs = matmul._prune(matmul.AUTOTUNE_CONFIGS, {"a_ptr": a, "M": m, "N": n, "K": k})
        return {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_stages) for c in configs}

    head = kept(64, 1000, 384, torch.float32)
    assert max(m for m, *_ in head) == 64 and (16, 32, 64, 3) in head and len(head) < len(matmul.AUTOTUNE_CONFIGS)
    # 128x256x64 in three stages needs 288 KiB in float32 (not on any GPU), 144 KiB in bfloat16
    assert (128, 256, 64, 3) not in kept(4096, 2304, 768, torch.float32)
    assert (128, 256, 64, 3) in kept(4096, 2304, 768, torch.bfloat16)


def test_a_search_starts_from_inductors_own_choice_listed_or_not(
    cache_dir: Path, benchmarked: list[float], table: Callable[[list[dict[str, Any]]], None]
) -> None:
    """The configuration Inductor's autotuner chose for the kernel a check stands in for is timed first, before
    the table's nearest shape class; one the list lacks is added; the note says how it did."""
    table([_entry(4096, 16, 4)])  # the nearest class's winner would otherwise go first
    with tuning_record.recording() as used, tuning_search.starting_from({"BLOCK": 32, "num_warps": 2, "num_stages": 3}):
        _double(_doubling_kernel(), 1000)
    assert [c.config for c in used] == ["BLOCK=32, num_warps=2, num_stages=3"] and len(benchmarked) == 2
    assert used[0].note.endswith(
        "; started from Inductor's own choice for this kernel (BLOCK=32, num_warps=2, num_stages=3): it won")
    with tuning_record.recording() as used, tuning_search.starting_from({"BLOCK": 64, "num_warps": 8, "GROUP_M": 8}):
        _double(_doubling_kernel(), 2000)  # another shape class: searched again
    assert [c.config for c in used] == ["BLOCK=64, num_warps=8, num_stages=3"] and len(benchmarked) == 5
    assert used[0].note.endswith(
        "; started from Inductor's own choice for this kernel (BLOCK=64, num_warps=8, num_stages=3): it won")
    with tuning_record.recording() as used, tuning_search.starting_from({"BLOCK_M": 128, "num_warps": 8}):
        _double(_doubling_kernel(), 300)  # names none of the kernel's meta-parameters: the list's own order
    assert len(benchmarked) == 7 and "Inductor" not in used[0].note
    assert tuning_search._start == {}  # the block's choice ends with it
