"""compare and diff pages that do not contradict themselves (issue 31, points 8 and 13), on real captures: the
method text is the rule the numbers follow, one robust step per configuration, one speed-up over eager, one unit
for memory, advice measured by another configuration not advised blindly, autotuner re-picks within the noise
not counted as changes, an "unstable" banner, configuration links to current renders, a table that wraps."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens import api
from inductor_lens.analysis import analyze_comparison
from inductor_lens.compare import ConfigRun, build_comparison
from inductor_lens.compare.kernels import diff_runs
from inductor_lens.compare.noise import ROBUST_ROUNDS, basis
from inductor_lens.compare.runner import rerender_comparison
from inductor_lens.compare.summary import KERNEL_FLOOR_US, config_result, judge_changes, tried_here
from inductor_lens.records import CompileRun, DiagnosisLine, RoundMeasure, Timing
from inductor_lens.report import render_comparison, write_report
from inductor_lens.units import format_bytes, format_ms

pytestmark = pytest.mark.unit

GPT2 = "h100-gpt2-fp32-default"  # HF GPT-2, fp32, default mode, timed on an H100


@pytest.fixture(scope="module")
def reports(unpacked, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("compare-answers")
    names = (GPT2, "cpu-torch2.13-repeated-layers-train", "cpu-torch2.14.1-mlp-train")
    return {name: api.report_folder(unpacked(name), out / name, draw=False).index.parent for name in names}


@pytest.fixture(scope="module")
def gpt2(reports) -> CompileRun:
    return api.load_run(reports[GPT2])


def _raw_capture(unpacked, name: str) -> dict:
    return json.loads((unpacked(name) / "capture.json").read_text())


def _rounds(*pairs: tuple[float, float]) -> tuple[RoundMeasure, ...]:
    """Warm rounds of (compiled, eager) medians in ms."""
    return tuple(RoundMeasure(k, 1, Timing(c, c, c, 20, "t"), Timing(e, e, e, 20, "t"))
                 for k, (c, e) in enumerate(pairs, 1))  # fmt: skip


def _index(comparison) -> str:
    return render_comparison(comparison, analyze_comparison(comparison))["index.html"]


def _cells(index: str, row: str) -> list[str]:
    found = re.search(rf"<th[^>]*>{row}</th>(.*?)</tr>", index)
    assert found is not None, row
    return re.findall(r"<td(?: class=\"[^\"]*\")?>(.*?)</td>", found.group(1))


# --- 8: the method text is the rule applied; 2 rounds: one bad round does not set the step ---------------------


def test_two_rounds_and_the_cold_process_make_a_median_one_bad_round_cannot_set(gpt2, unpacked) -> None:
    cold = _raw_capture(unpacked, GPT2)["bench"]["end_to_end"]["compiled"]["median_ms"]
    bad, good = 3 * cold, 1.01 * cold
    entries = [ConfigRun("a", "default", {}, gpt2, "a", rounds=_rounds((good, 14.0), (bad, 14.0))),
               ConfigRun("b", "default", {"max_autotune": True}, gpt2, "b", rounds=_rounds((cold, 14.0), (cold, 14.0)))]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="gpt2", model_path="m.py")
    a = comparison.configs[0]
    assert len(a.rounds) < ROBUST_ROUNDS
    assert a.step_ms == pytest.approx(statistics.median([cold, good, bad])) == pytest.approx(good)
    assert a.step_ms != pytest.approx((good + bad) / 2)  # the median of the two rounds alone: the bad one sets half
    assert a.noise == pytest.approx((bad - cold) / good)  # the spread of the same three medians
    assert a.measured == f"median of 3: the cold process and 2 warm rounds ({format_ms(cold)}, {format_ms(good)}, {format_ms(bad)})"
    index = _index(comparison)
    # the lede, the step's title and "How these numbers were measured" all say the rule that made the step
    assert index.count("A configuration&#39;s step is the median of 3 medians: the cold process and 2 warm rounds") == 3
    assert "median of its round medians" not in index and "median of the round medians" not in index
    assert a.measured in _cells(index, "Step")[0]


def test_an_older_comparison_says_mean_of_two_processes_not_rounds(gpt2) -> None:
    again = Timing(13.0, 13.0, 13.0, 20, "t")
    entries = [ConfigRun("a", "default", {}, gpt2, "a", latency_again=again),
               ConfigRun("b", "default", {"max_autotune": True}, gpt2, "b", latency_again=again)]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="gpt2", model_path="m.py")
    cold = gpt2.bench.end_to_end.compiled.median_ms
    assert comparison.rounds == 0 and comparison.configs[0].step_ms == pytest.approx((cold + 13.0) / 2)
    index = _index(comparison)
    assert "0 warm rounds" not in index and "round medians" not in index
    assert "A configuration&#39;s step is the mean of the cold and the warm process (a median of two" in index
    assert f"({format_ms(cold)}, 13.000 ms); the spread is these two" in _cells(index, "Step")[0]


def test_with_three_rounds_the_step_is_their_median(gpt2) -> None:
    measured = basis(gpt2.bench.end_to_end.compiled, None, _rounds((10.0, 14.0), (30.0, 14.0), (11.0, 14.0)))
    assert measured.step_ms == 11.0 and measured.values == (10.0, 30.0, 11.0)  # the cold process left out
    assert measured.rule == "the median of 3 medians: 3 warm rounds (interleaved)"


# --- 13: one speed-up over eager, worded as the evidence judges it ----------------------------------------------


def test_speedup_and_slower_than_eager_come_from_one_source(gpt2) -> None:
    # the compiled step 3.16x eager's in the rounds, although the cold process measured a speed-up
    rounds = _rounds((31.6, 10.0), (31.7, 10.1), (31.5, 9.9))
    entries = [ConfigRun("slow", "default", {}, gpt2, "a", rounds=rounds),
               ConfigRun("other", "default", {"max_autotune": True}, gpt2, "b", rounds=_rounds((5.0, 10.0), (5.0, 10.0), (5.0, 10.0)))]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="gpt2", model_path="m.py")
    slow = comparison.configs[0]
    assert gpt2.bench.end_to_end.speedup > 1  # its own report: faster than eager
    assert slow.eager_step_ms == 10.0 and slow.speedup == pytest.approx(10.0 / 31.6)
    (eager,) = [e for e in comparison.evidence if e.against == "eager"]
    assert eager.config == "slow" and eager.slower_by == pytest.approx(31.6 / 10.0 - 1)
    index = _index(comparison)
    assert f"{slow.speedup:.2f}x: slower than eager" in _cells(index, "Speed-up over eager")[0]
    assert "takes 3.16x the time of eager PyTorch" in index and "216.0% slower" not in index
    assert "2.00x" in _cells(index, "Speed-up over eager")[1]  # 10 / 5, the same processes


def test_speedup_within_noise_is_not_called_a_slowdown(gpt2) -> None:
    entries = [ConfigRun(n, "default", {"k": n}, gpt2, n, rounds=_rounds((10.0, 9.9), (10.1, 10.0), (9.9, 10.1)))
               for n in ("a", "b")]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="gpt2", model_path="m.py")
    assert not [e for e in comparison.evidence if e.against == "eager"]
    assert "about eager&#39;s time (within the noise of" in _cells(_index(comparison), "Speed-up over eager")[0]


# --- 8: one unit for memory -------------------------------------------------------------------------------------


def test_peak_memory_in_the_units_of_the_report(gpt2, unpacked) -> None:
    raw = _raw_capture(unpacked, GPT2)["bench"]["end_to_end"]["compiled_peak_bytes"]
    comparison = build_comparison([ConfigRun("a", "default", {}, gpt2, "a"), ConfigRun("b", "default", {"k": 1}, gpt2, "b")],
                                  kind="diff", title="gpt2", model_path="m.py")  # fmt: skip
    cells = _cells(_index(comparison), "Peak memory")
    assert cells == [format_bytes(raw)] * 2 and format_bytes(raw) == "5.3 GB"
    assert "MiB" not in _index(comparison)


# --- 8: advice another configuration measured ------------------------------------------------------------------


def test_advice_measured_within_noise_by_another_column_is_not_advised(gpt2) -> None:
    noise_rounds = _rounds((10.0, 14.0), (10.1, 14.0), (9.9, 14.0))
    entries = [ConfigRun("default", "default", {}, gpt2, "a", rounds=noise_rounds),
               ConfigRun("mac", "max-autotune-no-cudagraphs", {}, gpt2, "b", rounds=_rounds((9.9, 14.0), (10.0, 14.0), (9.95, 14.0)))]  # fmt: skip
    configs = build_comparison(entries, kind="compare", title="gpt2", model_path="m.py").configs
    advice = DiagnosisLine("Matmuls take 90% of the device time, not autotuned", 100.0,
                           'mode="max-autotune-no-cudagraphs" (benchmarks Triton templates against the library)', "index.html")  # fmt: skip
    base, other = tried_here([replace(configs[0], diagnosis=(advice,)), configs[1]])
    (line,) = base.diagnosis
    assert line.tried_by == "mac" and line.tried is not None
    assert line.tried.judgement == "within noise" and line.tried.fraction == pytest.approx(other.step_ms / base.step_ms - 1)
    comparison = replace(build_comparison(entries, kind="compare", title="gpt2", model_path="m.py"), configs=(base, other))
    cell = _cells(_index(comparison), "Diagnosis")[0]
    assert "try:" not in cell and "not worth trying: mode=&#34;max-autotune-no-cudagraphs&#34;" in cell
    assert f"measured here as mac: {100 * line.tried.fraction:+.1f}%" in cell and "within noise" in cell
    # measured faster: still advised, with the measurement
    faster = tried_here([replace(configs[0], diagnosis=(advice,)), replace(other, step_ms=5.0, rounds=())])[0]
    assert faster.diagnosis[0].tried is not None and faster.diagnosis[0].tried.judgement == "faster"


def test_precision_advice_is_matched_by_the_matmul_precision_fact(gpt2, unpacked) -> None:
    raw = _raw_capture(unpacked, GPT2)["bench"]["ceilings"]["float32_matmul_precision"]
    base = config_result(ConfigRun("fp32", "default", {}, gpt2, "a"))
    assert base.facts["matmul precision"] == raw == "highest"
    tf32 = replace(base, name="tf32", facts={**base.facts, "matmul precision": "high"}, step_ms=base.step_ms / 3)
    advice = DiagnosisLine("fp32 matmuls near the fp32 roof", 1.0, 'torch.set_float32_matmul_precision("high")', "index.html")
    (line,) = tried_here([replace(base, diagnosis=(advice,)), tf32])[0].diagnosis
    assert line.tried_by == "tf32" and line.tried is not None and line.tried.fraction == pytest.approx(-2 / 3)


# --- 8: autotuner re-picks of the same code, within the noise, are no change ------------------------------------


def _repicked(run: CompileRun, by_us: float) -> tuple[CompileRun, str]:
    """``run`` with one autotuned kernel's kept launch config changed and its launch ``by_us`` slower; its name."""
    graph = next(g for g in run.graphs if any(k.timing and k.timing.config for k in g.kernels))
    kernel = max((k for k in graph.kernels if k.timing and k.timing.config), key=lambda k: len(k.name))
    launch = next(x for x in graph.launches if x.target == kernel.name and x.timing)
    timing = replace(kernel.timing, config=kernel.timing.config + "; another pick")
    kernels = tuple(replace(k, timing=timing) if k is kernel else k for k in graph.kernels)
    launches = tuple(replace(x, timing=replace(x.timing, median_us=x.timing.median_us + by_us)) if x is launch else x
                     for x in graph.launches)  # fmt: skip
    other = replace(graph, kernels=kernels, launches=launches)
    return replace(run, graphs=tuple(other if g is graph else g for g in run.graphs)), kernel.name


