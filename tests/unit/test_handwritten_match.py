"""Matching Inductor's kernels to hand-written equivalents, on the real captures (no torch, no Triton needed)."""

from __future__ import annotations

from collections import Counter

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.handwritten.catalog import EQUIVALENTS, get, parse_shape
from inductor_lens.handwritten.interpreter_shapes import interpreter_shape
from inductor_lens.handwritten.match import choose, concepts_of, match_run, op_name, shape_for
from inductor_lens.handwritten.source import kernel_source
from inductor_lens.parse import parse_debug_folder

from ..conftest import CPU_CASE

# (graph kind, target) -> (kind, equivalents, shape, dtype): every match of the inference graph.
BLOCK_INFERENCE = {
    "triton_per_fused_native_layer_norm_0": ("exact", ("layernorm",), "2048x512"),
    "extern_kernels.addmm": ("exact", ("matmul_bias",), "2048x1536x512"),
    "torch.ops.aten._scaled_dot_product_efficient_attention.default": (
        "exact", ("flash_attention_causal",), "8x8x256x64"),
    "triton_per_fused_add_addmm_native_layer_norm_view_1": ("composed", ("bias_residual", "layernorm"), "2048x512"),
    "triton_poi_fused_addmm_gelu_view_2": ("exact", ("bias_gelu",), "2048x2048"),
    "triton_poi_fused_add_addmm_view_3": ("partial", ("bias_residual",), "2048x512"),
}  # fmt: skip


def _matches(unpacked, case: str, kind: str) -> list:
    run = parse_debug_folder(unpacked(case), strict=True)
    graph = next(g for g in run.graphs if g.kind == kind)
    return [m for m in match_run(run) if m.graph_id == graph.id]


def _shape(match) -> str:
    return "x".join(str(v) for v in match.shape.values())


def test_block_matches(unpacked) -> None:
    matches = _matches(unpacked, "block_default", "inference")
    # every Triton kernel once, plus 5 extern calls (1 addmm, 3 mm, 1 attention)
    assert [m.target for m in matches].count("extern_kernels.mm") == 3
    assert len(matches) == 4 + 5
    for m in matches:
        if m.target in BLOCK_INFERENCE:
            kind, names, shape = BLOCK_INFERENCE[m.target]
            assert (m.kind, m.equivalents, _shape(m), m.dtype) == (kind, names, shape, "float32"), m
    mms = [m for m in matches if m.target == "extern_kernels.mm"]
    assert [(m.equivalents, _shape(m)) for m in mms] == [
        (("matmul",), "2048x512x512"), (("matmul",), "2048x2048x512"), (("matmul",), "2048x512x2048")]  # fmt: skip
    partial = next(m for m in matches if m.kind == "partial")
    assert partial.not_covered == ("1 more full-size input",)  # x + (mm + b) + (mm + b): 3 full tensors


def test_attention_causal_flag_follows_the_call(unpacked) -> None:
    for kind in ("forward", "inference"):
        attention = next(m for m in _matches(unpacked, "block_default", kind) if "attention" in m.target)
        assert attention.equivalents == ("flash_attention_causal",), kind
    # efficient attention's 5th argument is compute_log_sumexp (False when not training), its 7th is_causal
    graphs = parse_debug_folder(unpacked("block_default")).graphs
    sdpa = next(x for x in graphs[1].launches if "attention" in x.target)
    assert (sdpa.args[4], sdpa.args[6]) == ("False", "True")


def test_softmax_layernorm_is_a_composition(unpacked) -> None:
    (match,) = _matches(unpacked, "softmax_ln_default", "inference")
    assert match.kind == "composed"
    # x * 0.125 + bias -> softmax -> layernorm -> + x: four hand-written launches for one Inductor kernel
    assert match.equivalents == ("scale_bias", "softmax", "layernorm", "residual")
    assert match.concepts == ("mul", "add", "softmax", "layernorm")
    assert _shape(match) == "2048x4096" and match.not_covered == ()


def test_bf16_mlp_templates_match_the_fused_matmul(unpacked) -> None:
    """The second template's name says gelu (the origins of the GELU output it reads as A), but its code only
    adds the bias: the GELU ran in its own kernel before it, and is counted there once."""
    matches = _matches(unpacked, "mlp_bf16_max_autotune_nocg", "inference")
    assert [(m.target, m.kind, m.equivalents, _shape(m), m.dtype) for m in matches] == [
        ("triton_tem_fused_addmm_t_0", "exact", ("matmul_bias",), "1024x8192x2048", "bfloat16"),
        ("triton_poi_fused_gelu_1", "exact", ("gelu",), "1024x8192", "bfloat16"),
        ("triton_tem_fused_addmm_gelu_t_2", "exact", ("matmul_bias",), "1024x2048x8192", "bfloat16"),
    ]


