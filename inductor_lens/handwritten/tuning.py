"""Stage 4 of the pipeline (bench), hand-written side: each hand-written kernel autotuned once per shape class.

``triton.autotune`` benchmarks every configuration of a kernel the first time a process launches it
with a new key, and forgets the winner when the process ends: on a GPU the hand-written stage of a
4-layer GPT-2 spent about 110 s there. A ``TunedKernel`` keeps the ``@triton.jit`` kernel and its
configuration list apart, and picks the configuration of each launch itself:

1. a key this process has seen: its winner (memoised);
2. else the winner stored in the autotune cache on disk (``caches.handwritten_dir()``, one JSON file
   per key): the jit kernel is launched with it directly, nothing is benchmarked;
3. else ``triton.autotune`` runs once, and its best configuration and measured time are stored.

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
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..caches import handwritten_dir, write_entry
from ..records import ConfigOrigin, JsonScalar, KernelConfig

# The layout of a cache file; another number is ignored.
FORMAT = 1
# The autotuner's timer, ``(kernel_call, quantiles) -> [median, p20, p80]`` in ms; None: Triton's own
# benchmarker for the device. Read when a kernel first tunes (tests put a counting fake here).
BENCHMARK: Callable[..., Any] | None = None
# How this process served each key the first time: "tuned" (an autotuner run) or "cache".
FIRST_USES: Counter[str] = Counter()

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
    except (OSError, ValueError):
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


@contextlib.contextmanager
def recording() -> Iterator[list[KernelConfig]]:
    """The configurations launched inside the block: each (kernel, configuration) once, as first used."""
    global _recorded
    outer, _recorded = _recorded, []
    try:
        yield _recorded
    finally:
        _recorded = outer


@dataclass(frozen=True)
class _Choice:
    config: Any  # a triton.Config of the kernel's list
    origin: ConfigOrigin  # "tuned" or "cache": how this process first got it
    time_ms: float | None
    text: str  # config_text(config)


def _note(kernel: str, choice: _Choice, origin: ConfigOrigin) -> None:
    if _recorded is not None and not any(r.kernel == kernel and r.config == choice.text for r in _recorded):
        _recorded.append(KernelConfig(kernel, choice.text, origin, choice.time_ms))


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
    ) -> None:
        """``configs``: triton.Config; ``key``: the parameters Triton's autotune key would name; ``prune``:
        triton.autotune's early_config_prune; ``heuristics``: meta-parameters computed from the arguments
        and the chosen configuration (triton.heuristics)."""
        import triton

        self.kernel = kernel
        self.configs = list(configs)
        self.key = tuple(key)
        self.prune = prune
        base = _base_function(kernel)
        self.name: str = base.__name__
        listed = json.dumps([config_fields(c) for c in self.configs], sort_keys=True, default=str)
        self.version = hashlib.sha256(f"{_module_source(base)}\n{listed}\n{self.key}".encode()).hexdigest()[:16]
        self._arg_names: list[str] = list(kernel.arg_names)
        self._launcher = triton.heuristics(dict(heuristics))(kernel) if heuristics else kernel
        self._autotuner: Any = None
        # Winners by Triton's exact key (the fast path of every launch), and by tuning key.
        self._by_exact_key: dict[tuple[Any, ...], _Choice] = {}
        self._by_tuning_key: dict[str, _Choice] = {}

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **switches: self.launch(grid, *args, **switches)

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
        arguments = {**dict(zip(self._arg_names, args, strict=False)), **switches}
        # As Triton's autotuner keys: the named values, then every tensor's dtype.
        exact = (*(arguments[k] for k in self.key if k in arguments), *(t.dtype for t in _tensors(arguments)))
        choice = self._by_exact_key.get(exact)
        if choice is None:
            choice, launched = self._choose(grid, args, switches, arguments)
            self._by_exact_key[exact] = choice
            return launched
        _note(self.name, choice, "reused" if choice.origin == "tuned" else choice.origin)
        return self._launch(choice.config, grid, args, switches)

    def _choose(
        self, grid: Any, args: tuple[Any, ...], switches: dict[str, Any], arguments: dict[str, Any]
    ) -> tuple[_Choice, Any]:
        """The winner for a key new to the fast path (and the launch): from this process's tunings, the
        disk cache, or the autotuner."""
        key = self.tuning_key(arguments)
        choice = self._by_tuning_key.get(key.file_name)
        if choice is not None:
            _note(self.name, choice, "reused" if choice.origin == "tuned" else choice.origin)
            return choice, self._launch(choice.config, grid, args, switches)
        folder = handwritten_dir()[0]
        cached = load(key, folder)
        config = self._known(cached.config) if cached is not None else None
        if cached is not None and config is not None:
            choice = _Choice(config, "cache", cached.time_ms, config_text(config))
            launched = self._launch(config, grid, args, switches)
        else:
            choice, launched = self._tune(grid, args, switches)
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

    def _tune(self, grid: Any, args: tuple[Any, ...], switches: dict[str, Any]) -> tuple[_Choice, Any]:
        """Run Triton's autotuner: it benchmarks the pruned configurations, then launches the best."""
        tuner = self._tuner()
        launched = tuner[grid](*args, **switches)
        best = tuner.best_config
        timing = getattr(tuner, "configs_timings", {}).get(best)
        median = timing[0] if isinstance(timing, (list, tuple)) else timing
        time_ms = float(median) if isinstance(median, (int, float)) else None
        return _Choice(best, "tuned", time_ms, config_text(best)), launched

    def _tuner(self) -> Any:
        if self._autotuner is None:
            import triton

            prune = {"early_config_prune": self.prune} if self.prune else None
            self._autotuner = triton.autotune(
                configs=self.configs, key=list(self.key), prune_configs_by=prune, do_bench=BENCHMARK
            )(self._launcher)
        return self._autotuner


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