def test_same_code_under_another_autotuner_pick_within_noise_is_unchanged(gpt2) -> None:
    """GPT-2's own kernels against themselves, one kernel's kept launch config and time changed: by 1 µs it is
    unchanged (its note kept), by far more it is changed."""

    def moved(by_us: float) -> CompileRun:
        return _repicked(gpt2, by_us)[0]

    noise = 0.02
    for by_us, kind in ((KERNEL_FLOOR_US, "unchanged"), (10 * KERNEL_FLOOR_US, "changed")):
        diff = judge_changes(diff_runs("a", gpt2, "b", moved(by_us)), noise)
        (change,) = [c for c in diff.changes if c.same_code]
        assert change.kind == kind and change.delta_us == pytest.approx(by_us)
        assert "the run-time autotuner kept" in change.note
    comparison = build_comparison([ConfigRun("a", "default", {}, gpt2, "a"), ConfigRun("b", "default", {"k": 1}, moved(1.0), "b")],
                                  kind="diff", title="gpt2", model_path="m.py")  # fmt: skip
    index = _index(comparison)
    assert "0 changed" in index and "1 of the unchanged run the same code under another autotuner pick" in index
    assert f"and {KERNEL_FLOOR_US:.0f} µs" in index  # the threshold is said


# --- 13: the "unstable" banner ------------------------------------------------------------------------------------


