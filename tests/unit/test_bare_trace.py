"""A report from TORCH_TRACE logs alone (no debug folder): the graphs rebuilt from the trace's records.

Every committed capture that has both a debug folder and a trace is read twice, whole and with its trace
logs alone: the two must find the same graphs (by compile id and kind) with the same kernels, launch order,
FX graph stages and provenance. Then the bare reading's own facts on one capture, the CLI on one log file, and
each compile's IR stages as the trace holds them (Dynamo's graph, pre-grad, AOT, post-grad), a page each.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.compat import TRACE_FILE
from inductor_lens.records import CompileRun, GraphRecord
from inductor_lens.report import render_report

from ..conftest import CliResult

# Every fixture with graph folders and a TORCH_TRACE log (GPU: H200 and H100, torch 2.11; CPU: torch 2.13, 2.14.1).
CAPTURES = (
    "block_default", "block_reduce_overhead", "gpt2_small_ro", "h100-block-ro-graphfree",
    "h200-block-autotune-timed", "llama_bf16_max_autotune", "llama_small_bf16", "mlp_bf16_max_autotune_nocg",
    "mlp_default", "mlp_epilogue", "mlp_max_autotune_nocg", "resnet18_train", "resnet50_train",
    "softmax_ln_coord", "softmax_ln_default", "cpu-torch2.13-block-dynamic", "cpu-torch2.13-dynamic-recompile",
    "cpu-torch2.13-graphbreak-recompile", "cpu-torch2.13-mlp-train-dynamic", "cpu-torch2.13-mlp-train",
    "cpu-torch2.13-slice-dynamic", "cpu-torch2.14-channels-last",
)  # fmt: skip


def _traces_alone(capture: Path, target: Path) -> Path:
    """A folder holding only the capture's TORCH_TRACE logs."""
    target.mkdir()
    for path in capture.rglob("*"):
        if path.is_file() and TRACE_FILE.match(path.name):
            shutil.copy2(path, target / path.name)
    return target


def _what_it_shows(graph: GraphRecord) -> dict[str, object]:
    return {
        "kernels": [k.name for k in graph.kernels],
        "categories": [k.category for k in graph.kernels],
        "launches": [(launch.kind, launch.target) for launch in graph.launches],
        "fx_stages": sorted(g.stage for g in graph.fx_graphs),
        "provenance": graph.provenance is not None,
        "source_nodes": [k.source_nodes for k in graph.kernels],
    }


def _by_compile(run: CompileRun) -> dict[tuple[str | None, str], dict[str, object]]:
    return {(g.compile_id, g.kind): _what_it_shows(g) for g in run.graphs}


