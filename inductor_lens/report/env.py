"""Report stage: the one Jinja2 environment every page is rendered with.

Autoescape is on for everything and undefined names fail loudly. Static CSS/JS are inlined with
``include_static`` (read raw, never parsed as a template), so every page works offline on its own.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from ..records.wording import flag_tone
from ..units import format_bytes, format_micros, format_percent
from .resources import templates_dir


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    folder = templates_dir()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "separators": (",", ":")}
    env.globals["include_static"] = functools.partial(_include_static, folder / "static")
    env.filters.update(
        bytes=format_bytes,
        seconds=format_seconds,
        number=format_number,
        error=format_error,
        micros=format_micros,
        percent=format_percent,
        number0=format_number0,
        kind_label=format_kind,
        short_name=short_name,
        flag_tone=flag_tone,
    )
    return env


@functools.lru_cache(maxsize=16)
def _include_static(folder: Path, name: str) -> Markup:
    text = (folder / name).read_text(encoding="utf-8")
    if name.endswith(".css"):
        # every page carries the stylesheet: without comments and indentation it is a third smaller
        text = re.sub(r"\s+", " ", re.sub(r"/\*.*?\*/", "", text, flags=re.S)).strip()
    return Markup(text)


def format_seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} µs"


def format_number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_error(value: float | None) -> str:
    if value is None:
        return "—"
    if not math.isfinite(value):
        return str(value)
    return "0" if value == 0 else f"{value:.2e}"


def format_number0(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


_KIND_WORDS = {"cpp": "C++", "triton": "Triton", "persistent_reduction": "persistent reduction"}


def format_kind(kind: str) -> str:
    """``triton persistent_reduction`` -> ``Triton persistent reduction`` (a launch kind of a comparison)."""
    return " ".join(_KIND_WORDS.get(word, word) for word in kind.split())


# Inductor names a fused kernel after every op in it (names of 100 characters and more are common on real
# models): tables show its kind prefix, its last ops and its index, and the whole name on hover.
SHORT_NAME_LIMIT = 36
_HEAD_LIMIT = 18
_TAIL_LIMIT = 18
_MIN_HIDDEN = 6  # eliding fewer characters would save no room worth the ellipsis


def short_name(name: str, titled: bool = True) -> Markup:
    """``triton_per_fused__to_copy_add_embedding_…_pow_rsqrt_0`` -> ``triton_per_fused__to_copy_…pow_rsqrt_0``.

    Cuts fall after a ``_`` or ``.`` where one is near. The elided middle stays in the page, hidden, so that
    a table's filter (which reads a row's text) still finds it; CSS draws the ellipsis before the tail.
    ``titled``: the whole name on hover, as a title attribute.
    """
    if len(name) <= SHORT_NAME_LIMIT:
        return escape(name)
    breaks = [i + 1 for i, char in enumerate(name) if char in "_."]
    head = max((i for i in breaks if _HEAD_LIMIT // 2 <= i <= _HEAD_LIMIT), default=_HEAD_LIMIT)
    tail = min(
        (i for i in breaks if len(name) - _TAIL_LIMIT <= i <= len(name) - 4), default=len(name) - _TAIL_LIMIT
    )
    if tail - head < _MIN_HIDDEN:
        return escape(name)
    title = Markup(' title="{}"').format(name) if titled else ""
    return Markup(
        '<span class="short-name"{}>{}<span class="elided">{}</span><span class="tail">{}</span></span>'
    ).format(title, name[:head], name[head:tail], name[tail:])
