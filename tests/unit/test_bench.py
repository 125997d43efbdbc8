"""The bench stage on CPU: byte/FLOP accounting and the roofline on real fixture kernels, attribution of a
profiled step from a Chrome trace, and measurements joined to the records and shown in the report.

The numbers in these tests are worked out by hand from the kernels' shapes; no test here times anything.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench import attach_measurements
from inductor_lens.bench.attribution import attribute
from inductor_lens.bench.graph_calls import launch_label
from inductor_lens.bench.roofline import (
    AT_MEMORY_ROOF,
    OVERCOUNTED,
    REPEATED_LOADS,
    argument_type,
    extern_cost,
    flag_tone,
    flags,
    kernel_cost,
    place,
)
from inductor_lens.exchange.shared import kernel_fingerprint
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun, DeviceCeilings, GraphRecord, Timing, to_jsonable
from inductor_lens.report import render_report
from inductor_lens.worker.measure import _snapshot, stat

from ..conftest import CPU_CASE, FIXED_TIME, TIMED_CASE

MIB = 1 << 20
H200_LIKE = DeviceCeilings(
    copy_gb_per_s=4000.0,
    copy=Timing(1.0, 1.0, 1.0, 10, "test"),
    copy_bytes=4 << 30,
    matmul_tflops=50.0,
    matmul=Timing(1.0, 1.0, 1.0, 10, "test"),
    matmul_dtype="float32",
    matmul_size=8192,
)


def _run(unpacked, case: str) -> CompileRun:
    return parse_debug_folder(unpacked(case), strict=True, now=lambda: FIXED_TIME)


def _graph(run: CompileRun, graph_id: str) -> GraphRecord:
    return next(g for g in run.graphs if g.id == graph_id)


# -- bytes and FLOPs ----------------------------------------------------------------------------------------


def test_extern_matmul_costs_on_the_h200_block(unpacked) -> None:
    graph = _graph(_run(unpacked, "block_default"), "model__1_inference_3.1")
    costs = {
        launch.position: extern_cost(graph, launch)[:2]
        for launch in graph.launches
        if launch.kind == "extern"
    }
    # addmm(bias f32[1536], x f32[2048, 512], W^T f32[512, 1536]): A + B + C + bias, 2*M*N*K
    assert costs[2] == (4 * (2048 * 512 + 512 * 1536 + 2048 * 1536 + 1536), 2 * 2048 * 1536 * 512)
    # mm(f32[2048, 2048], f32[2048, 512]); the FFN's down projection
    assert costs[8] == (4 * (2048 * 2048 + 2048 * 512 + 2048 * 512), 2 * 2048 * 512 * 2048)
    # mm(view of buf6 [2048, 512], f32[512, 512]): buf6 has no declared type, so the dtype comes from B
    assert argument_type(graph, graph.launches[3].args[0]) == "?[2048, 512]"
    assert costs[4] == (4 * (2048 * 512 + 512 * 512 + 2048 * 512), 2 * 2048 * 512 * 512)
    # causal attention on q, k, v f32[8, 8, 256, 64]: Q·Kᵀ and P·V over half the scores; q, k, v read, out written
    q = 8 * 8 * 256 * 64
    assert costs[3] == (4 * 4 * q, 2 * 8 * 8 * 256 * 256 * (64 + 64) // 2)
    assert graph.launches[2].args[6] == "True"  # is_causal, as call() passes it


def test_triton_kernels_use_inductors_own_counts(unpacked) -> None:
    graph = _run(unpacked, "mlp_bf16_max_autotune_nocg").graphs[0]
    template = graph.kernel("triton_tem_fused_addmm_t_0")
    assert template is not None and template.category == "template"
    moved, flops, source = kernel_cost(graph, template, None)
    # kernel_num_gb 0.071303168 and kernel_flop 2*M*N*K for (1024 x 2048) @ (2048 x 8192)
    assert (moved, flops) == (71_303_168, 2 * 1024 * 8192 * 2048)
    assert source.startswith("Inductor's")


def test_cpp_kernels_are_counted_from_their_tensors(unpacked) -> None:
    backward = _graph(_run(unpacked, CPU_CASE), "model__0_backward_3.1")
    launch = next(x for x in backward.launches if x.target == "cpp_fused_sum_threshold_backward_0")
    kernel = backward.kernel(launch.target)
    # (in_out_ptr0=buf3, a reuse of relu f32[32, 128], counted twice; tangents f32[32, 10]; buf0 f32[32, 128];
    #  buf2 f32[1, 10])
    assert launch.args == ("buf3", "tangents_1", "buf0", "buf2")
    moved, flops, source = kernel_cost(backward, kernel, launch)
    assert moved == 4 * (2 * 32 * 128 + 32 * 10 + 32 * 128 + 10)
    assert flops is None and source.startswith("counted")


# -- the roofline -------------------------------------------------------------------------------------------


def test_roofline_of_a_compute_bound_matmul() -> None:
    moved, flops = 71_303_168, 2 * 1024 * 8192 * 2048
    point = place((moved, flops, "test"), 1e-3, "isolated", H200_LIKE)
    assert point.gb_per_s == pytest.approx(71.303168)
    assert point.tflops == pytest.approx(34.359738368)
    assert point.intensity == pytest.approx(flops / moved)  # ~482 FLOP/byte, past the ridge at 50e12/4e12
    assert point.bound == "compute"
    assert point.percent == pytest.approx(100 * 34.359738368 / 50.0)


def test_roofline_of_a_low_intensity_kernel_uses_the_bandwidth_slope() -> None:
    # 8 FLOP/byte is left of the ridge (12.5): the roof there is 4000 GB/s * 8 = 32 TFLOP/s
    point = place((MIB, 8 * MIB, "test"), 1e-6, "in context", H200_LIKE)
    assert point.bound == "memory"
    assert point.percent == pytest.approx(100 * (8 * MIB / 1e-6) / (4000e9 * 8))


def test_roofline_without_flops_is_bandwidth_only() -> None:
    point = place((32 * MIB, None, "test"), 10e-6, "in context", H200_LIKE)
    assert point.gb_per_s == pytest.approx(32 * MIB / 10e-6 / 1e9)
    assert point.percent == pytest.approx(100 * point.gb_per_s / 4000.0)
    assert point.tflops is None and point.bound == "memory"
    assert place((None, None, "test"), 1e-6, "in context", H200_LIKE) is None


def test_flags() -> None:
    slow = place((MIB, None, "test"), 10e-6, "in context", H200_LIKE)  # 105 GB/s: 2.6% of the roof
    assert flags(slow, 10e-6, None) == ("at 3% of the roofline",)
    tiny = place((MIB, None, "test"), 2e-6, "in context", H200_LIKE)  # too short to judge
    assert flags(tiny, 2e-6, None) == ()
    from_l2 = place((64 * MIB, None, "test"), 10e-6, "in context", H200_LIKE)  # 6.7 TB/s: beats DRAM
    assert flags(from_l2, 10e-6, None) == ("above the copy bandwidth in the step: inputs served from L2",)
    # with L2 cleared, 40 us: 42% of the copy bandwidth, so the step's 168% came from L2
    assert flags(from_l2, 10e-6, 40e-6) == (
        "above the copy bandwidth in the step: inputs served from L2 (isolated, L2 cleared: 42%)",
        "one launch takes 75% less time in the step than isolated (L2 cleared): 10.0 vs 40.0 µs",
    )
    # still over the copy bandwidth with L2 cleared (140%), the count exact: at the roof
    assert flags(from_l2, 10e-6, 12e-6) == (AT_MEMORY_ROOF,)
    # Inductor's count over the tensors passed (a max-pool's window loads): the count overestimates
    overcounted = replace(from_l2, cost_source=f"Inductor's; 2.00x the 1,000 bytes ({REPEATED_LOADS})")
    assert flags(overcounted, 10e-6, 12e-6) == (OVERCOUNTED,)
    slower = flags(None, 30e-6, 20e-6)
    assert slower == (
        "one launch takes 50% more time in the step than isolated (L2 cleared): 30.0 vs 20.0 µs",
    )
    shown = (*flags(slow, 10e-6, None), *slower, *flags(from_l2, 10e-6, 40e-6), OVERCOUNTED, AT_MEMORY_ROOF)
    assert [flag_tone(f) for f in shown] == ["bad", "warn", "", "", "", ""]  # only time to win is an alarm
    assert flags(None, 21e-6, 20e-6) == ()  # within 15%
    assert flags(None, 3e-6, 1e-6) == ()  # both under 20 us


# -- attribution --------------------------------------------------------------------------------------------


def _event(name: str, cat: str, ts: float, dur: float, tid: int = 1, ext: int | None = None) -> dict:
    args = {"External id": ext} if ext is not None else {}
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid, "pid": 1, "args": args}


def _gpu_trace(graph: GraphRecord, steps: int, kernel_us: dict[int, float]) -> list[dict]:
    """A Kineto-like trace: per step, one graph region with one CPU range per launch and GPU kernels."""
    events: list[dict] = []
    ext = 0
    for step in range(steps):
        base = step * 10_000.0
        events.append(_event(f"inductor_lens_step_{step}", "user_annotation", base, 9_000))
        events.append(_event("## Call CompiledFxGraph fabc ##", "cpu_op", base + 10, 8_000))
        gpu_clock = base + 100.0
        for index, launch in enumerate(graph.launches):
            ext += 1
            start = base + 20 + 100 * index
            events.append(_event(launch_label(launch), "cpu_op", start, 50, ext=ext))
            issuing = ext
            if launch.kind == "extern" and "attention" in launch.target:
                ext += 1  # the GPU kernel hangs off a range nested inside the top-level one
                events.append(_event("aten::_efficient_attention_forward", "cpu_op", start + 5, 40, ext=ext))
                issuing = ext
            events.append(
                _event(
                    f"gpu_kernel_{launch.position}",
                    "kernel",
                    gpu_clock,
                    kernel_us[launch.position],
                    7,
                    issuing,
                )
            )
            gpu_clock += kernel_us[launch.position] + 2.0  # a 2 us gap before the next kernel
        ext += 1  # eager work inside the step but outside the compiled graph
        events.append(_event("aten::copy_", "cpu_op", base + 8_500, 20, ext=ext))
        events.append(_event("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy", gpu_clock + 50, 1.5, 7, ext))
    return events


def test_attribution_ties_every_gpu_kernel_to_its_launch(unpacked, tmp_path: Path) -> None:
    graph = _graph(_run(unpacked, "block_default"), "model__1_inference_3.1")
    kernel_us = {launch.position: 10.0 * launch.position for launch in graph.launches}
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": _gpu_trace(graph, 3, kernel_us)}))
    result = attribute(trace, [graph], "cuda")
    assert result.steps == 3
    for launch in graph.launches:
        times = result.launches[(graph.id, launch.position)]
        assert times.per_step_us == [kernel_us[launch.position]] * 3
        assert times.per_step_calls == [1, 1, 1]
    launched = sum(kernel_us.values())
    assert result.step_total_us == [launched + 1.5] * 3
    assert result.unattributed == {"Memcpy DtoH (Device -> Pinned)": 1.5}
    gaps = 2.0 * (len(graph.launches) - 1)
    assert result.step_busy_us == [launched + 1.5] * 3
    assert result.step_span_us == [pytest.approx(launched + gaps + 2.0 + 50 + 1.5)] * 3


def test_attribution_skips_regions_of_other_graphs(unpacked, tmp_path: Path) -> None:
    run = _run(unpacked, "block_default")
    inference = _graph(run, "model__1_inference_3.1")
    forward = _graph(run, "model__0_forward_1.0")
    kernel_us = {launch.position: 5.0 for launch in inference.launches}
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": _gpu_trace(inference, 1, kernel_us)}))
    result = attribute(trace, [forward, inference], "cuda")
    # the two graphs launch different kernels; the region's launch names pick the inference graph
    assert {graph_id for graph_id, _ in result.launches} == {inference.id}


def test_cuda_graph_replays_are_aligned_to_launches(unpacked, tmp_path: Path) -> None:
    """Under reduce-overhead the step is one cudaGraphLaunch: no launch ranges; the replayed kernels carry the
    launch call's ``correlation``, and are aligned to the graph's launches in order."""
    graph = _graph(_run(unpacked, "block_default"), "model__1_inference_3.1")
    launch_call = _event("cudaGraphLaunch", "cuda_runtime", 10, 20, ext=1)
    launch_call["args"]["correlation"] = 5
    events = [_event("inductor_lens_step_0", "user_annotation", 0, 1_000), launch_call]
    clock = 100.0
    for launch in graph.launches:
        name = launch.target if launch.kind == "triton" else "sm90_xmma_gemm_f32f32_cublas"
        kernel = _event(name, "kernel", clock, 4.0, 7, 1)
        kernel["args"]["correlation"] = 5
        events.append(kernel)
        clock += 5.0
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    result = attribute(trace, [graph], "cuda")
    assert sorted(p for _, p in result.launches) == [launch.position for launch in graph.launches]
    assert all(times.per_step_us == [4.0] for times in result.launches.values())
    assert result.unattributed == {}
    assert result.replayed_us == [4.0 * len(graph.launches)] and result.approximate_us == [0.0]
    assert not result.replays_tied_exactly  # no graph-free profile: aligned by order
    assert result.step_total_us == [4.0 * len(graph.launches)]


def test_cpu_attribution_uses_the_kernel_profile_ranges(unpacked, tmp_path: Path) -> None:
    forward = _graph(_run(unpacked, CPU_CASE), "model__0_forward_1.0")
    events = [
        _event("inductor_lens_step_0", "user_annotation", 0, 1_000),
        _event("## Call CompiledFxGraph f1 ##", "cpu_op", 10, 900),
        _event("aten::addmm", "cpu_op", 20, 100),
        _event("aten::mm", "cpu_op", 30, 80),  # nested inside addmm: not a launch of its own
        _event("graph_0_cpp_fused_relu_0", "cpu_op", 130, 40),  # TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE name
        _event("aten::addmm", "cpu_op", 200, 60),
    ]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    result = attribute(trace, [forward], "cpu")
    assert [result.launches[(forward.id, p)].per_step_us for p in (1, 2, 3)] == [[100.0], [40.0], [60.0]]
    assert result.step_total_us == [900.0]  # on CPU: the time inside compiled graphs


# -- measurements joined to the records, and shown -----------------------------------------------------------


def _timing(median_ms: float) -> dict:
    return to_jsonable(stat([median_ms] * 5, "test harness"))


def test_attach_measurements_times_kernels_and_renders(unpacked, tmp_path: Path) -> None:
    run = _run(unpacked, "block_default")
    inference = _graph(run, "model__1_inference_3.1")
    run = replace(run, graphs=(inference,))
    kernel_us = {launch.position: 10.0 * launch.position for launch in inference.launches}
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "profile_trace.json").write_text(
        json.dumps({"traceEvents": _gpu_trace(inference, 2, kernel_us)})
    )
    first = inference.kernels[0]
    isolated = {
        first.name: [
            {"isolated": _timing(0.004), "fingerprint": kernel_fingerprint(first.source), "n_regs": 40}
        ]
    }
    bench = {
        "device": "cuda",
        "ceilings": {
            "copy_bytes": 4 << 30, "copy": _timing(1.0), "copy_gb_per_s": 4000.0, "matmul_flop": 2 * 8192**3,
            "matmul": _timing(22.0), "matmul_tflops": 50.0, "dtype": "float32", "tf32": False,
        },
        "end_to_end": {"eager": _timing(0.5), "compiled": _timing(0.4), "eager_peak_bytes": 10, "compiled_peak_bytes": 8},
        "isolated": isolated,
    }  # fmt: skip
    (capture / "capture.json").write_text(json.dumps({"bench": bench}))
    timed = attach_measurements(run, capture)

    assert timed.bench.end_to_end.speedup == pytest.approx(1.25)
    assert timed.bench.step.attributed_us == sum(kernel_us.values())
    assert timed.bench.step.total_us == sum(kernel_us.values()) + 1.5  # plus the eager copy
    graph = timed.graphs[0]
    kernel = graph.kernel(first.name)
    launch = next(x for x in graph.launches if x.target == first.name)
    assert kernel.timing.in_context_us == kernel_us[launch.position]
    assert kernel.timing.isolated.median_ms == 0.004 and kernel.timing.registers == 40
    assert kernel.timing.roofline.gb_per_s == pytest.approx(
        kernel.bytes_accessed / (kernel_us[launch.position] * 1e-6) / 1e9
    )
    mm = graph.launches[7]  # position 8: the 2048x2048 @ 2048x512 mm
    assert mm.timing.median_us == 80.0 and mm.timing.roofline.tflops == pytest.approx(
        2 * 2048 * 512 * 2048 / 80e-6 / 1e12
    )
    # a different kernel with the same name (another graph) is not given this kernel's isolated time
    other = {first.name: [{"isolated": _timing(0.004), "fingerprint": "0" * 16}]}
    (capture / "capture.json").write_text(json.dumps({"bench": {**bench, "isolated": other}}))
    assert attach_measurements(run, capture).graphs[0].kernel(first.name).timing.isolated is None

    # the timings survive lens.json and are drawn in the report
    assert CompileRun.from_json(timed.to_json()) == timed
    index = render_report(timed, analyze(timed), draw=False)["index.html"]
    assert "Where the time goes" in index and 'class="timebar"' in index and "<svg" in index
    table = index.split('id="kernel-table"', 1)[1].split("</table>", 1)[0]
    names = re.findall(r'<td data-value="([^"]+)"><a href=', table)
    # slowest first: launch 9 (90 us), the mm at 8 (80 us), ... launch 1 (10 us)
    assert names[:2] == ["triton_poi_fused_add_addmm_view_3", "aten.mm"]
    assert names[-1] == "triton_per_fused_native_layer_norm_0"


def test_real_h200_capture_is_attributed_in_full(unpacked) -> None:
    """A real capture: 20 profiled steps of the transformer block under max-autotune-no-cudagraphs."""
    root = unpacked(TIMED_CASE)
    run = attach_measurements(parse_debug_folder(root, strict=True), root / "capture")
    bench = run.bench
    assert bench.device == "cuda" and bench.error is None
    assert bench.ceilings.copy_gb_per_s == pytest.approx(4243.4, abs=0.1)
    assert (
        bench.ceilings.matmul_tflops == pytest.approx(51.1, abs=0.1)
        and bench.ceilings.matmul_dtype == "float32"
    )
    step = bench.step
    assert step.steps == 20 and step.unattributed == {}
    assert step.attributed_us == pytest.approx(step.total_us) == pytest.approx(380.0825)
    (graph,) = run.graphs
    by_position = {launch.position: launch for launch in graph.launches}
    # extern_kernels.bias_addmm is a Python helper: the profiler shows the aten::addmm it calls
    assert by_position[2].target == "extern_kernels.bias_addmm" and by_position[2].aten_op == "aten.addmm"
    assert by_position[2].timing.median_us == pytest.approx(90.672)
    # each launch's time states its spread over the 20 profiled steps
    spread = by_position[2].timing
    assert spread.steps == 20 and spread.p10_us <= spread.median_us <= spread.p90_us
    assert spread.spread.startswith("p10-p90 ") and spread.spread.endswith(" µs over 20 profiled steps")
    assert by_position[3].timing.median_us == pytest.approx(41.6325)  # attention, a kernel nested in SDPA
    assert by_position[8].timing.calls == 2.0  # this mm runs as two cuBLAS kernels
    # shares are medians over steps, so they add up to 1 only within the steps' spread
    assert sum(launch.timing.share for launch in graph.launches) == pytest.approx(1.0, abs=0.005)
    for kernel in graph.kernels:  # every Triton kernel found its replay by name and fingerprint
        assert kernel.timing.isolated.samples > 100 and kernel.timing.config.startswith("XBLOCK")
        assert kernel.timing.registers is not None
    layer_norm = graph.kernel("triton_per_fused_native_layer_norm_0")
    assert layer_norm.timing.in_context_us == pytest.approx(3.0555)
    assert layer_norm.timing.isolated.median_ms == pytest.approx(0.007136, abs=1e-6)
    mm = by_position[8]
    assert mm.timing.roofline.bound == "compute" and mm.timing.roofline.flops == 2 * 2048 * 512 * 2048
    assert bench.end_to_end.speedup == pytest.approx(1.0858, abs=1e-4)
    assert bench.end_to_end.cudagraphs is None  # this mode has none


def test_bench_error_is_shown_not_fatal(unpacked, tmp_path: Path) -> None:
    run = _run(unpacked, CPU_CASE)
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "capture.json").write_text(
        json.dumps({"bench": {"device": "cpu", "error": "RuntimeError: boom"}})
    )
    timed = attach_measurements(run, capture)
    assert timed.bench.error == "RuntimeError: boom"
    assert "Timing failed: RuntimeError: boom" in render_report(timed, analyze(timed), draw=False)["index.html"]


# -- the child's helpers ---------------------------------------------------------------------------------------


def test_fingerprint_matches_what_triton_holds(unpacked, tmp_path: Path) -> None:
    """The parent hashes the kernel as output_code.py prints it, the child as Triton's JITFunction holds it."""
    pytest.importorskip("triton")
    graph = _run(unpacked, "block_default").graphs[0]
    kernel = graph.kernels[0]
    body = kernel.source[re.search(r"^def\s", kernel.source, re.MULTILINE).start() :]
    module_file = tmp_path / f"{kernel.name}.py"
    module_file.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n" + body)
    spec = importlib.util.spec_from_file_location(kernel.name, module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "def get_args" in kernel.source  # the harness below the kernel is not part of it
    jitted = getattr(module, kernel.name)
    # the interpreter (on in the test session) wraps the function without keeping Triton's .src
    held = jitted.src if hasattr(jitted, "src") else inspect.getsource(jitted.fn)
    assert kernel_fingerprint(held) == kernel_fingerprint(kernel.source)
    assert kernel_fingerprint(graph.kernels[1].source) != kernel_fingerprint(kernel.source)


def test_snapshot_keeps_views_and_shared_storage() -> None:
    torch = pytest.importorskip("torch")
    base = torch.arange(24.0).reshape(4, 6)
    view = base[:, 1:4].t()
    copied = _snapshot((view, base, 3), [1 << 20])
    assert copied[0].shape == view.shape and copied[0].stride() == view.stride()
    assert copied[0].storage_offset() == view.storage_offset() and torch.equal(copied[0], view)
    assert (
        copied[0].untyped_storage().data_ptr() == copied[1].untyped_storage().data_ptr()
    )  # shared, as before
    assert copied[1].untyped_storage().data_ptr() != base.untyped_storage().data_ptr() and copied[2] == 3
    assert _snapshot((base,), [8]) is None  # over the memory budget: not copied
