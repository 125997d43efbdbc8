"""Several ranks: finding each rank's output, where the ranks diverged, the landing page, torchrun commands.

On the real two-rank captures of tests/fixtures/cpu-torch2.13-two-ranks.tar.gz (PROVENANCE.md): ``compile-nproc``
is ``compile --nproc 2 samples/ranks_diverge.py`` (a rank<r>/capture folder per rank), ``torchrun-shared`` a plain
torchrun job whose ranks shared one TORCH_COMPILE_DEBUG tree and TORCH_TRACE folder.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.bench.profiled_step import profiled_step
from inductor_lens.capture.ranks import check_launcher, split_torchrun
from inductor_lens.errors import UsageError
from inductor_lens.parse.ranks import find_ranks
from inductor_lens.pipeline import report_folder
from inductor_lens.ranked import read_ranked, report_rank, report_ranks, write_landing
from inductor_lens.ranked_light import light_summary
from inductor_lens.ranked_plan import plan_ranks
from inductor_lens.records.rank_causes import divergences, rank_list
from inductor_lens.records.rank_normalise import code_hash, normalized_guards, paired
from inductor_lens.records.rank_summary import summarize
from inductor_lens.records.ranks import (
    TITLE_CACHE,
    TITLE_CODE,
    TITLE_COLLECTIVES,
    TITLE_RECOMPILE,
    TITLE_STRAGGLER,
    Collective,
    RankedRun,
    RankGraph,
)
from inductor_lens.report.ranks_view import ALL_SAME, collective_text, render_ranks

from ..conftest import CliResult

FIXTURE = "cpu-torch2.13-two-ranks"
RECOMPILE = (
    "rank 1 compiled 0/1 that rank 0 did not "
    "(recompiled because 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16)"
)
OTHER_CODE = (
    "graph 0/0 inference was compiled to other code on rank 1 than on rank 0: "
    "cpp_fused_mul_relu_2 only on rank 1; cpp_fused_mul_2 only on rank 0; "
    "the compile reads the rank (EQUALS_MATCH: G['rank'] == <rank>): code that branches on the rank"
)
COLLECTIVES = (
    "the compiled graphs of rank 1 hold 2 collective(s): all_reduce(f32[32]) x2, rank 0's 1 collective(s): "
    "all_reduce(f32[32]): the difference is in graphs only rank 1 compiled (0/1 inference)"
)


def test_per_rank_logs_and_a_shared_debug_tree_are_split_by_rank_and_pid(
    unpacked: Callable[[str], Path],
) -> None:
    sources = find_ranks(unpacked(FIXTURE) / "torchrun-shared")
    assert [s.rank for s in sources] == [0, 1]
    assert all(s.layout is not None for s in sources)
    layouts = [s.layout for s in sources if s.layout is not None]
    assert [[p.name for p in layout.trace_files] for layout in layouts] == [
        ["dedicated_log_torch_trace_rank_0_bo_4v55w.log"],
        ["dedicated_log_torch_trace_rank_1_c6tw41a4.log"],
    ]
    # the pid in each trace line's prefix picks the rank's run folder of the shared tree
    assert [[p.name.rsplit("-", 1)[1] for p in layout.run_dirs] for layout in layouts] == [
        ["pid_11643"],
        ["pid_11644"],
    ]
    assert [len(layout.graph_folders) for layout in layouts] == [1, 2]


def test_rank_folders_are_ranks_and_one_rank_is_an_ordinary_report(unpacked: Callable[[str], Path]) -> None:
    job = unpacked(FIXTURE) / "compile-nproc"
    sources = find_ranks(job)
    assert [(s.rank, s.folder.name, s.layout) for s in sources] == [(0, "rank0", None), (1, "rank1", None)]
    assert find_ranks(job / "rank0") == ()
    assert find_ranks(job / "rank1" / "capture") == ()


def test_the_landing_names_where_the_ranks_diverged(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    result = report_ranks(unpacked(FIXTURE) / "torchrun-shared", tmp_path / "report")
    found = {d.aspect: d for d in result.divergences}
    # the guard on the rank (G['rank'] == 1) is each rank's own value, left out: the branch shows as other code
    assert list(found) == ["compile ids", "graphs", "kernels", "collectives"]
    assert (found["compile ids"].title, found["compile ids"].text) == (TITLE_RECOMPILE, RECOMPILE)
    assert (found["graphs"].title, found["graphs"].text) == (TITLE_CODE, OTHER_CODE)
    assert (found["collectives"].title, found["collectives"].text) == (TITLE_COLLECTIVES, COLLECTIVES)
    assert {d.severity for d in result.divergences} == {"warn"}
    # two groups of ranks that compiled the same: each gets its full report
    assert [(e.rank, e.report) for e in result.ranked.ranks] == [(0, True), (1, True)]
    assert [(run.title, [g.id for g in run.graphs]) for run in result.runs] == [
        ("torchrun-shared · rank 0", ["model__0_inference_0.0"]),
        ("torchrun-shared · rank 1", ["model__0_inference_0.0", "model__1_inference_1.1"]),
    ]
    landing = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "The ranks diverged: compile ids, graphs, kernels, collectives differ." in landing
    assert "Recompile on some ranks only</b>:" in landing and "What to do:" in landing
    assert "Compared after normalising" in landing
    assert "How to read this page" in landing
    assert "<h1>Where the ranks diverged</h1>" in landing
    for rank in (0, 1):
        assert f'href="rank{rank}/index.html"' in landing
        assert (tmp_path / "report" / f"rank{rank}" / "lens.json").is_file()
        assert (tmp_path / "report" / f"rank{rank}" / "compile.html").is_file()


def test_a_compile_nproc_capture_reports_per_rank_with_its_measurements(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    out = tmp_path / "report"
    result = report_ranks(unpacked(FIXTURE) / "compile-nproc", out)
    assert [d.aspect for d in result.divergences] == [
        "compile ids",
        "graphs",
        "guards",
        "kernels",
        "collectives",
    ]
    # the rank's own number is left out; the relu only rank 1's branch calls is a guard of its own
    assert next(d for d in result.divergences if d.aspect == "guards").details == (
        "ID_MATCH: ___check_obj_id(G['torch'].relu, <id>), type=<class 'builtin_function_or_method'>",
    )
    # each rank's measurements (capture.json, profile_trace.json) are attached, as `report` of one capture does
    assert all(run.bench is not None and run.bench.end_to_end is not None for run in result.runs)
    landing = (out / "index.html").read_text(encoding="utf-8")
    assert "Compiled step" in landing and "Profiled step, in compiled code" in landing
    # the landing page re-renders from the ranks' lens.json files alone, to the same page
    ranked = read_ranked(out)
    assert ranked is not None and [e.folder for e in ranked.ranks] == ["rank0", "rank1"]
    first = landing.replace(ranked.created, "")
    index, _runs, again = write_landing(out, ranked)
    assert again == result.divergences
    assert index.read_text(encoding="utf-8").replace(ranked.created, "") == first
    # and `report` of the multi-rank report re-renders every rank and the landing in place
    rerun = report_ranks(out)
    assert rerun.index == out / "index.html"
    assert rerun.divergences == result.divergences
    assert [e.source for e in rerun.ranked.ranks] == ["rank0", "rank1"]


def test_collectives_that_do_not_match_in_one_graph_are_bad(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    result = report_ranks(unpacked(FIXTURE) / "torchrun-shared", tmp_path / "report")
    ranked = read_ranked(tmp_path / "report")
    assert ranked is not None
    zero, one = (summarize(e.rank, e.folder, run) for e, run in zip(ranked.ranks, result.runs, strict=True))
    graph = one.graphs[0]
    other = dataclasses.replace(
        graph, collectives=(Collective("all_gather_into_tensor", graph.key, "f32[64]"),)
    )
    one = dataclasses.replace(one, graphs=(other, *one.graphs[1:]))
    bad = [d for d in divergences([zero, one]) if d.severity == "bad"]
    assert [d.text for d in bad] == [
        "graph 0/0 inference issues 1 collective(s): all_gather_into_tensor(f32[64]) on rank 1 but 1 collective(s): "
        "all_reduce(f32[32]) on rank 0 (another shape or op): collectives that do not match across ranks hang or "
        "mix up data"
    ]
    assert divergences([zero, dataclasses.replace(zero, rank=1)]) == ()


def test_what_differs_between_processes_of_one_compile_is_left_out() -> None:
    guards = (
        "TREE_GUARD_MANAGER:\n+- RootGuardManager\n"
        "| | +- ID_MATCH: ___check_obj_id(G['dist'], 140607858087696), type=<class 'module'>  # dist.all_reduce(s)\n"
        "Guard latency = 203.08 us"
    )
    assert normalized_guards(guards) == ("ID_MATCH: ___check_obj_id(G['dist'], <id>), type=<class 'module'>",)
    assert normalized_guards(
        "+- TENSOR_MATCH: check_tensor(L['x'], device=1, size=[2])\n+- EQUALS_MATCH: L['self'].local_rank == 3\n"
        "+- ID_MATCH: <code object inner at 0x7f74ab12> G['seed'] == 1234"
    ) == (
        "TENSOR_MATCH: check_tensor(L['x'], device=<i>, size=[2])",
        "EQUALS_MATCH: L['self'].local_rank == <rank>",
        "ID_MATCH: <code object inner at 0x<addr>> G['seed'] == <seed>",
    )
    code = "# kernel path: /tmp/a/xy.py\nk = async_compile.triton('k', '''x''', device_str='cuda')\nload('/tmp/a/k.so')\n"
    moved = code.replace("/tmp/a/", "/tmp/b/")
    assert code_hash(code) == code_hash(moved) != code_hash(code.replace("'''x'''", "'''y'''"))
    on_one = "stream = get_raw_stream(1)\nx = torch.empty(4, device='cuda:1')\nDeviceProperties(type='cuda', index=1)"
    assert code_hash(on_one) == code_hash(on_one.replace("1", "0")) != code_hash(on_one.replace("4", "8"))


def test_torchrun_commands_are_split_into_launcher_options_and_the_script() -> None:
    assert split_torchrun(
        ["torchrun", "--standalone", "--nproc-per-node", "2", "train.py", "--steps", "3"]
    ) == (
        ["--standalone", "--nproc-per-node", "2"],
        ["train.py", "--steps", "3"],
    )
    assert split_torchrun(
        ["python3", "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "pkg.train", "-x"]
    ) == (
        ["--nproc_per_node=2"],
        ["-m", "pkg.train", "-x"],
    )
    assert split_torchrun(["python", "train.py"]) is None
    with pytest.raises(UsageError, match="--no-python"):
        split_torchrun(["torchrun", "--no-python", "echo", "hi"])


def test_bad_process_counts_and_a_missing_torchrun_are_one_line_errors(
    monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., CliResult]
) -> None:
    model = Path(__file__).resolve().parents[2] / "samples" / "ddp_mlp.py"
    for value, fragment in (
        ("0", "--nproc 0: give the number of processes"),
        ("two", "'two' is not a valid integer"),
    ):
        result = run_cli("compile", model, "--nproc", value)
        assert result.code == 2
        assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
            next(line for line in result.stderr.splitlines() if fragment in line)
        ]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(UsageError, match=r"--nproc needs torch\.distributed\.run \(torchrun\)"):
        check_launcher(2)
    result = run_cli("compile", model, "--nproc", "2")
    assert result.code == 2 and "error: --nproc needs torch.distributed.run (torchrun)" in result.stderr


def test_an_unreadable_ranks_document_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "ranks.json").write_text('{"schema_version": 99, "ranks": {}}', encoding="utf-8")
    with pytest.raises(Exception, match="ranks document"):
        read_ranked(tmp_path)
    document = RankedRun(title="t", created="c", tool_version="v", source_dir="s")
    assert RankedRun.from_json(document.to_json()) == document


def _copies(unpacked: Callable[[str], Path], target: Path, edits: dict[int, dict[str, str]]) -> Path:
    """Rank 0's TORCH_TRACE log of the torchrun capture copied as the log of each rank of ``edits``, each copy with
    its text replacements."""
    log = next((unpacked(FIXTURE) / "torchrun-shared" / "trace").glob("*_rank_0_*.log"))
    target.mkdir()
    for rank, replacements in edits.items():
        text = log.read_text(encoding="utf-8")
        for old, new in replacements.items():
            assert old in text
            text = text.replace(old, new)
        (target / f"dedicated_log_torch_trace_rank_{rank}_copy.log").write_text(text, encoding="utf-8")
    return target


def test_identical_copies_of_one_rank_never_diverge_and_one_stands_for_them(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    logs = _copies(unpacked, tmp_path / "logs", {0: {}, 1: {}, 2: {}})
    out = tmp_path / "report"
    result = report_ranks(logs, out)
    assert result.divergences == ()
    # the landing page was written from the light pass; rank 0's full report stands for the identical ranks
    assert [(e.rank, e.report) for e in result.ranked.ranks] == [(0, True), (1, False), (2, False)]
    assert [run.title for run in result.runs] == ["logs · rank 0"]
    assert not (out / "rank1").exists()
    landing = (out / "index.html").read_text(encoding="utf-8")
    assert f"{ALL_SAME} (3 ranks)" in landing
    assert "(rank 0 stands for ranks 0-2, which compiled the same)" in landing
    assert "logs · 3 ranks" in landing  # the header counts the ranks, not the groups of identical ones
    assert "<h1>The ranks, compared: no divergence</h1>" in landing
    assert f"inductor-lens report {out.resolve()} --rank 1" in landing
    # the page written first, before the full reports, says they are being built; the last one does not
    assert "being built" not in landing
    first = render_ranks(result.ranked, result.summaries, str(out.resolve()), building=True)["index.html"]
    assert "<b>being built</b>, this page is written again when they are done" in first
    # the light pass and the full report agree on everything compared
    full = summarize(0, "rank0", result.runs[0])
    assert full.fingerprint == result.summaries[1].fingerprint == result.summaries[0].fingerprint
    # `report FOLDER --rank 2`: rank 2's report on demand, linked from the landing page re-rendered
    again = report_rank(out, None, 2)
    assert [(e.rank, e.report) for e in again.ranked.ranks] == [(0, True), (1, False), (2, True)]
    assert (out / "rank2" / "lens.json").is_file() and again.divergences == ()
    assert 'href="rank2/index.html"' in (out / "index.html").read_text(encoding="utf-8")
    with pytest.raises(UsageError, match=r"--rank 7: .* holds no rank 7 \(its ranks: 0-2\)"):
        report_rank(out, None, 7)


def test_ranks_that_differ_only_by_device_index_and_addresses_compiled_the_same(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    logs = _copies(unpacked, tmp_path / "logs", {
        rank: {
            "device=None": f"device={rank}",
            "___check_global_state()": f"___check_global_state() <code object inner at 0x7f74{rank}a9c0>",
            "\tasync_compile = AsyncCompile()": f"\tasync_compile = AsyncCompile()  # cuda:{rank} at 0x55{rank}0",
        }
        for rank in (0, 1)
    })  # fmt: skip
    result = report_ranks(logs, tmp_path / "report")
    assert result.divergences == ()
    assert f"{ALL_SAME} (2 ranks)" in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")


def test_named_causes_a_cache_hit_on_one_rank_is_a_hang_risk_and_a_slow_rank_a_straggler(
    unpacked: Callable[[str], Path],
) -> None:
    log = str(next((unpacked(FIXTURE) / "torchrun-shared" / "trace").glob("*_rank_0_*.log")))
    zero = light_summary(0, "rank0", [log])
    assert zero.cache == {"0/0": "AOTAutograd miss, FX graph miss"}
    warm = dataclasses.replace(zero, rank=1, cache={"0/0": "AOTAutograd hit"})
    (hang,) = divergences([zero, warm])
    assert (hang.aspect, hang.severity, hang.title) == ("cache", "bad", TITLE_CACHE)
    assert hang.text.startswith("the compile cache served 0/0 on rank 1 but not on rank 0 (")
    assert "graphs 0/0 inference" in hang.text and "watchdog" in hang.text and hang.action
    # four ranks alike and one that takes 3x longer per step and to compile
    ranks = [dataclasses.replace(zero, rank=r, step_ms=10.0 + r * 0.1) for r in range(4)]
    slow = dataclasses.replace(zero, rank=4, step_ms=31.0, compile_times={"0/0": 3 * (zero.compile_s or 0)})
    (straggler,) = divergences([*ranks, slow])
    assert (straggler.aspect, straggler.title, straggler.ranks) == ("stragglers", TITLE_STRAGGLER, (4,))
    assert straggler.text.startswith("rank 4 is slower than the others: compile time ")
    assert "; step time 31.0 ms against the ranks' median 10.2 ms" in straggler.text
    assert divergences(ranks) == ()
    # a rank whose profiled step (from its profile trace, full report or not) takes 3x the others'
    timed = [dataclasses.replace(zero, rank=r, step_device_us=20_000.0 + r * 10) for r in range(4)]
    (late,) = divergences([*timed, dataclasses.replace(zero, rank=4, step_device_us=60_000.0)])
    assert late.ranks == (4,) and "profiled step in compiled code 60.0 ms against the ranks' median 20.0 ms" in late.text


def test_long_rank_lists_are_ranges_and_a_count() -> None:
    assert rank_list([0, 1, 2, 3, 5, 7, 8]) == "0-3, 5, 7, 8"
    assert rank_list(range(1, 64, 2)) == "1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23 and 20 more of 32 ranks"


def test_graphs_one_compile_split_into_are_paired_by_code_then_order() -> None:
    def graph(code: str, nth: int) -> RankGraph:
        return RankGraph("4/0 forward", "g", code, (f"k_{code}",), (Collective("all_reduce", "4/0 forward"),), nth)

    mine = (graph("a", 0), graph("b", 1), graph("c", 2))
    theirs = (graph("c", 0), graph("a", 1), graph("b", 2))  # DDP's submodules logged in another order
    assert [(m.code_hash, t.code_hash) for m, t in paired(mine, theirs) if m and t] == [("a", "a"), ("b", "b"), ("c", "c")]
    other = (graph("a", 0), graph("x", 1), graph("c", 2))
    assert [(m and m.name, t and t.name) for m, t in paired(mine, other) if not (m and t and m.code_hash == t.code_hash)] == [
        ("4/0 forward #2", "4/0 forward #2")
    ]


def test_sixteen_copied_ranks_report_fast_without_a_divergence(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    logs = _copies(unpacked, tmp_path / "logs", {rank: {} for rank in range(16)})
    result = report_ranks(logs, tmp_path / "report", draw=False)
    assert result.divergences == () and len(result.summaries) == 16
    assert [e.rank for e in result.ranked.ranks if e.report] == [0]
    # re-rendered from rank 0's lens.json and the light pass over the others' logs, to the same verdict
    ranked = read_ranked(tmp_path / "report")
    assert ranked is not None
    _index, runs, again = write_landing(tmp_path / "report", ranked)
    assert again == () and len(runs) == 1


def test_a_rank_without_a_full_report_keeps_its_capture_times(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    job = tmp_path / "job"
    for rank in (0, 1):  # rank 0's capture folder as both ranks' own
        shutil.copytree(unpacked(FIXTURE) / "compile-nproc" / "rank0", job / f"rank{rank}")
    result = report_ranks(job, tmp_path / "report", draw=False)
    assert result.divergences == ()
    assert [e.report for e in result.ranked.ranks] == [True, False]
    zero, one = result.summaries
    assert one.step_ms == zero.step_ms is not None and one.cold_compile_s == zero.cold_compile_s is not None
    # and its profiled step and collectives, from the light pass over its profile trace
    assert one.step_device_us == zero.step_device_us is not None
    assert one.step_collectives == zero.step_collectives and [c.op for c in one.step_collectives] == ["all_reduce"]
    landing = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    row = landing.split('<tr id="rank-1">', 1)[1].split("</tr>", 1)[0]  # its row in the table of ranks
    assert f"{one.step_device_us:.1f} µs" in row and collective_text(one.step_collectives[0]) in row
    # rank 1's full report, built on demand, has the same values as the light pass gave it
    light = one
    (_zero, built) = report_rank(tmp_path / "report", None, 1, draw=False).summaries
    assert (built.step_device_us, built.step_collectives) == (light.step_device_us, light.step_collectives)


@pytest.mark.parametrize("rank", [0, 1])
def test_the_light_pass_reads_a_ranks_profiled_step_as_its_full_report_does(
    unpacked: Callable[[str], Path], tmp_path: Path, rank: int
) -> None:
    job = unpacked(FIXTURE) / "compile-nproc"
    planned = next(p for p in plan_ranks(job, None) if p.rank == rank)
    assert planned.profile is not None and planned.profile[1] == "cpu"
    light = light_summary(rank, f"rank{rank}", planned.logs, profile=planned.profile)
    full = summarize(rank, f"rank{rank}", report_folder(job / f"rank{rank}", tmp_path / "report", draw=False).run)
    assert light.step_device_us is not None and light.step_collectives
    assert (light.step_device_us, light.step_collectives) == (full.step_device_us, full.step_collectives)
    # TORCH_TRACE logs alone (no capture): no profiled step, as before
    bare = light_summary(rank, f"rank{rank}", planned.logs)
    assert (bare.step_device_us, bare.step_collectives) == (None, ())


def test_the_light_pass_reads_a_gpu_profiled_step_as_its_full_report_does(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    # a real H200 capture of one process, read as one rank: all kernel time per step, CUDA-graph free
    folder = unpacked("h200-block-autotune-timed")
    run = report_folder(folder, tmp_path / "report", draw=False).run
    assert run.bench is not None and run.bench.step is not None
    step = profiled_step(folder / "capture" / "profile_trace.json", run.bench.device)
    assert step is not None and run.bench.device == "cuda"
    assert (step.total_us, step.collectives) == (run.bench.step.total_us, run.bench.step.collectives)


def test_report_rank_from_the_command_line(
    unpacked: Callable[[str], Path], tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    logs = _copies(unpacked, tmp_path / "logs", {0: {}, 1: {}, 2: {}})
    out = tmp_path / "report"
    result = run_cli("report", logs, "--out", out, "--rank", "2")
    assert result.code == 0, result.stderr
    assert "inductor-lens: the ranks compiled the same (see the landing page)" in result.stderr
    assert "full reports: rank(s) 0, 2" in result.stderr
    assert (out / "rank2" / "lens.json").is_file() and not (out / "rank1").exists()
    single = unpacked(FIXTURE) / "compile-nproc" / "rank0"
    result = run_cli("report", single, "--out", tmp_path / "one", "--rank", "1")
    assert result.code == 2
    assert "error: --rank 1: " in result.stderr and "not several ranks; leave --rank out" in result.stderr


def test_a_cache_hit_whose_trace_says_no_kind_nor_tensor_is_paired_and_compared_alike(
    unpacked: Callable[[str], Path],
) -> None:
    log = str(next((unpacked(FIXTURE) / "torchrun-shared" / "trace").glob("*_rank_0_*.log")))
    zero = light_summary(0, "rank0", [log])
    (graph,) = zero.graphs
    # a warm rank: its trace logs the output code, not the AOT graphs (no kind) nor the FX graph (no tensor type)
    served = dataclasses.replace(
        graph, key="0/0 unknown", collectives=tuple(dataclasses.replace(c, tensor="") for c in graph.collectives)
    )
    warm = dataclasses.replace(zero, rank=1, graphs=(served,), cache={"0/0": "AOTAutograd hit"})
    assert [d.title for d in divergences([zero, warm])] == [TITLE_CACHE]


def test_collectives_of_the_profiled_steps_that_differ_are_named(unpacked: Callable[[str], Path]) -> None:
    """DDP's all-reduces run in hooks, outside the graphs: the profiled steps' collectives (ops, calls and bytes per
    step) are compared too. Rank 0's light summary of the two-rank capture, as read from its profile trace, against
    copies of it: the same collectives never diverge, one more call a step or other bytes do, and a rank without a
    profiled step is left out."""
    job = unpacked(FIXTURE) / "compile-nproc"
    zero = light_summary(0, "rank0", [str(p) for p in (job / "rank0" / "capture" / "trace").glob("*.log")],
                         profile=(str(job / "rank0" / "capture" / "profile_trace.json"), "cpu"))  # fmt: skip
    (all_reduce,) = zero.step_collectives
    assert (all_reduce.op, all_reduce.calls_per_step) == ("all_reduce", 2.0)
    same = dataclasses.replace(zero, rank=1)
    untimed = dataclasses.replace(zero, rank=2, step_collectives=())
    assert divergences([zero, same, untimed]) == ()
    extra = dataclasses.replace(all_reduce, calls_per_step=3.0, bytes_per_step=396_288.0)
    sized = dataclasses.replace(all_reduce, bytes_per_step=264_192.0)
    ranks = [dataclasses.replace(zero, step_collectives=(sized,)), dataclasses.replace(same, step_collectives=(extra,))]
    (found,) = divergences(ranks)
    assert (found.aspect, found.title, found.ranks, found.severity) == ("collectives", TITLE_COLLECTIVES, (1,), "warn")
    assert found.text == (
        "in the profiled steps rank 1 issued all_reduce x3 (396.3 KB) a step, rank 0 all_reduce x2 (264.2 KB)"
    )
