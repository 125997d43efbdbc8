"""Report stage: the large texts of a graph (generated code, FX graphs, scheduler IR), one page each, and
those of a compile (its IR stages from the TORCH_TRACE log: Dynamo's graph, pre-grad, AOT, post-grad).

Each text is highlighted once and stored once, on its own page under ``graphs/<graph id>/`` (or
``compile/<frame>/``); the graph page links to them instead of carrying them (a 48-layer ``--train``
graph page held 10 MB of code in closed ``<details>``). Line anchors keep the names the other pages link
to: ``code-N`` in ``output_code.html``, ``fx-N``, ``fxr-N``, ``irpre-N``, ``ir-N``; ``L-N`` in a stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from markupsafe import Markup

from ..records import DynamoFrame, GraphRecord
from ..records.wording import TRACE_GRAPH_PREFIX
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
    owner: str  # the graph id, or the compile id, the text belongs to
    owner_url: str  # its page, from the report's root
    origin: str  # where the text was read, as a sentence's end: "from the graph's debug folder <path>" (Markup)
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
    where = "rebuilt from the TORCH_TRACE log at" if graph.id.startswith(TRACE_GRAPH_PREFIX) else "from the graph's debug folder"
    origin = Markup('{}\n<span class="path">{}</span>').format(Markup(where), graph.folder)  # where: our words
    pages: dict[str, TextPage] = {}
    for text in graph_texts(graph):
        pages.update(paged_text(graph.id, views.graph_url(graph), origin, text, partial(text_url, graph, text.name)))
    return pages


def stage_pages(frame: DynamoFrame) -> dict[str, TextPage]:
    """``{relative url: page}`` for each IR stage of a compile, in the order the trace logged them."""
    pages: dict[str, TextPage] = {}
    owner = f"compile.html#{views.frame_anchor(frame.compile_id)}"
    for index, stage in enumerate(frame.stages, start=1):
        title, explanation = STAGES.get(stage.name, (stage.name, "A form of the graph the TORCH_TRACE log holds."))
        cut = f" The trace's text was {stage.cut_chars:,} characters longer; the rest is not kept." if stage.cut_chars else ""
        language = "text" if stage.name.endswith("_metadata") else "python"
        text = GraphText(stage.name, stage.name, title, explanation + cut, language, "L", stage.text)
        url_of = partial(views.stage_url, frame, index, stage.name)
        pages.update(paged_text(frame.compile_id, owner, "from the TORCH_TRACE log", text, url_of))
    return pages


def paged_text(
    owner: str, owner_url: str, origin: str, text: GraphText, url_of: Callable[[int], str]
) -> dict[str, TextPage]:
    """One page for ``text``, or pages of ``TEXT_PAGE_LINES`` lines (shown plain) for a longer one."""
    too_large = text.language != "text" and not is_highlighted(text.text, text.language)
    page_lines = views.TEXT_PAGE_LINES
    if text.lines <= page_lines:
        code = highlight(text.text, text.language, text.anchor)
        return {url_of(1): TextPage(owner, owner_url, origin, text, code, too_large, 1, text.lines)}
    pages: dict[str, TextPage] = {}
    lines = text.text.splitlines()
    starts = range(1, len(lines) + 1, page_lines)
    urls = [url_of(start) for start in starts]
    for index, start in enumerate(starts):
        chunk = lines[start - 1 : start - 1 + page_lines]
        pages[urls[index]] = TextPage(
            owner,
            owner_url,
            origin,
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


# A compile's IR stages: (title, explanation) by the trace's name, in the order torch logs them.
STAGES = {
    "dynamo_output_graph": ("Dynamo's graph", "The FX graph Dynamo traced from your Python: torch-level ops and "
                            "the model's parameters as inputs (its placeholders name them)."),
    "before_pre_grad_graph": ("Before the pre-grad passes", "The graph Inductor received from Dynamo."),
    "after_pre_grad_graph": ("After the pre-grad passes", "The same graph after Inductor's pre-grad passes "
                             "(fusions and rewrites on torch-level ops)."),
    "aot_joint_graph": ("AOT joint graph", "AOTAutograd's forward and backward traced together, in ATen ops: "
                        "the graph it partitions."),
    "aot_forward_graph": ("AOT forward graph", "The forward half of the partition: what it computes and the "
                          "tensors it saves for the backward."),
    "aot_backward_graph": ("AOT backward graph", "The backward half: the gradients, from the saved tensors and "
                           "the incoming gradients (tangents)."),
    "aot_inference_graph": ("AOT inference graph", "The ATen graph when no gradient is needed (one graph, no "
                            "partition)."),
    "aot_forward_graph_fw_metadata": ("AOT input/output metadata", "AOTAutograd's view of the inputs and outputs: "
                                      "which are mutated, aliased or need gradients."),
    "before_joint_graph": ("Before the joint-graph passes", "The joint graph Inductor received."),
    "after_joint_graph": ("After the joint-graph passes", "The joint graph after Inductor's joint-graph passes."),
    "before_post_grad_graph": ("Before the post-grad passes", "The ATen graph Inductor lowers, before its "
                               "post-grad passes."),
    "inductor_post_grad_graph": ("Post-grad graph", "After the post-grad passes: the ops the kernels compute."),
    "inductor_pre_grad_graph": ("Pre-grad graph", "The graph before Inductor's pre-grad passes (older releases)."),
}  # fmt: skip
