"""compare and diff: configuration parsing, the kernel diff on real captures, the verdict, the CLI, and a
CPU end-to-end comparison of the MLP sample under two modes."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens import api
from inductor_lens.analysis import analyze_comparison
from inductor_lens.compare import ConfigRun, build_comparison, parse_config, requested_configs
from inductor_lens.compare.comparability import differences, headline, run_facts
from inductor_lens.compare.kernels import diff_runs, kernel_body
from inductor_lens.compare.noise import SINGLE_PROCESS_FLOOR, own_noise, rotated, versus
from inductor_lens.compare.summary import gap_words, judged
from inductor_lens.compare.verdict import verdict
from inductor_lens.errors import InputFolderError, UsageError
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import (
    COMPARISON_SCHEMA_VERSION,
    AgainstBaseline,
    BenchResult,
    Comparison,
    CompileRun,
    ConfigResult,
    EndToEnd,
    GraphRecord,
    Launch,
    LaunchTiming,
    RoundMeasure,
    Timing,
)
from inductor_lens.report import render_comparison
from inductor_lens.report.compare_view import side_by_side

from ..conftest import SAMPLES, assert_one_line_error

KNOWN = {"epilogue_fusion": True, "max_autotune": False, "coordinate_descent_tuning": False}


# --- which configurations ---------------------------------------------------------------------


def test_configs_from_modes_and_option_sets() -> None:
    requests = requested_configs(
        ["default", "max-autotune"],
        [
            "epi:max_autotune=true,epilogue_fusion=false",
            "cd:mode=max-autotune-no-cudagraphs,coordinate_descent_tuning=1",
        ],
        KNOWN,
    )
    assert [(r.name, r.mode, dict(r.options)) for r in requests] == [
        ("default", "default", {}),
        ("max-autotune", "max-autotune", {}),
        ("epi", "default", {"max_autotune": True, "epilogue_fusion": False}),
        ("cd", "max-autotune-no-cudagraphs", {"coordinate_descent_tuning": True}),
    ]
    # with neither, every mode of the installed torch, as torch lists them (torch 2.13 added lite)
    import torch._inductor

    assert [r.name for r in requested_configs([], [], KNOWN)] == list(torch._inductor.list_mode_options())
    assert "lite" in [r.name for r in requested_configs([], [], KNOWN)]


@pytest.mark.parametrize(
    ("modes", "configs", "message"),
    [
        (["default"], [], "at least two configurations"),
        (["default", "default"], [], "given twice"),
        ([], ["a:epilogue_fusion=true", "a:max_autotune=true"], "given twice"),
        ([], ["epilogue_fusion=true"], "NAME:KEY=VALUE"),
        ([], ["../../etc:max_autotune=true", "b:max_autotune=true"], "configuration name '../../etc'"),
        ([], ["default:max_autotune=true", "b:max_autotune=true"], "is a mode's name"),
        ([], ["a:epilog_fusion=true", "b:max_autotune=true"], "unknown Inductor option 'epilog_fusion'"),
        ([], ["a:mode=fastest", "b:max_autotune=true"], "unknown mode 'fastest'"),
    ],
)
def test_bad_configurations_are_refused(modes: list[str], configs: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        requested_configs(modes, configs, KNOWN)


def test_parse_config_keeps_values_typed() -> None:
    request = parse_config("cd:coordinate_descent_tuning=true", KNOWN)
    assert request.options == {"coordinate_descent_tuning": True}
    assert request.describe() == "mode default, coordinate_descent_tuning=True"


# --- the kernel diff, on real H200 captures -------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_runs(unpacked) -> dict[str, CompileRun]:
    names = (
        "block_default",
        "block_reduce_overhead",
        "mlp_default",
        "mlp_bf16_max_autotune_nocg",
        "mlp_epilogue",
    )
    return {name: parse_debug_folder(unpacked(name), strict=True) for name in names}


def _counts(diff) -> dict[str, int]:
    return {k: diff.count(k) for k in ("unchanged", "changed", "regrouped", "added", "removed")}


def test_same_capture_is_all_unchanged(gpu_runs) -> None:
    diff = diff_runs("a", gpu_runs["block_default"], "b", gpu_runs["block_default"])
    assert _counts(diff) == {"unchanged": 18, "changed": 0, "regrouped": 0, "added": 0, "removed": 0}
    assert [g.kind for g in diff.graphs] == ["forward", "inference"]


def test_reduce_overhead_keeps_the_kernels_of_default(gpu_runs) -> None:
    # CUDA graphs change how the launches are replayed, not what they compute
    diff = diff_runs("default", gpu_runs["block_default"], "ro", gpu_runs["block_reduce_overhead"])
    assert _counts(diff)["unchanged"] == 18 and not [c for c in diff.changes if c.note]


def test_templates_against_library_calls(gpu_runs) -> None:
    diff = diff_runs(
        "default", gpu_runs["mlp_default"], "bf16-autotune", gpu_runs["mlp_bf16_max_autotune_nocg"]
    )
    # The default's inference addmm computes input_3 only (its GELU, input_2, is the Triton kernel before it);
    # the bf16 template computes both: a regrouping.
    assert _counts(diff) == {"unchanged": 0, "changed": 5, "regrouped": 1, "added": 0, "removed": 0}
    inference = [
        c for c in diff.changes if "inference" in c.before.graph_id and not c.before.graph_id.endswith("-2")
    ]
    assert [(c.before.targets, c.after.targets, c.nodes, c.note) for c in inference] == [
        (("extern_kernels.mm",), ("triton_tem_fused_addmm_t_0",), ("input_1",),
         "extern_kernels.mm → a Triton template kernel"),
        (("triton_poi_fused_addmm_gelu_0",), ("triton_poi_fused_gelu_1",), ("input_2",), "different code"),
        (("extern_kernels.addmm",), ("triton_tem_fused_addmm_gelu_t_2",), ("input_2", "input_3"),
         "the fusion boundary moved (only after: input_2)"),
    ]  # fmt: skip
    assert "def triton_poi_fused_addmm_gelu_0" in inference[1].before.source


def test_same_code_with_other_tuning_settings(gpu_runs) -> None:
    diff = diff_runs("default", gpu_runs["mlp_default"], "epilogue", gpu_runs["mlp_epilogue"])
    assert _counts(diff)["unchanged"] == 6
    notes = {c.before.targets[0]: c.note for c in diff.changes}
    assert notes["triton_poi_fused_gelu_0"] == "same code; Inductor's tuning settings differ: max_autotune"
    assert notes["extern_kernels.addmm"] == ""


def _graph(*launches: tuple[str, str, tuple[str, ...]]) -> GraphRecord:
    return GraphRecord(
        id="g",
        name="g",
        folder="g",
        kind="inference",
        launches=tuple(
            Launch(position=i, kind=kind, target=target, line=i, code=f"{target}(...)", source_nodes=nodes)  # type: ignore[arg-type]
            for i, (kind, target, nodes) in enumerate(launches, 1)
        ),
    )


def _run(graph: GraphRecord) -> CompileRun:
    return CompileRun(title="m", created="now", tool_version="0", source_dir="/", graphs=(graph,))


def test_regrouped_added_and_removed() -> None:
    before = _graph(
        ("extern", "extern_kernels.mm", ("mm",)),
        ("extern", "bias_add_call", ("bias", "gelu")),
        ("extern", "dropout_call", ("dropout",)),
    )
    after = _graph(
        ("extern", "fused_call", ("mm", "bias", "gelu")),
        ("extern", "extra_call", ("extra",)),
    )
    diff = diff_runs("a", _run(before), "b", _run(after))
    assert [(c.kind, c.before and c.before.targets, c.after and c.after.targets) for c in diff.changes] == [
        ("regrouped", ("extern_kernels.mm", "bias_add_call"), ("fused_call",)),
        ("added", None, ("extra_call",)),
        ("removed", ("dropout_call",), None),
    ]
    assert diff.changes[0].note == "the same work in 2 launch(es) before and 1 after: fused differently"


def test_kernel_body_ignores_name_comments_and_decorator() -> None:
    a = "import triton\n@triton_heuristics.pointwise(meta={'x': 1})\n@triton.jit\ndef k_0(x):\n    # ORIGIN\n    y = x\n"
    b = "@triton_heuristics.pointwise(meta={'x': 2})\n@triton.jit\ndef k_7(x):\n\n    y = x  \n"
    assert kernel_body(a, "k_0") == kernel_body(b, "k_7") == "def KERNEL(x):\n    y = x"


def test_side_by_side_folds_long_equal_runs() -> None:
    before = "\n".join(f"line {i}" for i in range(30))
    after = before.replace("line 15", "line fifteen")
    lines = side_by_side(before, after)
    assert [line.tag for line in lines] == [
        "skip",
        "equal",
        "equal",
        "equal",
        "replace",
        "equal",
        "equal",
        "equal",
        "skip",
    ]
    assert (
        lines[0].left == "12 unchanged lines"
        and lines[4].left == "line 15"
        and lines[4].right == "line fifteen"
    )
    assert lines[4].left_no == 16 and lines[4].right_no == 16
    assert side_by_side(before, before) == ()


# --- verdict and noise ---------------------------------------------------------------------------


def _config(name: str, ms: float, again: float | None = None, spread: float = 0.0) -> ConfigResult:
    """An older comparison's configuration: a cold and (maybe) a warm process, no rounds."""
    timing = Timing(ms, ms * (1 - spread), ms * (1 + spread), 20, "test")
    again_timing = Timing(again, again, again, 20, "test") if again is not None else None
    step = (ms + again) / 2 if again is not None else ms
    return ConfigResult(name, "default", latency=timing, latency_again=again_timing,
                        noise=own_noise(timing, again_timing), step_ms=step)  # fmt: skip


