"""Report stage: syntax highlighting with Pygments (CSS classes only, no inline styles).

Every highlighted block gets an anchor per line (``#<prefix>-<n>``, numbered by a CSS counter), so pages can
link to the line of a launch or a kernel definition. Texts over ``HIGHLIGHT_LIMIT`` are shown plain
(with the same anchors): Pygments lexes about 0.3 MB/s and its markup is 5-6x the text (measured on a
48-layer graph's 540 KB FX code: 2.1 s, 3.5 MB highlighted; 0.02 s, 0.9 MB plain).
"""

from __future__ import annotations

import functools
import re

from markupsafe import Markup, escape
from pygments import highlight as _highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer, TextLexer

HIGHLIGHT_LIMIT = 128_000
_LEXERS = {"python": PythonLexer, "cpp": CppLexer, "text": TextLexer}


def is_highlighted(code: str, language: str) -> bool:
    """Whether ``highlight`` colours this text (else it is shown plain)."""
    return len(code) <= HIGHLIGHT_LIMIT and language != "text"


def highlight(code: str, language: str, anchor_prefix: str) -> Markup:
    if not is_highlighted(code, language):
        return plain(code, anchor_prefix)
    lexer = _LEXERS.get(language, TextLexer)(stripnl=False, ensurenl=True)
    html = _highlight(code, lexer, HtmlFormatter(linespans=anchor_prefix))
    # one <span id=…> per line, numbered by the same CSS counter as plain(); whitespace needs no span
    html = html.replace("<pre><span></span>", _NUMBERED_PRE.format(first=0), 1)
    return Markup(_WHITESPACE_TOKEN.sub(r"\1", html))


_NUMBERED_PRE = '<pre class="lines" style="counter-reset: line {first}">'
_WHITESPACE_TOKEN = re.compile(r'<span class="w">(\s*)</span>')


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    return HtmlFormatter(style="friendly").get_style_defs(".highlight")


def plain(code: str, anchor_prefix: str, first_line: int = 1) -> Markup:
    """Escaped text, one element per line with its anchor (``<prefix>-<n>``); the numbers are drawn by CSS
    (a counter), which keeps the markup to about 25 bytes a line for texts of hundreds of thousands."""
    lines = code.splitlines() or [""]
    body = "".join(
        f"<span id={anchor_prefix}-{n}>{escape(line)}</span>\n" for n, line in enumerate(lines, start=first_line)
    )
    return Markup(f'<div class="highlight">{_NUMBERED_PRE.format(first=first_line - 1)}{body}</pre></div>')
