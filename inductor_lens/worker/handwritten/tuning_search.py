"""Stage 4 of the pipeline (bench), hand-written side: the search for a kernel's winner, and its order.

Where neither the autotune cache nor the shipped table has a winner for a key (``tuning_store.py``), a
``tuning.TunedKernel`` searches at a cost the kernel is worth: its configurations pruned by the shape (the
kernel's ``prune``), Inductor's own choice for the kernel the check stands in for first (``starting_from``), then
the winner of the nearest shape class (cache or table), then the list's order; all of them compiled at once in a
thread pool (Triton's ``AsyncCompileMode``), then timed one after another until the kernel's budget
(``TUNE_BUDGET_S``) is spent; a search cut short says how many it timed. A kernel may bring its own timer
(``graph_benchmark``: the GPU's time alone, replayed from a CUDA graph) and a post hook timed with each launch (the
weight gradient's sum of its slices).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .tuning_record import Choice
from .tuning_store import USE_TABLE, TuningKey, config_fields, config_text, nearest_config

# The autotuner's timer, ``(kernel_call, quantiles) -> [median, p20, p80]`` in ms; None: Triton's own
# benchmarker for the device. Read when a kernel first tunes (tests put a counting fake here).
BENCHMARK: Callable[..., Any] | None = None
# graph_benchmark's CUDA graph holds about this many ms of launches; Triton's do_bench_cudagraph replays it ten times.
GRAPH_REP_MS = 10
# Seconds a search may spend on one key (compiling and timing its configurations; at least one is always
# timed); 0: no limit, every configuration the prune keeps (how the shipped tables are made).
TUNE_BUDGET_S = float(os.environ.get("INDUCTOR_LENS_TUNE_BUDGET", "8"))
# A search times each configuration with do_bench over this many ms (after a 5 ms warm-up): enough samples
# to rank configurations of kernels of microseconds to a millisecond, a third of Triton's own default.
SEARCH_REP_MS = 30

# The launch configuration Inductor's autotuner chose for the kernel the check stands in for (``starting_from``):
# a search times a configuration of it first. Meta-parameter names it lacks (GROUP_M) take the list's values.
_start: dict[str, int] = {}


@contextlib.contextmanager
def starting_from(config: Mapping[str, int]) -> Iterator[None]:
    """Inside the block, a search times ``config`` (``BLOCK_M``..., ``num_warps``, ``num_stages``) first."""
    global _start
    outer, _start = _start, dict(config)
    try:
        yield
    finally:
        _start = outer


class Searchable(Protocol):
    """What a search reads of the kernel it tunes (``tuning.TunedKernel``)."""

    name: str
    configs: list[Any]
    prune: Callable[..., list[Any]] | None
    post_hook: Callable[..., None] | None
    benchmark: Callable[..., Any] | None

    def known(self, fields: dict[str, Any]) -> Any | None: ...

    def launch_config(self, config: Any, grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> Any: ...

    def precompile(self, configs: list[Any], grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> None: ...


def ordered(
    kernel: Searchable, named: dict[str, Any], switches: dict[str, Any], key: TuningKey, folder: Path
) -> tuple[list[Any], Any | None]:
    """The pruned configurations in the order a search times them: Inductor's own choice for the kernel the
    check stands in for (``starting_from``; added where the list lacks it and it fits), then the winner of the
    nearest shape class (cache or table), then the list's order; and that choice of Inductor's (None: none)."""
    candidates = _candidates(kernel, named, switches)
    nearest = nearest_config(key, folder) if USE_TABLE else None
    inductors = _inductors(kernel, named, switches)
    for first in (kernel.known(nearest) if nearest else None, inductors):
        if first is not None:
            if first in candidates:
                candidates.remove(first)
            candidates.insert(0, first)
    return candidates, inductors


def _inductors(kernel: Searchable, named: dict[str, Any], switches: dict[str, Any]) -> Any | None:
    """Inductor's choice (``_start``) as a configuration of this kernel: the list's own where it has it; None
    where it names none of the kernel's meta-parameters or the kernel's prune finds it does not fit."""
    template = kernel.configs[0] if kernel.configs else None
    if not _start or template is None or not set(template.kwargs) & set(_start):
        return None
    from triton import Config

    kwargs = {name: _start.get(name, value) for name, value in template.kwargs.items()}
    made = Config(kwargs, num_warps=_start.get("num_warps", template.num_warps),
                  num_stages=_start.get("num_stages", template.num_stages))  # fmt: skip
    listed = kernel.known(config_fields(made))
    if listed is not None:
        return listed
    kept = kernel.prune([*kernel.configs, made], named, **switches) if kernel.prune else [made]
    return made if any(c is made for c in kept) else None


def tune(
    kernel: Searchable, grid: Any, args: tuple[Any, ...], named: dict[str, Any], switches: dict[str, Any],
    key: TuningKey, folder: Path,
) -> tuple[Choice, Any]:  # fmt: skip
    """Search the pruned configurations (``ordered``), compiled at once, timed until the budget is spent;
    launch the best. A configuration that does not compile or fit counts as infinitely slow."""
    started = time.perf_counter()
    candidates, inductors = ordered(kernel, named, switches, key, folder)
    kernel.precompile(candidates, grid, args, switches)
    timings: dict[int, float] = {}
    failure: BaseException | None = None
    for index, config in enumerate(candidates):
        if timings and TUNE_BUDGET_S > 0 and time.perf_counter() - started > TUNE_BUDGET_S:
            break
        try:
            timings[index] = _time(kernel, config, grid, args, switches, named)
        except Exception as exc:
            if not _unfit(exc):
                raise
            failure, timings[index] = exc, math.inf
    best_index = min(timings, key=lambda i: timings[i])
    if math.isinf(timings[best_index]):
        assert failure is not None
        raise failure
    best = candidates[best_index]
    launched = kernel.launch_config(best, grid, args, switches)
    seconds = time.perf_counter() - started
    timed = f"{len(timings)} of {len(candidates)} configuration{'s' if len(candidates) != 1 else ''}"
    if len(timings) < len(candidates):
        note = f"cut short: {timed} timed within the {TUNE_BUDGET_S:g} s budget; searched {seconds:.1f} s"
    else:
        note = f"{timed} timed; searched {seconds:.1f} s"
    if len(kernel.configs) > len(candidates):
        note += f" ({len(kernel.configs) - len(candidates)} pruned for this shape)"
    if inductors is not None:
        own = timings.get(next(i for i, c in enumerate(candidates) if c is inductors))
        verdict = ("won" if best is inductors else f"timed {own:.4f} ms against the winner's {timings[best_index]:.4f}"
                   if own is not None and not math.isinf(own) else "did not run")  # fmt: skip
        note += f"; started from Inductor's own choice for this kernel ({config_text(inductors)}): it {verdict}"
    return Choice(best, "tuned", timings[best_index], config_text(best), note), launched


def _candidates(kernel: Searchable, named: dict[str, Any], switches: dict[str, Any]) -> list[Any]:
    """The configurations the kernel's prune keeps for these arguments (by name), in the list's order."""
    candidates = kernel.prune(list(kernel.configs), named, **switches) if kernel.prune else list(kernel.configs)
    if not candidates:
        raise RuntimeError(f"{kernel.name}: no configuration of its list fits these arguments")
    return list(candidates)


def _time(
    kernel: Searchable, config: Any, grid: Any, args: tuple[Any, ...], switches: dict[str, Any],
    named: dict[str, Any],
) -> float:  # fmt: skip
    """One configuration's median (ms), timed as Triton's autotuner times it: the launch and the post hook."""
    full = {**named, **switches, **config.all_kwargs()}

    def call() -> None:
        kernel.launch_config(config, grid, args, switches)
        if kernel.post_hook is not None:
            kernel.post_hook(full, exception=None)

    timer = BENCHMARK or kernel.benchmark or _search_timer
    result = timer(call, quantiles=(0.5, 0.2, 0.8))
    return float(result[0] if isinstance(result, (list, tuple)) else result)


def _search_timer(kernel_call: Callable[[], Any], quantiles: Sequence[float]) -> Any:
    import triton.testing

    return triton.testing.do_bench(kernel_call, warmup=5, rep=SEARCH_REP_MS, quantiles=list(quantiles))


def _unfit(exc: BaseException) -> bool:
    """A configuration this GPU cannot run (shared memory, registers, a compile-time assertion): skipped, as
    Triton's autotuner skips it."""
    return type(exc).__name__ in ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")


def graph_benchmark(kernel_call: Callable[[], Any], quantiles: Sequence[float]) -> Any:
    """A tuner's timer (``TunedKernel(benchmark=...)``) that replays the timed call from a CUDA graph: the
    GPU's time alone, for a call of several small kernels whose Python launches outweigh them (Triton's
    ``do_bench`` launches from the host each time)."""
    import triton.testing

    return triton.testing.do_bench_cudagraph(kernel_call, rep=GRAPH_REP_MS, quantiles=list(quantiles))
