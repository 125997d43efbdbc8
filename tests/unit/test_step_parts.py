"""The whole step in parts (bench/step_parts.py): forward, backward, optimizer and the rest, checked against the raw
``profile_trace.json`` of real captures, read here on its own:

- ``cpu-torch2.13-repeated-layers-train`` and ``cpu-torch2.14.1-mlp-train``: ``compile --train`` on CPU (forward
  and backward, no optimizer), host wall times of the ranges;
- ``cpu-torch2.13-run-sgd-train``: ``run`` of a training loop (compiled MLP, cross-entropy, SGD with momentum), so
  its steps hold torch.optim's ``Optimizer.step#`` and ``Optimizer.zero_grad#`` ranges;
- ``h100-resnet50-train``: ``compile --train`` on an H100: the device time of the kernels each part launched.

Expected: per profiled step, a ``## Call CompiledFxGraph`` range is backward when it lies inside autograd's
``CompiledFunctionBackward`` range, optimizer when inside an optimizer range, forward otherwise; each part's median
over the steps; the rest is the median step less the parts.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inductor_lens.bench import attach_measurements
from inductor_lens.bench.step_parts import SHARES_ADD_UP, shares_note
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun, HostLoad

from ..conftest import FIXED_TIME

pytestmark = pytest.mark.unit

STEP = "inductor_lens_step_"
CALL = "## Call CompiledFxGraph"
BACKWARD = "CompiledFunctionBackward"
OPTIMIZER = ("Optimizer.step#", "Optimizer.zero_grad#")


def _timed(root: Path) -> CompileRun:
    capture = root / "capture" if (root / "capture").is_dir() else root
    run = parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME)
    return attach_measurements(run, capture, strict=True)


def _events(root: Path) -> list[dict[str, Any]]:
    capture = root / "capture" if (root / "capture").is_dir() else root
    document = json.loads((capture / "profile_trace.json").read_text(encoding="utf-8"))
    return [e for e in document["traceEvents"] if e.get("ph") == "X"]


def _inside(event: dict[str, Any], around: list[dict[str, Any]]) -> bool:
    return any(
        a["tid"] == event["tid"] and a["ts"] <= event["ts"] and event["ts"] + event.get("dur", 0) <= a["ts"] + a["dur"]
        for a in around
    )


def _steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The host's step ranges (a GPU trace repeats each on the device's timeline, as a gpu_user_annotation)."""
    host = (e for e in events if e["name"].startswith(STEP) and e.get("cat") == "user_annotation")
    return sorted(host, key=lambda e: int(e["name"][len(STEP) :]))


def _in_step(event: dict[str, Any], step: dict[str, Any]) -> bool:
    return step["ts"] <= event["ts"] <= step["ts"] + step["dur"]


def _host_parts(events: list[dict[str, Any]]) -> tuple[dict[str, float], float]:
    """Medians of each part's host time per step, and the median step wall time."""
    calls = [e for e in events if e["name"].startswith(CALL)]
    backward = [e for e in events if e["name"].endswith(BACKWARD)]
    optimizer = [e for e in events if e["name"].startswith(OPTIMIZER)]
    outer_optimizer = [o for o in optimizer if not _inside(o, [p for p in optimizer if p is not o])]
    per_step: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}
    walls = []
    for step in _steps(events):
        mine = [c for c in calls if _in_step(c, step) and not _inside(c, outer_optimizer)]
        per_step["backward"].append(sum(c["dur"] for c in mine if _inside(c, backward)))
        per_step["forward"].append(sum(c["dur"] for c in mine if not _inside(c, backward)))
        per_step["optimizer"].append(sum(o["dur"] for o in outer_optimizer if _in_step(o, step)))
        walls.append(step["dur"])
    return {name: statistics.median(values) for name, values in per_step.items()}, statistics.median(walls)


@pytest.mark.parametrize(
    ("case", "names"),
    [
        ("cpu-torch2.13-repeated-layers-train", ["forward", "backward", "the rest"]),
        ("cpu-torch2.14.1-mlp-train", ["forward", "backward", "the rest"]),
        ("cpu-torch2.13-run-sgd-train", ["forward", "backward", "optimizer", "the rest"]),
    ],
)
def test_cpu_parts_from_the_raw_trace(unpacked: Callable[[str], Path], case: str, names: list[str]) -> None:
    root = unpacked(case)
    step = _timed(root).bench.step  # type: ignore[union-attr]
    assert step is not None
    expected, wall = _host_parts(_events(root))
    assert [p.name for p in step.parts] == names
    assert step.step_wall_us == pytest.approx(wall)
    parts = {p.name: p for p in step.parts}
    for name in names[:-1]:
        assert expected[name] > 0
        assert parts[name].per_step_us == pytest.approx(expected[name], rel=1e-9), name
        assert parts[name].share == pytest.approx(expected[name] / wall, rel=1e-9), name
    rest = wall - sum(expected[name] for name in names[:-1])
    assert parts["the rest"].per_step_us == pytest.approx(max(0.0, rest), rel=1e-9, abs=1e-6)
    assert sum(p.share for p in step.parts) == pytest.approx(1.0)
    assert "host wall time" in step.parts_method


