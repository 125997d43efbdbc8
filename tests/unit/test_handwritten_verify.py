"""Hand-written matches checked against what Inductor's kernel computes (handwritten/verify.py), on real captures:
the equivalents, chained as matched, in float64 on the launch's shapes against the kernel's own FX nodes."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from inductor_lens.handwritten import attach as attach_module
from inductor_lens.handwritten.attach import attach_handwritten
from inductor_lens.handwritten.catalog import get
from inductor_lens.handwritten.match import agrees, choose, concepts_of, coverage, match_run
from inductor_lens.handwritten.verify import verify_task
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import from_jsonable, to_jsonable
from inductor_lens.records.handwritten import HandwrittenMatch
from inductor_lens.worker.handwritten.verify import run_verify

GATED = "cpu-torch2.13-gated-mlps"
# The gate-times-up kernels of the fixture's four blocks: T5's NewGELU written out and F.gelu's tanh form decompose
# alike, so Inductor generates one kernel for both, launched twice; then the erf form and SiLU (torch 2.13's C++
# kernels record GELU and SiLU as their pieces: mul, pow, tanh; x / (1 + exp(-x))).
GATED_KERNELS = {
    "cpp_fused__unsafe_view_add_mul_pow_tanh_0": ("mul", "gelu_tanh"),
    "cpp_fused__unsafe_view_gelu_mul_1": ("mul", "gelu"),
    "cpp_fused__unsafe_view_mul_silu_2": ("mul", "silu"),
}
EQUIVALENT = {("mul", "gelu_tanh"): "gelu_tanh_mul", ("mul", "gelu"): "gelu_mul", ("mul", "silu"): "silu_mul"}


def _gated(unpacked):
    run = parse_debug_folder(unpacked(GATED), strict=True)
    (graph,) = run.graphs
    return run, graph, {m.target: m for m in match_run(run) if m.kind != "none" and graph.kernel(m.target)}


def test_gated_activations_match_their_gated_kernels_on_cpu(unpacked) -> None:
    _, graph, matches = _gated(unpacked)
    assert sorted(matches) == sorted(GATED_KERNELS)
    for target, concepts in GATED_KERNELS.items():
        m = matches[target]
        assert (m.kind, m.equivalents, m.concepts, m.not_covered) == ("exact", (EQUIVALENT[concepts],), concepts, ())
        assert dict(m.shape) == {"rows": 64, "cols": 96} and m.dtype == "float32"
    # the four down projections and eight up/gate projections stay library matmuls
    targets = [x.target for x in graph.launches]
    assert targets.count("extern_kernels.mm") == 12
    assert [x.position for x in graph.launches if x.target == "cpp_fused__unsafe_view_add_mul_pow_tanh_0"] == [3, 7]


def test_gated_activations_as_triton_kernels_record_them() -> None:
    """Triton kernels (torch 2.11) record aten.gelu and aten.silu whole: the gate's mul makes them gated."""
    for ops, source, name in (
        (("aten.gelu", "aten.mul"), "libdevice.erf(tmp1)", "gelu_mul"),
        (("aten.gelu", "aten.mul"), "libdevice.tanh(tmp1)", "gelu_tanh_mul"),
        (("aten.silu", "aten.mul"), "tl.sigmoid(tmp0)", "silu_mul"),
    ):
        kind, chosen, uncovered = choose(concepts_of(ops, template=False, source=source))
        assert (kind, [e.name for e in chosen], uncovered) == ("exact", [name], [])
    # a negation alone is no SiLU; with its exp (x / (1 + exp(-x)), torch 2.13's C++ kernels) it is
    assert concepts_of(("aten.neg", "aten.mul"), template=False) == ["neg", "mul"]
    # a tanh alone (samples/graphbreak.py's torch.tanh(linear(y))) is no GELU
    assert concepts_of(("aten.tanh",), template=False) == ["tanh"]
    assert concepts_of(("aten.mul", "aten.add", "aten.tanh"), template=False) == ["gelu_tanh"]
    assert concepts_of(("aten.mul", "aten.div", "aten.add", "aten.exp", "aten.neg"), template=False) == ["mul", "silu"]


def test_every_gated_match_computes_what_inductor_computes(unpacked) -> None:
    _, graph, matches = _gated(unpacked)
    for target, m in matches.items():
        task = verify_task(graph, graph.kernel(target), m)
        assert not isinstance(task, str), task
        # the first launch's own two inputs (the kernel launched twice lists both launches' FX nodes)
        assert [(i.dtype, i.size, i.values) for i in task.inputs] == [("float32", [64, 96], "randn")] * 2
        result = run_verify(task, "cpu")
        assert result.agrees is True, (target, result)
        assert result.max_rel_error is not None and result.max_rel_error < 1e-12
        assert result.tolerance == get(m.equivalents[0]).tolerance["float32"]


