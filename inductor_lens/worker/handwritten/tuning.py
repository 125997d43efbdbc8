"""Stage 4 of the pipeline (bench), hand-written side: each hand-written kernel autotuned once per shape class.

``triton.autotune`` benchmarks every configuration of a kernel the first time a process launches it
with a new key, and forgets the winner when the process ends: on a GPU the hand-written stage of a
4-layer GPT-2 spent about 110 s there. A ``TunedKernel`` keeps the ``@triton.jit`` kernel and its
configuration list apart, and picks the configuration of each launch itself:

1. a key this process has seen: its winner (memoised);
2. else the winner stored in the autotune cache on disk (``caches.handwritten_dir()``, one JSON file
   per key): the jit kernel is launched with it directly, nothing is benchmarked;
3. else the winner of the *shipped table* for the GPU's architecture (``tuned/sm_90.json``: H100, H200),
   written by ``benchmarks/tuning_table.py`` from full searches on that GPU over the shapes of common
   models, so those need no search at all;
4. else a search costing what it is worth: the kernel's configurations pruned by the shape (``prune``),
   the nearest shape class of the table (or the cache) first, all of them compiled at once in a thread
   pool (Triton's ``AsyncCompileMode``), then timed one after another until the kernel's budget
   (``TUNE_BUDGET_S``) is spent; a search cut short says how many it timed. The winner and its time are
   stored in the cache. A kernel may bring its own timer (``graph_benchmark``: the GPU's time alone,
   replayed from a CUDA graph) and a post hook timed with each launch (the weight gradient's sum of its
   slices).

The key is the kernel, its version (a hash of its module's source and of its configuration list, so
two lists for one kernel never share a winner), its *shape class*, the dtypes of
its tensor arguments, the device's name and Triton's version. The shape class is Triton's own autotune
key (the sizes and switches the kernel names) with every size rounded up to a power of two, so the
many nearby shapes a model launches share one tuning; every configuration in the lists is valid for
any size, and the launchers' pruning depends on sizes only through their power of two. A stored
configuration must also still be one of the kernel's: a corrupt, stale or foreign file is ignored
(tuned afresh and overwritten), never an error. Which configuration ran, and where it came from, is
noted for the report (``recording``). Under Triton's interpreter nothing is tuned: the launchers pass
fixed configurations to the jit kernels and never come here.

All of that is Python work, and so is ``JITFunction.run`` (binding and specialising the arguments,
looking the compiled kernel up, reading the device, stream and hooks): several microseconds a launch,
the whole time of a small kernel. So each launch is first looked up on a cheap *launch key*: the
current device, then for every argument what Triton's own keys read of it (the autotune key's values
exactly, constexprs' values, and for the others what Triton's specialisation depends on: a tensor's
dtype and 16-byte alignment, an int's width, whether it is 1 and whether it divides by 16; never
coarser than Triton's, so one launch key is one compiled kernel). A launch key seen before skips the
tuning key, the files and the recording (noted once per key per ``recording`` block), and launches
the ``CompiledKernel`` its second launch returned directly, as ``JITFunction.run`` ends: ``run(grid,
stream, function, metadata, hooks, *every parameter)``, the same call in Triton 3.6 and 3.7. It falls
back to ``kernel[grid](...)`` wherever that is not certain to be the same: no GPU driver (the
interpreter), not a CUDA kernel, a launch hook set (a profiler's), Triton's debug or instrumentation
options changed, a pre-run hook, a heuristic that gives another value, or an argument of another type.
Triton's check that the globals a kernel reads have not changed since it compiled is skipped there.
``FAST_LAUNCH`` off (``INDUCTOR_LENS_FAST_LAUNCH=0``) takes the full path every time, to compare.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...caches import handwritten_dir, write_entry
from ...records import ConfigOrigin, JsonScalar, KernelConfig
from ..compat import async_compile_mode, launch_compiled, triton_driver

# The layout of a cache file; another number is ignored.
FORMAT = 1
# The autotuner's timer, ``(kernel_call, quantiles) -> [median, p20, p80]`` in ms; None: Triton's own
# benchmarker for the device. Read when a kernel first tunes (tests put a counting fake here).
BENCHMARK: Callable[..., Any] | None = None
# graph_benchmark's CUDA graph holds about this many ms of launches; Triton's do_bench_cudagraph replays it ten times.
GRAPH_REP_MS = 10
# How this process served each key the first time: "tuned" (a search), "cache" or "table".
FIRST_USES: Counter[str] = Counter()
# Seconds a search may spend on one key (compiling and timing its configurations; at least one is always
# timed); 0: no limit, every configuration the prune keeps (how the shipped tables are made).
TUNE_BUDGET_S = float(os.environ.get("INDUCTOR_LENS_TUNE_BUDGET", "8"))
# Off (``INDUCTOR_LENS_TUNING_TABLE=0``): the shipped tables are not read (a full search, to make them).
USE_TABLE = os.environ.get("INDUCTOR_LENS_TUNING_TABLE", "1") != "0"
# On (``INDUCTOR_LENS_TUNING_COMPILE_ONLY=1``, the check process's helpers that compile ahead of it): a key with
# no winner has its pruned configurations compiled, none timed or stored (timings taken beside other processes
# sharing the GPU would pick noisy winners); the first is launched.
COMPILE_ONLY = os.environ.get("INDUCTOR_LENS_TUNING_COMPILE_ONLY") == "1"
# The shipped tables, one file per GPU architecture: tuned/sm_90.json.
TABLE_DIR = Path(__file__).with_name("tuned")
# A search times each configuration with do_bench over this many ms (after a 5 ms warm-up): enough samples
# to rank configurations of kernels of microseconds to a millisecond, a third of Triton's own default.
SEARCH_REP_MS = 30
# Off: every launch takes the full path (tuning key, memo, note, ``kernel[grid]``), for comparing the two.
FAST_LAUNCH = os.environ.get("INDUCTOR_LENS_FAST_LAUNCH", "1") != "0"

_recorded: list[KernelConfig] | None = None


def shape_class(values: Mapping[str, Any]) -> dict[str, JsonScalar]:
    """The autotune key's values, each positive size rounded up to a power of two (switches kept)."""
    return {name: _size_class(value) for name, value in values.items()}


