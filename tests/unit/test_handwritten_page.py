"""The hand-written page of a deep model: equal matches are one row, each distinct source is shown once,
and every id on the page is unique, however many times the model repeats a layer."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from html.parser import HTMLParser

from inductor_lens.analysis import analyze
from inductor_lens.exchange.files import (
    HANDWRITTEN_RESULTS_FILE,
    HandwrittenResults,
    HandwrittenTaskResult,
    task_key,
    write_json_file,
)
from inductor_lens.handwritten.attach import attach_handwritten
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun, KernelConfig, LaunchTiming, Timing
from inductor_lens.report import render_report
from inductor_lens.report.handwritten_view import handwritten_page

from ..conftest import FIXED_TIME

LAYERS = 48
# Each repetition of the graph's extern calls gets positions past the real ones.
STRIDE = 1000
TIMING = Timing(median_ms=0.02, p10_ms=0.019, p90_ms=0.021, samples=100, method="do_bench")


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: Counter[str] = Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value is not None:
                self.ids[value] += 1


def _deep(run: CompileRun, layers: int) -> CompileRun:
    """The block's inference graph with its extern matmul and attention calls made ``layers`` times, as a
    deep model of equal layers launches them (same target, same shapes, one call per layer)."""
    graph = next(g for g in run.graphs if g.kind == "inference")
    matches = [m for m in run.handwritten if m.graph_id == graph.id]
    calls = {m.launch for m in matches if graph.kernel(m.target) is None}
    launches, repeated = list(graph.launches), []
    for layer in range(1, layers):
        for launch in graph.launches:
            if launch.position in calls:
                launches.append(replace(launch, position=launch.position + layer * STRIDE))
        for match in matches:
            if match.launch in calls:
                repeated.append(replace(match, launch=(match.launch or 0) + layer * STRIDE))
    deep = replace(graph, launches=tuple(launches))
    return replace(
        run, graphs=(deep,), handwritten=(*(m for m in run.handwritten if m.graph_id == graph.id), *repeated)
    )


def test_a_deep_model_shows_each_source_once_and_repeated_matches_as_one_row(unpacked) -> None:
    run = attach_handwritten(parse_debug_folder(unpacked("block_default"), strict=True, now=lambda: FIXED_TIME),
                             None, execute=False)  # fmt: skip
    shallow = _deep(run, 1)
    shallow_page = render_report(shallow, analyze(shallow), draw=False)["handwritten.html"]
    run = _deep(run, LAYERS)
    page = handwritten_page(run, analyze(run))
    extern_rows = [r for r in page.rows if r.graph.kernel(r.match.target) is None]
    assert extern_rows and all(r.count == LAYERS for r in extern_rows)
    mm = next(r for r in extern_rows if r.match.target == "extern_kernels.mm")
    assert [p for p, _ in mm.launch_links][:2] == [mm.match.launch, (mm.match.launch or 0) + STRIDE]

    html = render_report(run, analyze(run), draw=False)["handwritten.html"]
    parser = _Ids()
    parser.feed(html)
    repeated = {i: n for i, n in parser.ids.items() if n > 1}
    assert not repeated, f"ids used more than once: {sorted(repeated)[:5]}"
    sources = {k.source for k in run.handwritten_kernels}
    # matmul and matmul_bias launch one kernel: fewer sources than kernels, each highlighted once
    assert len(sources) < len(run.handwritten_kernels)
    assert html.count('<div class="highlight">') == len(sources) == len(page.sources)
    for source in page.sources:
        assert html.count(f'id="{source.anchor}"') == 1
    assert "def matmul_kernel(" not in html  # highlighted: each name is its own span
    assert html.count('<span class="nf">matmul_kernel</span>') == 1
    # 48 layers cost a few links per row, not 48 copies of the rows and sources
    assert len(html) < 1.5 * len(shallow_page)
    assert f"×{LAYERS}" in html and f"{LAYERS} launches:" in html


def test_grouped_extern_calls_take_the_median_of_their_launch_times(unpacked) -> None:
    run = attach_handwritten(parse_debug_folder(unpacked("block_default"), strict=True), None, execute=False)
    run = _deep(run, 3)
    (graph,) = run.graphs
    mm = next(m for m in run.handwritten if m.target == "extern_kernels.mm")
    times = {mm.launch: 10.0, mm.launch + STRIDE: 30.0, mm.launch + 2 * STRIDE: 14.0}
    launches = tuple(
        replace(x, timing=LaunchTiming(times[x.position], calls=1, share=0.01)) if x.position in times else x
        for x in graph.launches
    )
    run = replace(run, graphs=(replace(graph, launches=launches),))
    row = next(r for r in handwritten_page(run, analyze(run)).rows if r.match.key == mm.key)
    assert row.count == 3 and row.inductor_us == 14.0
    assert row.inductor_method == "in context (profiled steps), the median of 3 launches"


def test_the_page_says_which_launch_config_ran_and_where_it_came_from(unpacked) -> None:
    run = attach_handwritten(parse_debug_folder(unpacked("block_default"), strict=True), None, execute=False)
    configs = (KernelConfig("matmul_kernel", "BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=4", "cache", 0.0123),)
    matches = tuple(
        replace(m, runs=tuple(replace(r, configs=configs, timing=TIMING) for r in m.runs))
        if m.target == "extern_kernels.mm" else m
        for m in run.handwritten
    )  # fmt: skip
    run = CompileRun.from_json(replace(run, handwritten=matches).to_json())
    assert run.handwritten == matches  # the configurations are saved with the run
    html = render_report(run, analyze(run), draw=False)["handwritten.html"]
    assert "<code>BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=4</code>" in html
    assert "from the autotune cache, nothing benchmarked; 12.3 µs when tuned" in html
    assert "Launch configs from the autotune cache" in html



def test_launch_configs_from_a_copied_capture_folder_reach_the_run(unpacked, tmp_path) -> None:
    """The check process's results file carries each task's configurations; attaching it keeps them."""
    run = attach_handwritten(parse_debug_folder(unpacked("block_default"), strict=True), None, execute=False)
    config = KernelConfig("matmul_kernel", "BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3", "tuned", 0.5)
    results = HandwrittenResults(
        device="cuda",
        results={
            task_key(r.name, r.shape, r.dtype): HandwrittenTaskResult(ok=True, timing=TIMING, configs=[config])
            for m in run.handwritten
            for r in m.runs
            if r.name == "matmul"
        },
    )
    write_json_file(tmp_path / HANDWRITTEN_RESULTS_FILE, results)
    run = attach_handwritten(run, tmp_path, execute=False)
    matmuls = [r for m in run.handwritten for r in m.runs if r.name == "matmul"]
    assert matmuls and all(r.configs == (config,) and r.device == "cuda" for r in matmuls)
    assert all(r.configs == () for m in run.handwritten for r in m.runs if r.name != "matmul")
