"""What to compile and how: the CompileSpec handed from the CLI to the capture stage.

Inductor options given as ``KEY=VALUE`` are parsed here and checked against torch's own list
(``torch._inductor.list_options()``), with the closest valid names offered for a typo.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError

# The modes of torch 2.11-2.13, known without importing torch; ``available_modes()`` asks torch itself.
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DEVICES = ("auto", "cpu", "cuda")
# How the compiled outputs are judged: against a float64 run (worker/accuracy.py), against eager alone, or not.
ACCURACY_CHECKS = ("fp64", "eager", "off")
BENCH_SCOPES = ("full", "end_to_end")
# Canonical torch dtype names, and the short spellings people type.
DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float64": "float64",
    "fp64": "float64",
    "double": "float64",
}
DEFAULT_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class CompileSpec:
    """One ``inductor-lens compile`` request; serialisable so the child process can read it."""

    model_path: Path
    mode: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)
    train: bool = False
    device: str = "auto"
    dtype: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    bench: bool = True
    # "full": ceilings, end to end, profiled steps, isolated kernels; "end_to_end": the latencies only
    # (what the second, warm-cache process of a comparison measures).
    bench_scope: str = "full"
    # Check (and on a GPU time) hand-written Triton equivalents of the kernels, after the capture.
    handwritten: bool = True
    accuracy: str = "fp64"

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.accuracy not in ACCURACY_CHECKS:
            raise UsageError(f"unknown accuracy check {self.accuracy!r}; choose one of {', '.join(ACCURACY_CHECKS)}")
        if self.device not in DEVICES:
            raise UsageError(f"unknown device {self.device!r}; choose one of {', '.join(DEVICES)}")
        if self.dtype is not None and self.dtype not in DTYPES.values():
            raise UsageError(f"unknown dtype {self.dtype!r}; choose one of {', '.join(sorted(set(DTYPES)))}")
        if self.bench_scope not in BENCH_SCOPES:
            raise UsageError(
                f"unknown bench scope {self.bench_scope!r}; choose one of {', '.join(BENCH_SCOPES)}"
            )
        if self.timeout_s <= 0:
            raise UsageError("--timeout must be a positive number of seconds")

    @property
    def model_name(self) -> str:
        return self.model_path.stem

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["model_path"] = str(self.model_path)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> CompileSpec:
        data = json.loads(text)
        data["model_path"] = Path(data["model_path"])
        return cls(**data)


def available_modes() -> tuple[str, ...]:
    """torch.compile's modes as the installed torch lists them (``torch._inductor.list_mode_options``)."""
    try:
        from torch._inductor import list_mode_options
    except ImportError:
        return MODES
    return tuple(list_mode_options())


def check_mode(mode: str) -> None:
    """Known modes pass without importing torch; any other is looked up in the installed torch."""
    if mode in MODES:
        return
    modes = available_modes()
    if mode not in modes:
        raise UsageError(f"unknown mode {mode!r}; this torch has {', '.join(modes)}")


def normalize_dtype(name: str | None) -> str | None:
    if name is None:
        return None
    key = name.strip().lower().removeprefix("torch.")
    if key not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; choose one of {', '.join(sorted(set(DTYPES)))}")
    return DTYPES[key]


_INT = re.compile(r"[+-]?\d+")


def parse_value(text: str) -> bool | int | float | str:
    """``true``/``false`` -> bool, ``12`` -> int, ``1e-3`` -> float, anything else -> str."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.fullmatch(stripped):
        return int(stripped)
    try:
        return float(stripped)
    except ValueError:
        return text


def parse_option(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"--option expects KEY=VALUE, got {pair!r}")
    return key, value


def inductor_option_defaults() -> dict[str, Any]:
    """Every Inductor config name with its current value, from the installed torch."""
    import torch._inductor.config as inductor_config

    return dict(inductor_config.get_config_copy())


def parse_inductor_options(pairs: Iterable[str], known: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` pairs and check each key and value against Inductor's own config.

    ``known`` maps option names to their defaults (from ``inductor_option_defaults()`` unless given);
    a value is coerced to the type of the default where that is unambiguous.
    """
    parsed = [parse_option(p) for p in pairs]
    if not parsed:
        return {}
    if known is None:
        known = inductor_option_defaults()
    options: dict[str, Any] = {}
    for key, raw in parsed:
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
            hint = f"closest: {', '.join(close)}" if close else "see torch._inductor.list_options()"
            raise UsageError(f"unknown Inductor option {key!r}", hint=hint)
        options[key] = _coerce(key, raw, known[key])
    return options


def _coerce(key: str, raw: str, default: Any) -> Any:
    value = parse_value(raw)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if value in (0, 1) and not isinstance(value, float):
            return bool(value)
        raise UsageError(f"Inductor option {key!r} takes true or false, got {raw!r}")
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise UsageError(f"Inductor option {key!r} takes an integer, got {raw!r}")
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise UsageError(f"Inductor option {key!r} takes a number, got {raw!r}")
    if isinstance(default, str):
        return raw
    return value