@pytest.mark.parametrize("name", CAPTURES)
def test_the_trace_alone_finds_the_debug_folders_graphs_kernels_and_launch_order(
    name: str, unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    capture = unpacked(name)
    whole = parse_debug_folder(capture)
    bare = parse_debug_folder(_traces_alone(capture, tmp_path / "trace"))
    assert len(bare.graphs) == len(whole.graphs)
    assert _by_compile(bare) == _by_compile(whole)
    assert bare.environment.source == "TORCH_TRACE log" and not any(g.ir for g in bare.graphs)


def test_a_bare_trace_names_its_graphs_by_compile_id_and_kind_and_says_what_it_lacks(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    """resnet18_train: one frame, its forward then its backward (AOTAutograd logged both); mlp_default: a
    forward (0/0) and, after a no_grad call, an inference graph (0/1)."""
    run = parse_debug_folder(_traces_alone(unpacked("resnet18_train"), tmp_path / "rn"), strict=True)
    assert [(g.id, g.compile_id, g.kind, len(g.kernels)) for g in run.graphs] == [
        ("trace-0_0_forward", "0/0", "forward", 101), ("trace-0_0_backward", "0/0", "backward", 79)
    ]  # fmt: skip
    (note,) = [d for d in run.stats.diagnostics if "no debug folder" in d.message]
    assert note.level == "note" and "ir_pre_fusion.txt" in note.message and "2 graph(s)" in note.message
    run = parse_debug_folder(_traces_alone(unpacked("mlp_default"), tmp_path / "mlp"), strict=True)
    assert [(g.name, g.kind) for g in run.graphs] == [("0/0 forward", "forward"), ("0/1 inference", "inference")]
    assert run.graphs[0].folder.endswith(".log:2061")  # the output code's record


def test_a_kernel_without_inductors_byte_count_is_counted_from_its_tensors_and_says_so(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    """A production trace has no kernel_num_gb (Inductor writes it only with TORCHINDUCTOR_BENCHMARK_KERNEL):
    cpp_fused_relu_0 of the CPU MLP takes buf1, f32[32, 128], as in_out_ptr0: read and written, 32,768 bytes."""
    run = parse_debug_folder(_traces_alone(unpacked("cpu-torch2.13-mlp-train"), tmp_path / "t"), strict=True)
    forward = next(g for g in run.graphs if g.kind == "forward")
    assert [k.bytes_accessed for k in forward.kernels] == [None]
    page = render_report(run, analyze(run), draw=False)[f"kernels/{forward.id}/cpp_fused_relu_0.html"]
    assert "<dd>32,768 B (32.8 KB)</dd>" in page
    assert "counted from the tensors passed (each read or written once), at its first launch" in page


def test_report_reads_one_trace_log_file(
    unpacked: Callable[[str], Path], tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    (log,) = [p for p in _traces_alone(unpacked("llama_small_bf16"), tmp_path / "t").iterdir()]
    result = run_cli("report", log, "--out", tmp_path / "report")
    assert result.code == 0, result.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Read from TORCH_TRACE logs alone" in page and "triton_red_fused__to_copy_add_embedding_mean" in page


def test_a_file_that_is_no_trace_is_a_one_line_error(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    result = run_cli("report", tmp_path / "notes.txt", "--out", tmp_path / "report")
    assert result.code != 0 and "not a folder or a TORCH_TRACE log" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_each_compile_keeps_its_ir_stages_in_the_order_the_trace_logged_them(unpacked: Callable[[str], Path]) -> None:
    """cpu-torch2.13-mlp-train: one frame, forward and backward; each stage is a page of the report."""
    from inductor_lens.report import render_report

    run = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True)
    (frame,) = run.frames
    assert [s.name for s in frame.stages] == [
        "dynamo_output_graph", "before_pre_grad_graph", "after_pre_grad_graph", "aot_joint_graph",
        "aot_forward_graph_fw_metadata", "aot_forward_graph", "aot_backward_graph",
        "before_post_grad_graph", "inductor_post_grad_graph", "before_post_grad_graph", "inductor_post_grad_graph",
    ]  # fmt: skip
    assert [s.lines for s in frame.stages][:4] == [13, 16, 16, 46] and not any(s.cut_chars for s in frame.stages)
    assert frame.stages[3].text.startswith("class inner_f(torch.nn.Module):") and "tangents" in frame.stages[3].text
    pages = render_report(run, analyze(run), draw=False)
    assert "compile/frame-0-0/04-aot_joint_graph.html" in pages
    assert 'href="compile/frame-0-0/07-aot_backward_graph.html"' in pages["compile.html"]


def test_a_stage_past_the_limit_is_cut_at_a_line_and_says_so(
    unpacked: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from inductor_lens.parse import trace_kinds

    monkeypatch.setattr(trace_kinds, "IR_STAGE_LIMIT", 200)
    (frame,) = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train")).frames
    joint = next(s for s in frame.stages if s.name == "aot_joint_graph")
    assert len(joint.text) <= 200 and joint.text.endswith("\n") and joint.cut_chars > 0


def test_a_trace_without_output_code_has_no_graphs_and_says_so(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """A compile worker's log (mlp_default's small ones: timeline events only): no graph, one warning."""
    folder = tmp_path / "worker"
    folder.mkdir()
    shutil.copy2(next(unpacked("mlp_default").rglob("dedicated_log_torch_trace_61chavn9.log")), folder)
    run = parse_debug_folder(folder)
    assert run.graphs == ()
    assert [d.message for d in run.stats.diagnostics] == ["no graph output code in the TORCH_TRACE log, and no debug folder"]


def test_a_record_with_a_bad_compile_id_is_warned_once_and_skipped(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """The output code of mlp_default's 0/1 with a frame id that is not an integer: one warning naming its
    line, one graph left (0/0)."""
    folder = _traces_alone(unpacked("mlp_default"), tmp_path / "t")
    log = folder / "dedicated_log_torch_trace_f6sk9ivp.log"
    lines = log.read_text().split("\n")
    line = 6271  # the inductor_output_code record of 0/1
    assert '"inductor_output_code"' in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace('"frame_id": 0', '"frame_id": "0"')
    log.write_text("\n".join(lines))
    run = parse_debug_folder(folder)
    assert [(g.compile_id, g.kind) for g in run.graphs] == [("0/0", "forward")]
    warnings = [d for d in run.stats.diagnostics if d.level == "warning"]
    assert len(warnings) == 1 and warnings[0].count == 1
    assert f"line {line}" in warnings[0].message and "frame_id" in warnings[0].message
