"""Stage 4 of the pipeline (bench), hand-written side: the winners kept, in the autotune cache on disk and in the
shipped tables.

A winner is kept under a ``TuningKey``: the kernel, its version (a hash of its module's source and of its
configuration list, so two lists for one kernel never share a winner), its *shape class*, the dtypes of its tensor
arguments, the device's name and Triton's version. The shape class is Triton's own autotune key (the sizes and
switches the kernel names) with every size rounded up to a power of two, so the many nearby shapes a model launches
share one tuning; every configuration in the lists is valid for any size, and the launchers' pruning depends on
sizes only through their power of two.

- The autotune cache (``caches.handwritten_dir()``): one JSON file per key (``load``, ``store``). A corrupt, stale
  or foreign file is ignored (tuned afresh and overwritten), never an error.
- The *shipped tables*, one per GPU architecture (``tuned/sm_90.json``: H100, H200), written by
  ``benchmarks/tuning_table.py`` from full searches on that GPU over the shapes of common models
  (``table_entry``).
- Where a search starts: the winner of the nearest shape class in either (``nearest_config``).

A stored configuration must also still be one of the kernel's (``tuning.TunedKernel`` checks that).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from ...caches import write_entry
from ...records import JsonScalar

# The layout of a cache file; another number is ignored.
FORMAT = 1
# Off (``INDUCTOR_LENS_TUNING_TABLE=0``): the shipped tables are not read (a full search, to make them).
USE_TABLE = os.environ.get("INDUCTOR_LENS_TUNING_TABLE", "1") != "0"
# The shipped tables, one file per GPU architecture: tuned/sm_90.json.
TABLE_DIR = Path(__file__).with_name("tuned")


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


def tuning_key(kernel: str, version: str, key: Sequence[str], arguments: Mapping[str, Any]) -> TuningKey:
    """The key of a launch of ``kernel`` (at ``version``) with ``arguments`` (by name); ``key``: the parameters
    Triton's autotune key names."""
    tensors = tensors_of(arguments)
    return TuningKey(
        kernel=kernel,
        version=version,
        shape_class=shape_class({k: arguments[k] for k in key if k in arguments}),
        dtypes=",".join(str(t.dtype).removeprefix("torch.") for t in tensors),
        device=_device_name(tensors[0].device) if tensors else "",
        triton=_triton_version(),
    )


def tensors_of(arguments: Mapping[str, Any]) -> list[Any]:
    """The tensor arguments, in order (anything with a dtype and a device)."""
    return [v for v in arguments.values() if hasattr(v, "dtype") and hasattr(v, "device")]


@functools.cache
def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return str(device.type)


@functools.cache
def _triton_version() -> str:
    import triton

    return str(triton.__version__)


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
