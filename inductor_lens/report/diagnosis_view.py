"""Report stage: the view model of the index's stability banner and its diagnosis ("why is this slower,
or not faster, than eager, and what to try").

The diagnosis itself is ``bench.diagnosis.diagnose`` (records only); this module lays it out: a
waterfall from the eager step to the compiled step (each timed finding one bar, linked to its evidence)
as plain HTML bars positioned in percent of the widest total, and the ranked list of findings.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..bench.diagnosis import Diagnosis, Finding, diagnose
from ..bench.stability import Stability
from ..records import CompileRun


@dataclass(frozen=True)
class WaterfallBar:
    label: str
    value: str  # "+3,495.6 µs", "8,683.6 µs"
    kind: str  # "total", "gain", "cost"
    left: float  # percent of the chart's width
    width: float
    url: str = ""
    title: str = ""


@dataclass(frozen=True)
class DiagnosisView:
    diagnosis: Diagnosis
    stability: Stability
    bars: tuple[WaterfallBar, ...]
    findings: tuple[Finding, ...]
    waterfall_note: str = ""


def diagnosis_view(run: CompileRun) -> DiagnosisView:
    diagnosis = diagnose(run)
    bars: tuple[WaterfallBar, ...] = ()
    note = ""
    if diagnosis.noisy:
        note = ("The times are not drawn: the measurements are unstable (see the banner above), so the times at "
                "stake below would be noise. Measure again on a quiet machine.")  # fmt: skip
    elif diagnosis.eager_us and diagnosis.compiled_us:
        bars, note = _waterfall(diagnosis)
    return DiagnosisView(diagnosis, diagnosis.stability, bars, diagnosis.findings, note)


def _us(value: float, sign: bool = False) -> str:
    return f"{value:+,.1f} µs" if sign else f"{value:,.1f} µs"


def _waterfall(diagnosis: Diagnosis) -> tuple[tuple[WaterfallBar, ...], str]:
    eager, compiled = diagnosis.eager_us or 0.0, diagnosis.compiled_us or 0.0
    timed = diagnosis.timed
    costs = sum(f.at_stake_us or 0.0 for f in timed)
    scale_costs, note = 1.0, ""
    if costs > compiled > 0:
        scale_costs = compiled / costs
        note = (f"The times at stake add up to {_us(costs)}, more than the compiled step: they overlap (an upper "
                "bound each), so their bars are scaled down to fit the compiled step.")  # fmt: skip
    base = compiled - costs * scale_costs
    widest = max(eager, compiled, base) or 1.0

    def pct(value: float) -> float:
        return round(100.0 * value / widest, 2)

    bars = [WaterfallBar("Eager step", _us(eager), "total", 0.0, pct(eager), "index.html#timing",
                         "the eager model's step, median")]  # fmt: skip
    change = base - eager
    rest = ("the compiled kernels themselves (fusion, fewer passes over memory) and everything the findings "
            "below do not name")  # fmt: skip
    bars.append(
        WaterfallBar(
            "Compiled code, before the costs below",
            _us(change, sign=True),
            "gain" if change <= 0 else "cost",
            pct(min(base, eager)),
            pct(abs(change)),
            "index.html#kernels",
            f"{rest}: the compiled step minus the times at stake below",
        )
    )
    position = base
    for finding in timed:
        width = (finding.at_stake_us or 0.0) * scale_costs
        bars.append(WaterfallBar(finding.title, _us(finding.at_stake_us or 0.0, sign=True), "cost", pct(position),
                                 pct(width), finding.evidence_url, finding.estimate))  # fmt: skip
        position += width
    bars.append(WaterfallBar("Compiled step", _us(compiled), "total", 0.0, pct(compiled), "index.html#timing",
                             "the compiled model's step, median"))  # fmt: skip
    return tuple(bars), note
