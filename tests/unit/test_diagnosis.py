"""Stability and diagnosis (bench/stability.py, bench/diagnosis.py) on real captures, and their place on the index.

Real inputs: the host-bound ResNet-18 training step captured on an H100 (``resnet18_train``), the timed H200
transformer block (stable, GPU-bound), and CPU captures whose own numbers do not hold (a part larger than its
whole, spreads of 30-65%). Expected values are computed from the records the same way the rules state them,
never asserted as timings of this machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench.diagnosis import diagnose
from inductor_lens.bench.stability import SPREAD_LIMIT, judge, launch_share_sum
from inductor_lens.pipeline import build_run
from inductor_lens.records import CompileRun, HostLoad
from inductor_lens.report import render_report
from inductor_lens.worker.load import host_window

from ..conftest import FIXED_TIME, TIMED_CASE

HOST_BOUND_CASE = "resnet18_train"  # the capture/ folder itself


@pytest.fixture(scope="module")
def runs(unpacked_module: Callable[[str], Path]) -> dict[str, CompileRun]:
    built = {}
    for name in (HOST_BOUND_CASE, TIMED_CASE, "cpu-torch2.13-dynamic-recompile", "cpu-torch2.13-mlp-train-dynamic"):
        root = unpacked_module(name)
        capture = root / "capture" if (root / "capture").is_dir() else root
        built[name] = build_run(root, capture, now=lambda: FIXED_TIME)
    return built


@pytest.fixture(scope="module")
def unpacked_module(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    from ..conftest import unpack_fixture

    return lambda name: unpack_fixture(name, tmp_path_factory.mktemp(f"diag-{name}"))


def test_host_bound_gpu_capture_names_launch_overhead_and_suggests_cuda_graphs(runs: dict[str, CompileRun]) -> None:
    run = runs[HOST_BOUND_CASE]
    bench = run.bench
    assert bench is not None and bench.step is not None and bench.end_to_end is not None
    launches = [launch for g in run.graphs for launch in g.launches if launch.timing is not None]
    assert len(launches) == 223  # 180 Triton kernels and 43 extern calls, all timed
    assert sum(launch.timing.calls for launch in launches if launch.timing) == 293
    diagnosis = diagnose(run)
    top = diagnosis.findings[0]
    assert top.kind == "host-bound"
    step = bench.end_to_end.compiled.median_ms * 1e3
    idle = step - (bench.step.busy_us or 0.0)
    assert idle > 0.5 * step  # the GPU idles more than half the step
    assert top.title == f"Host-bound: the GPU idles {idle / step:.0%} of the step, waiting for the host to launch work"
    # the default mode with CUDA graphs added, nothing else changed
    assert 'mode="reduce-overhead"' in top.change and "CUDA graphs" in top.change
    assert top.caveat.startswith("CUDA graphs replay fixed memory addresses")
    assert top.at_stake_us == pytest.approx(idle)
    assert diagnosis.bound is not None and diagnosis.bound.verdict == "host-bound"
    assert diagnosis.bound.idle_us == top.at_stake_us  # the verdict and the finding: one rule, the same numbers
    assert top.confidence == "high"
    assert f"{step:,.1f} µs benchmarked step - {bench.step.busy_us:,.1f} µs GPU busy per profiled step" in top.evidence
    assert "223 launches (293 GPU kernels) per step" in top.evidence
    assert f"the idle time is {idle / 223:,.1f} µs per launch" in top.evidence
    assert top.evidence_url == "index.html#timing"
    # ranked by time at stake, untimed findings last
    stakes = [f.at_stake_us for f in diagnosis.findings]
    timed = [s for s in stakes if s is not None]
    assert timed == sorted(timed, reverse=True) and stakes[: len(timed)] == timed
    # no graph break, recompile or fallback in this capture: convolution_backward is a library call
    assert not {f.kind for f in diagnosis.findings} & {"graph break", "recompile", "fallback"}
    # its measurements hold: the eager spread (21%) is under the limit, the shares add up to 95%
    stability = judge(run)
    assert stability.stable, stability.reasons
    assert launch_share_sum(run) == pytest.approx(bench.step.attributed_us / bench.step.total_us, rel=1e-3)
    assert diagnosis.headline.startswith("Compiled is faster than eager")
    assert not diagnosis.noisy


def test_gpu_bound_step_is_not_called_host_bound(runs: dict[str, CompileRun]) -> None:
    run = runs[TIMED_CASE]
    diagnosis = diagnose(run)
    assert "host-bound" not in {f.kind for f in diagnosis.findings}
    stability = judge(run)
    assert stability.stable and stability.verdict == "judged"
    assert not stability.speedup_within_noise  # 0.425 vs 0.391 ms, p10-p90 ranges 4 µs wide


def test_cpu_capture_with_a_part_larger_than_its_whole_is_unstable(runs: dict[str, CompileRun]) -> None:
    run = runs["cpu-torch2.13-dynamic-recompile"]
    bench = run.bench
    assert bench is not None and bench.step is not None and bench.end_to_end is not None
    stability = judge(run)
    assert not stability.stable and stability.verdict == "unstable"
    rules = [r.rule for r in stability.reasons]
    assert rules == ["spread", "spread", "part over whole"]
    whole = bench.end_to_end.compiled.median_ms * 1e3
    assert bench.step.total_us > 400 * whole
    assert f"({bench.step.total_us:,.1f} µs)" in stability.reasons[2].text
    assert f"({whole:,.1f} µs)" in stability.reasons[2].text
    eager = bench.end_to_end.eager
    assert f"{(eager.p90_ms - eager.p10_ms) / eager.median_ms:.0%} of it" in stability.reasons[0].text
    # no load recorded in this capture (written before it was): nothing said about the machine
    assert bench.host == () and stability.load == ""
    diagnosis = diagnose(run)
    assert diagnosis.noisy and diagnosis.headline.startswith("Not judged: the measurements are unstable")
    (recompile,) = [f for f in diagnosis.findings if f.kind == "recompile"]
    assert recompile.title == "Recompiled [0/1]: tensor 'input_ids' size mismatch at index 1. expected 16, actual 24"
    assert recompile.change.startswith("torch._dynamo.mark_dynamic(input_ids, 1)")
    assert recompile.at_stake_us is None
    assert recompile.evidence_url == "compile.html#frame-0-1"


def test_profiled_step_spread_alone_makes_a_run_unstable(runs: dict[str, CompileRun]) -> None:
    run = runs["cpu-torch2.13-mlp-train-dynamic"]
    step = run.bench.step if run.bench else None
    assert step is not None and step.total_p10_us is not None and step.total_p90_us is not None
    stability = judge(run)
    assert [r.rule for r in stability.reasons] == ["spread"]
    assert "profiled steps" in stability.reasons[0].text
    assert (step.total_p90_us - step.total_p10_us) / step.total_us > SPREAD_LIMIT
    # end to end alone, eager 284 and compiled 280 ms overlap: about the same, not a gain
    assert stability.speedup_within_noise


def _with_host(run: CompileRun, *windows: HostLoad) -> CompileRun:
    assert run.bench is not None
    return replace(run, bench=replace(run.bench, host=windows))


def test_busy_machine_rules(runs: dict[str, CompileRun]) -> None:
    run = runs["cpu-torch2.13-mlp-train-dynamic"]
    assert run.bench is not None and run.bench.step is not None
    # quiet: the profiled step's spread removed, a window where this process used both CPUs alone
    steady = replace(run, bench=replace(run.bench, step=replace(run.bench.step, total_p10_us=None, total_p90_us=None)))
    quiet = HostLoad("eager and compiled steps", wall_s=2.0, cpu_s=3.9, cpus=2, threads=2, load_before=1.9,
                     load_after=2.0, system_busy_s=4.0)  # fmt: skip
    assert judge(_with_host(steady, quiet)).stable
    # other processes took 1.5 CPUs over the window
    others = replace(quiet, cpu_s=1.0, system_busy_s=4.0)
    stability = judge(_with_host(steady, others))
    (reason,) = stability.reasons
    assert reason.rule == "busy machine"
    assert "other processes kept 1.5 of the 2 CPUs busy (this process: 0.5)" in reason.text
    assert "this process ran 0.50 CPU-seconds per second with 2 thread(s)" in reason.text
    # the load average alone (no /proc/stat): above the CPUs plus the margin
    loaded = replace(quiet, system_busy_s=None, load_before=3.2, load_after=2.9)
    assert "the load average was 3.2 on 2 CPUs" in judge(_with_host(steady, loaded)).reasons[0].text
    # too short a window for /proc/stat's 10 ms ticks: not judged by it
    short = replace(others, wall_s=0.05, cpu_s=0.05, system_busy_s=0.2)
    assert judge(_with_host(steady, short)).stable
    # on a GPU run, a busy machine is a note, not a reason
    gpu = runs[TIMED_CASE]
    noted = judge(_with_host(gpu, others))
    assert noted.stable and len(noted.notes) == 1 and "other processes kept 1.5" in noted.notes[0]


def test_shares_over_the_whole_make_a_run_unstable(runs: dict[str, CompileRun]) -> None:
    run = runs[TIMED_CASE]
    graphs = tuple(
        replace(g, launches=tuple(
            replace(launch, timing=replace(launch.timing, share=launch.timing.share * 1.2)) if launch.timing else launch
            for launch in g.launches))
        for g in run.graphs
    )  # fmt: skip
    shares = launch_share_sum(replace(run, graphs=graphs))
    assert shares is not None and shares > 1.05
    stability = judge(replace(run, graphs=graphs))
    assert [r.rule for r in stability.reasons] == ["shares"]
    assert f"add up to {shares:.0%} of the profiled step's device time" in stability.reasons[0].text


def test_host_load_round_trips_through_lens_json(runs: dict[str, CompileRun]) -> None:
    window = HostLoad("profiled steps", 0.5, 0.9, 2, 2, 0.5, 0.6, 1.0)
    run = _with_host(runs[TIMED_CASE], window)
    again = CompileRun.from_json(run.to_json())
    assert again.bench is not None and again.bench.host == (window,)
    assert again.bench.step == run.bench.step if run.bench else False


def test_host_window_measures_this_process() -> None:
    import torch

    windows: list[HostLoad] = []
    with host_window("spin", windows):
        x = 0
        for i in range(200_000):
            x += i
    (window,) = windows
    assert window.window == "spin" and window.wall_s > 0 and window.cpu_s > 0
    assert window.cpus >= 1 and window.threads == torch.get_num_threads()
    with host_window("nothing kept", None):
        pass


def test_index_shows_banner_and_neutral_speedup_when_unstable(runs: dict[str, CompileRun]) -> None:
    index = render_report(runs["cpu-torch2.13-dynamic-recompile"], analyze(runs["cpu-torch2.13-dynamic-recompile"]), draw=False)["index.html"]
    assert "These measurements are unstable: the speed-up is not judged." in index
    assert "not judged: unstable" in index
    card = re.search(r'<div class="card ([a-z]*)">\s*<dt>Compiled step \(CPU\)</dt>', index)
    assert card is not None and card.group(1) == ""  # neither green nor red
    assert 'class="waterfall"' not in index  # too noisy to draw
    assert "The times are not drawn: the measurements are unstable" in index


def test_index_shows_waterfall_of_host_bound_step(runs: dict[str, CompileRun]) -> None:
    run = runs[HOST_BOUND_CASE]
    index = render_report(run, analyze(run), draw=False)["index.html"]
    assert 'id="stability"' not in index
    assert '<h2 id="diagnosis">' in index
    rows = re.findall(r'<div class="wf-row (\w+)"><a class="wf-label" href="([^"]+)"[^>]*>([^<]+)</a>', index)
    assert rows[0][2] == "Eager step" and rows[-1][2] == "Compiled step"
    assert rows[2][:2] == ("cost", "index.html#timing")
    assert rows[2][2].startswith("Host-bound: the GPU idles ")
    assert rows[1][0] == "gain"  # the compiled kernels shorten the step before the launch overhead
    assert 'mode=&#34;reduce-overhead&#34;' in index  # autoescaped
