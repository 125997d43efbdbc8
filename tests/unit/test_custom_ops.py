"""Custom ops (``torch.library``) as library calls: named with their namespace, timed from their own profiler
range, and diagnosed as the model's or a library's own op, never as an ATen fallback or as Python overhead.

The real capture is ``cpu-torch2.13-custom-op`` (``samples/custom_op.py`` on CPU, torch 2.13: Linear -> ReLU ->
``lens_demo::mix`` -> tanh, see tests/fixtures/PROVENANCE.md); the expected times are worked out here from its
``profile_trace.json`` alone.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench import attach_measurements
from inductor_lens.bench.diagnosis import diagnose
from inductor_lens.bench.graph_calls import launch_label
from inductor_lens.parse import compat, parse_debug_folder
from inductor_lens.parse.diagnostics import Diagnostics
from inductor_lens.parse.output_code import parse_output_code
from inductor_lens.records import CompileRun, Launch
from inductor_lens.report import render_report
from inductor_lens.report.env import format_micros

from ..conftest import FIXED_TIME

# The same sample captured under two torch versions on CPU and on an H200: 2.13 records the op's own
# ``lens_demo::mix`` range (with two ``aten::mm`` in it); 2.14.1 records none (compat.RANGELESS_CUSTOM_OPS), its two
# ``aten::matmul`` at the top level; on the H200 (2.11) the range launches four GPU kernels (two CUTLASS SGEMMs, two cuBLASLt split-K reductions).
CASES = ("cpu-torch2.13-custom-op", "cpu-torch2.14.1-custom-op", "h200-torch2.11-custom-op")
OP = "lens_demo::mix"
LAUNCHES = {
    "cpu": [("extern", "aten.addmm"), ("cpp", "cpp_fused_mix_relu_0"), ("extern", OP), ("cpp", "cpp_fused_add_tanh_1")],
    "cuda": [("extern", "aten.mm"), ("triton", "triton_poi_fused_addmm_mix_relu_0"), ("extern", OP),
             ("triton", "triton_poi_fused_add_tanh_1")],
}  # fmt: skip
CPU_CASES = CASES[:2]
_RUNS: dict[str, CompileRun] = {}


def _timed(unpacked: Callable[[str], Path], case: str) -> tuple[Path, CompileRun]:
    """The fixture's folder and its run, parsed and timed once per session."""
    root = unpacked(case)
    if case not in _RUNS:
        run = parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME)
        _RUNS[case] = attach_measurements(run, root / "capture", strict=True)
    return root, _RUNS[case]


def _mix(run: CompileRun) -> Launch:
    (graph,) = run.graphs
    (launch,) = [launch for launch in graph.launches if launch.target.startswith("torch.ops.lens_demo.")]
    return launch


@pytest.mark.parametrize("case", CASES)
def test_the_custom_op_is_a_library_call_named_with_its_namespace(unpacked: Callable[[str], Path], case: str) -> None:
    _, timed = _timed(unpacked, case)
    (graph,) = timed.graphs
    assert [(launch.kind, launch.label) for launch in graph.launches] == LAUNCHES[timed.environment.device_type or ""]
    mix = _mix(timed)
    assert (mix.position, mix.target, mix.aten_op) == (3, "torch.ops.lens_demo.mix.default", "lens_demo.mix.default")
    assert launch_label(mix) == OP  # the profiler's name for its range