@pytest.mark.parametrize(
    ("equivalents", "why"),
    [
        (("gelu_mul",), "differs from its FX nodes"),  # erf where the kernel takes tanh: 1.8e-4 of the largest
        (("silu_mul",), "differs from its FX nodes"),
        (("gelu_tanh",), "differs from its FX nodes"),  # the activation without its gate
        # the match T5's gated GELU had: a bias row and a residual the kernel never reads
        (("bias_gelu_tanh", "residual"), "reads 3 tensors, the kernel 2"),
    ],
)
def test_a_planted_wrong_equivalence_is_rejected(unpacked, equivalents: tuple[str, ...], why: str) -> None:
    _, graph, matches = _gated(unpacked)
    target = "cpp_fused__unsafe_view_add_mul_pow_tanh_0"
    task = verify_task(graph, graph.kernel(target), replace(matches[target], equivalents=equivalents))
    assert not isinstance(task, str), task
    result = run_verify(task, "cpu")
    assert result.agrees is False and why in result.note, result
    assert result.note.startswith("computes something else than Inductor's kernel")
    if result.max_rel_error is not None:
        assert result.max_rel_error > result.tolerance


def test_the_check_process_rejects_a_planted_match_and_does_not_time_it(unpacked, tmp_path, monkeypatch) -> None:
    """Through the check process: the T5 kernel paired with SwiGLU's kernel is rejected, its task is not run,
    it is no agreeing equivalent, and the other matches are verified."""
    root = tmp_path / "gated"
    shutil.copytree(unpacked(GATED), root)
    run = parse_debug_folder(root, strict=True)
    target = "cpp_fused__unsafe_view_add_mul_pow_tanh_0"

    def planted(run):
        return tuple(
            replace(m, equivalents=("silu_mul",)) if m.target == target else m for m in match_run(run)
        )

    monkeypatch.setattr(attach_module, "match_run", planted)
    attached = attach_handwritten(run, root / "capture", execute=True, timeout_s=600)
    by_target = {m.target: m for m in attached.handwritten}
    wrong = by_target[target]
    assert wrong.rejected and wrong.verified is False and not agrees(wrong)
    assert wrong.verify_error is not None and wrong.verify_error > wrong.verify_tolerance
    assert "computes something else than Inductor's kernel: silu_mul" in wrong.verify_note
    assert all(r.timing is None for r in wrong.runs)
    for other in GATED_KERNELS.keys() - {target}:
        assert by_target[other].verified is True, by_target[other]
    # the SwiGLU kernel's own silu_mul task was shared, so it ran and agreed with torch
    assert agrees(by_target["cpp_fused__unsafe_view_mul_silu_2"])
    matmuls = [m for m in attached.handwritten if m.target == "extern_kernels.mm"]
    assert len(matmuls) == 12 and all(m.verified is None for m in matmuls)
    assert {m.verify_note for m in matmuls} == {"a library call: it computes the op it names"}
    share = coverage(attached)
    assert share is None or share.by_kind_us.get("rejected", 0.0) >= 0.0


def test_a_real_composition_missing_an_add_is_rejected(unpacked) -> None:
    """GPT-2 (torch 2.11, H200): x + (mm + b) + (mm + b') -> LayerNorm was matched as bias_residual -> layernorm,
    one bias short; the FX nodes say so. The last block's kernel (one bias) is verified."""
    run = parse_debug_folder(unpacked("gpt2_small_ro"), strict=True)
    matches = {m.target: m for m in match_run(run)}
    graph = run.graphs[0]
    results = {}
    for target in ("triton_per_fused_add_addmm_native_layer_norm_view_7", "triton_per_fused_add_addmm_native_layer_norm_view_8"):
        m = matches[target]
        assert m.equivalents == ("bias_residual", "layernorm")
        task = verify_task(graph, graph.kernel(target), m)
        assert not isinstance(task, str), task
        results[target] = run_verify(task, "cpu")
    assert results["triton_per_fused_add_addmm_native_layer_norm_view_7"].agrees is False
    assert results["triton_per_fused_add_addmm_native_layer_norm_view_8"].agrees is True


def test_verification_fields_round_trip_and_older_matches_load() -> None:
    match = HandwrittenMatch("g", "k", 1, "exact", ("silu_mul",), verified=False, verify_error=0.5,
                             verify_tolerance=1e-5, verify_note="computes something else")  # fmt: skip
    assert from_jsonable(HandwrittenMatch, to_jsonable(match)) == match
    older = to_jsonable(replace(match, verified=None, verify_error=None, verify_tolerance=None, verify_note=""))
    for key in ("verified", "verify_error", "verify_tolerance", "verify_note"):
        older.pop(key)
    loaded = from_jsonable(HandwrittenMatch, older)
    assert loaded.verified is None and not loaded.rejected


T5 = "cpu-torch2.13-t5-gated"
T5_GATED = "cpp_fused__unsafe_view_add_mul_pow_tanh_3"


