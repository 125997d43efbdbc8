"""The comparison stage, its input: which configurations to compile, from ``--mode`` and ``--config``.

``--mode max-autotune`` names a configuration after its mode. ``--config NAME:KEY=VALUE,KEY=VALUE``
names a set of Inductor options, compiled in the default mode unless one of the pairs is
``mode=...``. Names become folder names, so they are checked here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..options import available_modes, check_mode, parse_inductor_options

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


@dataclass(frozen=True)
class ConfigRequest:
    name: str
    mode: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        pairs = ", ".join(f"{k}={v}" for k, v in self.options.items())
        return f"mode {self.mode}" + (f", {pairs}" if pairs else "")


def parse_config(text: str, known: Mapping[str, Any] | None = None) -> ConfigRequest:
    """``NAME:KEY=VALUE,KEY=VALUE`` (``mode=...`` picks the mode) -> a ConfigRequest."""
    name, sep, body = text.partition(":")
    name = name.strip()
    if not sep or not body.strip():
        raise UsageError(f"--config expects NAME:KEY=VALUE[,KEY=VALUE...], got {text!r}")
    mode = "default"
    pairs = []
    for pair in (p.strip() for p in body.split(",")):
        key, _, value = pair.partition("=")
        if key.strip() == "mode":
            mode = _mode(value.strip())
        elif pair:
            pairs.append(pair)
    return ConfigRequest(_checked_name(name), mode, parse_inductor_options(pairs, known))


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