def _size_class(value: Any) -> JsonScalar:
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        return 1 << (value - 1).bit_length() if value > 0 else value
    return str(value)


@dataclass(frozen=True)
class TuningKey:
    kernel: str  # the @triton.jit function's name
    version: str  # a hash of its module's source and configurations: an edited kernel is tuned afresh
    shape_class: Mapping[str, JsonScalar]
    dtypes: str  # of its tensor arguments, in order: "bfloat16,bfloat16,float32"
    device: str  # "NVIDIA H100 80GB HBM3"
    triton: str  # Triton's version

    def as_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))

    @property
    def file_name(self) -> str:
        digest = hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()[:32]
        return f"{self.kernel}-{digest}.json"


@dataclass(frozen=True)
class CachedConfig:
    config: dict[str, Any]  # config_fields() of the winner
    time_ms: float | None  # its median when it was tuned


def config_fields(config: Any) -> dict[str, Any]:
    """A ``triton.Config`` as JSON: its meta-parameters and launch options."""
    return {
        "kwargs": dict(config.kwargs),
        "num_warps": config.num_warps,
        "num_stages": config.num_stages,
        "num_ctas": config.num_ctas,
        "maxnreg": config.maxnreg,
    }


def config_text(config: Any) -> str:
    """``BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3``: what the report shows."""
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    if config.num_ctas != 1:
        options["num_ctas"] = config.num_ctas
    if config.maxnreg is not None:
        options["maxnreg"] = config.maxnreg
    return ", ".join(f"{k}={v}" for k, v in {**config.kwargs, **options}.items())


