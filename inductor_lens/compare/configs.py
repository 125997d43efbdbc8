"""The comparison stage, its input: which configurations to compile, from ``--mode`` and ``--config``.

``--mode max-autotune`` names a configuration after its mode. ``--config NAME:KEY=VALUE,KEY=VALUE``
names a set of Inductor options, compiled in the default mode unless one of the pairs is
``mode=...``; the pairs ``matmul_precision=``, ``cudnn_allow_tf32=``, ``autocast=``, ``dynamic=`` and
``dynamo.NAME=`` set the model process's other settings (``ConfigRequest.apply``). Names become folder
names, so they are checked here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..config_options import parse_dynamo_options, parse_inductor_options, parse_value
from ..errors import UsageError
from ..options import (
    CompileSpec,
    ScriptSpec,
    available_modes,
    check_mode,
    check_run_settings,
    normalize_autocast,
)
from ..records import CompileSettings, SettingChange

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
# A request's settings beyond the mode and options: the spec fields of the same names (None, {}: the base's).
PROCESS_SETTINGS = ("matmul_precision", "cudnn_allow_tf32", "autocast", "dynamic", "dynamo_options")
_DYNAMO_KEY = "dynamo."

Spec = TypeVar("Spec", bound=CompileSpec | ScriptSpec)


@dataclass(frozen=True)
class ConfigRequest:
    name: str
    mode: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)
    matmul_precision: str | None = None
    cudnn_allow_tf32: bool | None = None
    autocast: str | None = None  # canonical: "bfloat16", "float16"
    dynamic: bool | None = None
    dynamo_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_run_settings(self.matmul_precision, self.cudnn_allow_tf32, self.autocast, self.dynamo_options)

    def apply(self, base: Spec) -> Spec:
        """``base`` compiled as this configuration: its mode and options, and each other setting it sets."""
        changed = {name: getattr(self, name) for name in PROCESS_SETTINGS if getattr(self, name) not in (None, {})}
        return replace(base, mode=self.mode, options=dict(self.options), **changed)

    def describe(self) -> str:
        pairs = ", ".join(f"{k}={v}" for k, v in self.options.items())
        settings = settings_text(self)
        return f"mode {self.mode}" + (f", {pairs}" if pairs else "") + (f"; {settings}" if settings else "")


def settings_text(settings: ConfigRequest | CompileSettings) -> str:
    """The settings beyond the mode and options, in words, as a suggestion says them (``SettingChange.describe``):
    ``float32 matmul precision "high"; autocast bfloat16``; "" where none is set."""
    values = {name: getattr(settings, name) for name in PROCESS_SETTINGS}
    if all(value in (None, {}) for value in values.values()):
        return ""
    return SettingChange("", **values).describe()


def parse_config(text: str, known: Mapping[str, Any] | None = None) -> ConfigRequest:
    """``NAME:KEY=VALUE,KEY=VALUE`` (``mode=...`` picks the mode, ``matmul_precision=``, ``cudnn_allow_tf32=``,
    ``autocast=``, ``dynamic=`` and ``dynamo.NAME=`` the other settings) -> a ConfigRequest."""
    name, sep, body = text.partition(":")
    name = name.strip()
    if not sep or not body.strip():
        raise UsageError(f"--config expects NAME:KEY=VALUE[,KEY=VALUE...], got {text!r}")
    mode = "default"
    settings: dict[str, Any] = {}
    pairs, dynamo_pairs = [], []
    for pair in (p.strip() for p in body.split(",")):
        key, _, value = (part.strip() for part in pair.partition("="))
        if key == "mode":
            mode = _mode(value)
        elif key == "matmul_precision":
            settings[key] = value
        elif key in ("cudnn_allow_tf32", "dynamic"):
            settings[key] = _flag(key, value)
        elif key == "autocast":
            settings[key] = normalize_autocast(value)
        elif key.startswith(_DYNAMO_KEY):
            dynamo_pairs.append(pair.removeprefix(_DYNAMO_KEY))
        elif pair:
            pairs.append(pair)
    return ConfigRequest(_checked_name(name), mode, parse_inductor_options(pairs, known),
                         dynamo_options=parse_dynamo_options(dynamo_pairs), **settings)  # fmt: skip


def _flag(key: str, text: str) -> bool:
    value = parse_value(text)
    if not isinstance(value, bool):
        raise UsageError(f"--config {key} takes true or false, got {text!r}")
    return value


def requested_configs(
    modes: Iterable[str], configs: Iterable[str], known: Mapping[str, Any] | None = None
) -> tuple[ConfigRequest, ...]:
    """The configurations in the order given (modes first); every mode of the installed torch when none is given."""
    requests = [ConfigRequest(_mode(m), m) for m in modes]
    requests += [parse_config(c, known) for c in configs]
    if not requests:
        requests = [ConfigRequest(m, m) for m in available_modes()]
    seen: set[str] = set()
    for request in requests:
        if request.name in seen:
            raise UsageError(f"configuration {request.name!r} is given twice; give each a different name")
        seen.add(request.name)
    if len(requests) < 2:
        raise UsageError(
            "compare needs at least two configurations (e.g. --mode default --mode max-autotune)"
        )
    return tuple(requests)


def _mode(value: str) -> str:
    check_mode(value)
    return value


def _checked_name(name: str) -> str:
    modes = available_modes()
    if not _NAME.fullmatch(name) or name in modes:
        why = (
            "is a mode's name"
            if name in modes
            else "must be letters, digits, '_', '.', '+' or '-' (at most 64)"
        )
        raise UsageError(f"configuration name {name!r} {why}")
    return name
