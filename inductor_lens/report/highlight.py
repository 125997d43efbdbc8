"""Report stage: syntax highlighting with Pygments (CSS classes only, no inline styles).

Every highlighted block gets line numbers and an anchor per line (``#<prefix>-<n>``), so pages can
link to the line of a launch or a kernel definition. Very large texts are shown plain (with the
same anchors), since highlighting multiplies their size several times.
"""

from __future__ import annotations

import functools

from markupsafe import Markup, escape
from pygments import highlight as _highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer, TextLexer

HIGHLIGHT_LIMIT = 300_000
_LEXERS = {"python": PythonLexer, "cpp": CppLexer, "text": TextLexer}


def highlight(code: str, language: str, anchor_prefix: str) -> Markup:
    if len(code) > HIGHLIGHT_LIMIT or language == "text":
        return plain(code, anchor_prefix)
    formatter = HtmlFormatter(linenos="inline", lineanchors=anchor_prefix, anchorlinenos=True, wrapcode=True)
    lexer = _LEXERS.get(language, TextLexer)(stripnl=False, ensurenl=True)
    return Markup(_highlight(code, lexer, formatter))


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    return HtmlFormatter(style="friendly").get_style_defs(".highlight")


def plain(code: str, anchor_prefix: str) -> Markup:
    """Escaped text with a numbered anchor per line, in the same frame as highlighted code."""
    lines = code.splitlines() or [""]
    width = len(str(len(lines)))
    body = "".join(
        f'<a id="{anchor_prefix}-{n}" href="#{anchor_prefix}-{n}" class="linenos">{n:>{width}}</a> {escape(line)}\n'
        for n, line in enumerate(lines, start=1)
    )
    return Markup(f'<div class="highlight"><pre>{body}</pre></div>')