def _rounds(*medians: float, start: int = 1) -> tuple[RoundMeasure, ...]:
    return tuple(RoundMeasure(k, 1, Timing(m, m, m, 20, "t")) for k, m in enumerate(medians, start))


def _rounded(name: str, *medians: float) -> ConfigResult:
    rounds = _rounds(*medians)
    return ConfigResult(name, "default", latency=rounds[0].compiled, rounds=rounds,
                        noise=own_noise(None, None, rounds), step_ms=sorted(medians)[len(medians) // 2])  # fmt: skip


def test_noise_is_the_spread_of_the_round_medians() -> None:
    rounds = _rounds(10.0, 10.5, 9.8)
    assert own_noise(None, None, rounds) == pytest.approx(0.7 / 10.0)
    assert own_noise(None, None, _rounds(10.0, 10.01)) == 0.02  # the floor
    assert rotated(["a", "b", "c"], 1) == ["a", "b", "c"] and rotated(["a", "b", "c"], 2) == ["b", "c", "a"]
    # the pair: the largest of the spread of the round-by-round ratios and each one's own spread
    a, b = _rounded("a", 10.0, 10.2, 9.9), _rounded("b", 8.0, 8.5, 7.8)
    pair = versus(a, b)
    assert pair is not None and pair.ratios == pytest.approx((0.8, 8.5 / 10.2, 7.8 / 9.9))
    assert pair.noise == pytest.approx(max(0.7 / 8.0, 8.5 / 10.2 - 7.8 / 9.9))
    assert pair.fraction == pytest.approx(-0.2) and pair.judgement == "faster" and pair.rounds_agree


def test_a_winner_only_beyond_the_noise_of_the_pair() -> None:
    clear = judged([_rounded("default", 10.0, 10.2, 9.9), _rounded("max-autotune", 8.0, 8.1, 7.9)])
    said = verdict(clear, (False, "3 of 3 launches differ"))
    assert said.significant and said.fastest == "max-autotune" and said.runner_up == "default"
    assert said.text == ("max-autotune is the fastest: default is +25.0% against it (10.000 ms against 8.000 ms), "
                         "beyond the noise of 3.0% between them, and every round agrees")  # fmt: skip
    # a 3% lead with rounds 6% apart: no winner
    close = judged([_rounded("default", 10.0, 10.6, 10.3), _rounded("max-autotune", 9.7, 10.0, 10.4)])
    said = verdict(close, (False, "1 of 3 launches differ"))
    assert not said.significant and said.fastest is None
    assert said.text.startswith("no winner: default is +3.0% against max-autotune")
    assert "within the noise of 7.0% between them" in said.text


def test_the_same_code_never_names_a_winner() -> None:
    """Two configurations that compiled the same program: even a steady 10% gap is noise (too few rounds)."""
    graph = _graph(("extern", "mm", ("mm",)), ("extern", "add", ("add",)))
    entries = [ConfigRun(name, "default", {"max_autotune": False}, _timed_run(graph, ms, 2.0, None), name,
                         rounds=_rounds(ms, ms * 1.01, ms))
               for name, ms in (("a", 1.0), ("b", 1.1))]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="m", model_path="m.py")
    said = comparison.verdict
    assert said is not None and said.fastest is None and not said.significant and said.same_code
    assert said.text.startswith("no winner: same code; the gap 10.0% is beyond the measured noise 2.0% of 3 rounds")
    entries[1] = replace(entries[1], rounds=_rounds(1.01, 0.99, 1.0))
    said = build_comparison(entries, kind="compare", title="m", model_path="m.py").verdict
    assert said is not None and said.fastest is None
    assert said.text.startswith("no winner: same code; the gap 0.0% is within the noise 3.0% (a against b: all 2 "
                                "launches the same code")  # fmt: skip
    # other code: the same numbers name a winner
    other = replace(entries[1], run=_timed_run(_graph(("extern", "mm", ("mm",))), 1.1, 2.0, None),
                    rounds=_rounds(1.1, 1.11, 1.1))  # fmt: skip
    said = build_comparison([entries[0], other], kind="compare", title="m", model_path="m.py").verdict
    assert said is not None and said.fastest == "a" and said.same_code is False


def test_the_verdict_is_made_of_the_numbers_in_the_table() -> None:
    """Every number of the verdict sentence is in the table, in the column it belongs to."""
    graphs = [_graph(("extern", "mm", ("mm",))), _graph(("extern", "mm2", ("mm",))), _graph(("extern", "mm3", ("mm",)))]
    entries = [ConfigRun(name, "default", {}, _timed_run(g, r[0], 2.0, None), name, rounds=_rounds(*r))
               for name, g, r in zip(("default", "b", "c"), graphs,
                                     ((1.0, 1.02, 0.99), (0.62, 0.64, 0.63), (0.64, 0.66, 0.62)), strict=True)]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="m", model_path="m.py")
    said = comparison.verdict
    assert said is not None and said.fastest is None  # b and c within noise; default -38% is not "within 1.7%"
    index = render_comparison(comparison, analyze_comparison(comparison))["index.html"]
    cells = {
        row: re.findall(r'<td(?: class="best")?>(.*?)</td>', re.search(rf"<th[^>]*>{row}</th>(.*?)</tr>", index).group(1))
        for row in ("Step", "Against the fastest", "Against default")
    }  # fmt: skip
    step_cells, fastest_cells, default_cells = cells.values()
    numbers = re.findall(r"[+-]?[\d,]+\.\d+(?: ms|%)", said.text)
    assert numbers == ["+1.6%", "0.640 ms", "0.630 ms", "6.3%"]
    assert "0.640 ms" in step_cells[2] and "0.630 ms" in step_cells[1]
    assert "+1.6%" in fastest_cells[2] and "noise 6.3%" in fastest_cells[2] and "fastest" in fastest_cells[1]
    assert "+58.7%" in fastest_cells[0] and "-37.0%" in default_cells[1]
    assert f"{said.text}." in index and "within 1.7%" not in index


