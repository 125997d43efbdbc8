"""Report stage: Graphviz layouts, run in parallel and kept in the render cache by the hash of their DOT source.

Every drawing of a report is laid out here, all at once: ``lay_out(sources)`` runs one ``dot``
process per source on a thread pool (the work happens in the ``dot`` processes, so threads are
enough to use every core), and keeps each SVG in the render cache (``render_cache.py``) under the
SHA-256 of its source and of the ``dot`` version. A re-render of an unchanged report lays nothing out again.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import render_cache

# A safety net only: drawings are split so that each layout takes about a second (see drawing.py).
DOT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Layout:
    svg: str | None  # the SVG document dot wrote; None when it could not
    notice: str | None  # why there is no SVG
    cached: bool = False
    seconds: float = 0.0


@functools.lru_cache(maxsize=1)
def dot_binary() -> str | None:
    return shutil.which("dot")


@functools.lru_cache(maxsize=1)
def dot_version() -> str:
    binary = dot_binary()
    if binary is None:
        return ""
    try:
        completed = subprocess.run([binary, "-V"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return completed.stderr.decode(errors="replace").strip()


def lay_out(sources: Sequence[str], *, workers: int | None = None) -> list[Layout]:
    """The SVG of each DOT source, in order: from the cache, else laid out in parallel."""
    binary = dot_binary()
    if binary is None:
        notice = (
            "Graphviz's 'dot' program is not installed here, so the graph is not drawn "
            "(install it with e.g. 'apt-get install graphviz' and re-render with 'inductor-lens report')."
        )
        return [Layout(None, notice) for _ in sources]
    keys = [_key(source) for source in sources]
    results: dict[int, Layout] = {}
    missing: list[int] = []
    for index, key in enumerate(keys):
        svg = render_cache.read(key, "svg")
        if svg is not None:
            results[index] = Layout(svg, None, cached=True)
        else:
            missing.append(index)
    if missing:
        # the longest layouts first, so the pool does not end waiting on one big drawing
        missing.sort(key=lambda i: -len(sources[i]))
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            for index, layout in zip(missing, pool.map(lambda i: _run_dot(binary, sources[i]), missing), strict=True):
                results[index] = layout
                if layout.svg is not None:
                    render_cache.write(keys[index], "svg", layout.svg)
    return [results[i] for i in range(len(sources))]


def _run_dot(binary: str, source: str) -> Layout:
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            [binary, "-Tsvg"], input=source.encode(), capture_output=True, timeout=DOT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return Layout(None, f"Graphviz took over {DOT_TIMEOUT_S:.0f} s to lay out this drawing; it is not shown.")
    except OSError as exc:
        return Layout(None, f"Graphviz could not be run: {exc.strerror or exc}")
    if completed.returncode != 0:
        reason = completed.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        return Layout(None, f"Graphviz could not draw this graph: {reason[0]}")
    return Layout(_strip_prolog(completed.stdout.decode("utf-8", errors="replace")), None,
                  seconds=time.perf_counter() - started)  # fmt: skip


def _strip_prolog(svg: str) -> str:
    """Drop the XML prolog, DOCTYPE, comments and element ids so the SVG can sit inside an HTML page
    (Graphviz numbers its ids from 1 in every drawing: two drawings on a page would repeat them)."""
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else svg
    body = re.sub(r"<!--.*?-->", "", body, flags=re.S)
    return _SVG_ID.sub("", body)


_SVG_ID = re.compile(r' id="[^"]*"')


# Bumped when what is kept of dot's SVG changes (_strip_prolog), so older cache entries are not used.
_CACHE_FORMAT = 1


def _key(source: str) -> str:
    return render_cache.key("layout", str(_CACHE_FORMAT), dot_version(), source)
