"""Stage 4 of the pipeline (bench), in the model process: time the compiled model where it lives.

After the model has been compiled and checked, ``benchmark.measure(...)`` times it on the device it ran on and
returns a ``files.BenchData`` (the parent turns it into records, see ``bench/__init__.py``):

- ceilings (GPU): the device's real bandwidth (a large device-to-device copy) and compute (a large
  matmul in the model's dtype), measured here, once per run;
- end to end: eager and compiled step latency (median and spread) and peak memory;
- in context: one profiled run of several steps; every kernel the GPU ran (or, on CPU, every
  kernel's profiler range) is tied to the launch of the compiled graph that issued it;
- in isolation (GPU): each Triton kernel the step launched, replayed alone on a copy of the
  arguments of its real launch (same shapes, strides, dtypes and values);
- under CUDA graphs (GPU): the compiled graphs' own code profiled, timed and isolated again without
  them (``graph_free.py``), since a graph replay hides its launches.

GPU timings use ``triton.testing.do_bench`` (CUDA events; it clears the L2 cache before every
repetition, so inputs do not sit in cache). Only torch, triton and the standard library are used,
besides the declarations of ``files.py``; the hand-written kernels' check process and ``handwritten
bench`` time with the same functions.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import torch
import torch.distributed as dist

from ..exchange.files import (
    COLLECTIVE_SIZES_TRACE_FILE,
    STEP_MARKS,
    CeilingsData,
    EndToEndData,
    IsolatedKernel,
    ProfileData,
)
from ..exchange.shared import kernel_fingerprint, quantile
from ..records.codec import int_or_none
from ..records.timing import Timing
from .compat import caching_autotuner, triton_driver

WARMUP_MS = 25
REP_MS = 100
# do_bench's rep is a time budget: 100 ms is a thousand samples of a short kernel, where a median is settled
# long before (benchmarks/sample_cap_check.py: medians within the full budget's own spread, on an H100). So
# the budget is cut to the wall time of about this many calls (host overhead included, so the GPU-timed
# samples come to 130-310); kernels longer than about REP_MS / MAX_SAMPLES keep the full 100 ms.
MAX_SAMPLES = 100
# do_bench_cudagraph replays a graph of this many ms of calls ten times: each replay is one sample, a mean over
# hundreds of calls of a short kernel, so 20 ms settles it; at 100 ms, a second of replays per kernel was most of
# the hand-written stage's time on an H100 (benchmarks/results/2026-11-27-h100-first-report.md).
GRAPH_REP_MS = 20
# A do_bench with a budget of 1 ms runs the call about this many times (1 first call, 5 to estimate, 1 warm-up, 1 timed).
_PROBE_CALLS = 8
# One rank of several times a fixed count of calls (gpu_step_time), after this many.
RANKED_WARMUP_CALLS = 5
PROFILED_STEPS = 20
CPU_REPEATS = 20
COPY_BYTES = 1 << 31  # 2 GiB, far beyond any L2
MATMUL_SIZE = 8192


def stat(samples_ms: list[float], method: str) -> Timing:
    return Timing(
        median_ms=statistics.median(samples_ms),
        p10_ms=quantile(samples_ms, 0.1),
        p90_ms=quantile(samples_ms, 0.9),
        samples=len(samples_ms),
        method=method,
    )


def gpu_time(fn: Callable[[], Any], *, max_samples: int | None = MAX_SAMPLES) -> Timing:
    from triton.testing import do_bench

    rep = float(REP_MS)
    if max_samples is not None:
        # a short probe gives the wall time of one repetition (L2 clear, the call, host overhead)
        started = time.perf_counter()
        do_bench(fn, warmup=1, rep=1, return_mode="median")
        per_call_ms = (time.perf_counter() - started) * 1e3 / _PROBE_CALLS
        rep = min(rep, max(1.0, max_samples * per_call_ms))
    samples = do_bench(fn, warmup=WARMUP_MS, rep=rep, return_mode="all")
    budget = f"{min(rep, REP_MS):.0f} ms of repetitions"
    if max_samples is not None:
        budget += f" (the wall time of about {max_samples} calls)"
    return stat(
        [float(s) for s in samples],
        f"triton.testing.do_bench, warm-up {WARMUP_MS} ms, {budget}, L2 cleared before each",
    )


def gpu_step_time(fn: Callable[[], Any]) -> Timing:
    """A model step on the GPU: ``gpu_time``, except in one rank of several (``compile --nproc``). do_bench
    sizes its repetitions from each rank's own estimate, and a step with collectives (DDP's all-reduce) would
    then wait forever on the rank that stopped first; there every rank makes the same count of calls."""
    if not several_ranks():
        return gpu_time(fn)
    driver = triton_driver()
    cache = driver.get_empty_cache_for_benchmark()
    for _ in range(RANKED_WARMUP_CALLS):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(MAX_SAMPLES)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(MAX_SAMPLES)]
    for start, end in zip(starts, ends, strict=True):
        driver.clear_cache(cache)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return stat(
        [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)],
        f"CUDA events, {MAX_SAMPLES} calls after {RANKED_WARMUP_CALLS} warm-up calls, the same count on every "
        "rank (one of several), L2 cleared before each",
    )


def gpu_graph_time(fn: Callable[[], Any]) -> Timing | None:
    """GPU time alone: ``fn`` captured in a CUDA graph and replayed, so no Python launch overhead counts."""
    from triton.testing import do_bench_cudagraph

    try:
        fn()  # autotuning and compilation happen outside the capture
        median, p10, p90 = do_bench_cudagraph(fn, rep=GRAPH_REP_MS, quantiles=[0.5, 0.1, 0.9])
    except Exception:  # a launcher that cannot be captured: no graph timing, not an error
        return None
    return Timing(
        median_ms=float(median),
        p10_ms=float(p10),
        p90_ms=float(p90),
        samples=0,
        method=f"triton.testing.do_bench_cudagraph: the call replayed from a CUDA graph, {GRAPH_REP_MS} ms of "
        "repetitions in each of its 10 replays",
    )


def use_threads(threads: int | None) -> None:
    """``--threads``: torch's intra-op threads (and OpenMP's, which ATen sets with them), before anything compiles:
    Inductor builds its C++ kernels for torch's thread count at compile time. The windows' HostLoad records it."""
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # for any process the model starts
        torch.set_num_threads(threads)


def cpu_time(fn: Callable[[], Any], repeats: int = CPU_REPEATS) -> Timing:
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return stat(samples, f"time.perf_counter around each of {repeats} calls after one warm-up call (CPU)")


def ceilings(device: torch.device, dtype: torch.dtype) -> CeilingsData:
    """The device's measured bandwidth and matmul throughput: the 100% lines of the roofline."""
    free, _ = torch.cuda.mem_get_info(device)
    nbytes = min(COPY_BYTES, free // 4)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy = gpu_time(functools.partial(dst.copy_, src))
    del src, dst
    n = MATMUL_SIZE
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    flop = 2 * n**3

    def tflops(timing: Timing) -> float:
        return flop / (timing.median_ms * 1e-3) / 1e12

    matmul = gpu_time(functools.partial(operator.matmul, a, b))
    tf32_tflops = bf16_tflops = None
    if dtype == torch.float32:
        if not torch.backends.cuda.matmul.allow_tf32:
            with _tf32_matmuls():
                tf32_tflops = tflops(gpu_time(functools.partial(operator.matmul, a, b)))
        a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
        bf16_tflops = tflops(gpu_time(functools.partial(operator.matmul, a16, b16)))
        del a16, b16
    del a, b
    torch.cuda.empty_cache()
    return CeilingsData(
        copy_bytes=2 * nbytes,
        copy=copy,
        copy_gb_per_s=2 * nbytes / (copy.median_ms * 1e-3) / 1e9,
        matmul_flop=flop,
        matmul=matmul,
        matmul_tflops=tflops(matmul),
        dtype=str(dtype).removeprefix("torch."),
        tf32=bool(torch.backends.cuda.matmul.allow_tf32),
        matmul_tf32_tflops=tf32_tflops,
        matmul_bf16_tflops=bf16_tflops,
        cudnn_tf32=bool(torch.backends.cudnn.allow_tf32),
        float32_matmul_precision=str(torch.get_float32_matmul_precision()),
    )


@contextlib.contextmanager
def _tf32_matmuls() -> Iterator[None]:
    """TF32 for float32 matmuls for the block only: the run's own setting is restored after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def end_to_end(
    step: Callable[[Any], Any], eager: Callable[..., Any], compiled: Callable[..., Any], device: torch.device
) -> EndToEndData:
    timings: dict[str, Timing] = {}
    peaks: dict[str, int] = {}
    for name, fn in (("eager", eager), ("compiled", compiled)):
        if device.type == "cuda":
            timings[name] = gpu_step_time(functools.partial(step, fn))
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            step(fn)
            torch.cuda.synchronize(device)
            peaks[name] = int(torch.cuda.max_memory_allocated(device))
        else:
            timings[name] = cpu_time(functools.partial(step, fn))
    return EndToEndData(
        eager=timings["eager"],
        compiled=timings["compiled"],
        eager_peak_bytes=peaks.get("eager"),
        compiled_peak_bytes=peaks.get("compiled"),
    )


def profile_steps(step: Callable[[Any], Any], compiled: Callable[..., Any], device: torch.device, path: str) -> ProfileData:
    """Profile PROFILED_STEPS compiled steps and save the Chrome trace; ``attribute`` reads it."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for _ in range(3):
        step(compiled)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    with profile(activities=activities) as prof:
        for index in range(PROFILED_STEPS):
            with record_function(f"{STEP_MARKS[0]}{index}"):
                step(compiled)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    prof.export_chrome_trace(path)
    if sizes_collectives(device):
        with profile(activities=activities, record_shapes=True) as sized, record_function(f"{STEP_MARKS[0]}0"):
            step(compiled)
        sized.export_chrome_trace(str(Path(path).with_name(COLLECTIVE_SIZES_TRACE_FILE)))
    return ProfileData(steps=PROFILED_STEPS, trace=path, device=device.type)


def several_ranks() -> bool:
    """Whether this process is one rank of a process group of several."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def sizes_collectives(device: torch.device) -> bool:
    """Whether one more step is profiled with shapes for the collectives' bytes (COLLECTIVE_SIZES_TRACE_FILE): a
    CPU job of several ranks, whose gloo ranges carry no sizes without them (NCCL's kernels carry theirs)."""
    return device.type != "cuda" and several_ranks()


# (Inductor's CachingAutotuner, copies of its positional arguments or None, its keyword arguments)
RecordedLaunch = tuple[Any, tuple[Any, ...] | None, dict[str, Any]]


@contextlib.contextmanager
def recording_launches(device: torch.device) -> Iterator[dict[int, RecordedLaunch]]:
    """While inside, keep for every Triton kernel launched a copy of its first launch.

    The copy holds the launch's arguments as they were just before it ran (tensors cloned with
    their exact sizes, strides, offsets and values), so the kernel can be replayed alone later.
    """
    autotuner = caching_autotuner()
    original = autotuner.run
    launches: dict[int, RecordedLaunch] = {}
    budget = [torch.cuda.mem_get_info(device)[0] // 4]  # never clone more than a quarter of free memory

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        if id(self) not in launches:
            launches[id(self)] = (self, _snapshot(args, budget), dict(kwargs))
        return original(self, *args, **kwargs)

    with mock.patch.object(autotuner, "run", recording):
        yield launches


def record_launches(
    step: Callable[[Any], Any], compiled: Callable[..., Any], device: torch.device
) -> list[RecordedLaunch]:
    """Run one compiled step and keep a copy of the first launch of every Triton kernel it launches."""
    with recording_launches(device) as launches:
        step(compiled)
        torch.cuda.synchronize(device)
    return list(launches.values())


def _snapshot(args: tuple[Any, ...], budget: list[int]) -> tuple[Any, ...] | None:
    """Clone the tensor arguments of a launch (sharing storage where the launch shares it)."""
    clones: dict[int, torch.UntypedStorage] = {}
    copied = []
    for value in args:
        if not isinstance(value, torch.Tensor):
            copied.append(value)
            continue
        storage = value.untyped_storage()
        if storage.data_ptr() not in clones:
            budget[0] -= storage.nbytes()
            if budget[0] < 0:
                return None
            clones[storage.data_ptr()] = storage.clone()
        view = torch.empty(0, dtype=value.dtype, device=value.device)
        view.set_(clones[storage.data_ptr()], value.storage_offset(), value.size(), value.stride())
        copied.append(view)
    return tuple(copied)


def isolated_kernels(
    step: Callable[[Any], Any], compiled: Callable[..., Any], device: torch.device
) -> dict[str, list[IsolatedKernel]]:
    """Each Triton kernel of a compiled step, replayed alone on a copy of its real arguments."""
    return replay_launches(record_launches(step, compiled, device))


def replay_launches(launches: list[RecordedLaunch]) -> dict[str, list[IsolatedKernel]]:
    """Time each recorded launch alone. Keyed by kernel name; graphs of one run can reuse a name, so each
    entry carries the kernel's fingerprint too (``kernel_fingerprint``), which tells them apart."""
    results: dict[str, list[IsolatedKernel]] = {}
    for kernel, args, kwargs in launches:
        entry = IsolatedKernel(fingerprint=kernel_fingerprint(getattr(kernel.fn, "src", "")))
        if args is None:
            entry.error = "not replayed: copying its arguments would take more than a quarter of free memory"
        else:
            try:
                entry.isolated = gpu_time(functools.partial(kernel.run, *args, **kwargs))
            except Exception as exc:  # a replay that fails is reported, not fatal
                entry.error = f"{type(exc).__name__}: {exc}"[:300]
        if len(kernel.launchers) == 1:
            launcher = kernel.launchers[0]
            entry.config = str(getattr(launcher, "config", ""))
            entry.n_regs = int_or_none(getattr(launcher, "n_regs", None))
            entry.n_spills = int_or_none(getattr(launcher, "n_spills", None))
            entry.shared = int_or_none(getattr(launcher, "shared", None))
        results.setdefault(kernel.fn.__name__, []).append(entry)
    torch.cuda.empty_cache()
    return results