def test_single_process_noise_has_a_floor() -> None:
    assert _config("a", 10.0, spread=0.01).noise == SINGLE_PROCESS_FLOOR
    assert _config("a", 10.0, spread=0.08).noise == pytest.approx(0.08)
    said = verdict(judged([_config("a", 10.0, spread=0.01), _config("b", 9.7, spread=0.01)]), None)
    assert not said.significant and said.text.startswith("no winner: a is +3.1% against b")


def test_each_pair_is_judged_by_its_own_noise() -> None:
    # one configuration measured badly does not hide a clear lead between two others
    configs = judged([_config("default", 10.0, 10.1), _config("noisy", 12.0, 20.0), _config("fast", 3.0, 3.05)])
    said = verdict(configs, None)
    assert said.significant and said.fastest == "fast" and said.noise == pytest.approx(0.02)


def test_gaps_are_worded_by_the_noise_rule() -> None:
    assert gap_words(0.366, 0.05, "the kernels") == "+36.6%, beyond the noise of 5.0%: the kernels take longer"
    assert gap_words(0.03, 0.05, "the kernels") == (
        "+3.0%, within the noise of 5.0%: the kernels take about the same time"
    )
    assert "less time" in gap_words(-0.2, 0.05, "the kernels")


def _timed_run(graph: GraphRecord, compiled_ms: float, eager_ms: float, cudagraphs: str | None) -> CompileRun:
    e2e = EndToEnd(
        eager=Timing(eager_ms, eager_ms, eager_ms, 20, "t"),
        compiled=Timing(compiled_ms, compiled_ms, compiled_ms, 20, "t"),
        speedup=eager_ms / compiled_ms,
        cudagraphs=cudagraphs,
    )
    return replace(_run(graph), bench=BenchResult(device="cuda", end_to_end=e2e))


