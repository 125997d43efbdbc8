"""``report CAPTURE --profile TRACE`` on CPU, end to end: a plain script (no inductor-lens) compiles a model with a
graph break and records torch.profiler traces, once as a plain ``with profile():`` loop and once under a schedule
(``ProfilerStep#``); its own TORCH_COMPILE_DEBUG folder is the capture. The report's per-launch times must be the
trace's durations, worked out here from the JSON alone, and its step count the trace's.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.records import CompileRun

from ..conftest import CliResult

SCRIPT = """
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        h = torch.relu(self.a(x))
        if h.sum().item() > -1e9:  # a graph break: two graphs
            h = h * 2
        return torch.tanh(self.b(h))

torch.manual_seed(0)
model, x, out = torch.compile(Model().eval()), torch.randn(8, 32), sys.argv[1]
with torch.no_grad():
    for _ in range(3):
        model(x)
    with profile(activities=[ProfilerActivity.CPU]) as plain:
        for _ in range(4):
            model(x)
    plain.export_chrome_trace(out + "/plain.json")
    ready = lambda p: p.export_chrome_trace(out + "/scheduled.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3), on_trace_ready=ready) as p:
        for _ in range(5):
            model(x)
            torch.ones(3).add_(1)  # eager work in each step, outside the compiled graphs
            p.step()
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The script's folder: torch_compile_debug/, trace/ (TORCH_TRACE), plain.json and scheduled.json."""
    folder = tmp_path_factory.mktemp("plain-script")
    (folder / "script.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE="1", TORCH_COMPILE_DEBUG="1", TORCH_TRACE=str(folder / "trace"),
               TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor-cache"))  # fmt: skip
    done = subprocess.run([sys.executable, "script.py", str(folder)], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def expected_times(trace: Path, steps: list[tuple[float, float]] | None) -> dict[str, list[float]]:
    """Per compiled-graph call's FX key: the median over steps of each top-level range's ``dur`` inside the call,
    in order; ``steps``: the windows whose calls count (None: every call)."""
    events = [
        e
        for e in json.loads(trace.read_text())["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "cpu_op"
    ]
    calls: dict[str, list[list[float]]] = {}
    for call in (e for e in events if e["name"].startswith("## Call CompiledFxGraph ")):
        start, end = call["ts"], call["ts"] + call["dur"]
        if steps is not None and not any(a <= start <= b for a, b in steps):
            continue
        inside = sorted((e for e in events if e["tid"] == call["tid"] and start < e["ts"] and e["ts"] + e["dur"] <= end),
                        key=lambda e: (e["ts"], -e["dur"]))  # fmt: skip
        top: list[dict] = []
        for e in inside:
            if not top or e["ts"] >= top[-1]["ts"] + top[-1]["dur"]:
                top.append(e)
        calls.setdefault(call["name"].split()[3], []).append([e["dur"] for e in top])
    return {
        key: [statistics.median(column) for column in zip(*durations, strict=True)]
        for key, durations in calls.items()
    }


def _report(run_cli: Callable[..., CliResult], *args: str | Path) -> tuple[CliResult, CompileRun]:
    result = run_cli("report", *args)
    assert result.code == 0, result.stderr
    out = Path(args[args.index("--out") + 1])
    return result, CompileRun.from_json((out / "lens.json").read_text())


def _timed(run: CompileRun) -> dict[str, list[float]]:
    return {g.fx_cache_key or g.id: [x.timing.median_us for x in g.launches if x.timing] for g in run.graphs}


def test_a_plain_loop_without_step_marks(
    recorded: Path, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    trace = recorded / "plain.json"
    result, run = _report(run_cli, recorded, "--profile", trace, "--out", tmp_path / "report")
    expected = expected_times(trace, None)
    assert len(run.graphs) == 2 and _timed(run) == expected  # exactly the trace's durations
    assert all(
        len(times) == len(g.launches) for g, times in zip(run.graphs, _timed(run).values(), strict=True)
    )
    source = run.bench.profile
    assert run.bench.step.steps == 4 and source.steps_found.startswith("no step marks in the trace: 4 steps")
    assert [(j.method, j.calls) for j in source.joins] == [("FX graph cache key", 4)] * 2
    assert source.recorded is not None and source.device_name is None
    assert "aten::item" in run.bench.step.unattributed  # the graph break's .item(), between the two graphs
    assert "inductor-lens: profile: no step marks in the trace: 4 steps" in result.stderr
    index = (tmp_path / "report" / "index.html").read_text()
    assert f"Times from</b> the profiler trace {trace}" in index and 'class="timebar"' in index

    # the same trace from "another process": other FX keys, joined by the launch names, the same times
    document = json.loads(trace.read_text())
    for event in document["traceEvents"]:
        event["name"] = re.sub(r"^(## Call CompiledFxGraph )\S+", r"\1fother", event.get("name", ""))
    renamed = tmp_path / "renamed.json"
    renamed.write_text(json.dumps(document))
    # given the report folder itself, which holds the first trace's times: they are replaced
    _, again = _report(run_cli, tmp_path / "report", "--profile", renamed, "--out", tmp_path / "report")
    assert _timed(again) == expected
    assert {j.method for j in again.bench.profile.joins} == {"launch-name sequence"}
    assert again.bench.profile.replaced == f"the times of the profiler trace {trace}"


def test_a_scheduled_profile_and_a_bare_trace_log(
    recorded: Path, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    trace = recorded / "scheduled.json"
    events = json.loads(trace.read_text())["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name", "").startswith("ProfilerStep#")]
    assert len(steps) == 3  # active=3
    (log,) = (recorded / "trace").glob("dedicated_log_torch_trace_*.log")
    _, run = _report(
        run_cli, log, "--profile", trace, "--out", tmp_path / "report"
    )  # the TORCH_TRACE log alone
    assert run.environment.source == "TORCH_TRACE log"
    assert _timed(run) == expected_times(trace, steps)
    assert run.bench.step.steps == 3 and run.bench.profile.steps_found == "3 steps marked ProfilerStep#<i>"
    assert {"aten::ones", "aten::add_", "aten::item"} <= set(run.bench.step.unattributed)


def test_a_trace_of_another_model_fails_in_one_line(recorded: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "## Call CompiledFxGraph fzzz ##", "ts": 0, "dur": 10, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "graph_0_cpp_fused_sigmoid_0", "ts": 1, "dur": 5, "tid": 1},
    ]}))  # fmt: skip
    from ..conftest import run_cli_process

    result = run_cli_process("report", recorded, "--profile", other, "--out", tmp_path / "report")
    assert result.code == 7
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "nothing in the trace joins the report's 2 graph(s)" in line
