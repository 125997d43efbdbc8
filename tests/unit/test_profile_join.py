"""``report --profile``: a profiler trace recorded elsewhere, joined to a capture's graphs (bench/profile.py).

The foreign traces here are the GPU captures' own profile_trace.json files with what only inductor-lens writes
taken out: the ``inductor_lens_step_<i>`` ranges (a plain ``with profile():`` loop marks no step) and, for the
join by names, the FX graph cache keys in ``## Call CompiledFxGraph <key> ##`` (another process, other Inductor
options: other keys). The times must then be the capture's own, launch for launch.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench import attach_measurements
from inductor_lens.bench.profile import attach_profile
from inductor_lens.errors import InputFolderError
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun
from inductor_lens.report import render_report

from ..conftest import CPU_CASE, FIXED_TIME, TIMED_CASE

STEP_MARK = re.compile(r"^inductor_lens_step_\d+$")
CALL = re.compile(r"^(## Call CompiledFxGraph )\S+")


def foreign_trace(source: Path, target: Path, *, other_keys: bool = False, gzipped: bool = False) -> Path:
    """``source`` as a plain script would have recorded it: no step marks (and, with ``other_keys``, FX graph
    cache keys that are none of the capture's)."""
    document = json.loads(source.read_text())
    events = [e for e in document["traceEvents"] if not STEP_MARK.match(str(e.get("name", "")))]
    if other_keys:
        events = [
            {**e, "name": CALL.sub(r"\1fkeyofanotherprocess", e["name"])} if "name" in e else e
            for e in events
        ]
    text = json.dumps({**document, "traceEvents": events})
    target.write_bytes(gzip.compress(text.encode()) if gzipped else text.encode())
    return target


def _launch_times(run: CompileRun) -> dict[tuple[str, int], float]:
    return {
        (g.id, x.position): x.timing.median_us for g in run.graphs for x in g.launches if x.timing is not None
    }


@pytest.mark.parametrize(
    ("case", "graphs", "other_keys"),
    [
        ("llama_small_bf16", 1, False),
        ("llama_small_bf16", 1, True),
        ("resnet50_train", 2, True),  # forward, and backward on autograd's thread
        ("gpt2_small_ro", 1, True),  # CUDA graphs: the replays' kernels joined by name
    ],
)
def test_a_foreign_trace_gives_the_captures_own_times(
    unpacked: Callable[[str], Path], tmp_path: Path, case: str, graphs: int, other_keys: bool
) -> None:
    root = unpacked(case)
    untimed = parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME)
    own = attach_measurements(untimed, root)
    trace = foreign_trace(
        root / "profile_trace.json", tmp_path / "trace.json.gz", other_keys=other_keys, gzipped=True
    )
    joined = attach_profile(own, trace)  # over a timed run: its timings are replaced

    mine, theirs = _launch_times(own), _launch_times(joined)
    assert len(theirs) == len(mine) > 0 and theirs.keys() == mine.keys()
    assert all(theirs[key] == pytest.approx(mine[key], abs=1e-9) for key in mine)
    step, own_step = joined.bench.step, own.bench.step
    assert step.steps == own_step.steps == 20
    assert step.total_us == pytest.approx(own_step.total_us) and step.attributed_us == pytest.approx(
        own_step.attributed_us
    )
    assert step.unattributed == pytest.approx(dict(own_step.unattributed))

    source = joined.bench.profile
    assert source.steps_found.startswith("no step marks in the trace: 20 steps, one per call of ")
    methods = {j.method for j in source.joins}
    if case == "gpt2_small_ro":
        assert methods == {"kernel names of its CUDA-graph replays"}
    else:
        assert methods == {"launch-name sequence" if other_keys else "FX graph cache key"}
    assert len(source.joins) == graphs and all(j.calls == 20 for j in source.joins)
    assert source.device_name == "NVIDIA H100 80GB HBM3" and source.device_detail.startswith(
        "132 SMs, compute capability 9.0"
    )
    assert source.recorded is not None and source.recorded.startswith("2026-11-2")
    assert source.replaced is not None and source.replaced.startswith("the capture's own measurements")
    assert source.unjoined_calls == 0 and joined.bench.end_to_end is None
    # nothing of the capture is left: no isolated times, and no ceilings (none were measured on these)
    assert all(k.timing is None or k.timing.isolated is None for g in joined.graphs for k in g.kernels)


def test_ceilings_are_the_captures_where_it_ran_on_the_traces_device(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    root = unpacked(TIMED_CASE)
    run = attach_measurements(parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME), root / "capture")
    trace = foreign_trace(root / "capture" / "profile_trace.json", tmp_path / "trace.json")
    joined = attach_profile(run, trace)
    assert joined.bench.ceilings == run.bench.ceilings
    assert joined.bench.profile.ceilings.startswith("measured by this report's capture on a NVIDIA H200")
    assert _launch_times(joined) == pytest.approx(_launch_times(run))

    # another device's trace: its kernels join, but the H200's ceilings are not this device's
    document = json.loads(trace.read_text())
    document["deviceProperties"][0]["name"] = "NVIDIA H100 80GB HBM3"
    trace.write_text(json.dumps(document))
    elsewhere = attach_profile(run, trace)
    assert elsewhere.bench.ceilings is None
    assert (
        "names its device (NVIDIA H100 80GB HBM3) but not its bandwidth" in elsewhere.bench.profile.ceilings
    )
    index = render_report(elsewhere, analyze(elsewhere), draw=False)["index.html"]
    assert "Times from</b> the profiler trace" in index and "GPU: NVIDIA H100 80GB HBM3" in index
    assert "launch-name sequence" not in index and "FX graph cache key (20 calls)" in index


def test_a_trace_of_another_model_is_refused_in_one_line(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked(CPU_CASE), strict=True, now=lambda: FIXED_TIME)
    trace = unpacked(TIMED_CASE) / "capture" / "profile_trace.json"
    with pytest.raises(InputFolderError) as error:
        attach_profile(run, trace)
    message = error.value.one_line()
    assert "nothing in the trace joins the report's 2 graph(s)" in message
    assert "holds 20 compiled-graph call(s) and 200 GPU kernel(s)" in message and "another model" in message
    assert error.value.exit_code == 7


def test_an_unreadable_trace_is_refused(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    run = parse_debug_folder(unpacked(CPU_CASE), strict=True, now=lambda: FIXED_TIME)
    for content in (b"\x1f\x8b not gzip", b'{"traceEvents": 3}', b"[]"):
        (tmp_path / "bad.json").write_bytes(content)
        with pytest.raises(InputFolderError, match="not a readable profiler trace"):
            attach_profile(run, tmp_path / "bad.json")