def test_cpu_kernels_match_and_unknown_work_says_so(unpacked) -> None:
    run = parse_debug_folder(unpacked(CPU_CASE), strict=True)
    kinds = {g.id: g.kind for g in run.graphs}
    by_target = {(kinds[m.graph_id], m.target): m for m in match_run(run)}
    assert by_target["forward", "cpp_fused_relu_0"].equivalents == ("relu",)
    assert _shape(by_target["forward", "cpp_fused_relu_0"]) == "32x128"
    # torch 2.13 records no ATen ops for C++ backward kernels: nothing to match, and the report says so
    none = by_target["backward", "cpp_fused_sum_threshold_backward_0"]
    assert none.kind == "none" and none.equivalents == () and none.runs == ()


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        (("aten.native_layer_norm.default",), ("exact", ["layernorm"], [])),
        (("aten.add.Tensor", "aten.relu.default"), ("exact", ["bias_relu"], [])),
        (
            ("prims.prepare_softmax_online", "aten.sub", "aten.exp", "aten._softmax"),
            ("exact", ["softmax"], []),
        ),
        (("aten.gelu", "aten.native_layer_norm"), ("composed", ["gelu", "layernorm"], [])),
        # a generated kernel whose origins name the convolution it feeds only does the ReLU
        (("aten.convolution", "aten.relu"), ("exact", ["relu"], [])),
        (("aten.cumsum", "aten.relu"), ("partial", ["relu"], ["cumsum"])),
        (("aten.sum.dim_IntList", "aten.threshold_backward"), ("none", [], ["sum", "relu_backward"])),
        (("aten.view", "aten.t", "aten._to_copy"), ("none", [], [])),
        (("aten.mul", "aten.add", "aten.erf"), ("exact", ["gelu"], [])),  # a C++ kernel's GELU (torch 2.13)
        # a C++ kernel's LayerNorm (torch 2.13)
        (("aten.var_mean", "aten.add", "aten.mul", "aten.sub", "aten.rsqrt"), ("exact", ["layernorm"], [])),
    ],
)
def test_choose(ops: tuple[str, ...], expected: tuple) -> None:
    kind, chosen, uncovered = choose(concepts_of(ops, template=False))
    assert (kind, [e.name for e in chosen], uncovered) == expected


def test_op_names_and_gelu_form() -> None:
    assert op_name("aten.native_layer_norm.default") == "native_layer_norm"
    assert op_name("torch.ops.aten._scaled_dot_product_efficient_attention.default") == (
        "_scaled_dot_product_efficient_attention"
    )
    assert op_name("prims.prepare_softmax_online") == "prepare_softmax_online"
    tanh_source = "tmp5 = libdevice.tanh(tmp4)"
    assert concepts_of(("aten.gelu",), template=False, source=tanh_source) == ["gelu_tanh"]
    assert concepts_of(("aten.gelu",), template=False, source="libdevice.erf(x)") == ["gelu"]
    # a pointwise kernel fused with an addmm does the addmm's bias add; a template does the matmul
    assert concepts_of(("aten.addmm", "aten.gelu"), template=False) == ["add", "gelu"]
    assert concepts_of(("aten.t", "aten.addmm"), template=True) == ["matmul", "add"]


def test_interpreter_shapes_stay_small() -> None:
    assert interpreter_shape(get("softmax"), {"rows": 2048, "cols": 4096}) == {"rows": 64, "cols": 4096}
    assert interpreter_shape(get("gelu"), {"rows": 3, "cols": 5}) == {"rows": 3, "cols": 5}
    mm = interpreter_shape(get("matmul_bias"), {"M": 1024, "N": 8192, "K": 2048})
    assert mm["K"] == 2048 and mm["M"] * mm["N"] * mm["K"] <= 1 << 23
    attention = interpreter_shape(
        get("flash_attention"), {"batch": 8, "heads": 8, "seq": 256, "head_dim": 64}
    )
    assert attention["head_dim"] == 64 and attention["seq"] == 256


