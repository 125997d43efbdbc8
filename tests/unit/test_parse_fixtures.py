"""The parsers against the real captures in tests/fixtures (strict mode: nothing may go unrecognised)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun

from ..conftest import CPU_CASE, FIXTURES, GPU_CASES

# Independent of the parser: the kernel names the file itself declares.
TRITON_DEFINITION = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)'", re.M)


def _parse(unpacked, name: str) -> CompileRun:
    return parse_debug_folder(unpacked(name), strict=True)


@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_fixture_kernels_match_output_code(unpacked, case: str) -> None:
    root = unpacked(case)
    run = parse_debug_folder(root, strict=True)
    output_codes = sorted(root.glob("torch_compile_debug/run_*/torchinductor/*/output_code.py"))
    assert len(run.graphs) == len(output_codes) == 2
    for graph in run.graphs:
        text = (root / "..").resolve().joinpath(root.name, graph.folder, "output_code.py").read_text()
        declared = [name for name, quoted in TRITON_DEFINITION.findall(text) if name == quoted]
        assert [k.name for k in graph.kernels] == declared
        assert all(k.backend == "triton" for k in graph.kernels)
        # every kernel is launched at least once by call()
        assert all(k.launches for k in graph.kernels)
    assert run.stats.warnings == ()


def test_gpu_fixture_counts_agree_with_capture_summary(unpacked) -> None:
    summary = {entry["case"]: entry for entry in json.loads((FIXTURES / "gpu-h200-summary.json").read_text())}
    summarised = [case for case in GPU_CASES if case in summary]  # the bf16 case came from a later batch
    assert len(summarised) == 7
    for case in summarised:
        run = _parse(unpacked, case)
        assert sum(len(g.kernels) for g in run.graphs) == summary[case]["triton_kernels"], case


def test_block_default_exact_kernels_and_launch_order(unpacked) -> None:
    run = _parse(unpacked, "block_default")
    assert [g.id for g in run.graphs] == ["model__0_forward_1.0", "model__1_inference_3.1"]
    assert [g.kind for g in run.graphs] == ["forward", "inference"]
    assert [g.compile_id for g in run.graphs] == ["0/0", "0/1"]
    inference = run.graphs[1]
    assert [(k.name, k.category) for k in inference.kernels] == [
        ("triton_per_fused_native_layer_norm_0", "persistent reduction"),
        ("triton_per_fused_add_addmm_native_layer_norm_view_1", "persistent reduction"),
        ("triton_poi_fused_addmm_gelu_view_2", "pointwise"),
        ("triton_poi_fused_add_addmm_view_3", "pointwise"),
    ]
    assert [(launch.kind, launch.target) for launch in inference.launches] == [
        ("triton", "triton_per_fused_native_layer_norm_0"),
        ("extern", "extern_kernels.addmm"),
        ("extern", "torch.ops.aten._scaled_dot_product_efficient_attention.default"),
        ("extern", "extern_kernels.mm"),
        ("triton", "triton_per_fused_add_addmm_native_layer_norm_view_1"),
        ("extern", "extern_kernels.mm"),
        ("triton", "triton_poi_fused_addmm_gelu_view_2"),
        ("extern", "extern_kernels.mm"),
        ("triton", "triton_poi_fused_add_addmm_view_3"),
    ]
    assert inference.launches[2].aten_op == "aten._scaled_dot_product_efficient_attention.default"
    layer_norm = inference.kernels[0]
    assert layer_norm.size_hints == {"x": 2048, "r0_": 512}
    assert (layer_norm.num_load, layer_norm.num_store, layer_norm.num_reduction) == (3, 1, 4)
    assert layer_norm.bytes_accessed == 8_392_704
    assert layer_norm.aten_ops == ("aten.native_layer_norm",)
    assert layer_norm.source_nodes == ("layer_norm",)
    assert [a.name for a in layer_norm.args] == [
        "in_ptr0",
        "in_ptr1",
        "in_ptr2",
        "out_ptr2",
        "xnumel",
        "r0_numel",
        "XBLOCK",
    ]
    assert layer_norm.args[0].type == "*fp32" and layer_norm.args[-1].type == "constexpr"
    assert layer_norm.node_mappings[0].source_node == "layer_norm"
    assert "var_mean" in layer_norm.node_mappings[0].aten_nodes
    assert layer_norm.graph_fragment.startswith("%arg0_1 : Tensor")
    assert layer_norm.launch_config["reduction_hint"] == "ReductionHint.INNER"
    assert layer_norm.launch_config["device"]["multi_processor_count"] == 132
    assert layer_norm.inductor_benchmark is not None and layer_norm.inductor_benchmark.registers == 72
    assert layer_norm.user_stack and "block.py" in layer_norm.user_stack[0]


def test_block_reduce_overhead_launches_inside_graph_partition(unpacked) -> None:
    run = _parse(unpacked, "block_reduce_overhead")
    for graph in run.graphs:
        assert len(graph.launches) == 9
        assert {launch.partition for launch in graph.launches} == {0}
    assert run.settings is not None and run.settings.mode_options["triton.cudagraphs"] is True
    assert (run.settings.mode, run.settings.mode_inferred) == ("reduce-overhead", True)


def test_bf16_templates_carry_config_and_flops(unpacked) -> None:
    run = _parse(unpacked, "mlp_bf16_max_autotune_nocg")
    inference = run.graphs[1]
    assert [k.name for k in inference.kernels] == [
        "triton_tem_fused_addmm_t_0",
        "triton_poi_fused_gelu_1",
        "triton_tem_fused_addmm_gelu_t_2",
    ]
    template = inference.kernel("triton_tem_fused_addmm_gelu_t_2")
    assert template is not None and template.category == "template"
    assert template.flops == 34_359_738_368
    assert template.launch_config["num_warps"] == 8 and template.launch_config["num_stages"] == 5
    assert template.launch_config["config_args"]["BLOCK_K"] == 64
    assert template.aten_ops == ("aten.gelu", "aten.t", "aten.addmm")
    assert run.environment.device_name == "NVIDIA H200"
    assert run.environment.torch_version == "2.11.0+cu130"
    assert run.environment.triton_version == "3.6.0"


def test_softmax_layernorm_is_one_reduction_kernel(unpacked) -> None:
    run = _parse(unpacked, "softmax_ln_default")
    for graph in run.graphs:
        (kernel,) = graph.kernels
        assert kernel.category == "reduction"
        assert "prims.prepare_softmax_online" in kernel.aten_ops
        assert kernel.size_hints == {"x": 2048, "r0_": 4096}


def test_cpu_fixture_cpp_kernels_with_provenance(unpacked) -> None:
    run = _parse(unpacked, CPU_CASE)
    assert [(g.id, g.kind) for g in run.graphs] == [
        ("model__0_forward_1.0", "forward"),
        ("model__0_backward_3.1", "backward"),
    ]
    forward, backward = run.graphs
    assert [(k.name, k.backend, k.category) for k in forward.kernels] == [
        ("cpp_fused_relu_0", "cpp", "pointwise")
    ]
    # C++ kernels get their ATen ops from the provenance json via the post-grad FX graph
    assert forward.kernels[0].aten_ops == ("aten.relu",)
    assert forward.kernels[0].post_grad_nodes == ("relu",)
    assert [a.type for a in forward.kernels[0].args] == ["float*"]
    assert [k.name for k in backward.kernels] == ["cpp_fused_sum_threshold_backward_0", "cpp_fused_sum_1"]
    assert [k.category for k in backward.kernels] == ["reduction", "reduction"]
    assert [launch.target for launch in backward.launches] == [
        "extern_kernels.mm",
        "extern_kernels.mm",
        "cpp_fused_sum_threshold_backward_0",
        "extern_kernels.mm",
        "cpp_fused_sum_1",
    ]
    assert run.environment.device_type == "cpu"
    assert run.environment.torch_version == "2.13.0+cpu"
    assert "graph_diagram.svg" in forward.files


def test_fx_graph_and_fused_ir_groups(unpacked) -> None:
    graph = _parse(unpacked, "block_default").graphs[1]
    fx = graph.fx_graph("transformed")
    assert fx is not None
    names = [n.name for n in fx.nodes]
    assert names[:13] == [f"arg{i}_1" for i in range(13)]
    assert names[-1] == "output"
    addmm = next(n for n in fx.nodes if n.name == "addmm")
    assert addmm.target == "aten.addmm.default"
    assert addmm.type == "f32[2048, 1536]"
    assert addmm.inputs == ("arg4_1", "view", "permute")
    assert addmm.source is not None and addmm.source.filename.endswith("block.py")
    assert addmm.source.line == 14 and addmm.source.function == "forward"
    assert (
        addmm.source.code
        == "q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)"
    )
    post = graph.ir_dump("post_fusion")
    assert post is not None
    fused = [n for n in post.nodes if n.node_type == "FusedSchedulerNode"]
    assert [(n.name, n.members) for n in fused] == [
        ("op0_op1_op3", ("op0", "op1", "op3")),
        ("op11_op12_op14", ("op11", "op12", "op14")),
    ]
    extern = [n.extern_kernel for n in post.nodes if n.extern_kernel]
    assert extern == [
        "extern_kernels.addmm",
        "torch.ops.aten._scaled_dot_product_efficient_attention.default",
        "extern_kernels.mm",
        "extern_kernels.mm",
        "extern_kernels.mm",
    ]
    assert post.nodes[0].writes == ("buf0", "buf1", "buf3")


def test_frames_from_trace(unpacked) -> None:
    run = _parse(unpacked, "softmax_ln_default")
    assert [(f.compile_id, f.function, f.graph_breaks) for f in run.frames] == [
        ("0/0", "forward", 0),
        ("0/1", "forward", 0),
    ]
    assert run.frames[0].filename is not None and run.frames[0].filename.endswith("softmax_ln.py")


@pytest.mark.parametrize("case", [*GPU_CASES, CPU_CASE])
def test_lens_json_round_trip(unpacked, case: str) -> None:
    run = _parse(unpacked, case)
    again = CompileRun.from_json(run.to_json())
    assert again == run


def test_fixture_folder_given_at_any_level(unpacked) -> None:
    root: Path = unpacked("mlp_default")
    whole = parse_debug_folder(root, strict=True)
    tree = parse_debug_folder(root / "torch_compile_debug", strict=True)
    (run_dir,) = (root / "torch_compile_debug").iterdir()
    one_run = parse_debug_folder(run_dir, strict=True)
    one_graph = parse_debug_folder(run_dir / "torchinductor" / "model__1_inference_3.1", strict=True)
    assert [g.name for g in whole.graphs] == [g.name for g in tree.graphs] == [g.name for g in one_run.graphs]
    assert [k.name for k in one_graph.graphs[0].kernels] == ["triton_poi_fused_addmm_gelu_0"]
