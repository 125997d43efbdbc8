"""The compile timeline: every chromium_event span of every TORCH_TRACE log, on the compilation page and
exported as a Chrome trace (tlparse's chromium_events.json, with each process under its own pid).

Counts are the begin events of the fixtures' logs (torch 2.11 on GPUs, 2.13 on CPUs); a log cut short or
damaged is counted and shown, never an exception.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder, trace_timeline
from inductor_lens.records import CompileRun
from inductor_lens.report import render_report
from inductor_lens.report.timeline_view import TIMELINE_EXPORT, family_of, timeline_view

from ..raw_trace import payload_after
from .test_bare_trace import CAPTURES, _traces_alone

# name: (spans, instants, process ids in the order the logs were read, compiles' top-level spans)
FIXTURES = {
    "cpu-torch2.13-mlp-train": (93, 2, [14945], {"dynamo": 1, "entire_backward_compile": 1}),
    "cpu-torch2.13-graphbreak-recompile": (236, 12, [13616], {"dynamo": 4}),
    "cpu-torch2.13-dynamic-recompile": (116, 6, [15753], {"dynamo": 2}),
    "cpu-torch2.13-slice-dynamic": (53, 2, [16455], {"dynamo": 1}),
    "block_default": (126, 4, [1192, 994, 1101], {"dynamo": 2, "CachingAutotuner.benchmark_all_configs": 4}),
    "block_reduce_overhead": (
        165, 4, [2621, 2526, 2419],
        {"dynamo": 2, "CachingAutotuner.benchmark_all_configs": 4, "CUDAGraphNode.record": 35,
         "cudagraphify.get_container": 2},
    ),
    "resnet50_train": (
        185, 3, [487], {"dynamo": 1, "entire_backward_compile": 1, "CachingAutotuner.benchmark_all_configs": 101}
    ),
}  # fmt: skip


def _raw_events(folder: Path) -> list[dict[str, object]]:
    """The chromium_event payloads of every log, read without the parser."""
    events = []
    for log in sorted(folder.rglob("dedicated_log_torch_trace_*.log")):
        lines = log.read_text().split("\n")
        for i, line in enumerate(lines):
            if '{"chromium_event"' in line:
                events.append(json.loads(payload_after(lines, i)))
    return events


@pytest.mark.parametrize("name", FIXTURES)
def test_every_begin_end_pair_of_every_log_is_one_span(name: str, unpacked: Callable[[str], Path]) -> None:
    spans, instants, pids, top = FIXTURES[name]
    capture = unpacked(name)
    run = parse_debug_folder(capture, strict=True)
    timeline = run.timeline
    kinds = Counter(s.kind for s in timeline.spans)
    assert (kinds["span"], kinds["instant"], kinds["unfinished"]) == (spans, instants, 0)
    assert (timeline.cut, timeline.unmatched_begins, timeline.unmatched_ends) == (0, 0, 0)
    assert [p.pid for p in timeline.processes] == pids
    raw = Counter(e["ph"] for e in _raw_events(capture))
    assert raw["B"] == raw["E"] == spans and raw["i"] == instants
    assert Counter(s.name for s in timeline.spans if s.kind == "span") == Counter(
        e["name"] for e in _raw_events(capture) if e["ph"] == "B"
    )
    compiled_top = Counter(
        s.name for s in timeline.spans if s.depth == 0 and s.kind == "span" and s.compile_id
    )
    assert compiled_top == top


def test_spans_nest_dynamo_then_the_frame_then_the_backend_and_inductor(
    unpacked: Callable[[str], Path],
) -> None:
    """cpu-torch2.13-mlp-train: compile 0/0's chain from Dynamo down to the C++ compiler, each within the last."""
    run = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True)
    spans = run.timeline.spans
    first = {s.name: s for s in reversed(spans) if s.compile_id == "0/0"}
    chain = ["dynamo", "entire_frame_compile", "compile_attempt_0", "backend_compile", "create_aot_dispatcher_function",
             "compile_fx.<locals>.fw_compiler_base", "inductor_compile", "fx_codegen_and_compile"]  # fmt: skip
    assert [first[name].depth for name in chain] == list(range(len(chain)))
    for outer, inner in itertools.pairwise(chain):
        assert first[outer].start_us <= first[inner].start_us and first[inner].end_us <= first[outer].end_us
    assert first["entire_frame_compile"].args["fn_name"] == "_compile.compile_inner"
    assert max(s.depth for s in spans) == 12
    # every span below the top row lies within the span it is nested in, one row up or (where a compile thread's
    # compile_file, logged as the same thread, straddles the end of the main thread's async_compile.wait) more
    placed = trace_timeline.nesting(spans)
    for i, span in enumerate(spans):
        row, parent = placed.get(i, (0, None))
        assert row == span.depth and (parent is None) == (row == 0)
        if parent is not None:
            container = spans[parent]
            assert (
                container.depth < row
                and container.start_us <= span.start_us
                and span.end_us <= container.end_us
            )
    parents = {i: spans[parent] for i, (_, parent) in placed.items() if parent is not None}
    straddling = [spans[i] for i, container in parents.items() if container.depth < spans[i].depth - 1]
    assert [(s.name, s.depth) for s in straddling] == [("async_compile.wait", 8)]
    (dynamo,) = [s for s in spans if s.name == "dynamo"]
    assert dynamo.args["co_name"] == "forward" and "dynamo_config" not in dynamo.args
    assert all(len(str(v)) <= trace_timeline.ARG_CHARS for s in spans for v in s.args.values())