def top_level_ranges(trace: Path) -> list[list[tuple[str, float]]]:
    """Per profiled step (``inductor_lens_step_<i>``): the outermost CPU ranges inside each compiled-graph call, in order."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    marks = [e for e in json.loads(trace.read_text())["traceEvents"] if str(e.get("name")).startswith("inductor_lens_step_")]
    found = []
    for step in sorted(marks, key=lambda e: e["ts"]):
        ranges: list[tuple[str, float]] = []
        calls = [e for e in events if e["name"].startswith("## Call CompiledFxGraph ")
                 and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]  # fmt: skip
        for call in calls:
            inside = sorted((e for e in events if e["tid"] == call["tid"] and call["ts"] < e["ts"]
                             and e["ts"] + e["dur"] <= call["ts"] + call["dur"]), key=lambda e: (e["ts"], -e["dur"]))  # fmt: skip
            end = float("-inf")
            for e in inside:
                if e["ts"] >= end:
                    ranges.append((e["name"], e["dur"]))
                    end = e["ts"] + e["dur"]
        found.append(ranges)
    return found


def op_times(trace: Path, before: str = "graph_0_cpp_fused_mix_relu_0", after: str = "graph_0_cpp_fused_add_tanh_1") -> list[float]:
    """Per profiled step, the custom op's time as the trace holds it: its own ``lens_demo::mix`` range, or where torch
    recorded none, the top-level ranges between those of the launches around it (``before``, ``after``)."""
    times = []
    for ranges in top_level_ranges(trace):
        names = [name for name, _ in ranges]
        own = [us for name, us in ranges if name == OP]
        times.append(sum(own) if own else sum(us for _, us in ranges[names.index(before) + 1 : names.index(after)]))
    return times


def gpu_op_times(trace: Path) -> list[tuple[float, int]]:
    """Per profiled step: the summed duration and the number of the GPU kernels launched from inside the op's range
    (by the ``External id`` of the CPU ops and CUDA runtime calls within it)."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    marks = sorted((e for e in events if e["name"].startswith("inductor_lens_step_") and e["cat"] == "user_annotation"),
                   key=lambda e: e["ts"])  # fmt: skip
    kernels = [e for e in events if e.get("cat") == "kernel"]
    found = []
    for step in marks:
        ours = [e for e in events if e["name"] == OP and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
        ids = {e["args"].get("External id") for op in ours for e in events
               if e.get("cat") in ("cpu_op", "cuda_runtime") and e["tid"] == op["tid"]
               and op["ts"] <= e["ts"] and e["ts"] + e["dur"] <= op["ts"] + op["dur"]}  # fmt: skip
        launched = [k["dur"] for k in kernels if k["args"].get("External id") in ids]
        found.append((sum(launched), len(launched)))
    return found


def test_the_custom_op_is_timed_on_the_gpu_by_its_kernels(unpacked: Callable[[str], Path]) -> None:
    root, timed = _timed(unpacked, "h200-torch2.11-custom-op")
    per_step = gpu_op_times(root / "capture" / "profile_trace.json")
    mix = _mix(timed)
    assert len(per_step) == 20 and all(n == 4 for _, n in per_step)
    assert mix.timing is not None and mix.timing.steps == 20 and mix.timing.calls == 4
    assert mix.timing.median_us == pytest.approx(statistics.median(us for us, _ in per_step), rel=1e-9)
    step = timed.bench.step if timed.bench else None
    assert step is not None and step.unattributed == {}  # every kernel of the step tied to a launch


@pytest.mark.parametrize("case", CPU_CASES)
def test_the_custom_op_is_timed_from_its_profiler_ranges(unpacked: Callable[[str], Path], case: str) -> None:
    root, timed = _timed(unpacked, case)
    trace = root / "capture" / "profile_trace.json"
    ranges = top_level_ranges(trace)
    names = {name for step in ranges for name, _ in step}
    own_range = root.name == "cpu-torch2.13-custom-op"
    assert (OP in names) is own_range  # torch 2.14.1 records no range for a custom op written in Python
    if not own_range:
        assert [name for name, _ in ranges[0]] == ["aten::addmm", "graph_0_cpp_fused_mix_relu_0", "aten::matmul",
                                                  "aten::matmul", "graph_0_cpp_fused_add_tanh_1"]  # fmt: skip
    per_step = op_times(trace)
    mix = _mix(timed)
    assert len(per_step) == 20 and all(us > 0 for us in per_step)
    assert mix.timing is not None and mix.timing.steps == 20 and mix.timing.calls == 1
    assert mix.timing.median_us == pytest.approx(statistics.median(per_step), rel=1e-9)
    step = timed.bench.step if timed.bench else None
    assert step is not None and step.unattributed == {}  # nothing left untied inside the graph, the op's work included
    assert step.attributed_us == pytest.approx(statistics.median(sum(us for _, us in s) for s in ranges), rel=1e-9)
    assert ("custom op launch(es) without a range of their own" in step.method) is not own_range


@pytest.mark.parametrize("case", CASES)
def test_the_diagnosis_names_a_custom_op_never_a_fallback(unpacked: Callable[[str], Path], case: str) -> None:
    _, timed = _timed(unpacked, case)
    diagnosis = diagnose(timed)
    kinds = [f.kind for f in diagnosis.findings]
    assert "fallback" not in kinds and kinds.count("custom op") == 1
    (finding,) = [f for f in diagnosis.findings if f.kind == "custom op"]
    assert finding.title == "1 custom op call(s) run outside Inductor's kernels: lens_demo::mix"
    mix = _mix(timed)
    assert mix.timing is not None and finding.at_stake_us == mix.timing.median_us
    assert finding.evidence_url == "graphs/model__0_inference_0.0.html#launch-3"


@pytest.mark.parametrize("case", CASES)
def test_the_report_shows_the_custom_op_with_its_time(unpacked: Callable[[str], Path], case: str) -> None:
    _, timed = _timed(unpacked, case)
    pages = render_report(timed, analyze(timed), draw=False)
    index = pages["index.html"]
    assert '<td data-value="lens_demo::mix">' in index  # its row in the kernel table
    assert "#3 lens_demo::mix: " in index  # its segment of the step's bar
    assert "1 custom op call(s) run outside Inductor&#39;s kernels: lens_demo::mix" in index
    assert "ATen fallback call(s)" not in index
    assert '<span class="badge cat-custom-op">custom op</span>' in index
    # the launch order: its row, with its time
    graph_page = pages["graphs/model__0_inference_0.0.html"]
    row = graph_page[graph_page.index('<tr id="launch-3">') :].split("</tr>")[0]
    mix = _mix(timed)
    assert mix.timing is not None and f'<td class="num" title="{mix.timing.spread}">{format_micros(mix.timing.median_us)}</td>' in row
    assert "<code>lens_demo::mix</code>" in row and '<span class="badge cat-custom-op">custom op</span>' in row


# Qwen3-MoE's experts under transformers 5.17 (transformers/integrations/moe.py registers
# transformers::grouped_mm_fallback with torch.library); call() as Inductor writes a custom op's fallback.
MOE_CALL = textwrap.dedent(
    """
    class Runner:
        def call(self, args):
            arg0_1, arg1_1, arg2_1 = args
            args.clear()
            # Topologically Sorted Source Nodes: [grouped_mm_fallback], Original ATen: [transformers.grouped_mm_fallback]
            buf0 = torch.ops.transformers.grouped_mm_fallback.default(arg0_1, arg1_1, arg2_1)
            buf1 = buf0
            del buf0
            buf2 = torch.ops.mkl._mkl_linear.default(buf1, arg1_1, arg1_1, None, 16)
            buf3 = torch.ops._c10d_functional.all_reduce_.default(buf2, 'sum', '0')
            return (buf1, buf2, )
    """
)


def test_a_library_namespace_is_kept_whole() -> None:
    parsed = parse_output_code(MOE_CALL, "output_code.py", Diagnostics(strict=True))
    moe, mkl, collective = parsed.launches
    assert (moe.kind, moe.target, moe.aten_op) == (
        "extern",
        "torch.ops.transformers.grouped_mm_fallback.default",
        "transformers.grouped_mm_fallback.default",
    )
    assert moe.aten_ops == ("transformers.grouped_mm_fallback",)
    assert (moe.label, launch_label(moe)) == ("transformers::grouped_mm_fallback", "transformers::grouped_mm_fallback")
    # torch's own namespaces are not custom ops; the profiler names their ranges <ns>::<op> all the same
    assert (mkl.label, launch_label(mkl)) == ("mkl._mkl_linear.default", "mkl::_mkl_linear")
    assert (collective.label, launch_label(collective)) == (
        "_c10d_functional.all_reduce_.default",
        "_c10d_functional::all_reduce_",
    )


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("torch.ops.lens_demo.mix.default", "lens_demo::mix"),
        ("torch.ops.transformers.grouped_mm_fallback.default", "transformers::grouped_mm_fallback"),
        ("torch.ops.mylib.scale", "mylib::scale"),  # an overload packet, no .default
        ("torch.ops.aten._scaled_dot_product_efficient_attention.default", None),
        ("torch.ops.prims.iota.default", None),
        ("torch.ops.mkl._mkl_linear.default", None),
        ("torch.ops._c10d_functional.wait_tensor.default", None),
        ("extern_kernels.mm", None),
        ("aten.randint.low", None),
        ("torch.ops.lens_demo", None),
    ],
)
def test_custom_op_classification(target: str, expected: str | None) -> None:
    assert compat.custom_op(target) == expected