def test_run_optimizer_is_its_own_part(unpacked: Callable[[str], Path]) -> None:
    """The training loop's SGD step and zero_grad: one range each per step, not counted in the forward."""
    step = _timed(unpacked("cpu-torch2.13-run-sgd-train")).bench.step  # type: ignore[union-attr]
    assert step is not None
    optimizer = next(p for p in step.parts if p.name == "optimizer")
    assert "2 range(s) per step" in optimizer.note
    forward = next(p for p in step.parts if p.name == "forward")
    assert "1 call(s) per step" in forward.note


def test_gpu_parts_are_device_time(unpacked: Callable[[str], Path]) -> None:
    """ResNet-50 --train on an H100: each part is the device time of the kernels launched inside its graphs' calls
    (a kernel's External id names the host range that launched it; that range's thread and time place it)."""
    root = unpacked("h100-resnet50-train")
    run = _timed(root)
    step = run.bench.step  # type: ignore[union-attr]
    assert step is not None
    events = _events(root)
    # the host range a kernel's External id names: an ATen op's (or a Triton launch's) range, else the runtime call's
    launches = {
        e["args"]["External id"]: e
        for category in ("cuda_runtime", "cpu_op")
        for e in events
        if e.get("cat") == category and (e.get("args") or {}).get("External id") is not None
    }
    calls = [e for e in events if e["name"].startswith(CALL)]
    backward = [e for e in events if e["name"].endswith(BACKWARD)]
    steps = _steps(events)
    per_step = {"forward": [0.0] * len(steps), "backward": [0.0] * len(steps)}
    total = [0.0] * len(steps)
    for kernel in (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")):
        launch = launches.get((kernel.get("args") or {}).get("External id"))
        index = next((i for i, s in enumerate(steps) if launch is not None and _in_step(launch, s)), None)
        if index is None or launch is None:
            continue
        total[index] += kernel["dur"]
        call = [c for c in calls if _inside(launch, [c])]
        if call:
            per_step["backward" if _inside(call[0], backward) else "forward"][index] += kernel["dur"]
    parts = {p.name: p for p in step.parts}
    assert list(parts) == ["forward", "backward", "the rest"]
    whole = statistics.median(total)
    for name in ("forward", "backward"):
        expected = statistics.median(per_step[name])
        assert parts[name].per_step_us == pytest.approx(expected, rel=0.005), name
        assert parts[name].share == pytest.approx(expected / whole, abs=0.005), name
    assert sum(p.share for p in step.parts) == pytest.approx(1.0)
    assert step.step_wall_us == pytest.approx(statistics.median(s["dur"] for s in steps))
    assert "device time" in step.parts_method and "host" in step.parts_method


def test_shares_note(unpacked: Callable[[str], Path]) -> None:
    """Silent where the launches add up; one sentence naming --threads and OMP_NUM_THREADS where they do not."""
    run = _timed(unpacked("cpu-torch2.13-repeated-layers-train"))
    step = run.bench.step  # type: ignore[union-attr]
    assert step is not None
    launches_us = sum(
        launch.timing.median_us for graph in run.graphs for launch in graph.launches if launch.timing is not None
    )
    added = launches_us / step.total_us
    assert (shares_note(run) == "") == (added >= SHARES_ADD_UP)
    # the same run, as if its graphs had taken five times as long: the launches add up to a fifth
    slowed = replace(run, bench=replace(run.bench, step=replace(step, total_us=step.total_us * 5)))  # type: ignore[type-var]
    note = shares_note(slowed)
    assert f"{added / 5:.0%}" in note
    assert "--threads N" in note and "OMP_NUM_THREADS" in note
    windows = [w for w in run.bench.host if w.window == "profiled steps"]  # type: ignore[union-attr]
    assert windows and windows[0].threads == windows[0].cpus == 2  # torch's default on the 2-CPU machine
    assert "torch ran 2 thread(s) on 2 CPU(s)" in note
    # fewer threads than CPUs and no other process busy: no contention to blame, no --threads to try
    quiet = [HostLoad(w.window, w.wall_s, w.cpu_s, w.cpus, threads=1) for w in run.bench.host]  # type: ignore[union-attr]
    calm = replace(slowed, bench=replace(slowed.bench, host=tuple(quiet)))  # type: ignore[type-var]
    assert f"{added / 5:.0%}" in shares_note(calm) and "--threads" not in shares_note(calm)