def test_evidence_for_a_slower_configuration() -> None:
    one = _graph(("extern", "mm", ("mm",)))
    two = _graph(("extern", "mm", ("mm",)), ("extern", "copy_call", ("copy",)))
    entries = [
        ConfigRun("default", "default", {}, _timed_run(one, 1.0, 1.5, None), "a",
                  latency_again=Timing(1.01, 1.0, 1.0, 20, "t")),
        ConfigRun("ro", "reduce-overhead", {}, _timed_run(two, 2.0, 1.5, "skipped: mutated inputs"), "b",
                  latency_again=Timing(2.02, 2.0, 2.0, 20, "t")),
    ]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="m", model_path="m.py")
    assert comparison.verdict.fastest == "default" and comparison.verdict.significant
    against_default, against_eager = comparison.evidence
    assert (against_default.config, against_default.against) == ("ro", "default")
    assert against_default.slower_by == pytest.approx(2.01 / 1.005 - 1)
    assert against_default.findings[:2] == (
        "CUDA graphs skipped: mutated inputs",
        "1 more launch(es) than default (2 against 1)",
    )
    assert "added kernel: nothing → copy_call" not in against_default.findings  # untimed launches: no delta
    assert (against_eager.against, round(against_eager.slower_by, 3)) == ("eager", 0.34)


