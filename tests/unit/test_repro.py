"""``inductor-lens repro``: standalone reproducers of generated kernels, from the committed captures.

C++ kernels of the CPU captures (a dynamic LayerNorm with two scratch outputs, a backward kernel that
writes two nodes one of them in place, an embedding with integer indices) are written, run in a fresh
process and must check out against eager float64; a kernel whose capture names no FX node still runs and
says why it is unchecked. Triton kernels of the GPU captures are written and compiled as Python, their
references tied to the right arguments, and a small one runs under Triton's interpreter and checks out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.repro.parts import ReproError
from inductor_lens.repro.plan import plan_repro
from inductor_lens.repro.writer import find_kernel, load_capture, write_repro

from ..conftest import GPU_CASES, CliResult, assert_one_line_error

SUMMARY = re.compile(
    r"^repro (?P<kernel>\S+): (?P<check>[^|]+) \| (?P<time>[^|]+) \| (?P<inputs>.+)$", re.MULTILINE
)


def run_script(script: Path, *, interpret: bool = False, timeout: float = 300) -> tuple[int, re.Match[str]]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=script.parent)  # fmt: skip
    match = SUMMARY.search(done.stdout)
    assert match is not None, done.stdout + done.stderr
    assert done.stdout.count("\n") == 1, done.stdout  # one summary line
    return done.returncode, match


@pytest.mark.parametrize(
    ("case", "kernel", "check"),
    [
        # dynamic shapes (s77=8, s27=256), two scratch buffers (the mean and variance, read by no one else)
        ("cpu-torch2.13-block-dynamic", "cpp_fused_native_layer_norm_0", "check passed (1 output against eager float64"),
        # backward: sum_1 and mul_15, the latter written in place over the buffer holding mm
        ("cpu-torch2.13-mlp-train-dynamic", "cpp_fused_gelu_gelu_backward_sum_0",
         "check passed (2 outputs against eager float64"),
        # an int64 index input, kept within the bound the kernel asserts (the table's 100 rows)
        ("cpu-torch2.13-dynamic-recompile", "model__0_inference_0.0/cpp_fused_embedding_0",
         "check passed (1 output against eager float64, max abs error 0)"),
    ],
)  # fmt: skip
def test_cpu_kernel_reproducer_checks_out(
    unpacked: Callable[[str], Path], tmp_path: Path, case: str, kernel: str, check: str
) -> None:
    result = write_repro(unpacked(case), kernel, tmp_path / "repro")
    text = result.script.read_text()
    assert "import inductor_lens" not in text and "from inductor_lens" not in text
    code, summary = run_script(result.script)
    assert code == 0
    assert summary["kernel"] == kernel.rpartition("/")[2]
    assert summary["check"].startswith(check), summary["check"]
    assert re.match(r"[\d.]+ us median, p10 [\d.]+, p90 [\d.]+ \(time\.perf_counter", summary["time"])
    assert summary["inputs"].startswith("random inputs; C++ (cpp_pybinding)")


def test_plans_of_every_cpu_kernel(unpacked: Callable[[str], Path]) -> None:
    """Every C++ kernel of the captures with provenance gets a reference tied to its arguments."""
    run, _ = load_capture(unpacked("cpu-torch2.13-block-dynamic"))
    (graph,) = run.graphs
    plans = {k.name: plan_repro(graph, k) for k in graph.kernels}
    ln = plans["cpp_fused_native_layer_norm_0"]
    assert [(a.param, a.written, a.size, a.stride) for a in ln.tensor_args][:2] == [
        ("in_out_ptr0", "buf1", (8, 256, 1), (256, 1, 2048)),
        ("in_ptr0", "arg2_1", (8, 256, 512), (131072, 512, 1)),
    ]
    assert [(a.param, a.value) for a in ln.args if not hasattr(a, "size")] == [("ks0", 256), ("ks1", 8)]
    assert [(i.node, i.param) for i in ln.reference.inputs] == [
        ("arg2_1", "in_ptr0"),
        ("arg3_1", "in_ptr1"),
        ("arg4_1", "in_ptr2"),
    ]
    assert [(o.node, o.param) for o in ln.reference.outputs] == [("add_1", "out_ptr2")]
    assert len(ln.reference.unchecked) == 2
    # the residual add_78 is read by the second LayerNorm, which computes it again itself: the kernel that
    # hands it on is the last one, writing add_122
    assert [(o.node, o.param) for o in plans["cpp_fused_add_view_3"].reference.outputs] == [
        ("add_122", "in_out_ptr0")
    ]
    assert [(o.node, o.param) for o in plans["cpp_fused_add_native_layer_norm_view_1"].reference.outputs] == [
        ("add_84", "out_ptr2")
    ]
    sizes = [(i.node, i.value) for i in plans["cpp_fused_gelu_view_2"].reference.inputs if i.param is None]
    assert sizes == [("arg0_1", 8), ("arg1_1", 256)]
    run, _ = load_capture(unpacked("cpu-torch2.13-dynamic-recompile"))
    embedding = plan_repro(run.graphs[0], run.graphs[0].kernels[0])
    assert [(a.param, a.dtype, a.values) for a in embedding.tensor_args] == [
        ("in_ptr0", "int64", "randint(0, 100)"), ("in_ptr1", "float32", "randn"), ("out_ptr0", "float32", "zeros")]  # fmt: skip


def test_kernel_without_fx_nodes_runs_unchecked(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """The older CPU capture's backward names no FX node per kernel: the script runs and times the kernel and
    says why it is not checked, never a check of something else."""
    result = write_repro(unpacked("cpu-torch2.13-mlp-train"), "cpp_fused_sum_1", tmp_path / "r")
    assert "provenance" in result.plan.reference.missing
    code, summary = run_script(result.script)
    assert code == 0
    assert summary["check"].startswith("no check: the records name no post-grad FX node for this kernel")
    assert "us median" in summary["time"]


@pytest.mark.parametrize("case", GPU_CASES)
def test_triton_reproducers_are_written(unpacked: Callable[[str], Path], tmp_path: Path, case: str) -> None:
    run, _ = load_capture(unpacked(case))
    written = checked = 0
    for graph in run.graphs:
        for kernel in graph.kernels:
            result = write_repro(
                unpacked(case), f"{graph.id}/{kernel.name}", tmp_path / graph.id / kernel.name
            )
            text = result.script.read_text()
            compile(text, str(result.script), "exec")
            assert f"KERNEL_NAME = {kernel.name!r}" in text and "CONFIG = None" in text
            assert "async_compile.triton(KERNEL_NAME, KERNEL_SOURCE, device_str=DEVICE)" in text
            written += 1
            checked += not result.plan.reference.missing
    assert written == sum(len(g.kernels) for g in run.graphs) > 0
    assert checked == written  # every kernel of these captures has its eager reference


def test_template_and_multi_output_ties(unpacked: Callable[[str], Path]) -> None:
    run, _ = load_capture(unpacked("block_default"))
    graph = next(g for g in run.graphs if g.name.endswith("forward_1"))
    ln = plan_repro(graph, graph.kernel("triton_per_fused_native_layer_norm_0"))  # type: ignore[arg-type]
    # mean (buf0) and rstd (buf3, in place over buf1): tied by the order Inductor created their buffers
    assert [(o.node, o.param) for o in ln.reference.outputs] == [
        ("getitem_1", "out_ptr0"), ("rsqrt", "in_out_ptr0"), ("add_1", "out_ptr1")]  # fmt: skip
    run, _ = load_capture(unpacked("mlp_bf16_max_autotune_nocg"))
    graph = next(g for g in run.graphs if g.name.endswith("inference_3"))
    template = plan_repro(graph, graph.kernel("triton_tem_fused_addmm_t_0"))  # type: ignore[arg-type]
    assert [a.param for a in template.args][-3:] == ["_grid_0", "_grid_1", "_grid_2"]
    # the GELU kernel after it writes in place what the next template reads: its output is checked
    gelu = plan_repro(graph, graph.kernel("triton_poi_fused_gelu_1"))  # type: ignore[arg-type]
    assert [(o.node, o.param) for o in gelu.reference.outputs] == [("convert_element_type_4", "in_out_ptr0")]


def test_triton_reproducer_under_the_interpreter(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    run, _ = load_capture(unpacked("mlp_default"))
    graph = next(g for g in run.graphs if g.name.endswith("inference_3"))
    result = write_repro(unpacked("mlp_default"), f"{graph.id}/triton_poi_fused_addmm_gelu_0", tmp_path / "r")
    code, summary = run_script(result.script, interpret=True)
    assert code == 0
    assert summary["check"].startswith("check passed (1 output against eager float64"), summary["check"]
    assert summary["time"] == "not timed under Triton's interpreter"
    assert "launched directly with XBLOCK=" in summary["inputs"]


def test_edited_kernel_fails_the_check(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """The check is real: a kernel edited to compute something else fails it, exit 1."""
    result = write_repro(unpacked("cpu-torch2.13-dynamic-recompile"), "model__0_inference_0.0/cpp_fused_mul_relu_unsqueeze_view_1",
                         tmp_path / "r")  # fmt: skip
    text = result.script.read_text()
    assert "at::vec::clamp_min(" in text
    result.script.write_text(text.replace("at::vec::clamp_min(", "at::vec::clamp_max(", 1))
    code, summary = run_script(result.script)
    assert code == 1
    assert summary["check"].startswith("check FAILED (1 output against eager float64; mul ("), summary["check"]


def test_unknown_and_ambiguous_kernels(unpacked: Callable[[str], Path], run_cli: Callable[..., CliResult],
                                       tmp_path: Path) -> None:  # fmt: skip
    folder = unpacked("cpu-torch2.13-dynamic-recompile")
    result = run_cli("repro", folder, "cpp_fused_embeding_0", "--out", tmp_path / "r")
    assert result.code == 2
    assert_one_line_error(
        result, "no generated kernel cpp_fused_embeding_0; did you mean: cpp_fused_embedding_0"
    )
    result = run_cli("repro", folder, "cpp_fused_embedding_0", "--out", tmp_path / "r")
    assert_one_line_error(result, "2 graphs have a kernel cpp_fused_embedding_0: name one as GRAPH/KERNEL",
                          "model__0_inference_0.0/cpp_fused_embedding_0")  # fmt: skip
    result = run_cli("repro", folder, "model__1_inference_1.1/cpp_fused_embedding_0", "--out", tmp_path / "r")
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"repro: {tmp_path / 'r' / 'repro.py'}"
    run, _ = load_capture(folder)
    with pytest.raises(ReproError):
        plan_repro(run.graphs[0], run.graphs[0].kernels[0].__class__(name="x", backend="cpp", category="", source="",
                                                                     definition_line=0))  # fmt: skip
    assert find_kernel(run, "model__1_inference_1/cpp_fused_embedding_0")[0].id == "model__1_inference_1.1"