def test_every_span_name_in_the_fixtures_has_a_part_of_the_compiler(unpacked: Callable[[str], Path]) -> None:
    names: set[object] = set()
    for name in CAPTURES:
        names |= {e["name"] for e in _raw_events(unpacked(name))}
    assert len(names) == 79  # 77 in the 2.11 and 2.13 captures, 2 first seen in the 2.14.1 one
    assert {n for n in names if family_of(str(n)) == "other"} == set()
    assert [family_of(n) for n in ("dynamo", "backend_compile", "inductor_compile", "Scheduler.codegen",
                                   "fx_graph_cache_miss", "CachingAutotuner.benchmark_all_configs",
                                   "CUDAGraphNode.record", "fx_codegen_and_compile", "PyCodeCache.load_by_key_path")] == [
        "dynamo", "aot", "inductor", "codegen", "cache", "autotune", "cudagraphs", "inductor", "codegen"
    ]  # fmt: skip


def test_the_page_draws_a_chart_per_time_apart_process_and_the_export_opens_in_perfetto(
    unpacked: Callable[[str], Path],
) -> None:
    """block_default: the compile (process 994) and two later runs of a graph's output_code.py (1101, 1192)."""
    run = parse_debug_folder(unpacked("block_default"), strict=True)
    view = timeline_view(run, analyze(run))
    assert [c.title.split(":")[0] for c in view.charts] == ["process 994", "process 1101", "process 1192"]
    assert "starting 23.50 s after the first event" in view.charts[1].title
    assert [len(c.lanes) for c in view.charts] == [1, 1, 1]
    assert (
        view.charts[1]
        .lanes[0]
        .detail.endswith("no compile ids: a process that ran compiled code or a compile worker · 6 spans")
    )
    assert (
        view.totals[0].name == "dynamo"
        and view.totals[0].count == 2
        and view.totals[0].compile_ids == "0/0, 0/1"
    )
    assert view.not_drawn == 0 and view.compile_ids == 2
    pages = render_report(run, analyze(run), draw=False)
    page = pages["compile.html"]
    assert page.count('class="tl-box') == 126 and page.count('class="tl-mark') == 4
    assert page.count('<figure class="tl-chart"') == 3
    assert (
        f'<a href="{TIMELINE_EXPORT}" download>' in page
        and "<code>https://ui.perfetto.dev</code> (<i>Open trace file</i>)" in page
    )
    assert 'data-tip="dynamo: 4.45 s\n[0/0] · at +0.000 s\naotautograd_local_cache_miss_count: 1\n' in page
    assert "How to read this page" in page and "Compile timeline." in page
    export = json.loads(pages[TIMELINE_EXPORT])
    events = export["traceEvents"]
    assert Counter(e["ph"] for e in events) == {"X": 126, "i": 4, "M": 3}
    assert {e["pid"] for e in events} == {994, 1101, 1192}
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names[994] == "process 994 · trace/dedicated_log_torch_trace_bhjbv1f4.log"
    raw = [e for e in _raw_events(unpacked("block_default")) if e["ph"] in ("B", "i")]
    assert sorted((e["name"], e["ts"]) for e in events if e["ph"] != "M") == sorted(
        (e["name"], e["ts"]) for e in raw
    )


