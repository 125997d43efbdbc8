"""Stage 5 of the pipeline (capture -> parse -> records -> bench -> report): CompileRun -> static HTML.

``render_report(run)`` returns every page as ``{relative path: text}`` without touching the disk
(the tests compare these dictionaries); ``write_report(files, out_dir)`` is the one place that
writes. Pages are self-contained (CSS and JS inlined, no network), and ``lens.json`` beside them
holds the whole data model so the report can be re-rendered or compared later.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import RenderError
from ..records import CompileRun
from ..version import __version__
from .env import environment
from .highlight import stylesheet
from .views import graph_page, graph_url, index_page, kernel_pages, kernel_url, log_lines

__all__ = ["LENS_JSON", "render_report", "write_report"]

LENS_JSON = "lens.json"


def render_report(run: CompileRun, *, draw: bool = True) -> dict[str, str]:
    env = environment()
    common = {"run": run, "version": __version__, "pygments_css": stylesheet()}
    files: dict[str, str] = {}
    files["index.html"] = env.get_template("index.html.j2").render(page=index_page(run), root="", **common)
    for graph in run.graphs:
        files[graph_url(graph)] = env.get_template("graph.html.j2").render(
            page=graph_page(run, graph, draw=draw), root="../", **common
        )
        for page in kernel_pages(run, graph):
            files[kernel_url(graph, page.kernel.name)] = env.get_template("kernel.html.j2").render(
                page=page, root="../../", **common
            )
    files["log.html"] = env.get_template("log.html.j2").render(lines=log_lines(run), root="", **common)
    files[LENS_JSON] = run.to_json()
    return files


def write_report(files: dict[str, str], out_dir: Path) -> Path:
    """Write the rendered files; returns the path of index.html."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for relative, text in files.items():
            target = out_dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
    except OSError as exc:
        raise RenderError(f"cannot write the report to {out_dir}: {exc.strerror or exc}") from exc
    return out_dir / "index.html"
