"""How the model became kernels: frames, graph breaks, recompiles, compile time, autotuning, provenance
(the report's compilation and source pages), against the real captures."""

from __future__ import annotations

import itertools
import re

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.origins import origin_segments
from inductor_lens.records import CompileRun
from inductor_lens.report import render_report

from ..conftest import FIXED_TIME, FIXTURES


def _run(unpacked, case: str) -> CompileRun:
    return parse_debug_folder(unpacked(case), strict=True, now=lambda: FIXED_TIME)


def test_every_autotune_table_of_mlp_epilogue_is_parsed(unpacked) -> None:
    root = unpacked("mlp_epilogue")
    run = _run(unpacked, "mlp_epilogue")
    log = (root / "run.log").read_text()
    printed = re.findall(r"^AUTOTUNE (\w+)\((.*)\)$", log, re.M)
    assert [(t.op, ", ".join(t.shapes)) for t in run.autotune] == printed
    assert len(run.autotune) == 4
    first = run.autotune[0]
    assert first.shapes == ("256x4096", "256x1024", "1024x4096")
    assert first.strides == "[0, 1], [1024, 1], [1, 1024]"
    assert first.dtypes == "torch.float32, torch.float32, torch.float32"
    assert (first.num_choices, first.benchmark_s, first.precompile_s) == (18, 0.6446, 5.2533)
    assert [(c.name, c.ms, c.percent) for c in first.choices[:3]] == [
        ("addmm", 0.0749, 100.0),
        ("bias_addmm", 0.0941, 79.5),
        ("triton_mm_9", 0.1364, 54.9),
    ]
    assert first.choices[2].kind == "triton" and first.choices[0].kind == "extern"
    assert first.choices[2].config == {"ACC_TYPE": "tl.float32", "ALLOW_TF32": False, "BLOCK_K": 32, "BLOCK_M": 64,
                                       "BLOCK_N": 128, "EVEN_K": True, "GROUP_M": 8, "USE_FAST_ACCUM": False,
                                       "num_stages": 3, "num_warps": 4}  # fmt: skip
    # every printed choice line of every table, with its time
    choice_lines = re.findall(r"^  (\S+) ([\d.]+) ms ([\d.]+)%", log, re.M)
    parsed = [(c.name, c.ms, c.percent) for t in run.autotune for c in t.choices]
    assert parsed == [(name, float(ms), float(pct)) for name, ms, pct in choice_lines]
    # the extern winners are the extern calls of the graphs, in order
    assert [(t.graph_id, t.winner.name, t.chosen_launch) for t in run.autotune] == [
        ("model__0_forward_1.0", "addmm", 1),
        ("model__0_forward_1.0", "addmm", 3),
        ("model__1_inference_3.1", "mm", 1),
        ("model__1_inference_3.1", "addmm", 3),
    ]
    page = render_report(run, analyze(run), draw=False)["compile.html"]
    assert page.count('<section class="autotune"') == 4
    assert 'tr class="winner"' in page and "triton_mm_9" in page


def test_bf16_templates_linked_to_their_autotune_winners(unpacked) -> None:
    run = _run(unpacked, "mlp_bf16_max_autotune_nocg")
    assert [(t.graph_id, t.winner.name, t.chosen_kernel) for t in run.autotune] == [
        ("model__0_forward_1.0", "triton_mm_17", "triton_tem_fused_addmm_t_0"),
        ("model__0_forward_1.0", "triton_mm_38", "triton_tem_fused_addmm_t_2"),
        ("model__1_inference_3.1", "triton_mm_57", "triton_tem_fused_addmm_t_0"),
        ("model__1_inference_3.1", "triton_mm_78", "triton_tem_fused_addmm_gelu_t_2"),
    ]


def test_bf16_gelu_and_the_template_that_is_named_after_it(unpacked) -> None:
    """The inference graph's second matmul is named ..._addmm_gelu_t_2 and Inductor attributes the GELU
    nodes to it, but its code only adds the bias: it reads the GELU that launch #2 computed. The report
    shows both facts: the GELU ops in the template's fused-ops list, and where they were computed."""
    run = _run(unpacked, "mlp_bf16_max_autotune_nocg")
    graph = run.graphs[1]
    template = graph.kernel("triton_tem_fused_addmm_gelu_t_2")
    assert template is not None
    gelu_nodes = {"add", "convert_element_type_3", "convert_element_type_4", "erf", "mul", "mul_1", "mul_2"}
    assert {m.source_node: set(m.aten_nodes) for m in template.node_mappings}["input_2"] == gelu_nodes
    assert "aten.gelu" in template.aten_ops
    assert graph.launches[2].reads == ("arg4_1", "buf1", "arg3_1") and graph.aliases["buf1"] == "buf0"
    files = render_report(run, analyze(run), draw=False)
    page = files["kernels/model__1_inference_3.1/triton_tem_fused_addmm_gelu_t_2.html"]
    assert "Computed before this kernel, not in it" in page
    banner = page.split('<div class="banner info">', 1)[1].split("</div>", 1)[0]
    assert all(f">{node}</code>" in banner for node in gelu_nodes)
    assert "triton_poi_fused_gelu_1</code></a> (launch #2)" in banner
    assert "Chosen by autotuning" in page and "0.05 ms" in page
    # the epilogue (after "inductor generates a suffix") loads the bias and adds it: no erf there
    assert "erf" not in template.source.split("# inductor generates a suffix", 1)[1]


