"""Report stage: syntax highlighting with Pygments (CSS classes only, no inline styles).

Every highlighted block gets an anchor per line (``#<prefix>-<n>``, numbered by a CSS counter), so pages can
link to the line of a launch or a kernel definition. Texts over ``HIGHLIGHT_LIMIT`` are shown plain
(with the same anchors): Pygments lexes about 0.3 MB/s and its markup is 5-6x the text (measured on a
48-layer graph's 540 KB FX code: 2.1 s, 3.5 MB highlighted; 0.02 s, 0.9 MB plain).

Highlighted blocks are kept in the render cache (``render_cache.py``) by the hash of the text, language,
anchor prefix and Pygments version, so a re-render lexes nothing again; ``prepare`` highlights the many
blocks of a first render (every kernel's source) in worker processes, one per core, before the pages ask.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor

import pygments
from markupsafe import Markup, escape
from pygments import highlight as _highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer, TextLexer

from . import render_cache

HIGHLIGHT_LIMIT = 128_000
_LEXERS = {"python": PythonLexer, "cpp": CppLexer, "text": TextLexer}


def is_highlighted(code: str, language: str) -> bool:
    """Whether ``highlight`` colours this text (else it is shown plain)."""
    return len(code) <= HIGHLIGHT_LIMIT and language != "text"


def highlight(code: str, language: str, anchor_prefix: str) -> Markup:
    if not is_highlighted(code, language):
        return plain(code, anchor_prefix)
    key = _cache_key(code, language, anchor_prefix)
    html = _prepared.pop(key, None) or render_cache.read(key, "html")
    if html is None:
        html = _pygments(code, language, anchor_prefix)
        render_cache.write(key, "html", html)
    return Markup(html)


def prepare(blocks: Iterable[tuple[str, str, str]]) -> None:
    """Highlight many ``(code, language, anchor prefix)`` blocks in parallel ahead of ``highlight`` (which then
    finds them ready), where there are enough not in the render cache to be worth the worker processes."""
    wanted = {}
    for code, language, prefix in blocks:
        key = _cache_key(code, language, prefix)
        if is_highlighted(code, language) and key not in _prepared and not render_cache.has(key, "html"):
            wanted[key] = (code, language, prefix)
    workers = min(os.cpu_count() or 1, 8)
    if workers < 2 or len(wanted) < PARALLEL_BLOCKS:
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        jobs = list(wanted.items())
        for (key, _), html in zip(jobs, pool.map(_pygments_job, [job for _, job in jobs], chunksize=4), strict=True):
            _prepared[key] = html
            render_cache.write(key, "html", html)


def reanchored(block: Markup, prefix: str, new_prefix: str) -> Markup:
    """A block from ``highlight`` or ``plain`` with its line ids renamed: the same code twice on one page
    (the kernel's source beside its hand-written equivalent) without lexing it twice or repeating ids."""
    # str first: Markup.replace would escape the replacement and print the tags as text
    text = str(block)
    return Markup(
        text.replace(f'<span id="{prefix}-', f'<span id="{new_prefix}-').replace(
            f"<span id={prefix}-", f"<span id={new_prefix}-"
        )
    )


def forget_prepared() -> None:
    """Drop what ``prepare`` made and no page took (called when a render ends)."""
    _prepared.clear()


# Fewer blocks than this are highlighted where they are asked for (starting workers costs ~0.5 s).
PARALLEL_BLOCKS = 24
# Blocks prepare() highlighted for this render, taken by highlight() (dropped if no page asks).
_prepared: dict[str, str] = {}
# Bumped when the markup _pygments writes changes, so older render-cache entries are not used.
_CACHE_FORMAT = 2


def _cache_key(code: str, language: str, prefix: str) -> str:
    return render_cache.key("highlight", str(_CACHE_FORMAT), pygments.__version__, language, prefix, code)


def _pygments_job(block: tuple[str, str, str]) -> str:
    return _pygments(*block)


def _pygments(code: str, language: str, anchor_prefix: str) -> str:
    lexer = _LEXERS.get(language, TextLexer)(stripnl=False, ensurenl=True)
    html = _highlight(code, lexer, HtmlFormatter(linespans=anchor_prefix))
    # one <span id=…> per line, numbered by the same CSS counter as plain(); whitespace needs no span
    html = html.replace("<pre><span></span>", _NUMBERED_PRE.format(first=0), 1)
    # a token whose class the stylesheet does not colour (names, punctuation, whitespace) needs no span:
    # a third of the markup of a Triton kernel's source
    return _TOKEN.sub(lambda m: m[0] if m[1] in _styled_classes() else m[2], html)


_NUMBERED_PRE = '<pre class="lines" style="counter-reset: line {first}">'
_TOKEN = re.compile(r'<span class="([A-Za-z0-9]+)">([^<]*)</span>')


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    return HtmlFormatter(style="friendly").get_style_defs(".highlight")


@functools.lru_cache(maxsize=1)
def _styled_classes() -> frozenset[str]:
    # whitespace ("w") is styled, but a colour on spaces shows nothing
    return frozenset(re.findall(r"\.highlight \.([A-Za-z0-9]+) \{", stylesheet())) - {"w"}


def plain(code: str, anchor_prefix: str, first_line: int = 1) -> Markup:
    """Escaped text, one element per line with its anchor (``<prefix>-<n>``); the numbers are drawn by CSS
    (a counter), which keeps the markup to about 25 bytes a line for texts of hundreds of thousands."""
    lines = code.splitlines() or [""]
    body = "".join(
        f"<span id={anchor_prefix}-{n}>{escape(line)}</span>\n" for n, line in enumerate(lines, start=first_line)
    )
    return Markup(f'<div class="highlight">{_NUMBERED_PRE.format(first=first_line - 1)}{body}</pre></div>')