def test_unstable_banner_when_a_configuration_report_is_unstable(reports) -> None:
    from inductor_lens.bench.stability import judge

    unstable, stable = reports["cpu-torch2.13-repeated-layers-train"], reports["cpu-torch2.14.1-mlp-train"]
    reasons = [r.text for r in judge(api.load_run(unstable)).reasons]
    assert reasons and not judge(api.load_run(stable)).reasons
    index = _index(api.diff_reports(unstable, stable, unstable.parent / "diff").comparison)
    banner = index[index.index('id="unstable"'):index.index("</div>", index.index('id="unstable"'))]
    assert "Unstable measurements." in banner and banner.count("<li>") == len(reasons)
    assert "cpu-torch2.14.1-mlp-train" not in banner
    assert 'href="../cpu-torch2.13-repeated-layers-train/index.html#stability"' in banner


# --- 8: configuration links open the current render ---------------------------------------------------------------


def test_rerendering_a_comparison_renders_its_configurations_again(reports, tmp_path: Path) -> None:
    folder = tmp_path / "cmp"
    runs = {}
    for name, source in (("a", "cpu-torch2.14.1-mlp-train"), ("b", "cpu-torch2.13-repeated-layers-train")):
        runs[name] = api.report_folder(reports[source], folder / "configs" / name, draw=False).run
    comparison = build_comparison([ConfigRun(n, "default", {"n": n}, r, f"configs/{n}") for n, r in runs.items()],
                                  kind="compare", title="m", model_path="m.py")  # fmt: skip
    write_report(render_comparison(comparison, analyze_comparison(comparison)), folder)
    stale = folder / "configs" / "a" / "index.html"
    stale.write_text("<html>an older render</html>")
    rerender_comparison(folder)
    assert "an older render" not in stale.read_text() and "<h1" in stale.read_text()
    index = (folder / "index.html").read_text()
    assert 'href="configs/a/index.html"' in index


