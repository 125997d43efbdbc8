"""Stage 5 of the pipeline (capture -> parse -> records -> bench -> analysis -> report): CompileRun and its
analysis -> static HTML.

``render_report(run, analyze(run))`` returns every page as ``{relative path: text}`` without touching the disk
(the tests compare these dictionaries); ``write_report(files, out_dir)`` is the one place that
writes. Pages are self-contained (CSS and JS inlined, no network), and ``lens.json`` beside them
holds the whole data model so the report can be re-rendered or compared later. The analysis
(``inductor_lens/analysis.py``: the diagnosis, the answers, time per module and line, ...) is worked out from
the records by the caller before rendering and is not saved: this package reads records and their analysis only.
"""

from __future__ import annotations

from pathlib import Path

from ..records import Comparison, CompileRun
from ..records.analysis import ComparisonAnalysis, RunAnalysis
from ..version import __version__
from .answers_view import answers_view, group_pages
from .compare_view import comparison_page
from .compile_view import compile_page
from .diagnosis_view import diagnosis_view
from .env import environment
from .folders import LENS_JSON, write_report_files
from .graph_view import draw_graphs, drawing_part_pages, graph_page
from .handwritten_view import handwritten_page, handwritten_status
from .highlight import forget_prepared, prepare, stylesheet
from .kernel_view import kernel_pages, kernel_source_blocks
from .numerics_view import divergence_view
from .provenance_view import provenance_page, provenance_url
from .source_view import line_anchor, line_urls, source_page
from .stages_view import stages_pages
from .text_view import stage_pages, text_pages
from .timeline_view import TIMELINE_EXPORT, timeline_export, timeline_view
from .timing_view import timing_view
from .trials_view import trials_view
from .views import graph_url, index_page, kernel_url, log_lines

__all__ = ["LENS_JSON", "render_comparison", "render_report", "write_report"]


def render_report(run: CompileRun, analysis: RunAnalysis, *, draw: bool = True) -> dict[str, str]:
    env = environment()
    common = {"run": run, "version": __version__, "pygments_css": stylesheet()}

    def page(template: str, root: str, **values: object) -> str:
        return env.get_template(template).render(root=root, **common, **values)

    urls = line_urls(run, analysis)
    diagnosis = diagnosis_view(analysis)
    answers = answers_view(run, analysis)
    files: dict[str, str] = {
        "index.html": page(
            "index.html.j2",
            "",
            page=index_page(run, analysis),
            timing=timing_view(run, analysis),
            diagnosis=diagnosis,
            divergence=divergence_view(run, urls),
            answers=answers,
            trials=trials_view(run, answers.answers.findings),
            handwritten=handwritten_status(run, analysis),
        )
    }
    for url, group_page in group_pages(run, analysis).items():
        files[url] = page("operation.html.j2", "../", page=group_page)
    drawings = draw_graphs(run, analysis) if draw else {}
    # every kernel's source, highlighted in parallel before the kernel pages ask for them one by one
    prepare(kernel_source_blocks(run))
    for graph in run.graphs:
        the_graph_page = graph_page(run, graph, analysis, drawings.get(graph.id))
        files[graph_url(graph)] = page("graph.html.j2", "../", page=the_graph_page)
        for url, part_page in drawing_part_pages(the_graph_page).items():
            files[url] = page("drawing.html.j2", "../../", page=part_page)
        for url, text_page in text_pages(graph).items():
            files[url] = page("text.html.j2", "../../", page=text_page)
        files[provenance_url(graph)] = page("provenance.html.j2", "../../", page=provenance_page(run, graph, analysis))
        for kernel_page in kernel_pages(run, graph, analysis, urls):
            files[kernel_url(graph, kernel_page.kernel.name)] = page(
                "kernel.html.j2", "../../", page=kernel_page
            )
        stages, stage_texts = stages_pages(run, graph)
        for url, the_stages_page in stages.items():
            files[url] = page("stages.html.j2", "../../../", page=the_stages_page)
        for url, text_page in stage_texts.items():
            files[url] = page("text.html.j2", "../../../", page=text_page)
    files["compile.html"] = page("compile.html.j2", "", page=compile_page(run, analysis), timeline=timeline_view(run, analysis))
    if run.timeline.spans:
        files[TIMELINE_EXPORT] = timeline_export(run)
    for frame in run.frames:
        for url, text_page in stage_pages(frame).items():
            files[url] = page("text.html.j2", "../../", page=text_page)
    files["handwritten.html"] = page("handwritten.html.j2", "", page=handwritten_page(run, analysis))
    files["source.html"] = page("source.html.j2", "", page=source_page(run, analysis), anchor=line_anchor)
    files["log.html"] = page("log.html.j2", "", lines=log_lines(run))
    files[LENS_JSON] = run.to_json()
    forget_prepared()
    return files


def render_comparison(comparison: Comparison, analysis: ComparisonAnalysis) -> dict[str, str]:
    """The comparison's pages: index.html, a page per kernel diff (diffs/N.html) and lens.json.

    Each configuration's ``report`` is its report folder relative to the comparison's folder.
    """
    env = environment()
    page = comparison_page(comparison, analysis)
    common = {"run": comparison, "version": __version__, "pygments_css": stylesheet(), "nav_rows": page.rows}
    files = {"index.html": env.get_template("compare.html.j2").render(root="", page=page, **common)}
    for diff in page.diffs:
        files[diff.url] = env.get_template("compare_diff.html.j2").render(root="../", page=diff, **common)
    files[LENS_JSON] = comparison.to_json()
    return files


def write_report(files: dict[str, str], out_dir: Path) -> Path:
    """Write the rendered files, whole beside the report already there and then moved in (a failed write leaves
    that report as it was: ``folders.write_report_files``); returns the path of index.html."""
    write_report_files(files, out_dir)
    return out_dir / "index.html"
