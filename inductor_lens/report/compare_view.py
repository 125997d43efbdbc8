"""Report stage, comparison pages: the view models behind compare.html.j2 and compare_diff.html.j2.

A comparison report is an index (table, verdict, evidence, kernel diff summary) and one page per
configuration diffed against the baseline, with a side-by-side source diff of each changed pair.
Each configuration's own report is a normal report in its folder (``configs/<name>/`` for
``compare``; the reports given to ``diff`` stay where they are and are linked).

Whether a difference beats the run-to-run noise is read from the records (compare/summary.py judged it
when the comparison was built), never worked out here; the numbers are formatted with the functions the
verdict sentence is formatted with (compare/verdict.py), so the text and the table cannot disagree.
What the runs differ in besides mode and options (compare/comparability.py ``headline``, worked out before
rendering with each configuration's speed-up against eager: ``ComparisonAnalysis``) heads the page. A
comparison saved before those judgements were recorded (schema 5) shows its measured numbers without them,
and says so: today's rules are not applied to yesterday's measurements.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..records import (
    AgainstBaseline,
    Comparison,
    ConfigDiff,
    ConfigResult,
    DiagnosisLine,
    DiffSide,
    Evidence,
    Judgement,
    KernelChange,
)
from ..records.analysis import ComparisonAnalysis
from ..records.pages import launch_page
from ..units import format_ms, format_percent, format_signed_percent

KIND_ORDER = ("triton pointwise", "triton reduction", "triton persistent_reduction", "triton template")
CONTEXT_LINES = 3
# The colour of a judgement; a difference not judged (or not timed) is muted.
TONES: dict[Judgement | None, str] = {"slower": "bad", "faster": "ok", "within noise": "muted", None: "muted"}


@dataclass(frozen=True)
class ConfigRow:
    config: ConfigResult
    url: str  # its report's index page
    step_ms: float | None
    versus_base: float | None  # fraction, + = slower than the baseline (None for the baseline itself)
    versus_tone: str  # "bad" slower / "ok" faster than the baseline beyond the noise of the two, else "muted"
    fastest: bool
    warm_ratio: float | None  # warm / cold compile seconds
    step_text: str  # step_ms as the verdict writes it
    noise_text: str  # its own noise
    versus: Gap | None  # against the baseline
    versus_fastest: Gap | None  # against the fastest
    rounds: tuple[str, ...]  # each round's median, in round order ("1.234 ms (2nd)")
    speedup_text: str  # "5.02x", "0.32x: slower than eager", or "" where not measured
    speedup_tone: str
    eager_text: str  # the eager step the speed-up divides ("" where not measured)
    diagnosis: tuple[DiagnosisRow, ...]


@dataclass(frozen=True)
class DiagnosisRow:
    """A diagnosis line; where another configuration ran its change, what that measured (``tried`` words)."""

    line: DiagnosisLine
    tried: str  # "measured here: max-autotune -1.1% (noise 2.0%): within noise", or ""
    advised: bool  # still worth trying: not measured here, or measured faster


@dataclass(frozen=True)
class Gap:
    """One cell "against ...": the gap, the noise of the pair, the judgement, as the verdict writes them."""

    text: str  # "+3.1%"
    noise: str  # "4.2%"
    judgement: str
    tone: str
    rounds: str  # the paired round ratios, "1.031, 0.998, 1.012", or ""


@dataclass(frozen=True)
class EvidenceRow:
    evidence: Evidence
    what: str  # "is 12.3% slower than", "takes 3.16x the time of"


@dataclass(frozen=True)
class DiffLine:
    tag: str  # "equal", "replace", "delete", "insert", "skip"
    left_no: int | None
    left: str
    right_no: int | None
    right: str


@dataclass(frozen=True)
class ChangeRow:
    change: KernelChange
    anchor: str
    before_url: str | None
    after_url: str | None
    lines: tuple[DiffLine, ...]  # side-by-side source diff (changed and regrouped pairs)
    tone: str  # "bad" slower / "ok" faster beyond the run-to-run noise, else "muted"


@dataclass(frozen=True)
class DiffPage:
    diff: ConfigDiff
    url: str
    base: ConfigRow
    other: ConfigRow
    rows: tuple[ChangeRow, ...]
    counts: dict[str, int]
    delta_us: float | None
    unjudged: bool  # timed changes without a recorded judgement: an older comparison
    retuned: int  # unchanged: the same code under another autotuner pick, its time within the noise
    threshold: str  # when a kernel's time counts as moved, in words ("" for an older comparison)


@dataclass(frozen=True)
class ComparisonPage:
    comparison: Comparison
    rows: tuple[ConfigRow, ...]
    kinds: tuple[str, ...]  # kernel kinds in any configuration, for the table's columns
    diffs: tuple[DiffPage, ...]
    evidence: tuple[EvidenceRow, ...]
    unjudged: bool  # timed configurations without a recorded judgement: an older comparison
    headline: str  # what the runs differ in besides mode and options ("" when nothing)
    gpu: bool  # any run on a GPU (CUDA graphs, device time)
    method: str  # how a step is worked out, made of the rules the configurations' steps were worked out by
    unstable: tuple[ConfigRow, ...]  # configurations whose own report calls its measurements unstable
    # any configuration with settings beyond its mode and options (autocast, matmul precision, ...): a column part
    settings: bool = False


def comparison_page(comparison: Comparison, analysis: ComparisonAnalysis) -> ComparisonPage:
    fastest = comparison.verdict.fastest if comparison.verdict else None
    rows = tuple(
        _row(c, c.report, c.name == fastest, eager)
        for c, eager in zip(comparison.configs, analysis.against_eager, strict=True)
    )
    seen = {k for c in comparison.configs for k in c.kernels}
    kinds = tuple(k for k in KIND_ORDER if k in seen) + tuple(sorted(seen - set(KIND_ORDER) - {"extern"}))
    kinds += ("extern",) if "extern" in seen else ()
    by_name = {r.config.name: r for r in rows}
    diffs = tuple(
        _diff_page(d, f"diffs/{i}.html", by_name[d.base], by_name[d.other], threshold)
        for i, (d, threshold) in enumerate(zip(comparison.diffs, analysis.change_thresholds, strict=True), 1)
    )
    # since schema 6 every timed configuration has its step_ms: older comparisons recorded no judgements
    unjudged = any(c.latency is not None and c.step_ms is None for c in comparison.configs)
    # facts["device"] is the device kind ("cuda", "cpu"); ConfigResult.device is its name (a CPU's model, too)
    gpu = any(c.facts.get("device", "cuda") != "cpu" or c.cudagraphs for c in comparison.configs)
    evidence = tuple(EvidenceRow(e, _slower_words(e.slower_by)) for e in comparison.evidence)
    return ComparisonPage(comparison, rows, kinds, diffs, evidence, unjudged, analysis.headline, gpu,
                          step_method(comparison.configs), tuple(r for r in rows if r.config.unstable),
                          settings=any(c.settings for c in comparison.configs))  # fmt: skip


def step_method(configs: tuple[ConfigResult, ...]) -> str:
    """How a step is worked out, in the words each configuration's step was worked out with (one sentence
    where they share the rule), so the page's method text cannot say another rule than its numbers follow."""
    # older comparisons recorded only ``measured``: "median of 3 round medians (...)"
    rules = {c.name: c.step_rule or f"the {c.measured}" for c in configs if c.step_rule or c.measured}
    if not rules:
        return ""
    if len(set(rules.values())) == 1:
        return f"A configuration's step is {next(iter(rules.values()))}."
    return "Steps: " + "; ".join(f"{name}'s, {rule}" for name, rule in rules.items()) + "."