def _judged_comparison() -> Comparison:
    """Two timed configurations: the other twice as fast; its launches the same, slower and faster."""

    def graph(*times: float) -> GraphRecord:
        plain = _graph(("extern", "mm", ("mm",)), ("extern", "add", ("add",)), ("extern", "copy", ("copy",)))
        timed = tuple(
            replace(x, timing=LaunchTiming(t, 1.0, 0.3)) for x, t in zip(plain.launches, times, strict=True)
        )
        return replace(plain, launches=timed)

    entries = [
        ConfigRun("default", "default", {}, _timed_run(graph(100.0, 10.0, 10.0), 1.0, 1.5, None), "a",
                  latency_again=Timing(1.01, 1.0, 1.0, 20, "t")),
        ConfigRun("fast", "max-autotune", {}, _timed_run(graph(101.0, 15.0, 5.0), 0.5, 1.5, None), "b",
                  latency_again=Timing(0.505, 0.5, 0.5, 20, "t")),
    ]  # fmt: skip
    return build_comparison(entries, kind="compare", title="m", model_path="m.py")


def test_judgements_are_made_once_and_recorded() -> None:
    comparison = _judged_comparison()
    base, fast = comparison.configs
    assert base.step_ms == pytest.approx(1.005) and base.against_baseline is None
    assert fast.step_ms == pytest.approx(0.5025)
    assert fast.against_baseline == AgainstBaseline(pytest.approx(-0.5), pytest.approx(0.02), "faster", against="default")
    (diff,) = comparison.diffs
    assert diff.noise == pytest.approx(0.02)
    # 1 µs of 100 is inside the 2% noise; +5 and -5 µs of 10 are not
    assert [c.judgement for c in diff.changes] == ["within noise", "slower", "faster"]
    assert Comparison.from_json(comparison.to_json()) == comparison
    files = render_comparison(comparison, analyze_comparison(comparison))
    assert '<span class="ok">-50.0%</span>' in files["index.html"]
    assert 'id="unjudged"' not in files["index.html"]
    page = files["diffs/1.html"]
    assert [page.count(f'Δ <b class="{tone}">') for tone in ("muted", "bad", "ok")] == [1, 1, 1]
    assert "did not record" not in page


def test_an_older_comparison_shows_its_numbers_without_judgement() -> None:
    """Schema 5 recorded no judgements: the page does not work them out again with today's rules."""
    document = json.loads(_judged_comparison().to_json())
    document["schema_version"] = 5
    for config in document["comparison"]["configs"]:
        del config["step_ms"], config["against_baseline"]
    for diff in document["comparison"]["diffs"]:
        del diff["noise"]
        for change in diff["changes"]:
            del change["judgement"]
    old = Comparison.from_json(json.dumps(document))
    assert old.configs[1].latency is not None and old.configs[1].against_baseline is None
    files = render_comparison(old, analyze_comparison(old))
    index = files["index.html"]
    assert 'id="unjudged"' in index and "did not record whether each difference" in index
    assert '<span class="muted">not recorded</span>' in index and "-50.0%" not in index
    assert "0.500 ms" in index  # the measured step is still shown
    page = files["diffs/1.html"]
    assert "did not record whether each difference" in page
    assert page.count('Δ <b class="muted">') == 3
    assert '<b class="bad">' not in page and '<b class="ok">' not in page


