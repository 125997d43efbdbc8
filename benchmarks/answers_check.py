"""The first page's four answers on the H100 fixtures, checked against the raw numbers (issue 31).

For each capture (tests/fixtures/h100-*.tar.gz, unpacked here): build its report as `inductor-lens report
<capture>` does, screenshot the first screen (1,400 x 900, headless Chromium), and write the four answers as
the page gives them beside the same numbers recomputed from the raw files with nothing of inductor_lens
(tests/raw_profile.py over profile_trace.json; capture.json's end-to-end medians):

    PYTHONPATH=. python benchmarks/answers_check.py --results benchmarks/results/<date>-h100-answers.md \
        --shots benchmarks/results/ [--measured-tf32 CAPTURE]

``--measured-tf32``: a capture of the same GPT-2 with torch.set_float32_matmul_precision("high"), whose
end-to-end medians are set beside the precision suggestion's estimate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tarfile
import tempfile
from pathlib import Path

from inductor_lens import api
from inductor_lens.records import CompileRun
from tests.raw_profile import launch_times, profiled_steps

FIXTURES = (
    "h100-gpt2-fp32-default",
    "h100-llama-bf16-max-autotune-nocg",
    "h100-vit-s16-reduce-overhead",
    "h100-resnet50-train",
)
ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--shots", type=Path, required=True, help="folder for the PNG screenshots")
    parser.add_argument("--measured-tf32", type=Path, help="capture folder of the GPT-2 run with TF32 matmuls")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="answers-"))
    runs: dict[str, CompileRun] = {}
    lines = [
        "# The first page's four answers on real H100 captures, checked against the raw numbers",
        "",
        f"Command: `PYTHONPATH=. python benchmarks/answers_check.py --results {args.results} --shots {args.shots}`"
        + (" --measured-tf32 <capture>" if args.measured_tf32 else "")
        + " (on the CPU machine: the captures are rendered here, nothing is timed here).",
        "",
        "Captures: tests/fixtures/h100-*.tar.gz (tests/fixtures/PROVENANCE.md): one NVIDIA H100 80GB HBM3, torch"
        " 2.11.0+cu130, triton 3.6.0, transformers 5.17.0, timm 1.0.29, torchvision 0.26.0+cu130, 2026-11-27."
        " Raw: speed-up from capture.json's end-to-end medians; busy and per-launch device time from"
        " profile_trace.json by tests/raw_profile.py (External id ties each kernel to the CPU event that"
        " launched it; under CUDA graphs the replayed kernels in order, aligned with the same code's launches"
        " profiled without them, profile_graph_free.json; medians over the 20 profiled steps).",
        "",
    ]
    for name in FIXTURES:
        with tarfile.open(ROOT / "tests" / "fixtures" / f"{name}.tar.gz") as archive:
            archive.extractall(work)
        capture = work / name
        result = api.report_folder(capture, work / f"{name}-report", draw=False)
        shot = args.shots / f"{args.results.stem.rsplit('-answers', 1)[0]}-answers-{name.removeprefix('h100-')}.png"
        _screenshot(result.index, shot)
        lines += _section(name, result.run, capture, shot.name)
        runs[name] = result.run
    if args.measured_tf32 is not None:
        lines += _measured_tf32(args.measured_tf32, runs["h100-gpt2-fp32-default"])
    args.results.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _section(name: str, run: CompileRun, capture: Path, shot: str) -> list[str]:
    answers = run.answers
    assert answers is not None
    raw_e2e = json.loads((capture / "capture.json").read_text(encoding="utf-8"))["bench"]["end_to_end"]
    eager, compiled = raw_e2e["eager"]["median_ms"], raw_e2e["compiled"]["median_ms"]
    steps = profiled_steps(capture / "profile_trace.json")
    busy = statistics.median(s.busy_us for s in steps)
    busy_spread = (min(s.busy_us for s in steps), max(s.busy_us for s in steps))
    total = statistics.median(s.total_us for s in steps)
    idle = max(0.0, compiled * 1e3 - busy)
    out = [f"## {name}", "", f"![first screen]({shot})", "", "| answer | the page | raw |", "|---|---|---|"]
    out.append(
        f"| 1. compiled vs eager | {answers.speedup:.2f}x ({answers.compiled_ms:.3f} vs {answers.eager_ms:.3f} ms) "
        f"| {eager / compiled:.2f}x (capture.json: {compiled:.3f} vs {eager:.3f} ms; compiled p10-p90 "
        f"{raw_e2e['compiled']['p10_ms']:.3f}-{raw_e2e['compiled']['p90_ms']:.3f}) |"
    )
    bound = answers.bound
    out.append(
        f"| 2. GPU or host | {bound.verdict if bound else '-'}: busy {bound.busy_us if bound else 0:,.1f} us, idle "
        f"{bound.idle_us if bound else 0:,.1f} us of {bound.step_us if bound else 0:,.1f} us "
        f"| busy {busy:,.1f} us (min-max over steps {busy_spread[0]:,.1f}-{busy_spread[1]:,.1f}); idle "
        f"{idle:,.1f} us = {idle / (compiled * 1e3):.1%} of the step |"
    )
    launches = [(g, launch) for g in sorted(run.graphs, key=lambda g: g.kind == "backward") for launch in g.launches if launch.timing]
    per_step, totals = launch_times(capture)
    aligned = all(len(times) == len(launches) for times in per_step)
    index = {(g.id, launch.position): i for i, (g, launch) in enumerate(launches)}
    for rank, group in enumerate(answers.groups[:5], start=1):
        if aligned:
            raw_share = statistics.median(
                sum(times[index[(m.graph_id, m.position)]] for m in group.members) / step_total
                for times, step_total in zip(per_step, totals, strict=True)
            )
            raw = f"{raw_share:.1%} (its launches' kernels over the step's {total:,.1f} us)"
        else:
            raw = "launches not aligned with the raw trace"
        where = group.module or group.source or ""
        out.append(
            f"| 3.{rank} `{group.name}` x{group.launches_per_step:g} {where} | {group.share:.1%}, "
            f"{group.per_step_us:,.1f} us per step | {raw} |"
        )
    for rank, finding in enumerate(answers.findings[:3], start=1):
        stake = f"{finding.at_stake_us:,.1f} us at stake" if finding.at_stake_us is not None else "no time at stake"
        out.append(f"| 4.{rank} {finding.kind} | {finding.change or finding.title} ({stake}) | {finding.estimate} |")
    out.append("")
    return out


def _measured_tf32(capture: Path, fp32: CompileRun) -> list[str]:
    """The precision finding's estimate on GPT-2 against the same model measured with TF32 matmuls."""
    raw = json.loads((capture / "capture.json").read_text(encoding="utf-8"))["bench"]["end_to_end"]
    tf32_ms = raw["compiled"]["median_ms"]
    answers = fp32.answers
    assert answers is not None and answers.compiled_ms is not None
    finding = next(f for f in answers.findings if f.kind == "precision")
    assert finding.at_stake_us is not None
    measured_us = (answers.compiled_ms - tf32_ms) * 1e3
    tf32_spread = (raw["compiled"]["p90_ms"] - raw["compiled"]["p10_ms"]) / tf32_ms
    compiled = fp32.bench.end_to_end.compiled if fp32.bench and fp32.bench.end_to_end else None
    fp32_spread = (compiled.p90_ms - compiled.p10_ms) / compiled.median_ms if compiled else float("nan")
    return [
        "## The precision suggestion, measured",
        "",
        "The same GPT-2 with `torch.set_float32_matmul_precision(\"high\")` set in its model file"
        " (benchmarks/models/h100_gpt2_tf32.py; its capture.json is kept in 2026-11-27-h100-answers/), same H100,"
        f" same session: compiled {tf32_ms:.3f} ms (p10-p90 {raw['compiled']['p10_ms']:.3f}-"
        f"{raw['compiled']['p90_ms']:.3f}), eager {raw['eager']['median_ms']:.3f} ms.",
        "",
        f"- the report's estimate (fp32 run): {finding.at_stake_us:,.1f} us per step at stake ({finding.estimate.split(';')[0]})",
        f"- measured: {answers.compiled_ms:.3f} - {tf32_ms:.3f} ms = {measured_us:,.1f} us per step"
        f" ({answers.compiled_ms / tf32_ms:.2f}x); the estimate is {finding.at_stake_us / measured_us - 1:+.1%} off",
        f"- noise: the compiled p10-p90 spread is {fp32_spread:.1%} of the fp32 median and {tf32_spread:.1%} of the TF32"
        " one (capture.json), far under the difference; the two runs differ in the matmul precision only (same model"
        " file, mode, inputs, GPU and session).",
        "",
    ]


def _screenshot(index: Path, png: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(index.resolve().as_uri())
        page.screenshot(path=str(png))
        browser.close()


if __name__ == "__main__":
    main()