def test_a_bare_trace_and_a_report_rendered_again_from_lens_json_export_the_same_timeline(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    whole_run = parse_debug_folder(unpacked("mlp_default"), strict=True)
    whole = render_report(whole_run, analyze(whole_run), draw=False)
    bare_run = parse_debug_folder(_traces_alone(unpacked("mlp_default"), tmp_path / "t"))
    bare = render_report(bare_run, analyze(bare_run), draw=False)
    # the bare trace's logs sit in the folder itself, not in trace/: only the process names differ
    assert bare[TIMELINE_EXPORT] == whole[TIMELINE_EXPORT].replace(
        "trace/dedicated_log", "dedicated_log"
    ).replace(json.dumps(str(unpacked("mlp_default"))), json.dumps(str(tmp_path / "t")))
    again = CompileRun.from_json(bare_run.to_json())
    assert again.timeline == bare_run.timeline
    assert render_report(again, analyze(again), draw=False)[TIMELINE_EXPORT] == bare[TIMELINE_EXPORT]
    assert len(json.loads(bare[TIMELINE_EXPORT])["traceEvents"]) == 112 + 4 + 3


def test_a_log_cut_short_or_damaged_is_counted_and_shown_never_raised(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    """cpu-torch2.13-mlp-train's log, cut just before Inductor's code generation of 0/0 ended (a compile killed
    there), with the begin of bytecode_tracing taken out and one event's payload broken."""
    folder = _traces_alone(unpacked("cpu-torch2.13-mlp-train"), tmp_path / "t")
    (log,) = folder.iterdir()
    lines = log.read_text().split("\n")
    records = [i for i, line in enumerate(lines) if '{"chromium_event"' in line]

    def payload(i: int) -> dict[str, object]:
        end = next(j for j in range(i + 1, len(lines)) if not lines[j].startswith("\t"))
        return json.loads("\n".join(line[1:] for line in lines[i + 1 : end]))

    cut = next(
        i for i in records if payload(i)["name"] == "GraphLowering.codegen" and payload(i)["ph"] == "E"
    )
    begin = next(i for i in records if payload(i)["name"] == "bytecode_tracing" and payload(i)["ph"] == "B")
    broken = next(
        i for i in records if payload(i)["name"] == "aot_collect_metadata" and payload(i)["ph"] == "E"
    )
    damaged = lines[:cut]
    damaged[broken + 1] = "\t{not json"
    del damaged[begin : next(j for j in range(begin + 1, cut) if not lines[j].startswith("\t"))]
    log.write_text("\n".join(damaged) + "\n")

    run = parse_debug_folder(folder)
    timeline = run.timeline
    unfinished = [s.name for s in timeline.spans if s.kind == "unfinished"]
    assert unfinished[:4] == ["dynamo", "entire_frame_compile", "compile_attempt_0", "backend_compile"]
    assert unfinished[-1] == "GraphLowering.codegen" and timeline.unmatched_begins == len(unfinished) == 12
    assert timeline.unmatched_ends == 1
    last = max(s.end_us for s in timeline.spans if s.kind == "span")  # the log's last event ended a span
    assert all(s.end_us == pytest.approx(last, abs=0.01) for s in timeline.spans if s.kind == "unfinished")
    assert "aot_collect_metadata" in unfinished  # its end's payload is the broken one
    warnings = [d.message for d in run.stats.warnings]
    assert any(
        m.startswith("12 chromium_event begin(s) without an end (dynamo, entire_frame_compile,")
        for m in warnings
    )
    assert "1 chromium_event end(s) of bytecode_tracing without a begin; left out" in warnings
    assert any("chromium_event: payload is not JSON" in m for m in warnings)
    page = render_report(run, analyze(run), draw=False)["compile.html"]
    assert (
        len(re.findall(r'class="tl-box [^"]*tl-unfinished', page)) == 12
        and "12 spans have a begin and no end" in page
    )
    assert "1 end event without a begin is left out" in page
    export = json.loads(render_report(run, analyze(run), draw=False)[TIMELINE_EXPORT])
    assert sum("unfinished" in e.get("args", {}) for e in export["traceEvents"]) == 12


def test_past_the_limit_the_longest_spans_are_kept_and_the_page_says_what_was_cut(
    unpacked: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compile's outer spans end last: the limit keeps the longest, not the first to end."""
    whole = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True).timeline.spans
    monkeypatch.setattr(trace_timeline, "MAX_SPANS", 40)
    run = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True)
    timeline = run.timeline
    assert (len(timeline.spans), timeline.cut) == (40, 95 - 40)
    durations = sorted(s.duration_us for s in whole)
    assert sorted(s.duration_us for s in timeline.spans) == durations[55:]
    assert timeline.cut_longest_us == durations[54] < durations[55]
    assert [s.name for s in timeline.spans if s.depth == 0] == ["dynamo", "entire_backward_compile"]
    longest = [(s.name, s.start_us) for s in whole if s.duration_us >= durations[55]]
    assert [(s.name, s.start_us) for s in timeline.spans] == longest  # in log order
    pages = render_report(run, analyze(run), draw=False)
    cut = f"{durations[54] / 1e3:.1f} ms"
    assert (
        f"the 40 longest are; 55 shorter ones (none longer than {cut}) are left out" in pages["compile.html"]
    )
    assert json.loads(pages[TIMELINE_EXPORT])["otherData"]["spans_left_out"] == 55


def test_a_report_without_chromium_events_says_so_and_exports_nothing(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(unpacked("cpu-torch2.13-slice-dynamic"), folder)
    for log in folder.rglob("dedicated_log_torch_trace_*.log"):
        text = log.read_text()
        # drop the chromium_event records and their payloads
        log.write_text(re.sub(r"^[^\t\n]*\{\"chromium_event\".*\n(\t.*\n)*", "", text, flags=re.M))
    run = parse_debug_folder(folder, strict=True)
    assert run.timeline.spans == () and run.frames
    pages = render_report(run, analyze(run), draw=False)
    assert TIMELINE_EXPORT not in pages
    assert (
        "No timeline: the TORCH_TRACE log holds no <code>chromium_event</code> records."
        in pages["compile.html"]
    )
