"""Stage 5 of the pipeline (report): the first page's answers and a page per operation group.

Reads the answers of the analysis (``run.answers``, built by ``bench/answers.py`` before rendering, or for a
lens.json written before answers existed built by ``inductor_lens/analysis.py``) and lays them out: the
speed-up, the bound verdict, the top operation groups and modules, and the first things to try, in that order,
to fit a 1,400 x 900 first screen. A library group (cuBLAS, cuDNN, attention, a custom op) gets a page of its own (``ops/<key>.html``); a
generated kernel's group links to its kernel page.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import Answers, CompileRun, Finding, GraphRecord, Launch, ModuleTime, OperationGroup
from ..records.analysis import RunAnalysis
from ..records.answers import FORWARD, OUTSIDE, REST
from ..records.pages import launch_page
from ..units import format_micros
from .trials_view import TriedOutcome, finding_outcome
from .views import code_line_url, graph_url, kernel_url

FIRST_PAGE_GROUPS = 5
FIRST_PAGE_MODULES = 4
FIRST_PAGE_FINDINGS = 3
REST_WORTH_SHOWING = 0.05  # an inference step that is its forward graphs alone shows no parts


def group_url(run: CompileRun, group: OperationGroup) -> str:
    """A library group's own page; a generated kernel's page for a kernel group."""
    if group.kind in ("library", "custom op"):
        return f"ops/{group.key}.html"
    first = group.members[0]
    graph = run.graph(first.graph_id)
    return kernel_url(graph, group.name) if graph is not None else f"ops/{group.key}.html"


@dataclass(frozen=True)
class GroupRow:
    group: OperationGroup
    url: str
    where: str  # module path, else the source line


@dataclass(frozen=True)
class FindingRow:
    finding: Finding
    tried: TriedOutcome | None  # its measured outcome where it was tried (--try, records/trials.py)


@dataclass(frozen=True)
class AnswersView:
    answers: Answers
    speed: str  # "1.12x faster than eager"
    speed_detail: str
    faster: bool | None
    bound: str
    bound_detail: str
    groups: tuple[GroupRow, ...]
    all_groups: tuple[GroupRow, ...]
    more_groups: int
    modules: tuple[ModuleTime, ...]
    findings: tuple[FindingRow, ...]
    more_findings: int
    module_note: str  # why there is no module time, where there is none
    step_method: str  # how the step's parts were measured
    step_parts_only: bool  # a script's report: its profiled steps are timed, no end-to-end step
    show_parts: bool  # the step has more than its forward graphs (backward, optimizer, or time around them)


def answers_view(run: CompileRun, analysis: RunAnalysis) -> AnswersView:
    answers = analysis.answers
    if answers.speedup is not None and answers.compiled_ms is not None and answers.eager_ms is not None:
        faster = answers.speedup >= 1
        ratio = answers.speedup if faster else 1 / answers.speedup
        speed = f"{ratio:.2f}× {'faster' if faster else 'slower'} than eager"
        speed_detail = (
            f"compiled {format_micros(answers.compiled_ms * 1e3)} vs eager {format_micros(answers.eager_ms * 1e3)} "
            "per step (medians)"
        )
    else:
        faster, speed, speed_detail = None, "Speed-up not measured", answers.speedup_note
    bound = answers.bound
    all_rows = tuple(GroupRow(g, group_url(run, g), g.module or g.source or "") for g in answers.groups)
    rows = all_rows[:FIRST_PAGE_GROUPS]
    modules = tuple(m for m in answers.modules if m.path != OUTSIDE)[:FIRST_PAGE_MODULES]
    if modules:
        module_note = ""
    elif answers.groups and not any(g.module for g in answers.groups):
        module_note = (
            "No module time: this capture has no record of the nn.Module each FX node ran under "
            "(capture/module_stacks.json, written by inductor-lens 0.2 and later); time per source line is on the "
            "Source page."
        )
    else:
        module_note = ""
    return AnswersView(
        answers=answers,
        speed=speed,
        speed_detail=speed_detail,
        faster=faster,
        bound=bound.verdict if bound is not None else "",
        bound_detail=_bound_sentence(answers),
        groups=rows,
        all_groups=all_rows,
        more_groups=max(0, len(answers.groups) - len(rows)),
        modules=modules,
        findings=tuple(FindingRow(f, finding_outcome(run.trials, f)) for f in answers.findings[:FIRST_PAGE_FINDINGS]),
        more_findings=max(0, len(answers.findings) - FIRST_PAGE_FINDINGS),
        module_note=module_note,
        step_method=run.bench.step.parts_method if run.bench is not None and run.bench.step is not None else "",
        step_parts_only=bool(answers.step_parts) and answers.compiled_ms is None,
        show_parts=any(
            part.name not in (FORWARD, REST) or (part.name == REST and part.share >= REST_WORTH_SHOWING)
            for part in answers.step_parts
        ),
    )


def _bound_sentence(answers: Answers) -> str:
    bound = answers.bound
    if bound is None:
        return ""
    parts = []
    if bound.step_us and bound.busy_us is not None and bound.idle_us is not None:
        gpu = (answers.device or "").startswith("cuda")
        ran, waited = ("the GPU ran kernels", "waited") if gpu else ("the kernels ran", "the rest, around them, took")
        parts.append(
            f"{ran} {format_micros(bound.busy_us)} of a {format_micros(bound.step_us)} step "
            f"and {waited} {format_micros(bound.idle_us)} ({(bound.idle_share or 0):.0%})"
        )
    if bound.detail:
        parts.append(bound.detail)
    return "; ".join(parts)


@dataclass(frozen=True)
class MemberRow:
    graph: GraphRecord
    launch: Launch
    graph_url: str
    launch_url: str
    code_url: str


@dataclass(frozen=True)
class GroupPage:
    run: CompileRun
    group: OperationGroup
    rank: int
    members: tuple[MemberRow, ...]
    fx_nodes: tuple[str, ...]
    time_basis: str


def group_pages(run: CompileRun, analysis: RunAnalysis) -> dict[str, GroupPage]:
    """``ops/<key>.html`` -> its page, for every library and custom-op group."""
    answers = analysis.answers
    pages = {}
    for rank, group in enumerate(answers.groups, start=1):
        if group.kind not in ("library", "custom op"):
            continue
        members = []
        nodes: dict[str, None] = {}
        for member in group.members:
            graph = run.graph(member.graph_id)
            launch = next((x for x in graph.launches if x.position == member.position), None) if graph else None
            if graph is None or launch is None:
                continue
            nodes.update(dict.fromkeys(launch.source_nodes))
            members.append(
                MemberRow(
                    graph,
                    launch,
                    graph_url(graph),
                    launch_page(graph.id, True, launch.target, launch.position),
                    code_line_url(graph, launch.line),
                )
            )
        pages[f"ops/{group.key}.html"] = GroupPage(run, group, rank, tuple(members), tuple(nodes), answers.time_basis)
    return pages
