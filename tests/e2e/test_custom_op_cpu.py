"""End to end on CPU: a ``torch.library`` custom op between compiled ops (``samples/custom_op.py``,
``lens_demo::mix``: two 512x512 matmuls) compiled by ``inductor-lens compile --strict``. The op is a library call
named with its namespace, in the launch order and the timing tables, with its own time: per launch, the median over
the profiled steps of its ``lens_demo::mix`` ranges in each (torch 2.13), or where torch records none (2.14 and
later: compat.RANGELESS_CUSTOM_OPS) of the ranges of the ops it ran, worked out from the run's own
``profile_trace.json`` alone; the same again when the report is timed from that trace as one recorded elsewhere
(``report --profile``). The diagnosis calls it a custom op, never an ATen fallback.
"""

from __future__ import annotations

import json
import statistics
from importlib.metadata import version
from pathlib import Path

import pytest

from ..conftest import SAMPLES, CliResult, run_cli_process
from ..unit.test_custom_ops import op_times, top_level_ranges

OP = "lens_demo::mix"
TARGET = "torch.ops.lens_demo.mix.default"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[CliResult, Path]:
    folder = tmp_path_factory.mktemp("custom-op")
    result = run_cli_process("compile", SAMPLES / "custom_op.py", "--device", "cpu", "--strict", "--no-handwritten",
                             "--out", folder / "report", cwd=folder)  # fmt: skip
    return result, folder / "report"


def _mix(run: dict) -> dict:
    (graph,) = run["graphs"]
    (launch,) = [launch for launch in graph["launches"] if launch["target"] == TARGET]
    return launch


def _assert_timed_from_the_trace(report: Path, trace: Path) -> dict:
    run = json.loads((report / "lens.json").read_text())["run"]
    own_range = tuple(int(part) for part in version("torch").split(".")[:2]) < (2, 14)
    assert any(name == OP for step in top_level_ranges(trace) for name, _ in step) is own_range
    per_step = op_times(trace)
    assert len(per_step) == 20 and all(us > 0 for us in per_step)
    mix = _mix(run)
    assert mix["kind"] == "extern" and mix["aten_op"] == "lens_demo.mix.default"
    timing = mix["timing"]
    assert timing is not None and timing["steps"] == 20 and timing["calls"] == 1
    assert timing["median_us"] == pytest.approx(statistics.median(per_step), rel=1e-9, abs=1e-6)
    step = run["bench"]["step"]
    assert OP not in step["unattributed"]  # its time is the op's, not work left untied inside the graph
    return run


def test_a_custom_op_is_a_timed_library_call(compiled: tuple[CliResult, Path]) -> None:
    result, report = compiled
    assert result.code == 0, result.stderr
    run = _assert_timed_from_the_trace(report, report / "capture" / "profile_trace.json")
    (graph,) = run["graphs"]
    assert [(launch["kind"], launch["target"]) for launch in graph["launches"]] == [
        ("extern", "extern_kernels.addmm"),
        ("cpp", "cpp_fused_mix_relu_0"),
        ("extern", TARGET),
        ("cpp", "cpp_fused_add_tanh_1"),
    ]
    index = (report / "index.html").read_text()
    assert f'<td data-value="{OP}">' in index  # its row in the kernels table, by its time
    assert f"#3 {OP}: " in index  # its segment of the step's bar
    assert f"1 custom op call(s) run outside Inductor&#39;s kernels: {OP}" in index
    assert "ATen fallback call(s)" not in index
    page = (report / "graphs" / f"{graph['id']}.html").read_text()
    row = page[page.index('<tr id="launch-3">') :].split("</tr>")[0]
    assert f"<code>{OP}</code>" in row and '<span class="badge cat-custom-op">custom op</span>' in row


def test_a_custom_op_is_timed_from_a_trace_recorded_elsewhere(
    compiled: tuple[CliResult, Path], tmp_path: Path
) -> None:
    result, report = compiled
    assert result.code == 0, result.stderr
    trace = tmp_path / "elsewhere.json"
    trace.write_bytes((report / "capture" / "profile_trace.json").read_bytes())
    again = run_cli_process("report", report / "capture", "--profile", trace, "--strict", "--out", tmp_path / "r")
    assert again.code == 0, again.stderr
    run = _assert_timed_from_the_trace(tmp_path / "r", trace)
    assert run["bench"]["profile"]["file"] == str(trace)
