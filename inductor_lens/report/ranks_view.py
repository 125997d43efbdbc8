"""Report stage, several ranks: the landing page of a multi-rank report (``index.html`` beside ``rank<r>/``).

``ranks_page(ranked, summaries)`` builds the page's view model from the ``ranks.json`` document and the
ranks' summaries (records/rank_summary.py: from each rank's lens.json, or the light pass over its logs): where
the ranks diverged, each cause named with what to do, what each group of identical ranks compiled side by side,
each rank's times in a row of its own (a page of a thousand ranks stays readable), which ranks have a full
report and how to build the others. ``render_ranks`` renders it; each rank's own report is the ordinary
single-rank report, untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..records.rank_causes import divergences, rank_list
from ..records.rank_normalise import NORMALISED
from ..records.ranks import RANKS_JSON, Divergence, RankedRun, RankSummary
from ..records.timing import CollectiveTime
from ..units import format_bytes
from ..version import __version__
from .env import environment, format_seconds
from .highlight import stylesheet

__all__ = ["ALL_SAME", "RanksPage", "collective_text", "ranks_page", "render_ranks"]

# What the ranks are compared by; "stragglers" compares their times, not what they compiled.
_ASPECTS = ("status", "compile ids", "graphs", "guards", "cache", "kernels", "collectives", "graph breaks")
_TIMING = "stragglers"
_KERNEL_ROWS = 40  # the slowest kernels shown side by side
_NAV_RANKS = 16  # ranks with a full report linked in the navigation bar
ALL_SAME = "All ranks compiled the same"  # the headline's words where nothing differs (tests rely on them)


@dataclass(frozen=True)
class RankColumn:
    """A column of the side-by-side tables: one rank, or a group of ranks that compiled the same."""

    rank: int  # the rank shown (the group's lowest)
    url: str  # its report, relative to the landing page; "" where it has none yet
    status: str
    error: str | None
    label: str = ""  # "rank 0", or "ranks 0, 2-63" for a group


@dataclass(frozen=True)
class RankRow:
    """One line of a side-by-side table: a fact, then its value on each rank."""

    label: str
    cells: tuple[str, ...]
    differs: bool
    title: str = ""


@dataclass(frozen=True)
class RankLine:
    """One rank in the table of every rank: its group, its report (or the command that builds it), its times."""

    rank: int
    group: str  # "A", "B"...: the group of ranks that compiled the same
    url: str
    command: str  # ``inductor-lens report ... --rank R`` where it has no report
    status: str
    cells: tuple[str, ...]  # its times, as ``RanksPage.time_labels``
    slow: bool  # a straggler


@dataclass(frozen=True)
class AspectVerdict:
    """One aspect compared (compile ids, guards...): the same on every rank, or its divergences."""

    aspect: str
    same: bool
    divergences: tuple[Divergence, ...]


@dataclass(frozen=True)
class RanksPage:
    ranked: RankedRun
    columns: tuple[RankColumn, ...]  # the groups of identical ranks, the reference rank's first
    headline: str
    aspects: tuple[AspectVerdict, ...]
    facts: tuple[RankRow, ...]
    times: tuple[RankRow, ...]  # per group: its representative's times
    kernel_times: tuple[RankRow, ...]
    bad: bool  # a divergence that puts the job at risk (a failed rank, mismatched collectives, a cache hang risk)
    stragglers: AspectVerdict | None = None
    normalised: tuple[str, ...] = NORMALISED
    reports: str = ""  # which ranks have a full report, and which ranks each stands for
    handwritten: str = ""  # the ranks whose full report ran the hand-written stage ("": it was off)
    time_labels: tuple[str, ...] = ()
    lines: tuple[RankLine, ...] = ()
    nav: tuple[RankColumn, ...] = ()
    kernel_columns: tuple[RankColumn, ...] = ()

    @property
    def compared(self) -> tuple[AspectVerdict, ...]:
        """The rows of "What was compared": each aspect, then the stragglers."""
        return self.aspects + ((self.stragglers,) if self.stragglers is not None else ())


def ranks_page(ranked: RankedRun, summaries: Sequence[RankSummary], report_dir: str = "") -> RanksPage:
    """``report_dir``: the multi-rank report's folder, named in the command that builds a rank's report."""
    found = divergences(summaries)
    aspects = tuple(
        AspectVerdict(
            aspect,
            not [d for d in found if d.aspect == aspect],
            tuple(d for d in found if d.aspect == aspect),
        )
        for aspect in _ASPECTS
    )
    slow = tuple(d for d in found if d.aspect == _TIMING)
    differing = [a.aspect for a in aspects if not a.same]
    if len(summaries) < 2:
        headline = "Only one rank left output: nothing to compare."
    elif differing:
        headline = f"The ranks diverged: {', '.join(differing)} differ."
    else:
        headline = (
            f"{ALL_SAME} ({len(summaries)} ranks): same compile ids, graphs, guards, cache outcomes, kernels and "
            "collectives."
        )
    if slow and len(summaries) >= 2:
        headline += f" {len(slow)} straggler rank(s): {rank_list(r for d in slow for r in d.ranks)}."
    reported = {e.rank for e in ranked.ranks if e.report}
    groups: dict[str, list[RankSummary]] = {}
    for summary in summaries:
        groups.setdefault(summary.fingerprint, []).append(summary)
    members = list(groups.values())
    shown = [_shown(group, reported) for group in members]
    columns = tuple(
        RankColumn(s.rank, _url(s, reported), s.status, s.error,
                   f"rank {s.rank}" if len(group) == 1 else f"ranks {rank_list(g.rank for g in group)}")
        for s, group in zip(shown, members, strict=True)
    )  # fmt: skip
    letters = {s.rank: _letter(i) for i, group in enumerate(members) for s in group}
    slow_ranks = {r for d in slow for r in d.ranks}
    where = report_dir or "REPORT"
    time_labels, time_values = _time_columns(summaries)
    lines = tuple(
        RankLine(
            s.rank, letters[s.rank], _url(s, reported),
            "" if s.rank in reported else f"inductor-lens report {where} --rank {s.rank}",
            s.status, tuple(value(s) for value in time_values), s.rank in slow_ranks,
        )
        for s in summaries
    )  # fmt: skip
    with_reports = [s for s in summaries if s.rank in reported]
    report_columns = tuple(RankColumn(s.rank, _url(s, reported), s.status, s.error, f"rank {s.rank}") for s in with_reports)
    return RanksPage(
        ranked=ranked,
        columns=tuple(
            RankColumn(c.rank, c.url, c.status, c.error, f"{_letter(i)}: {c.label}") for i, c in enumerate(columns)
        ),
        headline=headline,
        aspects=aspects,
        facts=_facts(shown),
        times=_times(shown),
        kernel_times=_kernel_times(with_reports),
        bad=any(d.severity == "bad" for d in found),
        stragglers=AspectVerdict(_TIMING, not slow, slow),
        reports=_reports(members, reported),
        handwritten=rank_list(ranked.handwritten),
        time_labels=time_labels,
        lines=lines,
        nav=report_columns[:_NAV_RANKS],
        kernel_columns=report_columns,
    )


def render_ranks(
    ranked: RankedRun, summaries: Sequence[RankSummary], report_dir: str = "", *, building: bool = False
) -> dict[str, str]:
    """The landing page and the ranks document: ``{relative path: text}``; ``building``: the full reports it
    links are still being built (the page is written again when they are done)."""
    page = ranks_page(ranked, summaries, report_dir)
    html = (
        environment()
        .get_template("ranks.html.j2")
        .render(root="", run=ranked, page=page, building=building, version=__version__, pygments_css=stylesheet())
    )
    return {"index.html": html, RANKS_JSON: ranked.to_json()}


def _shown(group: Sequence[RankSummary], reported: set[int]) -> RankSummary:
    """The rank that stands for a group: the lowest with a full report, else the lowest."""
    return next((s for s in group if s.rank in reported), group[0])


def _url(summary: RankSummary, reported: set[int]) -> str:
    return f"{summary.folder}/index.html" if summary.rank in reported else ""


def _letter(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else f"G{index + 1}"


def _reports(groups: Sequence[Sequence[RankSummary]], reported: set[int]) -> str:
    """``rank 0 stands for ranks 0, 2-63, which compiled the same``, for each group whose full report stands for
    ranks without one."""
    parts = []
    for group in groups:
        built = [s.rank for s in group if s.rank in reported]
        if built and len(group) > len(built):
            parts.append(f"rank {built[0]} stands for ranks {rank_list(s.rank for s in group)}, which compiled the same")
    return "; ".join(parts)


def _time_columns(
    summaries: Sequence[RankSummary],
) -> tuple[tuple[str, ...], tuple[Callable[[RankSummary], str], ...]]:
    """The times every rank has a value of (or some rank has): compile, first call, step, profiled step."""
    candidates: tuple[tuple[str, Callable[[RankSummary], object], Callable[[RankSummary], str]], ...] = (
        ("Compile, all", lambda s: s.compile_s, lambda s: format_seconds(s.compile_s)),
        ("First compiled call", lambda s: s.cold_compile_s, lambda s: format_seconds(s.cold_compile_s)),
        ("Compiled step", lambda s: s.step_ms, lambda s: _ms(s.step_ms)),
        ("Profiled step, in compiled code", lambda s: s.step_device_us, lambda s: _us(s.step_device_us)),
        ("Collectives per step", lambda s: s.step_collectives or None, _collectives_text),
    )
    kept = [(label, show) for label, value, show in candidates if any(value(s) is not None for s in summaries)]
    return tuple(label for label, _ in kept), tuple(show for _, show in kept)


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
        _row("Graphs", summaries, lambda s: "\n".join(f"{g.name} · {len(g.kernels)} launch(es) · code {g.code_hash}"
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
    if any(s.step_collectives for s in summaries):
        method = next(c.method for s in summaries for c in s.step_collectives)
        bytes_methods = dict.fromkeys(c.bytes_method or _BYTES_NOT_READ for s in summaries for c in s.step_collectives)
        rows.append(_row("Collectives per step", summaries, _collectives_text,
                         "In or outside the compiled graphs (DDP's all-reduce and FSDP2's all-gathers run in their hooks, "
                         f"outside them): calls, time and bytes; time: {method}; they overlap the step's other work. "
                         f"Bytes: {'; '.join(bytes_methods)}. On a GPU, the bandwidth is the bytes over the time"))  # fmt: skip
    return tuple(rows)


# The bytes of a report written before they were read (run schema 17).
_BYTES_NOT_READ = "not read by the version that wrote this report"


def _collectives_text(summary: RankSummary) -> str:
    return "\n".join(collective_text(c) for c in summary.step_collectives) or "—"


def collective_text(collective: CollectiveTime) -> str:
    """``all_reduce (NCCL) x2: 120.0 µs, 4.2 MB, 35.0 GB/s``: calls, time, bytes (— where the trace has no sizes)
    and, on a GPU, the bandwidth, per step."""
    text = f"{collective.op} ({collective.backend}) x{collective.calls_per_step:g}: {_us(collective.us_per_step)}, "
    text += format_bytes(collective.bytes_per_step) if collective.bytes_per_step is not None else "— bytes"
    rate = collective.bytes_per_s
    return text + (f", {rate / 1e9:,.1f} GB/s" if rate is not None else "")


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