def test_t5_gated_gelu_is_gelu_tanh_mul_and_verified(unpacked) -> None:
    """HF T5 v1.1 (transformers 5.17, 2 layers): its gated NewGELU, one kernel launched once per layer, was
    matched as bias_gelu_tanh -> residual and said to agree; it is gelu_tanh_mul, verified by the check process
    that made the capture (read back here), and the final norm's residual add is seen."""
    root = unpacked(T5)
    run = parse_debug_folder(root, strict=True)
    (graph,) = run.graphs
    assert [x.position for x in graph.launches if x.target == T5_GATED] == [11, 22]
    attached = attach_handwritten(run, root / "capture", execute=False)
    by_target = {m.target: m for m in attached.handwritten}
    gated = by_target[T5_GATED]
    assert (gated.kind, gated.equivalents, gated.concepts, gated.not_covered) == (
        "exact", ("gelu_tanh_mul",), ("mul", "gelu_tanh"), ())  # fmt: skip
    assert gated.verified is True and gated.verify_error is not None and gated.verify_error < 1e-12
    assert agrees(gated)
    final = by_target["cpp_fused__unsafe_view_add_mean_mul_pow_rsqrt_6"]
    assert (final.equivalents, final.verified) == (("rmsnorm_residual",), True)
    assert not any("bias_gelu_tanh" in m.equivalents for m in attached.handwritten)
    assert not [m.target for m in attached.handwritten if m.verified is False]
    # verified here too, from the records
    task = verify_task(graph, graph.kernel(T5_GATED), gated)
    assert not isinstance(task, str) and run_verify(task, "cpu").agrees is True


def test_a_stored_verdict_stands_only_for_the_equivalents_it_verified(unpacked, monkeypatch) -> None:
    """The capture's results verified gelu_tanh_mul; a match with other equivalents read against them is not
    verified (nor rejected) by that verdict."""
    root = unpacked(T5)
    run = parse_debug_folder(root, strict=True)
    planted = tuple(replace(m, equivalents=("silu_mul",)) if m.target == T5_GATED else m for m in match_run(run))
    monkeypatch.setattr(attach_module, "match_run", lambda _run: planted)
    attached = attach_handwritten(run, root / "capture", execute=False)
    gated = next(m for m in attached.handwritten if m.target == T5_GATED)
    assert gated.verified is None and gated.verify_note == ""


def test_gated_activations_as_triton_kernels_match_and_verify(unpacked) -> None:
    """The same four blocks as Triton kernels (``--preview-gpu``: torch 2.13 generating for an H200, no GPU):
    Triton kernels record aten.gelu and aten.silu whole, and the gate's mul beside them."""
    run = parse_debug_folder(unpacked(f"{GATED}-preview"), strict=True)
    (graph,) = run.graphs
    matches = {m.target: m for m in match_run(run) if graph.kernel(m.target)}
    expected = {
        "triton_poi_fused__unsafe_view_add_mul_pow_tanh_0": ("gelu_tanh_mul", 3),  # T5's NewGELU written out
        "triton_poi_fused__unsafe_view_gelu_mul_1": ("gelu_tanh_mul", 7),
        "triton_poi_fused__unsafe_view_gelu_mul_2": ("gelu_mul", 11),
        "triton_poi_fused__unsafe_view_mul_silu_3": ("silu_mul", 15),
    }
    assert {t: (m.equivalents[0], m.launch) for t, m in matches.items()} == expected
    for target, m in matches.items():
        assert (m.kind, len(m.equivalents), m.not_covered) == ("exact", 1, ())
        task = verify_task(graph, graph.kernel(target), m)
        assert not isinstance(task, str), task
        assert run_verify(task, "cpu").agrees is True, target


@pytest.mark.parametrize(
    ("case", "target", "equivalents"),
    [
        # x * 0.125 + b -> softmax -> LayerNorm -> + x: four hand-written launches chained, against one kernel
        # (its FX nodes call Inductor's own prims.prepare_softmax_online)
        ("softmax_ln_default", "triton_red_fused__softmax_add_exp_mul_native_layer_norm_prepare_softmax_online_sub_0",
         ("scale_bias", "softmax", "layernorm", "residual")),
        ("llama_small_bf16", "triton_poi_fused__unsafe_view_mul_silu_9", ("silu_mul",)),
        # a matmul template reading A through the transpose of attention's heads: paired through its permute
        ("llama_bf16_max_autotune", "triton_tem_fused_mm_t_transpose_view_8", ("matmul",)),
    ],
)
def test_torch_2_11_gpu_kernels_verify(unpacked, case: str, target: str, equivalents: tuple[str, ...]) -> None:
    run = parse_debug_folder(unpacked(case), strict=True)
    match = next(m for m in match_run(run) if m.target == target)
    graph = run.graph(match.graph_id)
    assert graph is not None and match.equivalents == equivalents
    task = verify_task(graph, graph.kernel(target), match)
    assert not isinstance(task, str), task
    result = run_verify(task, "cpu")
    assert result.agrees is True, result
