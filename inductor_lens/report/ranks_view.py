"""Report stage, several ranks: the landing page of a multi-rank report (``index.html`` beside ``rank<r>/``).

``ranks_page(ranked, summaries)`` builds the page's view model from the ``ranks.json`` document and the
ranks' summaries (records/ranks.py, made from each rank's lens.json): where the ranks diverged, what each
compiled side by side, and their times side by side. ``render_ranks`` renders it; each rank's own report is
the ordinary single-rank report, untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..records.ranks import RANKS_JSON, Divergence, RankedRun, RankSummary, divergences
from ..version import __version__
from .env import environment, format_seconds
from .highlight import stylesheet

__all__ = ["RanksPage", "ranks_page", "render_ranks"]

_ASPECTS = ("status", "compile ids", "graphs", "guards", "cache", "kernels", "collectives", "graph breaks")
_KERNEL_ROWS = 40  # the slowest kernels shown side by side


@dataclass(frozen=True)
class RankColumn:
    rank: int
    url: str  # the rank's report, relative to the landing page
    status: str
    error: str | None


@dataclass(frozen=True)
class RankRow:
    """One line of a side-by-side table: a fact, then its value on each rank."""

    label: str
    cells: tuple[str, ...]
    differs: bool
    title: str = ""


@dataclass(frozen=True)
class AspectVerdict:
    """One aspect compared (compile ids, guards...): the same on every rank, or its divergences."""

    aspect: str
    same: bool
    divergences: tuple[Divergence, ...]


@dataclass(frozen=True)
class RanksPage:
    ranked: RankedRun
    columns: tuple[RankColumn, ...]
    headline: str
    aspects: tuple[AspectVerdict, ...]
    facts: tuple[RankRow, ...]
    times: tuple[RankRow, ...]
    kernel_times: tuple[RankRow, ...]
    bad: bool  # a divergence that puts the job at risk (a failed rank, mismatched collectives)


def ranks_page(ranked: RankedRun, summaries: Sequence[RankSummary]) -> RanksPage:
    found = divergences(summaries)
    aspects = tuple(
        AspectVerdict(
            aspect,
            not [d for d in found if d.aspect == aspect],
            tuple(d for d in found if d.aspect == aspect),
        )
        for aspect in _ASPECTS
    )
    differing = [a.aspect for a in aspects if not a.same]
    if len(summaries) < 2:
        headline = "Only one rank left output: nothing to compare."
    elif differing:
        headline = f"The ranks diverged: {', '.join(differing)} differ."
    else:
        headline = f"All {len(summaries)} ranks compiled the same: same compile ids, graphs, guards, kernels and collectives."
    return RanksPage(
        ranked=ranked,
        columns=tuple(RankColumn(s.rank, f"{s.folder}/index.html", s.status, s.error) for s in summaries),
        headline=headline,
        aspects=aspects,
        facts=_facts(summaries),
        times=_times(summaries),
        kernel_times=_kernel_times(summaries),
        bad=any(d.severity == "bad" for d in found),
    )


def render_ranks(ranked: RankedRun, summaries: Sequence[RankSummary]) -> dict[str, str]:
    """The landing page and the ranks document: ``{relative path: text}``."""
    page = ranks_page(ranked, summaries)
    html = (
        environment()
        .get_template("ranks.html.j2")
        .render(root="", run=ranked, page=page, version=__version__, pygments_css=stylesheet())
    )
    return {"index.html": html, RANKS_JSON: ranked.to_json()}


def _row(
    label: str, summaries: Sequence[RankSummary], value: Callable[[RankSummary], str], title: str = ""
) -> RankRow:
    cells = tuple(value(s) for s in summaries)
    return RankRow(label, cells, len(set(cells)) > 1, title)


def _facts(summaries: Sequence[RankSummary]) -> tuple[RankRow, ...]:
    return (
        _row("Status", summaries, lambda s: s.status if not s.error else f"{s.status}: {s.error}"),
        _row("Compile ids", summaries, lambda s: ", ".join(s.compile_ids) or "none",
             "Dynamo's compiles, frame/attempt: 0/1 is frame 0's first recompile"),
        _row("Graphs", summaries, lambda s: "\n".join(f"{g.key} · {len(g.kernels)} launch(es) · code {g.code_hash}"
                                                    for g in s.graphs) or "none",
             "Each compiled graph with its launches and a hash of its output code (paths left out)"),
        _row("Kernels and library calls", summaries, lambda s: str(len(s.kernels))),
        _row("Collectives in the graphs", summaries,
             lambda s: "\n".join(f"{c.graph}: {c.label}" for c in s.collectives) or "none",
             "torch.distributed ops traced into the compiled graphs (functional collectives), in order"),
        _row("Guards per compile", summaries,
             lambda s: ", ".join(f"{cid}: {n}" for cid, n in s.guard_counts.items() if n is not None) or "—"),
        _row("Cache", summaries, lambda s: "\n".join(f"{cid}: {state}" for cid, state in s.cache.items()) or "—"),
        _row("Graph breaks", summaries, lambda s: str(len(s.graph_breaks))),
    )  # fmt: skip


def _times(summaries: Sequence[RankSummary]) -> tuple[RankRow, ...]:
    ids = list(dict.fromkeys(cid for s in summaries for cid in s.compile_ids))
    rows = [
        _row(f"Compile {cid}", summaries, functools.partial(_compile_time, cid),
             "Dynamo's compilation metrics for this compile: tracing, AOTAutograd and Inductor")
        for cid in ids
    ]  # fmt: skip
    rows.append(_row("Compile, all", summaries, lambda s: format_seconds(s.compile_s)))
    if any(s.cold_compile_s is not None for s in summaries):
        rows.append(_row("First compiled call", summaries, lambda s: format_seconds(s.cold_compile_s),
                         "The cold compile as the model process timed it: the first call of the compiled model"))  # fmt: skip
    if any(s.step_ms is not None for s in summaries):
        rows.append(
            _row("Compiled step", summaries, lambda s: _ms(s.step_ms), "Median of the timed compiled steps")
        )
    if any(s.step_device_us is not None for s in summaries):
        rows.append(_row("Profiled step, in compiled code", summaries, lambda s: _us(s.step_device_us),
                         "Per profiled step: on a GPU all kernel time, on a CPU the time inside the compiled graphs"))  # fmt: skip
    return tuple(rows)


def _kernel_times(summaries: Sequence[RankSummary]) -> tuple[RankRow, ...]:
    slowest: dict[str, float] = {}
    for summary in summaries:
        for name, us in summary.kernel_us.items():
            slowest[name] = max(slowest.get(name, 0.0), us)
    names = sorted(slowest, key=lambda n: -slowest[n])[:_KERNEL_ROWS]
    return tuple(_row(name, summaries, functools.partial(_kernel_time, name)) for name in names)


def _compile_time(compile_id: str, summary: RankSummary) -> str:
    return format_seconds(summary.compile_times.get(compile_id))


def _kernel_time(name: str, summary: RankSummary) -> str:
    return _us(summary.kernel_us.get(name))


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f} ms"


def _us(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} µs"