def load(key: TuningKey, folder: Path) -> CachedConfig | None:
    """The winner stored for the key; None when there is none, or the file is unreadable or another key's."""
    try:
        data = json.loads((folder / key.file_name).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deep, a damaged entry
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    if any(data.get(name) != value for name, value in key.as_json().items()):
        return None
    config, time_ms = data.get("config"), data.get("time_ms")
    if not isinstance(config, dict) or not isinstance(config.get("kwargs"), dict):
        return None
    if isinstance(time_ms, bool) or not isinstance(time_ms, (int, float)):
        time_ms = None
    return CachedConfig(config, None if time_ms is None else float(time_ms))


def store(key: TuningKey, folder: Path, config: Any, time_ms: float | None, shape: Mapping[str, Any]) -> None:
    """Keep the winner (atomically: a reader never sees half a file). A cache that cannot be written
    costs the next run a tuning, never this launch."""
    entry = {
        "format": FORMAT,
        **key.as_json(),
        "config": config_fields(config),
        "time_ms": time_ms,
        "tuned_on": {k: v for k, v in shape.items() if isinstance(v, (bool, int, float, str))},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        write_entry(folder / key.file_name, json.dumps(entry, indent=1, allow_nan=False) + "\n")
    except (OSError, ValueError) as exc:
        print(f"hand-written autotune cache: not written ({exc})", file=sys.stderr)


@dataclass(frozen=True)
class TableEntry:
    """One winner of a shipped table: found by a full search on a GPU of the table's architecture."""

    kernel: str
    shape_class: dict[str, JsonScalar]
    dtypes: str
    config: dict[str, Any]  # config_fields() of the winner
    time_ms: float | None
    device: str  # the GPU it was tuned on


def architecture(device_name: str) -> str | None:
    """``sm_90`` for the CUDA device of that name in this process; None without one."""
    return _architectures().get(device_name)


@functools.cache
def _architectures() -> dict[str, str]:
    try:
        import torch

        if not torch.cuda.is_available():
            return {}
        names = {}
        for index in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(index)
            names[str(torch.cuda.get_device_name(index))] = f"sm_{major}{minor}"
        return names
    except Exception:
        return {}


@functools.cache
def shipped_table(arch: str) -> dict[tuple[str, str, str], TableEntry]:
    """The shipped table of an architecture, by (kernel, shape class, dtypes); empty where there is none or it
    is unreadable (a damaged table costs searches, never an error)."""
    try:
        data = json.loads((TABLE_DIR / f"{arch}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), list):
        return {}
    table = {}
    for item in data["entries"]:
        try:
            entry = TableEntry(
                kernel=str(item["kernel"]), shape_class=dict(item["shape_class"]), dtypes=str(item["dtypes"]),
                config=dict(item["config"]), time_ms=_time_or_none(item.get("time_ms")), device=str(item["device"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError):
            continue
        table[entry.kernel, _class_text(entry.shape_class), entry.dtypes] = entry
    return table


def _class_text(shape_class: Mapping[str, Any]) -> str:
    return json.dumps(shape_class, sort_keys=True)


def _time_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def table_entry(key: TuningKey) -> TableEntry | None:
    """The shipped winner for the key on its GPU's architecture (any Triton version, any edit of the kernel
    that keeps the configuration in its list: the caller checks that)."""
    arch = architecture(key.device)
    if arch is None:
        return None
    return shipped_table(arch).get((key.kernel, _class_text(key.shape_class), key.dtypes))


def nearest_config(key: TuningKey, folder: Path) -> dict[str, Any] | None:
    """Where a search starts: the winner of the nearest shape class with the same switches and dtypes, from
    the shipped table of the GPU's architecture and the cache (sizes compared in powers of two)."""
    candidates: list[tuple[Mapping[str, Any], dict[str, Any]]] = []
    arch = architecture(key.device)
    if arch is not None:
        candidates += [(e.shape_class, e.config) for e in shipped_table(arch).values()
                       if e.kernel == key.kernel and e.dtypes == key.dtypes]  # fmt: skip
    with contextlib.suppress(OSError):
        for path in folder.glob(f"{key.kernel}-*.json"):
            with contextlib.suppress(OSError, ValueError, AttributeError, RecursionError):
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("version") == key.version and data.get("dtypes") == key.dtypes:
                    candidates.append((data["shape_class"], data["config"]))
    best: tuple[float, dict[str, Any]] | None = None
    for shape_class, config in candidates:
        distance = _distance(key.shape_class, shape_class)
        if distance is not None and (best is None or distance < best[0]):
            best = (distance, config)
    return best[1] if best is not None else None


def _distance(wanted: Mapping[str, Any], other: Mapping[str, Any]) -> float | None:
    """Sum of |log2| differences of the sizes; None where a switch (a non-size value) or a name differs."""
    if set(wanted) != set(other):
        return None
    total = 0.0
    for name, value in wanted.items():
        found = other[name]
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(found, int) and value > 0 and found > 0:
            total += abs(math.log2(value) - math.log2(found))
        elif value != found:
            return None
    return total


@contextlib.contextmanager
def recording() -> Iterator[list[KernelConfig]]:
    """The configurations launched inside the block: each (kernel, configuration) once, as first used."""
    global _recorded
    outer, _recorded = _recorded, []
    try:
        yield _recorded
    finally:
        _recorded = outer


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


@dataclass(frozen=True)
class _Choice:
    config: Any  # a triton.Config of the kernel's list
    origin: ConfigOrigin  # "tuned", "cache" or "table": how this process first got it
    time_ms: float | None
    text: str  # config_text(config)
    note: str = ""  # how the search went: "12 of 16 configurations timed (8 s budget); 1.9 s"


def _note(kernel: str, choice: _Choice, origin: ConfigOrigin) -> None:
    if _recorded is not None and not any(r.kernel == kernel and r.config == choice.text for r in _recorded):
        note = choice.note if origin == choice.origin else ""
        _recorded.append(KernelConfig(kernel, choice.text, origin, choice.time_ms, note))


def _later(choice: _Choice) -> ConfigOrigin:
    """The origin noted when this process launches a winner again."""
    return "reused" if choice.origin == "tuned" else choice.origin


@dataclass
class _Launch:
    """What a launch key launches: its winner and, once a full launch returned it, the compiled kernel."""

    choice: _Choice
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
        self._by_exact_key: dict[tuple[Any, ...], _Choice] = {}
        self._by_tuning_key: dict[str, _Choice] = {}
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
        tensors = _tensors(arguments)
        return TuningKey(
            kernel=self.name,
            version=self.version,
            shape_class=shape_class({k: arguments[k] for k in self.key if k in arguments}),
            dtypes=",".join(str(t.dtype).removeprefix("torch.") for t in tensors),
            device=_device_name(tensors[0].device) if tensors else "",
            triton=_triton_version(),
        )

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
            self._launches[key] = _Launch(choice, _recorded)
            return launched
        if known.noted is not _recorded:
            known.noted = _recorded
            _note(self.name, known.choice, _later(known.choice))
        if known.compiled is not None and runtime is not None:
            launched = self._direct(known, runtime, device, grid, args, switches)
            if launched is not None:
                return launched
        launched = self._launch(known.choice.config, grid, args, switches)
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

    def _full_launch(self, grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> tuple[_Choice, Any]:
        """Find the winner by Triton's autotune key (memoised), tuning key, cache or tuning; launch it."""
        arguments = {**dict(zip(self._arg_names, args, strict=False)), **switches}
        # As Triton's autotuner keys: the named values, then every tensor's dtype.
        exact = (*(arguments[k] for k in self.key if k in arguments), *(t.dtype for t in _tensors(arguments)))
        choice = self._by_exact_key.get(exact)
        if choice is None:
            choice, launched = self._choose(grid, args, switches, arguments)
            self._by_exact_key[exact] = choice
            return choice, launched
        _note(self.name, choice, _later(choice))
        return choice, self._launch(choice.config, grid, args, switches)

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
    ) -> tuple[_Choice, Any]:
        """The winner for a key new to the fast path (and the launch): from this process's tunings, the
        disk cache, or the autotuner."""
        key = self.tuning_key(arguments)
        choice = self._by_tuning_key.get(key.file_name)
        if choice is not None:
            _note(self.name, choice, _later(choice))
            return choice, self._launch(choice.config, grid, args, switches)
        folder = handwritten_dir()[0]
        cached = load(key, folder)
        config = self._known(cached.config) if cached is not None else None
        shipped = table_entry(key) if config is None and USE_TABLE else None
        listed = self._known(shipped.config) if shipped is not None else None
        if cached is not None and config is not None:
            choice = _Choice(config, "cache", cached.time_ms, config_text(config))
            launched = self._launch(config, grid, args, switches)
        elif shipped is not None and listed is not None:
            choice = _Choice(listed, "table", shipped.time_ms, config_text(listed))
            launched = self._launch(listed, grid, args, switches)
        elif COMPILE_ONLY:
            candidates, _ = self._ordered(dict(zip(self._arg_names, args, strict=False)), switches, key, folder)
            self._precompile(candidates, grid, args, switches)
            choice = _Choice(candidates[0], "tuned", None, config_text(candidates[0]), "compiled only")
            return choice, self._launch(candidates[0], grid, args, switches)
        else:
            choice, launched = self._tune(grid, args, switches, key, folder)
            tuned_on = {k: arguments[k] for k in self.key if k in arguments}
            store(key, folder, choice.config, choice.time_ms, tuned_on)
        self._by_tuning_key[key.file_name] = choice
        FIRST_USES[choice.origin] += 1
        _note(self.name, choice, choice.origin)
        return choice, launched

    def _known(self, fields: dict[str, Any]) -> Any | None:
        """The configuration of the list a stored one names (None: the list has changed since)."""
        return next((c for c in self.configs if config_fields(c) == fields), None)

    def _launch(self, config: Any, grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> Any:
        return self._launcher[grid](*args, **switches, **config.all_kwargs())

    def _ordered(
        self, named: dict[str, Any], switches: dict[str, Any], key: TuningKey, folder: Path
    ) -> tuple[list[Any], Any | None]:
        """The pruned configurations in the order a search times them: Inductor's own choice for the kernel the
        check stands in for (``starting_from``; added where the list lacks it and it fits), then the winner of the
        nearest shape class (cache or table), then the list's order; and that choice of Inductor's (None: none)."""
        candidates = self._candidates(named, switches)
        nearest = nearest_config(key, folder) if USE_TABLE else None
        inductors = self._inductors(named, switches)
        for first in (self._known(nearest) if nearest else None, inductors):
            if first is not None:
                if first in candidates:
                    candidates.remove(first)
                candidates.insert(0, first)
        return candidates, inductors

    def _inductors(self, named: dict[str, Any], switches: dict[str, Any]) -> Any | None:
        """Inductor's choice (``_start``) as a configuration of this kernel: the list's own where it has it; None
        where it names none of the kernel's meta-parameters or the kernel's prune finds it does not fit."""
        template = self.configs[0] if self.configs else None
        if not _start or template is None or not set(template.kwargs) & set(_start):
            return None
        from triton import Config

        kwargs = {name: _start.get(name, value) for name, value in template.kwargs.items()}
        made = Config(kwargs, num_warps=_start.get("num_warps", template.num_warps),
                      num_stages=_start.get("num_stages", template.num_stages))  # fmt: skip
        listed = self._known(config_fields(made))
        if listed is not None:
            return listed
        kept = self.prune([*self.configs, made], named, **switches) if self.prune else [made]
        return made if any(c is made for c in kept) else None

    def _tune(
        self, grid: Any, args: tuple[Any, ...], switches: dict[str, Any], key: TuningKey, folder: Path
    ) -> tuple[_Choice, Any]:
        """Search the pruned configurations (``_ordered``), compiled at once, timed until the budget is spent;
        launch the best. A configuration that does not compile or fit counts as infinitely slow."""
        started = time.perf_counter()
        named = dict(zip(self._arg_names, args, strict=False))
        candidates, inductors = self._ordered(named, switches, key, folder)
        self._precompile(candidates, grid, args, switches)
        timings: dict[int, float] = {}
        failure: BaseException | None = None
        for index, config in enumerate(candidates):
            if timings and TUNE_BUDGET_S > 0 and time.perf_counter() - started > TUNE_BUDGET_S:
                break
            try:
                timings[index] = self._time(config, grid, args, switches, named)
            except Exception as exc:
                if not _unfit(exc):
                    raise
                failure, timings[index] = exc, math.inf
        best_index = min(timings, key=lambda i: timings[i])
        if math.isinf(timings[best_index]):
            assert failure is not None
            raise failure
        best = candidates[best_index]
        launched = self._launch(best, grid, args, switches)
        seconds = time.perf_counter() - started
        timed = f"{len(timings)} of {len(candidates)} configuration{'s' if len(candidates) != 1 else ''}"
        if len(timings) < len(candidates):
            note = f"cut short: {timed} timed within the {TUNE_BUDGET_S:g} s budget; searched {seconds:.1f} s"
        else:
            note = f"{timed} timed; searched {seconds:.1f} s"
        if len(self.configs) > len(candidates):
            note += f" ({len(self.configs) - len(candidates)} pruned for this shape)"
        if inductors is not None:
            own = timings.get(next(i for i, c in enumerate(candidates) if c is inductors))
            verdict = ("won" if best is inductors else f"timed {own:.4f} ms against the winner's {timings[best_index]:.4f}"
                       if own is not None and not math.isinf(own) else "did not run")  # fmt: skip
            note += f"; started from Inductor's own choice for this kernel ({config_text(inductors)}): it {verdict}"
        return _Choice(best, "tuned", timings[best_index], config_text(best), note), launched

    def _candidates(self, named: dict[str, Any], switches: dict[str, Any]) -> list[Any]:
        """The configurations the kernel's prune keeps for these arguments (by name), in the list's order."""
        candidates = self.prune(list(self.configs), named, **switches) if self.prune else list(self.configs)
        if not candidates:
            raise RuntimeError(f"{self.name}: no configuration of its list fits these arguments")
        return list(candidates)

    def _time(
        self, config: Any, grid: Any, args: tuple[Any, ...], switches: dict[str, Any], named: dict[str, Any]
    ) -> float:
        """One configuration's median (ms), timed as Triton's autotuner times it: the launch and the post hook."""
        full = {**named, **switches, **config.all_kwargs()}

        def call() -> None:
            self._launch(config, grid, args, switches)
            if self.post_hook is not None:
                self.post_hook(full, exception=None)

        timer = BENCHMARK or self.benchmark or _search_timer
        result = timer(call, quantiles=(0.5, 0.2, 0.8))
        return float(result[0] if isinstance(result, (list, tuple)) else result)

    def _precompile(self, configs: list[Any], grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> None:
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


def _search_timer(kernel_call: Callable[[], Any], quantiles: Sequence[float]) -> Any:
    import triton.testing

    return triton.testing.do_bench(kernel_call, warmup=5, rep=SEARCH_REP_MS, quantiles=list(quantiles))


def _unfit(exc: BaseException) -> bool:
    """A configuration this GPU cannot run (shared memory, registers, a compile-time assertion): skipped, as
    Triton's autotuner skips it."""
    return type(exc).__name__ in ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")


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


def graph_benchmark(kernel_call: Callable[[], Any], quantiles: Sequence[float]) -> Any:
    """A tuner's timer (``TunedKernel(benchmark=...)``) that replays the timed call from a CUDA graph: the
    GPU's time alone, for a call of several small kernels whose Python launches outweigh them (Triton's
    ``do_bench`` launches from the host each time)."""
    import triton.testing

    return triton.testing.do_bench_cudagraph(kernel_call, rep=GRAPH_REP_MS, quantiles=list(quantiles))


def _tensors(arguments: Mapping[str, Any]) -> list[Any]:
    return [v for v in arguments.values() if hasattr(v, "dtype") and hasattr(v, "device")]


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


@functools.cache
def _device_name(device: Any) -> str:
    if device.type == "cuda":
        import torch

        return str(torch.cuda.get_device_name(device))
    return str(device.type)


@functools.cache
def _triton_version() -> str:
    import triton

    return str(triton.__version__)