# --- lens.json, re-rendering, the CLI on existing reports ----------------------------------------


@pytest.fixture(scope="module")
def two_reports(unpacked, tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("reports")
    a = api.report_folder(unpacked("mlp_default"), out / "mlp_default", draw=False)
    b = api.report_folder(unpacked("h200-block-autotune-timed"), out / "block-timed", draw=False)
    c = api.report_folder(unpacked("mlp_bf16_max_autotune_nocg"), out / "mlp-bf16", draw=False)
    assert a.index.is_file() and b.index.is_file() and c.index.is_file()
    return out / "mlp_default", out / "mlp-bf16"


def test_diff_of_two_reports(run_cli, two_reports, tmp_path: Path) -> None:
    a, b = two_reports
    result = run_cli("diff", a, b, "--out", tmp_path / "d")
    assert result.code == 0, result.stderr
    assert result.stdout.strip() == f"comparison: {tmp_path / 'd' / 'index.html'}"
    comparison = Comparison.from_json((tmp_path / "d" / "lens.json").read_text())
    assert comparison.kind == "diff" and [c.name for c in comparison.configs] == ["mlp_default", "mlp-bf16"]
    assert comparison.configs[1].kernels == {"triton pointwise": 2, "triton template": 4}
    assert comparison.configs[0].kernels == {"extern": 4, "triton pointwise": 2}
    assert comparison.configs[1].report.endswith("/mlp-bf16")
    assert (tmp_path / "d" / comparison.configs[1].report / "index.html").is_file()
    index = (tmp_path / "d" / "index.html").read_text()
    assert "Diff of two reports" in index and 'href="diffs/1.html"' in index
    # fp32 against bf16: the dtype difference comes first, at the top of the page and in the verdict
    assert [d.fact for d in comparison.differences] == ["dtype", "inputs"]
    assert (comparison.differences[0].base, comparison.differences[0].other) == ("float32", "bfloat16")
    assert comparison.verdict is not None and "not the mode and options alone" in comparison.verdict.compares
    assert "differ in dtype" in comparison.verdict.compares
    assert "These runs differ in dtype (float32 vs bfloat16): the likely cause of the gap" in result.stderr
    assert result.stderr.index("differ in dtype") < result.stderr.index(comparison.verdict.text)
    index_text = (tmp_path / "d" / "index.html").read_text()
    top = index_text.index('id="differences"')
    assert top < index_text.index('id="verdict"') < index_text.index('id="compare-table"')
    assert "These runs differ in dtype (float32 vs bfloat16)" in index_text[top:index_text.index('id="verdict"')]
    page = (tmp_path / "d" / "diffs" / "1.html").read_text()
    assert page.count('class="badge change-changed"') == 5 + 1  # 5 changes and the count badge
    assert page.count('class="badge change-regrouped"') == 1 + 1
    assert '<tr class="replace">' in page  # a side-by-side source diff
    # the links reach the two reports' own pages
    assert f'href="../{comparison.configs[1].report}/kernels/' in page
    # each configuration's diagnosis, recorded with the comparison and linked into its report
    first = comparison.configs[0].diagnosis[0]
    assert first.title.startswith("Recompiled [0/1]: GLOBAL_STATE changed: grad_mode") and first.at_stake_us is None
    assert "torch.no_grad()" in first.change and first.url == "compile.html#frame-0-1"
    assert f'<a href="{comparison.configs[0].report}/compile.html#frame-0-1">Recompiled [0/1]' in index


def test_comparability_facts_in_order(unpacked) -> None:
    """--train against inference, static against dynamic: named in that order, after the dtype."""
    train = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True)
    dynamic = parse_debug_folder(unpacked("cpu-torch2.13-block-dynamic"), strict=True)
    facts = run_facts(train), run_facts(dynamic)
    assert facts[0]["train"] == "training" and facts[1]["train"] == "inference"
    assert facts[0]["dynamic"] == "static" and facts[1]["dynamic"] == "dynamic"
    found = differences("train", facts[0], "dyn", facts[1])
    assert [d.fact for d in found] == ["train", "dynamic", "inputs"]
    assert headline(found).startswith("These runs differ in training or inference (training vs inference): "
                                      "the likely cause of the gap")  # fmt: skip
    bf16 = replace(train, settings=replace(train.settings, dtype="bfloat16"), capture=_outcome())
    assert next(d.fact for d in differences("a", facts[0], "b", run_facts(bf16))) == "dtype"
    assert differences("a", facts[0], "a", facts[0]) == []


