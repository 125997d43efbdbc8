"""Records, pages: where the report shows a graph's kernel, launch or compiled frame, as a path from the report's root.

The one naming of those pages and anchors: the report writes its pages there, and the records that link into
the report (a diagnosis finding's evidence, ``records.answers.Finding``) carry these paths.
"""

from __future__ import annotations

import re

from .graph import GraphRecord, Launch


def kernel_url(graph: GraphRecord, kernel_name: str) -> str:
    return f"kernels/{graph.id}/{kernel_name}.html"


def launch_url(graph: GraphRecord, launch: Launch) -> str:
    """A library call's operation page where the answers grouped it; else ``launch_page``."""
    if launch.kind == "extern" and launch.group is not None:
        return f"ops/{launch.group}.html"
    return launch_page(graph.id, launch.kind == "extern", launch.target, launch.position)


def launch_page(graph_id: str, extern: bool, target: str, position: int) -> str:
    """Where a launch is shown: an extern call on its graph's page, a kernel on its own page."""
    return f"graphs/{graph_id}.html#launch-{position}" if extern else f"kernels/{graph_id}/{target}.html"


def frame_anchor(compile_id: str) -> str:
    """``0/0_1`` -> ``frame-0-0_1``: an HTML id for a compile id on the compilation page."""
    return "frame-" + re.sub(r"[^A-Za-z0-9_]", "-", compile_id)