def _slower_words(fraction: float) -> str:
    """A step ``fraction`` slower (0.25: 25%) in words that read right at any size: "takes 3.16x the time of"."""
    return f"takes {1 + fraction:.2f}x the time of" if fraction >= 1 else f"is {format_percent(fraction)} slower than"


def _speedup(config: ConfigResult, eager: AgainstBaseline | None) -> tuple[str, str]:
    """The speed-up over eager, worded as the evidence judges it (``eager``: compare/summary.py ``against_eager``)."""
    if eager is None or not config.speedup:
        return "", "muted"
    text = f"{config.speedup:.2f}x"
    if eager.judgement == "within noise":
        return f"{text}: about eager's time (within the noise of {format_percent(eager.noise)})", "muted"
    return (f"{text}: slower than eager", "bad") if eager.judgement == "slower" else (text, "ok")


def _row(config: ConfigResult, url: str, fastest: bool, eager: AgainstBaseline | None) -> ConfigRow:
    versus = config.against_baseline
    fraction, tone = (versus.fraction, TONES[versus.judgement]) if versus else (None, TONES[None])
    warm = (config.warm_compile_s / config.cold_compile_s
            if config.warm_compile_s is not None and config.cold_compile_s else None)  # fmt: skip
    rounds = tuple(
        "failed" if r.error and not r.compiled.median_ms else f"{format_ms(r.compiled.median_ms)} ({_nth(r.position)})"
        for r in sorted(config.rounds, key=lambda r: r.round)
    )
    eager_ms = config.eager_step_ms or (config.eager.median_ms if config.eager else None)
    return ConfigRow(config, url.rstrip("/") + "/", config.step_ms, fraction, tone, fastest, warm,
                     format_ms(config.step_ms), format_percent(config.noise), _gap(versus), _gap(config.against_fastest),
                     rounds, *_speedup(config, eager), format_ms(eager_ms) if eager_ms else "",
                     tuple(_diagnosis_row(d) for d in config.diagnosis))  # fmt: skip