def test_catalog_is_consistent() -> None:
    assert len({e.name for e in EQUIVALENTS}) == len(EQUIVALENTS)
    for equivalent in EQUIVALENTS:
        assert kernel_source(equivalent.name), f"{equivalent.name}: kernel source not found"
        assert set(equivalent.tolerance) == {"float32", "float16", "bfloat16"}
        assert len(equivalent.default_shape) == len(equivalent.bench_shape) == len(equivalent.dims)
        moved, flops = equivalent.cost(equivalent.shape(equivalent.default_shape), 2)
        assert moved > 0 and (flops > 0) == (equivalent.bound == "compute")
    assert parse_shape("1000x777") == (1000, 777) and parse_shape("8, 8, 256, 64") == (8, 8, 256, 64)


def test_report_rows_keep_each_launch(unpacked) -> None:
    """Three extern mm calls of one graph are three rows, each with its own launch and shape."""
    from inductor_lens.handwritten.attach import attach_handwritten
    from inductor_lens.report.handwritten_view import handwritten_page

    run = attach_handwritten(parse_debug_folder(unpacked("block_default"), strict=True), None, execute=False)
    page = handwritten_page(run, analyze(run))
    mms = [r for r in page.rows if r.match.target == "extern_kernels.mm" and r.graph.kind == "inference"]
    assert [r.launch.position for r in mms] == [4, 6, 8]
    assert [r.steps[0].shape_text for r in mms] == ["2048x512x512", "2048x2048x512", "2048x512x2048"]
    assert len({r.match.key for r in page.rows}) == len(page.rows)  # the page's anchors are unique
    assert all(r.correctness == "not run" and r.verdict == "not timed (timing needs a GPU)" for r in mms)


def test_gpt2_matches_follow_the_activations_and_the_smallest_composition(unpacked) -> None:
    """HF GPT-2 (H100 capture): the embedding + LayerNorm kernel is sized by the activations it writes (4 x 256
    tokens of 256), not by the position table it indexes (2048 x 256), and composed of the embedding lookup,
    the add of the two embeddings and the LayerNorm; the model's own tanh-GELU formula, fused with the addmm's
    bias, is one bias_gelu_tanh, not a chain with residual adds made of the formula's adds."""
    run = parse_debug_folder(unpacked("gpt2_small_ro"), strict=True)
    by_target = {m.target: m for m in match_run(run)}
    embedding = by_target["triton_red_fused_add_arange_embedding_native_layer_norm_unsqueeze_0"]
    assert (embedding.kind, embedding.equivalents) == ("composed", ("embedding", "add", "layernorm"))
    # the ids and the table read right after them (the token embedding's) size the lookup
    assert embedding.shape == {"rows": 1024, "cols": 256, "tokens": 1024, "vocab": 2048, "dim": 256}
    assert shape_for(get("embedding"), dict(embedding.shape)) == {"tokens": 1024, "vocab": 2048, "dim": 256}
    assert embedding.not_covered == ()  # arange: index math, nothing to hand-write
    gelu = by_target["triton_poi_fused_add_addmm_mul_pow_tanh_view_5"]
    assert (gelu.kind, gelu.equivalents, gelu.shape) == ("exact", ("bias_gelu_tanh",), {"rows": 1024, "cols": 1024})
    # a real residual add next to a LayerNorm is still counted
    residual = by_target["triton_per_fused_add_addmm_native_layer_norm_view_7"]
    assert residual.equivalents == ("bias_residual", "layernorm")


def test_llama_rmsnorm_written_out_is_recognised(unpacked) -> None:
    """HF Llama (H100 capture, bf16) writes RMSNorm out (pow, mean, add eps, rsqrt, mul): it is an rmsnorm,
    the final norm with its residual add one rmsnorm_residual, and the layers' kernels (which gather the
    embedding again rather than read it) an embedding besides."""
    run = parse_debug_folder(unpacked("llama_small_bf16"), strict=True)
    by_target = {m.target: m for m in match_run(run)}
    final = by_target["triton_per_fused__to_copy__unsafe_view_add_mean_mul_pow_rsqrt_12"]
    assert (final.kind, final.equivalents, final.shape) == ("exact", ("rmsnorm_residual",), {"rows": 4096, "cols": 512})
    first = by_target["triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0"]
    assert (first.kind, first.equivalents, first.not_covered) == ("composed", ("embedding", "rmsnorm"), ())
    layer = by_target["triton_per_fused__to_copy__unsafe_view_add_embedding_mean_mul_pow_rsqrt_11"]
    assert layer.equivalents == ("rmsnorm_residual", "embedding")


def test_llama_swiglu_activation_is_one_silu_mul(unpacked) -> None:
    run = parse_debug_folder(unpacked("llama_small_bf16"), strict=True)
    (swiglu,) = [m for m in match_run(run) if m.target == "triton_poi_fused__unsafe_view_mul_silu_9"]
    assert (swiglu.kind, swiglu.equivalents, swiglu.shape, swiglu.dtype) == (
        "exact", ("silu_mul",), {"rows": 4096, "cols": 1408}, "bfloat16"
    )


