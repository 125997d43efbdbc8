"""Defects the report had on real captures (issue 14), each pinned to the capture that showed it.

Every number below was read off the capture itself (its trace logs, process log, output_code.py), not off
the parser's output: see tests/fixtures/PROVENANCE.md for where each capture comes from.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.parse import compat, parse_debug_folder
from inductor_lens.records import CompileRun
from inductor_lens.report import render_report
from inductor_lens.report.dataflow import reads_by_launch, storage
from inductor_lens.report.views import compile_summary

from ..conftest import GPU_CASES, TIMED_CASE

GRAPH_BREAK_CASE = "cpu-torch2.13-graphbreak-recompile"  # 2 frames compiled twice each
LLAMA_CASE = "llama_small_bf16"  # a real H100 model capture


def _parse(root: Path) -> CompileRun:
    return parse_debug_folder(root, strict=True)


def _round_trip(run: CompileRun) -> CompileRun:
    again = CompileRun.from_json(run.to_json())
    assert again == run
    return again


# --- 1, 2: graph breaks per compile; frames counted as Python frames ----------------------------------


def test_graph_breaks_are_each_compiles_own_not_torchs_running_count(unpacked) -> None:
    root = unpacked(GRAPH_BREAK_CASE) / "capture"
    (trace,) = root.glob("trace/*.log")
    running = [int(n) for n in re.findall(r'"num_graph_breaks": (\d+)', trace.read_text())]
    assert running == [1, 1, 1, 1, 2, 2, 2, 2]  # torch's process-wide counter, twice per compile, in log order
    run = _round_trip(_parse(root))
    assert [(f.compile_id, f.function, f.graph_breaks) for f in run.frames] == [
        ("0/0_1", "forward", 1),
        ("0/1_1", "forward", 1),
        ("1/0", "torch_dynamo_resume_in_forward_at_17", 0),
        ("1/1_1", "torch_dynamo_resume_in_forward_at_17", 0),  # the running count said 2
    ]
    assert [b.compile_id for b in run.graph_breaks] == ["0/0_1", "0/1_1"]


def test_frames_are_python_frames_each_compile_numbered(unpacked) -> None:
    run = _parse(unpacked(GRAPH_BREAK_CASE) / "capture")
    assert len(run.frames) == 4 and run.python_frames == ("0", "1")
    assert compile_summary(run) == "4 graphs from 2 Dynamo frames compiled 4 times in all, 2 graph breaks, 2 recompiles"
    pages = render_report(run, analyze(run), draw=False)
    assert "4 Dynamo frames" not in pages["index.html"]
    assert pages["compile.html"].count("compile 2 of 2 of frame") == 2
    assert "compile 1 of 2 of frame 1" in pages["compile.html"]


def test_one_frame_compiled_twice_is_one_frame(unpacked) -> None:
    run = _parse(unpacked("block_default"))
    assert [f.compile_id for f in run.frames] == ["0/0", "0/1"]
    assert compile_summary(run) == "2 graphs from 1 Dynamo frame compiled twice in all, 0 graph breaks, 1 recompile"


# --- 3: buffers call() allocates are not graph inputs ------------------------------------------------


def test_fresh_buffer_passed_as_in_out_pointer_is_written_not_an_input(unpacked) -> None:
    run = _parse(unpacked("block_default"))
    forward = run.graphs[0]
    first = forward.launches[0]
    assert "buf1 = empty_strided_cuda((8, 256, 1), (256, 1, 2048), torch.float32)" in forward.output_code
    assert "buf3 = reinterpret_tensor(buf1, (8, 256, 1), (256, 1, 1), 0); del buf1  # reuse" in forward.output_code
    assert first.code.startswith("triton_per_fused_native_layer_norm_0.run(buf3, primals_1, primals_2, primals_3,")
    assert first.reads == ("primals_1", "primals_2", "primals_3")
    assert first.writes == ("buf3", "buf0", "buf4")
    page = render_report(run, analyze(run), draw=False)[f"kernels/{forward.id}/triton_per_fused_native_layer_norm_0.html"]
    inputs = page.split("Where its inputs come from", 1)[1].split("</table>", 1)[0]
    assert inputs.count("graph input") == 3 and "<code>buf3</code>" not in inputs


@pytest.mark.parametrize("case", [*GPU_CASES, LLAMA_CASE])
def test_no_allocated_buffer_is_read_as_a_graph_input(unpacked, case: str) -> None:
    run = _parse(unpacked(case))
    for graph in run.graphs:
        allocated = set(re.findall(r"^\s+(buf\d+) = empty_strided_cuda\(", graph.output_code, re.M))
        assert allocated
        for position, reads in reads_by_launch(graph).items():
            orphans = [r.name for r in reads if r.producer is None and storage(graph, r.name) in allocated]
            assert orphans == [], (graph.id, position)


# --- 4, 5: extern launches: their own name and their own ATen op -------------------------------------


def test_bias_addmm_winner_keeps_its_name(unpacked) -> None:
    run = _parse(unpacked(TIMED_CASE))
    table = run.autotune[0]
    assert (table.op, [c.name for c in table.choices][:2]) == ("addmm", ["bias_addmm", "addmm"])
    assert table.winner is not None and table.winner.name == "bias_addmm" and table.chosen_launch == 2
    launch = run.graphs[0].launches[1]
    assert (launch.target, launch.aten_op) == ("extern_kernels.bias_addmm", "aten.addmm")  # the profiler's name
    assert launch.label == "bias_addmm (aten.addmm)"
    assert run.graphs[0].launches[3].label == "aten.mm"
    pages = render_report(run, analyze(run), draw=False)
    assert "launch #2 bias_addmm (aten.addmm)" in pages["compile.html"]
    assert "<code>bias_addmm (aten.addmm)</code>" in pages[f"graphs/{run.graphs[0].id}.html"]


def test_extern_launches_list_only_their_own_aten_op(unpacked) -> None:
    llama = _parse(unpacked(LLAMA_CASE)).graphs[0]
    down_proj = llama.launches[18]
    assert (down_proj.position, down_proj.target) == (19, "extern_kernels.mm")
    # Inductor's comment above it: "Original ATen: [aten._unsafe_view, aten.silu, aten.mul, aten.view, aten.t, aten.mm]"
    comment = llama.output_code[: llama.output_code.index(down_proj.code)].rsplit("Original ATen: ", 1)[1]
    assert comment.startswith("[aten._unsafe_view, aten.silu, aten.mul, aten.view, aten.t, aten.mm]")
    assert (down_proj.aten_ops, down_proj.source_nodes) == (("aten.mm",), ("down_proj",))
    externs = [launch for launch in llama.launches if launch.kind == "extern"]
    assert len(externs) == 18
    assert all(len(launch.aten_ops) == 1 for launch in externs)

    inference = _parse(unpacked("mlp_default")).graphs[1]
    addmm = inference.launches[2]  # listed aten.gelu, the op of the kernel before it
    assert (addmm.target, addmm.aten_ops, addmm.source_nodes) == ("extern_kernels.addmm", ("aten.addmm",), ("input_3",))
    block = _parse(unpacked("block_default")).graphs[0]
    assert block.launches[1].aten_ops == ("aten.addmm",)  # listed aten.native_layer_norm


def test_extern_ops_without_provenance_keep_the_calls_own_op() -> None:
    # Inductor's comments of the llama and block_default captures, without a provenance map to narrow them
    assert compat.extern_own_ops(
        ("aten._unsafe_view", "aten.silu", "aten.mul", "aten.view", "aten.t", "aten.mm"), "aten.mm"
    ) == ("aten.mm",)
    assert compat.extern_own_ops(("aten.addmm", "aten.view", "aten.gelu", "aten.t"), "aten.mm") == ("aten.addmm",)
    assert compat.extern_own_ops(("aten.native_layer_norm", "aten.view"), "aten.addmm") == ("aten.addmm",)
    assert compat.extern_own_ops((), "aten.mm") == ()


# --- 6: best_config from sibling trace logs ----------------------------------------------------------


def test_best_config_from_sibling_trace_logs(unpacked) -> None:
    root = unpacked("softmax_ln_coord")
    assert len(list(root.glob("trace/*.log"))) == 3
    run = _round_trip(_parse(root))
    name = "triton_red_fused__softmax_add_exp_mul_native_layer_norm_prepare_softmax_online_sub_0"
    infos = [graph.kernel(name).autotune_info for graph in run.graphs]  # type: ignore[union-attr]
    assert [info["best_config"] for info in infos] == [
        [["R0_BLOCK", 1024], ["XBLOCK", 1], ["num_warps", 2], ["num_stages", 1]],
        [["R0_BLOCK", 1024], ["XBLOCK", 1], ["num_warps", 4], ["num_stages", 1]],
    ]
    assert [info["best_config_logged_in"] for info in infos] == [
        "trace/dedicated_log_torch_trace_r7itxfpl.log",
        "trace/dedicated_log_torch_trace_p44fwqul.log",
    ]
    assert infos[0]["coordesc_tuning_start_config"][2] == ["num_warps", 8]  # the compile's own record stays
    page = render_report(run, analyze(run), draw=False)["compile.html"]
    assert "best: R0_BLOCK=1024, XBLOCK=1, num_warps=2, num_stages=1" in page
    assert "1 config(s) benchmarked at the first run</td>" not in page


# --- 7: failed autotune choices -----------------------------------------------------------------------


def test_failed_autotune_choices_are_counted_with_their_reason(unpacked) -> None:
    root = unpacked(TIMED_CASE)
    log = next(root.rglob("capture.log")).read_text()
    assert log.count("Exception No valid triton configs. OutOfMemoryError: out of resource") == 16
    run = _round_trip(_parse(root))
    assert [len(t.failed) for t in run.autotune] == [4, 4, 4, 4]
    reasons = Counter(f.reason for t in run.autotune for f in t.failed)
    assert reasons == {
        "out of shared memory: needs 262,144 bytes, the limit is 232,448": 8,
        "out of shared memory: needs 294,912 bytes, the limit is 232,448": 4,
        "out of shared memory: needs 393,216 bytes, the limit is 232,448": 4,
    }
    first = run.autotune[0].failed[0]
    assert first.stage == "precompile" and first.config["BLOCK_K"] == 128 and first.config["num_stages"] == 5
    pages = render_report(run, analyze(run), draw=False)
    assert "16 choices failed" in pages["compile.html"]
    assert "4 autotuned ops, 16 failed autotune choices" in pages["index.html"]


def test_failed_choices_at_benchmarking_are_counted_too(unpacked) -> None:
    run = _parse(unpacked("mlp_max_autotune_nocg"))
    stages = [Counter(f.stage for f in t.failed) for t in run.autotune]
    assert stages == [{"precompile": 4}, {"precompile": 4}, {"benchmark": 4}, {"benchmark": 4}]


# --- 8: compile phases named for what they time ----------------------------------------------------


def test_scheduler_is_in_the_code_generation_phase(unpacked) -> None:
    root = unpacked("mlp_default")
    trace = next(p for p in root.glob("trace/*.log") if '"name": "Scheduler.__init__"' in p.read_text())
    spans = re.findall(r'"name": "(code_gen|Scheduler.__init__)",\n\t"ts": [\d.]+,\n(?:.*\n){0,4}?\t"ph": "(\w)"',
                       trace.read_text())  # fmt: skip
    assert spans[:4] == [("code_gen", "B"), ("Scheduler.__init__", "B"), ("Scheduler.__init__", "E"), ("code_gen", "E")]
    run = _parse(root)
    names = [p.name for p in run.frames[0].phases if not p.within]
    assert names == ["Dynamo tracing", "AOTAutograd", "Inductor graph passes and lowering",
                     "Inductor scheduling and code generation"]  # fmt: skip


# --- 9: CUDA-graph recordings ------------------------------------------------------------------------


def test_cuda_graph_recordings_from_the_trace(unpacked) -> None:
    root = unpacked("block_reduce_overhead")
    text = "".join(p.read_text() for p in root.glob("trace/*.log"))
    assert text.count('"name": "CUDAGraphNode.record"') == 70  # 35 spans, B and E
    run = _round_trip(_parse(root))
    assert [(f.compile_id, f.cudagraph_recordings) for f in run.frames] == [("0/0", 35), ("0/1", None)]
    assert run.frames[0].cudagraph_record_s == pytest.approx(0.05103, abs=1e-5)
    pages = render_report(run, analyze(run), draw=False)
    assert "1 recompile, 35 CUDA-graph recordings" in pages["index.html"]
    assert "recorded 35 times, 51.0 ms recording in all" in pages["compile.html"]
    assert all(f.cudagraph_recordings is None for f in _parse(unpacked("block_default")).frames)


# --- 10: without a trace log, the breaks debug.log names ----------------------------------------------


def test_without_trace_log_the_break_debug_log_names_is_shown(fixture_copy) -> None:
    root = fixture_copy(GRAPH_BREAK_CASE) / "capture"
    shutil.rmtree(root / "trace")
    run = _round_trip(_parse(root))
    assert run.frames == ()
    (graph_break,) = run.graph_breaks
    assert graph_break.reason == "Graph break from `Tensor.item()`"
    assert graph_break.location is not None and graph_break.location.line == 17
    assert graph_break.location.code == "if y.sum().item() > 0:  # data-dependent Python control flow: a graph break"
    summary = "4 graphs, 1 graph break named in Dynamo&#39;s debug.log, recompiles not recorded (no TORCH_TRACE log)"
    pages = render_report(run, analyze(run), draw=False)
    assert summary in pages["index.html"]
    assert "0 graph breaks" not in pages["index.html"] and "0 recompiles" not in pages["index.html"]
    assert "Graph break from `Tensor.item()`" in pages["compile.html"]


# --- 11: the mode the options pin --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "mode", "options"),
    [
        ("mlp_max_autotune_nocg", "max-autotune-no-cudagraphs", {}),
        ("mlp_bf16_max_autotune_nocg", "max-autotune-no-cudagraphs", {}),
        ("block_reduce_overhead", "reduce-overhead", {}),
        ("mlp_epilogue", "default", {"epilogue_fusion": True, "max_autotune": True}),
        ("softmax_ln_coord", "default", {"coordinate_descent_tuning": True}),
    ],
)
def test_mode_is_inferred_from_options(unpacked, case: str, mode: str, options: dict[str, object]) -> None:
    run = _round_trip(_parse(unpacked(case)))
    assert run.settings is not None
    assert (run.settings.mode, run.settings.mode_inferred, dict(run.settings.options)) == (mode, True, options)
    index = render_report(run, analyze(run), draw=False)["index.html"]
    assert f"{mode} (inferred from options)" in index and "not recorded" not in index.split("Device", 1)[0]
