"""Each identical backward graph gets its own time: graphs Inductor served from its FX graph cache share a key and
launch the same kernels, and autograd runs backward calls outside Dynamo's compiled regions, so only the autograd
sequence number ties a backward call to its forward call (and that call's compile id).

The real capture is ``cpu-torch2.13-repeated-layers-train`` (``samples/repeated_layers.py --train`` on CPU, torch
2.13: four identical layers with a graph break after each; see tests/fixtures/PROVENANCE.md). The expected times
are worked out here from its ``profile_trace.json`` alone.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inductor_lens.bench import attach_measurements
from inductor_lens.bench.attribution import JOIN_METHODS, attribute
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun

from ..conftest import FIXED_TIME

CASE = "cpu-torch2.13-repeated-layers-train"
STEPS = 20
# id, compile id, cache hit: the backward graphs are compiled last layer first
GRAPHS = [
    ("model__0_forward_1.0", "0/0_1", False),
    ("model__1_forward_4.1", "1/0_1", False),
    ("model__2_forward_7.2", "2/0_1", True),
    ("model__3_forward_10.3", "3/0", True),
    ("model__3_backward_12.4", "3/0", False),
    ("model__2_backward_13.5", "2/0_1", True),
    ("model__1_backward_14.6", "1/0_1", True),
    ("model__0_backward_15.7", "0/0_1", False),
]
BACKWARD_LAUNCHES = ["cpp_fused_mul_tanh_tanh_backward_0", "extern_kernels.mm", "cpp_fused_sum_1", "extern_kernels.addmm"]
_RUNS: dict[str, tuple[Path, CompileRun]] = {}


def _timed(unpacked: Callable[[str], Path]) -> tuple[Path, CompileRun]:
    if CASE not in _RUNS:
        root = unpacked(CASE)
        run = parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME)
        _RUNS[CASE] = root, attach_measurements(run, root / "capture", strict=True)
    return _RUNS[CASE]


def _top_level(events: list[dict[str, Any]], around: dict[str, Any]) -> list[dict[str, Any]]:
    start, end = around["ts"], around["ts"] + around["dur"]
    inside = sorted(
        (e for e in events if e["tid"] == around["tid"] and start < e["ts"] and e["ts"] + e["dur"] <= end),
        key=lambda e: (e["ts"], -e["dur"]),
    )
    top: list[dict[str, Any]] = []
    for e in inside:
        if not top or e["ts"] >= top[-1]["ts"] + top[-1]["dur"]:
            top.append(e)
    return top


def _backward_times(trace: Path) -> dict[str, list[list[tuple[str, float]]]]:
    """Dynamo compile id of the forward call (``2/0``) -> per step, the (name, dur) of each top-level range inside
    the ``## Call CompiledFxGraph`` region that autograd's engine ran for that forward call's backward."""
    events = [
        e
        for e in json.loads(trace.read_text())["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
    ]
    steps = sorted(
        (e for e in events if e["name"].startswith("inductor_lens_step_")),
        key=lambda e: int(e["name"].removeprefix("inductor_lens_step_")),
    )
    assert len(steps) == STEPS

    def step_of(e: dict[str, Any]) -> int:
        (index,) = [i for i, s in enumerate(steps) if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
        return index

    compiled = [e for e in events if e["name"].startswith("Torch-Compiled Region: ")]
    forward_id: dict[int, str] = {}
    for call in (e for e in events if e["name"] == "CompiledFunction"):
        # each resume function runs inside the frame before it: the innermost region is the call's
        region = max(
            (r for r in compiled
             if r["tid"] == call["tid"] and r["ts"] <= call["ts"] and call["ts"] + call["dur"] <= r["ts"] + r["dur"]),
            key=lambda r: r["ts"],
        )  # fmt: skip
        forward_id[call["args"]["Sequence number"]] = region["name"].removeprefix("Torch-Compiled Region: ")
    found: dict[str, list[list[tuple[str, float]]]] = {}
    for node in (e for e in events if e["name"] == "autograd::engine::evaluate_function: CompiledFunctionBackward"):
        (call,) = [
            e for e in events
            if e["tid"] == node["tid"] and e["name"].startswith("## Call CompiledFxGraph ")
            and node["ts"] <= e["ts"] and e["ts"] + e["dur"] <= node["ts"] + node["dur"]
        ]  # fmt: skip
        per_step = found.setdefault(forward_id[node["args"]["Sequence number"]], [[] for _ in steps])
        assert not per_step[step_of(call)]  # one backward call of each forward per step
        per_step[step_of(call)] = [(e["name"], e["dur"]) for e in _top_level(events, call)]
    return found


def test_every_graph_forward_and_backward_has_timed_launches(unpacked: Callable[[str], Path]) -> None:
    _, run = _timed(unpacked)
    assert [(g.id, g.compile_id, g.cache_hit) for g in run.graphs] == GRAPHS
    for graph in run.graphs:
        assert graph.launches and all(
            launch.timing is not None and launch.timing.steps == STEPS and launch.timing.calls == 1
            and launch.timing.median_us > 0
            for launch in graph.launches
        ), graph.id  # fmt: skip
    assert run.bench is not None and run.bench.step is not None and run.bench.step.steps == STEPS


def test_each_backward_graph_is_timed_by_its_own_region(unpacked: Callable[[str], Path]) -> None:
    root, run = _timed(unpacked)
    trace = root / "capture" / "profile_trace.json"
    expected = _backward_times(trace)
    assert sorted(expected) == ["0/0", "1/0", "2/0", "3/0"]
    attribution = attribute(trace, run.graphs, "cpu")
    backward = [g for g in run.graphs if g.kind == "backward"]
    assert len(backward) == 4
    for graph in backward:
        assert graph.compile_id is not None
        own = expected[graph.compile_id.split("_")[0]]
        targets = [launch.target for launch in graph.launches]
        assert targets == (BACKWARD_LAUNCHES[:3] if graph.id == "model__0_backward_15.7" else BACKWARD_LAUNCHES)
        for index, launch in enumerate(graph.launches):
            times = attribution.launches[(graph.id, launch.position)]
            # the region's ranges, one per launch in order (C++ kernels as graph_<k>_<name>, extern as aten::<op>)
            (name,) = {step[index][0].split("::")[-1] for step in own}
            short = launch.target.removeprefix("extern_kernels.")
            assert name == short or name.endswith(f"_{short}"), (name, short)
            assert times.per_step_us == [step[index][1] for step in own]
            assert times.per_step_calls == [1] * STEPS
            assert launch.timing is not None and launch.timing.median_us == pytest.approx(
                statistics.median(times.per_step_us)
            )
    # the three identical backward graphs (one key) are told apart by the forward call's compile id
    shared = [g for g in backward if g.fx_cache_key == backward[0].fx_cache_key]
    assert [g.id for g in shared] == ["model__3_backward_12.4", "model__2_backward_13.5", "model__1_backward_14.6"]
    assert all(attribution.joins[g.id] == (JOIN_METHODS["names+seq"], STEPS) for g in shared)
    assert attribution.joins["model__0_backward_15.7"] == (JOIN_METHODS["key"], STEPS)
    assert attribution.unjoined_calls == 0


def test_without_sequence_numbers_identical_backward_graphs_go_by_the_order_they_first_ran(
    unpacked: Callable[[str], Path],
) -> None:
    """The same trace with autograd's sequence numbers taken out: nothing ties a backward call to its forward, so
    each step's i-th call of the three identical backward graphs goes to the i-th compiled (layer 4's, 3's, 2's:
    autograd runs them last layer first), which gives each its own region's times here, and the join says how."""
    root, run = _timed(unpacked)
    trace = root / "capture" / "profile_trace.json"
    document = json.loads(trace.read_text())
    stripped = []
    for event in document["traceEvents"]:
        if "Sequence number" in (event.get("args") or {}):
            del event["args"]["Sequence number"]
            stripped.append(event["name"])
    # per step, 4 forward calls and, for each, its backward node's two ranges (and the eager loss's own)
    assert len(stripped) == 380 and stripped.count("CompiledFunctionBackward") == stripped.count("CompiledFunction") == 80
    attribution = attribute(document, run.graphs, "cpu")
    linked = attribute(trace, run.graphs, "cpu")
    shared = ["model__3_backward_12.4", "model__2_backward_13.5", "model__1_backward_14.6"]
    assert all(attribution.joins[g] == (JOIN_METHODS["order"], STEPS) for g in shared)
    assert attribution.launches.keys() == linked.launches.keys()
    for key, times in linked.launches.items():
        assert attribution.launches[key].per_step_us == times.per_step_us, key
    assert attribution.unjoined_calls == 0
