"""Report stage: the large texts of a graph (generated code, FX graphs, scheduler IR), one page each.

Each text is highlighted once and stored once, on its own page under ``graphs/<graph id>/``; the
graph page links to them instead of carrying them (a 48-layer ``--train`` graph page held 10 MB of
code in closed ``<details>``). Line anchors keep the names the other pages link to: ``code-N`` in
``output_code.html``, ``fx-N``, ``fxr-N``, ``irpre-N``, ``ir-N``.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from ..records import GraphRecord
from . import views
from .highlight import highlight, is_highlighted, plain
from .views import file_name, text_url


@dataclass(frozen=True)
class GraphText:
    """One text file of a graph's debug folder, as shown on its own page."""

    name: str  # the page's name under graphs/<graph id>/
    file_name: str  # the file in the debug folder
    title: str
    explanation: str
    language: str
    anchor: str
    text: str

    @property
    def lines(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)


@dataclass(frozen=True)
class TextPage:
    graph: GraphRecord
    text: GraphText
    code: Markup
    # shown plain because it is too large to highlight (IR, plain text anyway, is not said to be)
    too_large_to_highlight: bool
    first_line: int = 1
    last_line: int = 0
    previous: str | None = None  # the page before, when the text is split (a file name in the same folder)
    next: str | None = None
    page_lines: int = 0  # the lines of a full page, where the text is split


# (page name, file name, title, explanation, language, line anchor prefix), in pipeline order
_TEXTS = (
    ("fx_graph_readable", "fx_graph_readable.py", "FX graph before Inductor's passes",
     "The ATen graph AOTAutograd handed to Inductor, before its post-grad passes.", "python", "fxr"),
    ("fx_graph_transformed", "fx_graph_transformed.py", "Post-grad FX graph",
     "The graph Inductor lowered, after its post-grad passes: the ops the kernels compute.", "python", "fx"),
    ("ir_pre_fusion", "ir_pre_fusion.txt", "Scheduler IR before fusion",
     "Inductor's scheduler nodes, one per buffer, before fusion.", "text", "irpre"),
    ("ir_post_fusion", "ir_post_fusion.txt", "Scheduler IR after fusion",
     "The scheduler nodes after fusion: each fused node became one kernel.", "text", "ir"),
    ("output_code", "output_code.py", "Generated code",
     "What Inductor generated: the kernels' source and call(), which runs them in launch order.", "python", "code"),
)  # fmt: skip


def graph_texts(graph: GraphRecord) -> tuple[GraphText, ...]:
    """The texts a graph has, in pipeline order: FX graphs, scheduler IR, generated code."""
    readable, transformed = graph.fx_graph("readable"), graph.fx_graph("transformed")
    pre_fusion, post_fusion = graph.ir_dump("pre_fusion"), graph.ir_dump("post_fusion")
    contents = {
        "fx_graph_readable": readable.code if readable is not None else None,
        "fx_graph_transformed": transformed.code if transformed is not None else None,
        "ir_pre_fusion": pre_fusion.text if pre_fusion is not None else None,
        "ir_post_fusion": post_fusion.text if post_fusion is not None else None,
        "output_code": graph.output_code or None,
    }
    return tuple(
        GraphText(name, file_name, title, explanation, language, anchor, text)
        for name, file_name, title, explanation, language, anchor in _TEXTS
        if (text := contents[name]) is not None
    )


def text_pages(graph: GraphRecord) -> dict[str, TextPage]:
    """``{relative url: page}`` for every text of ``graph``: one page each, or pages of ``TEXT_PAGE_LINES``
    lines for a text longer than that (shown plain)."""
    pages: dict[str, TextPage] = {}
    for text in graph_texts(graph):
        too_large = text.language != "text" and not is_highlighted(text.text, text.language)
        page_lines = views.TEXT_PAGE_LINES
        if text.lines <= page_lines:
            pages[text_url(graph, text.name)] = TextPage(
                graph, text, highlight(text.text, text.language, text.anchor), too_large, 1, text.lines
            )
            continue
        lines = text.text.splitlines()
        starts = range(1, len(lines) + 1, page_lines)
        urls = [text_url(graph, text.name, start) for start in starts]
        for index, start in enumerate(starts):
            chunk = lines[start - 1 : start - 1 + page_lines]
            pages[urls[index]] = TextPage(
                graph,
                text,
                plain("\n".join(chunk), text.anchor, first_line=start),
                too_large,
                start,
                start + len(chunk) - 1,
                file_name(urls[index - 1]) if index > 0 else None,
                file_name(urls[index + 1]) if index + 1 < len(urls) else None,
                page_lines,
            )
    return pages