def _diagnosis_row(line: DiagnosisLine) -> DiagnosisRow:
    if line.tried is None:
        return DiagnosisRow(line, "", True)
    said = (f"measured here as {line.tried_by}: {format_signed_percent(line.tried.fraction)} "
            f"(noise {format_percent(line.tried.noise)}), {line.tried.judgement}")  # fmt: skip
    return DiagnosisRow(line, said, line.tried.judgement == "faster")


def _gap(versus: AgainstBaseline | None) -> Gap | None:
    if versus is None:
        return None
    ratios = ", ".join(f"{r:.3f}" for r in versus.ratios)
    return Gap(format_signed_percent(versus.fraction), format_percent(versus.noise), versus.judgement, TONES[versus.judgement], ratios)


def _nth(position: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(position, f"{position}th")


def _diff_page(diff: ConfigDiff, url: str, base: ConfigRow, other: ConfigRow, rule: str) -> DiffPage:
    """``rule``: the rule the diff's changes were judged by, in words (compare/summary.py ``change_threshold``)."""
    rows = tuple(
        ChangeRow(
            change,
            f"change-{i}",
            _side_url(base.url, change.before),
            _side_url(other.url, change.after),
            side_by_side(change.before.source, change.after.source)
            if change.before and change.after and change.kind != "unchanged"
            else (),
            TONES[change.judgement],
        )
        for i, change in enumerate(diff.changes, 1)
    )
    counts = {kind: diff.count(kind) for kind in ("changed", "regrouped", "added", "removed", "unchanged")}
    deltas = [c.delta_us for c in diff.changes if c.delta_us is not None]
    total = sum(deltas) if deltas and len(deltas) == len(diff.changes) else None
    unjudged = any(c.delta_us is not None and c.judgement is None for c in diff.changes)
    retuned = sum(1 for c in diff.changes if c.kind == "unchanged" and c.same_code)
    threshold = rule if diff.noise is not None and deltas else ""
    return DiffPage(diff, url, base, other, rows, counts, total, unjudged, retuned, threshold)


def _side_url(report: str, side: DiffSide | None) -> str | None:
    """The first launch's page in that configuration's report (a kernel page, or the call on its graph page)."""
    if side is None:
        return None
    return report + launch_page(side.graph_id, side.kinds[0] == "extern", side.targets[0], side.launches[0])


def side_by_side(before: str, after: str, context: int = CONTEXT_LINES) -> tuple[DiffLine, ...]:
    """Line pairs for a two-column diff; long runs of equal lines folded to ``context`` lines each side."""
    left, right = before.splitlines(), after.splitlines()
    lines: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, left, right, autojunk=False).get_opcodes():
        if tag == "equal":
            count = i2 - i1
            head = 0 if i1 == 0 else context  # no context before the first change's leading lines
            tail = 0 if i2 == len(left) else context
            folded = count > head + tail + 1
            keep = [*range(head), -1, *range(count - tail, count)] if folded else range(count)
            for k in keep:
                if k == -1:
                    lines.append(DiffLine("skip", None, f"{count - head - tail} unchanged lines", None, ""))
                else:
                    lines.append(DiffLine("equal", i1 + k + 1, left[i1 + k], j1 + k + 1, right[j1 + k]))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            has_left, has_right = i1 + k < i2, j1 + k < j2
            lines.append(
                DiffLine(
                    tag,
                    i1 + k + 1 if has_left else None,
                    left[i1 + k] if has_left else "",
                    j1 + k + 1 if has_right else None,
                    right[j1 + k] if has_right else "",
                )
            )
    return tuple(lines) if any(line.tag not in ("equal", "skip") for line in lines) else ()
