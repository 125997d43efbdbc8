"""Stage 4 of the pipeline (bench), hand-written side: each hand-written kernel autotuned once per shape class.

``triton.autotune`` benchmarks every configuration of a kernel the first time a process launches it
with a new key, and forgets the winner when the process ends: on a GPU the hand-written stage of a
4-layer GPT-2 spent about 110 s there. A ``TunedKernel`` keeps the ``@triton.jit`` kernel and its
configuration list apart, and picks the configuration of each launch itself:

1. a key this process has seen: its winner (memoised);
2. else the winner stored in the autotune cache on disk: the jit kernel is launched with it directly, nothing
   is benchmarked;
3. else the winner of the *shipped table* for the GPU's architecture, so the shapes of common models need no
   search at all (the keys, the cache and the tables: ``tuning_store.py``);
4. else a search costing what it is worth (``tuning_search.py``); its winner and its time are stored in the
   cache.

Which configuration ran, and where it came from, is noted for the report (``tuning_record.py``). Under Triton's
interpreter nothing is tuned: the launchers pass fixed configurations to the jit kernels and never come here.

All of that is Python work, and so is ``JITFunction.run`` (binding and specialising the arguments,
looking the compiled kernel up, reading the device, stream and hooks): several microseconds a launch,
the whole time of a small kernel. So each launch is first looked up on a cheap *launch key*: the
current device, then for every argument what Triton's own keys read of it (the autotune key's values
exactly, constexprs' values, and for the others what Triton's specialisation depends on: a tensor's
dtype and 16-byte alignment, an int's width, whether it is 1 and whether it divides by 16; never
coarser than Triton's, so one launch key is one compiled kernel). A launch key seen before skips the
tuning key, the files and the recording (noted once per key per ``recording`` block), and launches
the ``CompiledKernel`` its second launch returned directly, as ``JITFunction.run`` ends
(``compat.launch_compiled``). It falls back to ``kernel[grid](...)`` wherever that is not certain to be the
same: no GPU driver (the interpreter), not a CUDA kernel, a launch hook set (a profiler's), Triton's debug or
instrumentation options changed, a pre-run hook, a heuristic that gives another value, or an argument of another
type. Triton's check that the globals a kernel reads have not changed since it compiled is skipped there.
``FAST_LAUNCH`` off (``INDUCTOR_LENS_FAST_LAUNCH=0``) takes the full path every time, to compare.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...caches import handwritten_dir
from ...records import KernelConfig
from ..compat import async_compile_mode, launch_compiled, triton_driver
from . import tuning_record, tuning_search
from .tuning_record import FIRST_USES, Choice, later, note
from .tuning_search import graph_benchmark as graph_benchmark  # the kernels import it from here
from .tuning_store import (
    USE_TABLE,
    TuningKey,
    config_fields,
    config_text,
    load,
    store,
    table_entry,
    tensors_of,
    tuning_key,
)

# On (``INDUCTOR_LENS_TUNING_COMPILE_ONLY=1``, the check process's helpers that compile ahead of it): a key with
# no winner has its pruned configurations compiled, none timed or stored (timings taken beside other processes
# sharing the GPU would pick noisy winners); the first is launched.
COMPILE_ONLY = os.environ.get("INDUCTOR_LENS_TUNING_COMPILE_ONLY") == "1"
# Off: every launch takes the full path (tuning key, memo, note, ``kernel[grid]``), for comparing the two.
FAST_LAUNCH = os.environ.get("INDUCTOR_LENS_FAST_LAUNCH", "1") != "0"


@dataclass
class _Launch:
    """What a launch key launches: its winner and, once a full launch returned it, the compiled kernel."""

    choice: Choice
    noted: list[KernelConfig] | None  # the recording it was last noted in
    compiled: Any = None
    state: tuple[Any, ...] = ()  # _Runtime.state() when it was kept
    tail: tuple[Any, ...] = ()  # the values of the parameters after the positional arguments
    live: tuple[tuple[int, str], ...] = ()  # those that are switches the launch key holds no value of
    heuristics: dict[str, Any] = field(default_factory=dict)  # their values for it


class _Unkeyed(Exception):
    """An argument the launch key cannot describe: the launch takes the full path."""


# How a parameter's argument enters the launch key.
_SPECIALISED, _VALUE, _VALUE_AND_SPECIALISED = 0, 1, 2
_INT32, _INT64 = range(-(2**31), 2**31), range(-(2**63), 2**63)


def _key_mode(constexpr: bool, in_autotune_key: bool) -> int:
    if constexpr:
        return _VALUE
    return _VALUE_AND_SPECIALISED if in_autotune_key else _SPECIALISED


def _specialisation(value: Any) -> Any:
    """What Triton specialises a (non-constexpr) argument on, or more (``native_specialize_impl``,
    CUDA's: a tensor's dtype and address % 16; an int's i32/i64/u64, == 1, % 16; a float's or bool's type)."""
    kind = type(value)
    if kind is int:
        return (value == 1, value % 16 == 0, value in _INT32, value in _INT64)
    if kind is float or kind is bool or value is None:
        return kind
    dtype = getattr(value, "dtype", None)
    if dtype is not None and hasattr(value, "data_ptr"):
        return (dtype, value.data_ptr() % 16 == 0)
    raise _Unkeyed(kind.__name__)


@dataclass(frozen=True)
class _Runtime:
    """What ``JITFunction.run`` reads on every launch besides its arguments (Triton 3.6 and 3.7)."""

    device: Callable[[], Any]
    stream: Callable[[Any], Any]
    knobs: Any

    def state(self) -> tuple[Any, ...]:
        """Whether a launch hook is set, then the global options a compilation reads: a kernel is
        launched directly only with no hook, and these as they were when it was kept."""
        runtime, compilation = self.knobs.runtime, self.knobs.compilation
        enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook  # HookChains, or None or a callable
        return (bool(getattr(enter, "calls", enter) or getattr(leave, "calls", leave)), runtime.debug,
                compilation.instrumentation_mode, getattr(runtime, "add_stages_inspection_hook", None))  # fmt: skip


@functools.cache
def _runtime() -> _Runtime | None:
    """Triton's active driver; None without one (the interpreter on a CPU) or where its API differs."""
    try:
        from triton import knobs

        active = triton_driver()
        runtime = _Runtime(active.get_current_device, active.get_current_stream, knobs)
        runtime.state()
    except Exception:
        return None
    return runtime


class TunedKernel:
    """A ``@triton.jit`` kernel and its autotune configurations; ``tuned[grid](*args, **switches)``
    launches the kernel with the winner for the arguments' key (see the module's docstring)."""

    def __init__(
        self,
        kernel: Any,
        configs: Sequence[Any],
        key: Sequence[str],
        *,
        prune: Callable[..., list[Any]] | None = None,
        heuristics: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
        post_hook: Callable[..., None] | None = None,
        benchmark: Callable[..., Any] | None = None,
    ) -> None:
        """``configs``: triton.Config, whose fields that name no parameter of the kernel are the launcher's
        (the heuristics and the grid read them, the kernel never gets them); ``key``: the parameters
        Triton's autotune key would name; ``prune``: triton.autotune's early_config_prune; ``heuristics``:
        parameters computed from the arguments and the chosen configuration (triton.heuristics);
        ``post_hook``: triton.autotune's, run after each timed launch (and timed with it); ``benchmark``: the
        tuner's timer when ``BENCHMARK`` is None."""
        self.kernel = kernel
        self.configs = list(configs)
        self.key = tuple(key)
        self.prune = prune
        self.post_hook = post_hook
        self.benchmark = benchmark
        base = _base_function(kernel)
        self.name: str = base.__name__
        listed = json.dumps([config_fields(c) for c in self.configs], sort_keys=True, default=str)
        self.version = hashlib.sha256(f"{_module_source(base)}\n{listed}\n{self.key}".encode()).hexdigest()[:16]
        self._arg_names: list[str] = list(kernel.arg_names)
        self._heuristics = dict(heuristics or {})
        fields = {name for config in self.configs for name in config.kwargs} - set(kernel.arg_names)
        self._launcher = _Launcher(kernel, self._heuristics, fields) if heuristics or fields else kernel
        # Winners by Triton's exact key (the full path), and by tuning key.
        self._by_exact_key: dict[tuple[Any, ...], Choice] = {}
        self._by_tuning_key: dict[str, Choice] = {}
        # The fast path: by launch key. Without the jit function's parameters (not a JITFunction) every
        # argument but the key's is keyed on its specialisation, and nothing is launched directly.
        self._params: list[Any] | None = getattr(kernel, "params", None)
        constexprs = {p.name for p in self._params if p.is_constexpr} if self._params is not None else set()
        self._mode_of = {name: _key_mode(name in constexprs, name in self.key) for name in self._arg_names}
        self._constexprs = frozenset(constexprs)
        self._modes = [self._mode_of[name] for name in self._arg_names]
        self._launches: dict[tuple[Any, ...], _Launch] = {}

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.launch, grid)

    def tuning_key(self, arguments: Mapping[str, Any]) -> TuningKey:
        return tuning_key(self.name, self.version, self.key, arguments)

    def launch(self, grid: Any, *args: Any, **switches: Any) -> Any:
        if not FAST_LAUNCH:
            return self._full_launch(grid, args, switches)[1]
        runtime = _runtime()
        try:
            device = runtime.device() if runtime is not None else None
            key = (device, self._launch_key(args), self._switches_key(switches))
            known = self._launches.get(key)
        except (_Unkeyed, TypeError):  # TypeError: an unhashable argument
            return self._full_launch(grid, args, switches)[1]
        if known is None:
            choice, launched = self._full_launch(grid, args, switches)
            self._launches[key] = _Launch(choice, tuning_record.recorded)
            return launched
        if known.noted is not tuning_record.recorded:
            known.noted = tuning_record.recorded
            note(self.name, known.choice, later(known.choice))
        if known.compiled is not None and runtime is not None:
            launched = self._direct(known, runtime, device, grid, args, switches)
            if launched is not None:
                return launched
        launched = self.launch_config(known.choice.config, grid, args, switches)
        if known.compiled is None and runtime is not None:
            self._keep(known, runtime, launched, args, switches)
        return launched

    def _launch_key(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if len(args) > len(self._modes):
            raise _Unkeyed("too many arguments")
        # fmt: off
        return tuple([
            value if mode == _VALUE
            else _specialisation(value) if mode == _SPECIALISED
            else (value, _specialisation(value))
            for mode, value in zip(self._modes, args, strict=False)
        ])
        # fmt: on

    def _switches_key(self, switches: dict[str, Any]) -> tuple[Any, ...]:
        if self._constexprs.issuperset(switches):  # as the launchers pass them
            return tuple(switches.items())
        modes = self._mode_of
        return tuple(
            [
                (name, value if modes.get(name, _VALUE) == _VALUE else (value, _specialisation(value)))
                for name, value in switches.items()
            ]
        )

    def _full_launch(self, grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> tuple[Choice, Any]:
        """Find the winner by Triton's autotune key (memoised), tuning key, cache or tuning; launch it."""
        arguments = {**dict(zip(self._arg_names, args, strict=False)), **switches}
        # As Triton's autotuner keys: the named values, then every tensor's dtype.
        exact = (*(arguments[k] for k in self.key if k in arguments), *(t.dtype for t in tensors_of(arguments)))
        choice = self._by_exact_key.get(exact)
        if choice is None:
            choice, launched = self._choose(grid, args, switches, arguments)
            self._by_exact_key[exact] = choice
            return choice, launched
        note(self.name, choice, later(choice))
        return choice, self.launch_config(choice.config, grid, args, switches)

    def _heuristic_values(self, config: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> dict[str, Any]:
        """As triton.heuristics computes them, each seeing the ones before."""
        meta = {**dict(zip(self._arg_names, args, strict=False)), **switches, **config.all_kwargs()}
        return _heuristic_values(self._heuristics, meta)

    def _keep(
        self, known: _Launch, runtime: _Runtime, launched: Any, args: tuple[Any, ...], switches: dict[str, Any]
    ) -> None:
        """Keep what a full launch returned for direct launches, where it is a loaded CUDA kernel."""
        state = runtime.state()
        target = getattr(getattr(launched, "metadata", None), "target", None)
        if state[0] or self._params is None or getattr(target, "backend", None) != "cuda":
            return
        if getattr(launched, "function", None) is None or not hasattr(launched, "packed_metadata"):
            return
        config = known.choice.config
        heuristics = self._heuristic_values(config, args, switches)
        tail: list[Any] = []
        live: list[tuple[int, str]] = []
        for index, param in enumerate(self._params[len(args) :], len(args)):
            if param.name in heuristics:
                tail.append(heuristics[param.name])
            elif param.name in switches:
                tail.append(switches[param.name])
                if self._mode_of[param.name] != _VALUE:
                    live.append((index, param.name))
            elif param.name in config.kwargs:
                tail.append(config.kwargs[param.name])
            elif param.has_default:
                tail.append(param.default)
            else:
                return
        known.compiled, known.state, known.heuristics = launched, state, heuristics
        known.tail, known.live = tuple(tail), tuple(live)

    def _direct(
        self, known: _Launch, runtime: _Runtime, device: Any, grid: Any, args: tuple[Any, ...],
        switches: dict[str, Any],
    ) -> Any | None:  # fmt: skip
        """Launch the kept kernel as ``JITFunction.run`` does once it has found it; None where it may not."""
        if runtime.state() != known.state or getattr(self.kernel, "pre_run_hooks", None):
            return None
        if self._heuristics and self._heuristic_values(known.choice.config, args, switches) != known.heuristics:
            return None
        values = args + known.tail
        if known.live:
            patched = list(values)
            for index, name in known.live:
                patched[index] = switches[name]
            values = tuple(patched)
        if callable(grid):
            grid = grid(dict(zip(self._arg_names, values, strict=False)))
        size = len(grid)
        compiled = known.compiled
        launch_compiled(compiled, (grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1),
                        runtime.stream(device), values)  # fmt: skip
        return compiled

    def _choose(
        self, grid: Any, args: tuple[Any, ...], switches: dict[str, Any], arguments: dict[str, Any]
    ) -> tuple[Choice, Any]:
        """The winner for a key new to the fast path (and the launch): from this process's tunings, the
        disk cache, or the autotuner."""
        key = self.tuning_key(arguments)
        choice = self._by_tuning_key.get(key.file_name)
        if choice is not None:
            note(self.name, choice, later(choice))
            return choice, self.launch_config(choice.config, grid, args, switches)
        folder = handwritten_dir()[0]
        cached = load(key, folder)
        config = self.known(cached.config) if cached is not None else None
        shipped = table_entry(key) if config is None and USE_TABLE else None
        listed = self.known(shipped.config) if shipped is not None else None
        if cached is not None and config is not None:
            choice = Choice(config, "cache", cached.time_ms, config_text(config))
            launched = self.launch_config(config, grid, args, switches)
        elif shipped is not None and listed is not None:
            choice = Choice(listed, "table", shipped.time_ms, config_text(listed))
            launched = self.launch_config(listed, grid, args, switches)
        elif COMPILE_ONLY:
            named = dict(zip(self._arg_names, args, strict=False))
            candidates, _ = tuning_search.ordered(self, named, switches, key, folder)
            self.precompile(candidates, grid, args, switches)
            choice = Choice(candidates[0], "tuned", None, config_text(candidates[0]), "compiled only")
            return choice, self.launch_config(candidates[0], grid, args, switches)
        else:
            choice, launched = self._tune(grid, args, switches, key, folder)
            tuned_on = {k: arguments[k] for k in self.key if k in arguments}
            store(key, folder, choice.config, choice.time_ms, tuned_on)
        self._by_tuning_key[key.file_name] = choice
        FIRST_USES[choice.origin] += 1
        note(self.name, choice, choice.origin)
        return choice, launched

    def known(self, fields: dict[str, Any]) -> Any | None:
        """The configuration of the list a stored one names (None: the list has changed since)."""
        return next((c for c in self.configs if config_fields(c) == fields), None)

    def launch_config(self, config: Any, grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> Any:
        return self._launcher[grid](*args, **switches, **config.all_kwargs())

    def _tune(
        self, grid: Any, args: tuple[Any, ...], switches: dict[str, Any], key: TuningKey, folder: Path
    ) -> tuple[Choice, Any]:
        """Search the configurations for the key (``tuning_search.tune``) and launch the winner."""
        named = dict(zip(self._arg_names, args, strict=False))
        return tuning_search.tune(self, grid, args, named, switches, key, folder)

    def precompile(self, configs: list[Any], grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> None:
        """Compile every candidate at once in a thread pool (Triton's ``AsyncCompileMode``; the compiler's
        passes and ptxas run outside the GIL), so the timing loop finds them compiled. Best effort: without a
        GPU driver (the interpreter) or that API, each compiles when first timed; errors surface there."""
        AsyncCompileMode = async_compile_mode()
        if len(configs) < 2 or _runtime() is None or AsyncCompileMode is None:
            return
        workers = max(1, min(len(configs), os.cpu_count() or 1, 16))
        with contextlib.suppress(Exception), ThreadPoolExecutor(workers) as pool, AsyncCompileMode(pool, ignore_errors=True):
            for config in configs:
                with contextlib.suppress(Exception):
                    self._launcher.run(*args, grid=grid, warmup=True, **switches, **config.all_kwargs())


class _Launcher:
    """The kernel as the autotuner and the full path launch it: ``triton.heuristics``' values computed,
    then the configuration's fields that are the launcher's dropped (given to ``JITFunction.run``, an
    unknown keyword is a compile option, and the same kernel would be compiled once per value)."""

    def __init__(self, kernel: Any, heuristics: Mapping[str, Callable[[dict[str, Any]], Any]], fields: set[str]):
        self.fn, self.arg_names = kernel, kernel.arg_names
        self.heuristics, self.fields = heuristics, frozenset(fields)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.update(_heuristic_values(self.heuristics, {**dict(zip(self.arg_names, args, strict=False)), **kwargs}))
        for name in self.fields:
            kwargs.pop(name, None)
        return self.fn.run(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid=grid, warmup=False)


def _heuristic_values(heuristics: Mapping[str, Callable[[dict[str, Any]], Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """The heuristics' values for the arguments and configuration ``meta``, as triton.heuristics computes
    them: in order, each seeing the ones before."""
    for name, heuristic in heuristics.items():
        meta[name] = heuristic(meta)
    return {name: meta[name] for name in heuristics}


def _base_function(kernel: Any) -> Any:
    """The Python function under Triton's wrappers (JITFunction, the interpreter's, heuristics)."""
    while not inspect.isfunction(kernel):
        kernel = kernel.fn
    return kernel


def _module_source(function: Any) -> str:
    module = inspect.getmodule(function)
    try:
        return inspect.getsource(module) if module is not None else function.__qualname__
    except (OSError, TypeError):
        return str(function.__qualname__)