# --- 8: the side-by-side table wraps (a 1,400 px window) ------------------------------------------------------------


def test_the_side_by_side_table_wraps_and_shortens_kernel_names(gpt2) -> None:
    other, name = _repicked(gpt2, 50.0)
    assert len(name) > 60  # a fused kernel named after its ops
    comparison = build_comparison([ConfigRun("a", "default", {}, gpt2, "a"),
                                   ConfigRun("b", "max-autotune-no-cudagraphs", {"coordinate_descent_tuning": True}, other, "b")],
                                  kind="diff", title="gpt2", model_path="m.py")  # fmt: skip
    index = _index(comparison)
    table = index[index.index('id="compare-table"'):index.index("</table>", index.index('id="compare-table"'))]
    assert 'style="overflow-wrap: anywhere"' in table and 'class="num' not in table  # no nowrap cells
    summary = index[index.index('id="diff-1"'):]
    assert summary.count(f'<span class="short-name" title="{name}">') == 2  # the changed row, both sides
    assert f"<code>{name}</code>" not in summary


def test_host_bound_evidence_says_what_cuda_graphs_measured_here(gpt2, unpacked, tmp_path: Path) -> None:
    """GPT-2's step made host-bound (its device time a third of it) against a configuration that used CUDA graphs
    (ViT-S/16 under reduce-overhead, as recorded) and measured the same: the evidence does not advise them."""
    vit = api.report_folder(unpacked("h100-vit-s16-reduce-overhead"), tmp_path / "vit", draw=False).run
    assert vit.bench.end_to_end.cudagraphs == "used"
    device_ms = gpt2.bench.step.total_us / 1e3
    step = 3 * device_ms
    entries = [ConfigRun("gpt2", "default", {}, gpt2, "a", rounds=_rounds(*[(step, device_ms)] * 3)),
               ConfigRun("ro", "reduce-overhead", {}, vit, "b", rounds=_rounds(*[(step * 1.005, device_ms)] * 3))]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="m", model_path="m.py")
    (eager,) = [e for e in comparison.evidence if e.config == "gpt2" and e.against == "eager"]
    (host,) = [f for f in eager.findings if f.startswith("the GPU works")]
    assert "which CUDA graphs (reduce-overhead) cut" not in host
    assert host.endswith("CUDA graphs were measured here: ro uses them, +0.5% against it (noise 2.0%): within noise")