def test_llama_rotary_is_sized_by_the_heads_it_writes(unpacked) -> None:
    """HF Llama's rotary kernels (k: 2 key/value heads, q: 8) are sized by the [batch, heads, seq, head_dim]
    tensor they write. The kernels after them only repeat k and v for grouped-query attention or build the
    causal mask: their ORIGIN comments quote the rotary code, but their code computes no cosine."""
    run = parse_debug_folder(unpacked("llama_small_bf16"), strict=True)
    suffix = "slice_transpose_unsqueeze_view_where"
    by_end = {m.target.rsplit("_", 1)[-1]: m for m in match_run(run) if suffix in m.target or "cos_mul" in m.target}
    rows = {end: (m.kind, m.equivalents, dict(m.shape)) for end, m in by_end.items()}
    assert rows == {
        "3": ("exact", ("rotary",), {"batch": 8, "heads": 2, "seq": 512, "head_dim": 64}),
        "4": ("exact", ("rotary",), {"batch": 8, "heads": 8, "seq": 512, "head_dim": 64}),
        "5": ("exact", ("copy",), {"rows": 32768, "cols": 64}),
        "6": ("exact", ("copy",), {"rows": 32768, "cols": 64}),
        "7": ("none", (), {}),  # writes the mask, reads nothing
    }  # fmt: skip


def test_llama_max_autotune_templates_are_the_projections_they_compute(unpacked) -> None:
    """HF Llama bf16 under max-autotune-no-cudagraphs (H200 capture): every projection is a Triton template.
    Their names list the ops that made the activations they read (RMSNorm, SwiGLU, the embedding), but their
    code only multiplies: each is one matmul, sized from A viewed as [batch * seq, K] (or, where A's type is
    not known, from the output and B). The rotary kernels carry transformers 5's mask ops (new_ones,
    bitwise_and, index), which are not their work."""
    run = parse_debug_folder(unpacked("llama_bf16_max_autotune"), strict=True)
    rows = [(m.target.removeprefix("triton_"), m.kind, m.equivalents, _shape(m)) for m in match_run(run)
            if m.target.startswith("triton_tem") or "cos" in m.target]  # fmt: skip
    assert rows == [
        ("tem_fused__to_copy_add_embedding_mean_mm_mul_pow_rsqrt_t_view_1", "exact", ("matmul",), "128x128x128"),
        ("tem_fused__to_copy_add_arange_bmm_expand_unsqueeze_2", "none", (), ""),
        ("tem_fused_mm_t_view_3", "exact", ("matmul",), "128x64x128"),
        ("poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bitwise_and_bmm_cat_clone_"
         "cos_expand_index_le_mul_neg_new_ones_scalar_tensor_sin_slice_transpose_unsqueeze_view_where_4",
         "exact", ("rotary",), "2x4x64x32"),
        ("poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bitwise_and_bmm_cat_clone_"
         "cos_expand_index_le_mul_neg_new_ones_scalar_tensor_sin_slice_transpose_unsqueeze_view_where_5",
         "exact", ("rotary",), "2x4x64x32"),
        ("poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bitwise_and_bmm_cat_clone_"
         "cos_expand_index_le_mul_neg_new_ones_scalar_tensor_sin_slice_transpose_unsqueeze_view_where_6",
         "exact", ("copy",), "512x32"),
        ("poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bitwise_and_bmm_cat_clone_"
         "cos_expand_index_le_mul_neg_new_ones_scalar_tensor_sin_slice_transpose_unsqueeze_view_where_7",
         "exact", ("copy",), "128x64"),
        ("tem_fused_mm_t_transpose_view_8", "exact", ("matmul",), "128x128x128"),
        ("tem_fused_mm_t_view_10", "exact", ("matmul",), "128x344x128"),
        ("tem_fused__unsafe_view_mm_mul_silu_t_view_12", "exact", ("matmul",), "128x128x344"),
        ("tem_fused__unsafe_view_mm_mul_silu_t_view_15", "exact", ("matmul",), "128x128x344"),
        ("tem_fused__to_copy__unsafe_view_add_mean_mm_mul_pow_rsqrt_t_view_17", "exact", ("matmul",), "128x1024x128"),
    ]
    kinds = Counter(m.kind for m in match_run(run))
    assert kinds == {"exact": 15, "composed": 4, "none": 1}