@pytest.mark.parametrize("case", CASES)
def test_a_library_custom_op_is_diagnosed_whole(unpacked: Callable[[str], Path], case: str) -> None:
    _, timed = _timed(unpacked, case)
    """transformers::grouped_mm_fallback in place of lens_demo::mix: named whole, never a fallback "transformers"."""
    (graph,) = timed.graphs
    moe = replace(
        _mix(timed),
        target="torch.ops.transformers.grouped_mm_fallback.default",
        aten_op="transformers.grouped_mm_fallback.default",
    )
    mkl = replace(moe, position=5, target="torch.ops.mkl._mkl_linear.default", aten_op="mkl._mkl_linear.default",
                  timing=None)  # fmt: skip
    index = replace(moe, position=6, target="torch.ops.aten.index_put.default", aten_op="aten.index_put.default",
                    timing=None)  # fmt: skip
    launches = (*(moe if launch.position == 3 else launch for launch in graph.launches), mkl, index)
    run = replace(timed, graphs=(replace(graph, launches=launches),))
    findings = {f.kind: f for f in diagnose(run).findings}
    assert findings["custom op"].title == (
        "1 custom op call(s) run outside Inductor's kernels: transformers::grouped_mm_fallback"
    )
    # the MKL matmul is a library call; ATen's index_put is the one fallback, named whole
    assert findings["fallback"].title == "1 ATen fallback call(s) Inductor did not generate: index_put"