def test_frames_recompiles_and_compile_time(unpacked) -> None:
    run = _run(unpacked, "block_default")
    assert [(f.compile_id, f.function, f.graph_breaks) for f in run.frames] == [
        ("0/0", "forward", 0),
        ("0/1", "forward", 0),
    ]
    assert run.frames[0].recompile_reasons == ()
    assert run.frames[1].recompile_reasons == ("0/0: GLOBAL_STATE changed: grad_mode",)
    assert [f.compile_id for f in run.recompiles] == ["0/1"]
    call_site = run.frames[0].call_site  # the last line of user code before the compiled forward()
    assert call_site is not None and (call_site.function, call_site.code) == ("step", "out = f(*inputs)")
    assert run.frames[0].guard_count == 104 and "TREE_GUARD_MANAGER" in run.frames[0].guards
    for frame in run.frames:
        slices = [p for p in frame.phases if not p.within]
        assert [p.name for p in slices] == ["Dynamo tracing", "AOTAutograd", "Inductor graph passes and lowering",
                                            "Inductor scheduling and code generation"]  # fmt: skip
        assert sum(p.seconds for p in slices) == pytest.approx(frame.compile_time_s, rel=1e-6)
        assert any(p.name == "of which kernel compilation" and p.within for p in frame.phases)
    page = render_report(run, analyze(run), draw=False)["compile.html"]
    assert 'id="frame-0-0"' in page and 'id="frame-0-1"' in page
    assert "GLOBAL_STATE changed: grad_mode" in page
    index = render_report(run, analyze(run), draw=False)["index.html"]
    assert "2 graphs from 1 Dynamo frame compiled twice in all, 0 graph breaks, 1 recompile" in index


def test_autotune_time_is_shown_within_inductor(unpacked) -> None:
    run = _run(unpacked, "mlp_epilogue")
    phases = {p.name: p for p in run.frames[1].phases}
    assert phases["of which autotuning"].seconds == pytest.approx(39.105131)
    assert phases["of which autotuning"].within


def test_placeholders_and_kernel_source_lines(unpacked) -> None:
    run = _run(unpacked, "block_default")
    graph = run.graphs[1]
    roles = {n.name: (n.role, n.origin) for n in graph.fx_graph("readable").nodes if n.op == "placeholder"}
    assert roles["arg0_1"] == ("input", "x")
    assert roles["arg1_1"] == ("parameter", "self.ln1.weight")
    assert roles["arg12_1"] == ("parameter", "self.fc2.bias")
    layer_norm = graph.kernel("triton_per_fused_native_layer_norm_0")
    assert layer_norm is not None
    assert [(s.line, s.code) for s in layer_norm.source_lines] == [
        (14, "q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)")
    ]
    files = render_report(run, analyze(run), draw=False)
    source = files["source.html"]
    assert (
        "/home/modelzoo/lab/models/block.py" in source
    )  # quoted lines only: the file is not on this machine
    assert "triton_per_fused_native_layer_norm_0" in source
    assert (
        files["kernels/model__1_inference_3.1/triton_per_fused_native_layer_norm_0.html"].count("block.py:14")
        >= 1
    )


def test_kernel_inputs_name_their_producers(unpacked) -> None:
    run = _run(unpacked, "block_default")
    page = render_report(run, analyze(run), draw=False)[
        "kernels/model__1_inference_3.1/triton_per_fused_add_addmm_native_layer_norm_view_1.html"
    ]
    inputs = page.split("Where its inputs come from", 1)[1].split("</table>", 1)[0]
    assert "#4 <code>aten.mm</code>" in inputs  # buf10: the output projection's matmul
    assert "graph input (input)" in inputs and "graph input (parameter)" in inputs


def test_origin_comments_map_kernel_lines_to_ops() -> None:
    source = (FIXTURES / "origin_kernel_torch2.13.txt").read_text()
    segments = origin_segments(source)
    assert len(segments) == 9
    lines = source.splitlines()
    exp = next(s for s in segments if "aten.exp.default" in s.ops)
    assert any("exp" in lines[n - 1] for n in range(exp.first_line, exp.last_line + 1))
    assert exp.source and exp.source[0].code == "y = torch.softmax(x * 0.5, dim=-1)"
    # segments are ordered and do not overlap
    assert all(a.last_line < b.first_line for a, b in itertools.pairwise(segments))


def test_pointwise_and_reduction_autotuning_from_the_trace(unpacked) -> None:
    coord = _run(unpacked, "softmax_ln_coord")
    (kernel,) = coord.graphs[0].kernels
    assert kernel.autotune_info["coordesc_tuning"] is True
    assert kernel.autotune_info["coordesc_tuning_start_config"] == [["R0_BLOCK", 1024], ["XBLOCK", 1], ["num_warps", 8],
                                                                    ["num_stages", 1]]  # fmt: skip
    block = _run(unpacked, "block_default")
    layer_norm = block.graphs[0].kernel("triton_per_fused_native_layer_norm_0")
    assert layer_norm is not None and layer_norm.autotune_info["only_config"] == [["XBLOCK", 2], ["num_warps", 1],
                                                                                     ["num_stages", 1]]  # fmt: skip
    page = render_report(coord, analyze(coord), draw=False)["compile.html"]
    table = page.split('id="kernel-tuning"', 1)[1].split("</table>", 1)[0]
    assert (
        table.count("<tr>") == 1 + 2
        and "coordinate descent from R0_BLOCK=1024, XBLOCK=1, num_warps=8" in table
    )