def _outcome():
    from inductor_lens.records import CaptureOutcome

    return CaptureOutcome(model_path="/m/mlp.py", model_name="mlp", status="ok", phase="done")


def test_diff_refuses_what_is_not_a_report(run_cli, unpacked, tmp_path: Path) -> None:
    result = run_cli("diff", unpacked("mlp_default"), unpacked("mlp_epilogue"), "--out", tmp_path / "d")
    assert_one_line_error(result, "no lens.json found")
    assert result.code == InputFolderError.exit_code


def test_comparison_round_trip_and_rerender(run_cli, two_reports, tmp_path: Path) -> None:
    a, b = two_reports
    first = api.diff_reports(a, b, tmp_path / "d")
    text = (tmp_path / "d" / "lens.json").read_text()
    assert Comparison.from_json(text) == first.comparison
    assert json.loads(text)["schema_version"] == COMPARISON_SCHEMA_VERSION
    with pytest.raises(ValueError, match="it holds a comparison"):
        CompileRun.from_json(text)
    assert api.is_comparison(tmp_path / "d") and not api.is_comparison(a)
    titled = tmp_path / "titled"  # a run whose title says "comparison" is still a run
    titled.mkdir()
    (titled / "lens.json").write_text(replace(api.load_run(a), title="comparison").to_json())
    assert '"comparison"' in (titled / "lens.json").read_text()[:200] and not api.is_comparison(titled)
    before = (tmp_path / "d" / "index.html").read_text()
    (tmp_path / "d" / "index.html").unlink()
    result = run_cli("report", tmp_path / "d")
    assert result.code == 0, result.stderr
    assert (tmp_path / "d" / "index.html").read_text() == before
    moved = run_cli("report", tmp_path / "d", "--out", tmp_path / "deeper" / "elsewhere")
    assert moved.code == 0, moved.stderr
    # the links to the two reports are worked out again from the new place
    page = (tmp_path / "deeper" / "elsewhere" / "index.html").read_text()
    links = re.findall(r'<th(?: class="best")?><a href="([^"]+)">', page)
    assert len(links) == 2 and all((tmp_path / "deeper" / "elsewhere" / link).is_file() for link in links)


def test_render_comparison_escapes_hostile_names(two_reports) -> None:
    a, b = two_reports
    runs = [api.load_run(a), api.load_run(b)]
    entries = [ConfigRun('<img src=x onerror="alert(1)">', "default", {}, runs[0], "a"),
               ConfigRun("b&c", "max-autotune", {"k": "<b>"}, runs[1], "b")]  # fmt: skip
    comparison = build_comparison(entries, kind="diff", title="<script>x</script>", model_path="m")
    files = render_comparison(comparison, analyze_comparison(comparison))
    assert "<img src=x" not in files["index.html"] and "&lt;img src=x" in files["index.html"]
    assert "<script>x</script>" not in files["index.html"] and "k=&lt;b&gt;" in files["index.html"]


def test_compare_refuses_bad_input_in_one_line(run_cli, tmp_path: Path) -> None:
    missing = run_cli("compare", tmp_path / "nope.py", "--mode", "default", "--mode", "max-autotune")
    assert_one_line_error(missing, "no such model file")
    one = run_cli("compare", SAMPLES / "mlp.py", "--mode", "default")
    assert_one_line_error(one, "at least two configurations")
    bad = run_cli("compare", SAMPLES / "mlp.py", "--config", "x:not_an_option=1", "--mode", "default")
    assert_one_line_error(bad, "unknown Inductor option 'not_an_option'")
    assert bad.code == UsageError.exit_code
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    foreign = run_cli("compare", SAMPLES / "mlp.py", "--mode", "default", "--mode", "max-autotune",
                      "--out", tmp_path / "foreign")  # fmt: skip
    assert_one_line_error(foreign, "holds no inductor-lens report")
    assert (tmp_path / "foreign" / "notes.txt").read_text() == "mine"


# --- end to end on the CPU ------------------------------------------------------------------------
