"""Report stage: the view model of the index's stability banner and its diagnosis ("why is this slower,
or not faster, than eager, and what to try").

The diagnosis itself is ``bench.diagnosis.diagnose``, run before rendering (``RunAnalysis.diagnosis``,
inductor_lens/analysis.py); this module lays it out: a
waterfall from the eager step to the compiled step (each timed finding one bar, linked to its evidence)
as plain HTML bars positioned in percent of the widest total, the ranked list of findings, and the rules
the findings follow, worded from the thresholds the code applies (``diagnosis_rules``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import Finding
from ..records.analysis import Diagnosis, DiagnosisRules, RunAnalysis, Stability


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
    rules: tuple[tuple[str, str], ...] = ()  # (name, rule) as the code applies it


def diagnosis_view(analysis: RunAnalysis) -> DiagnosisView:
    diagnosis = analysis.diagnosis
    bars: tuple[WaterfallBar, ...] = ()
    note = ""
    if diagnosis.noisy:
        note = ("The times are not drawn: the measurements are unstable (see the banner above), so the times at "
                "stake below would be noise. Measure again on a quiet machine.")  # fmt: skip
    elif diagnosis.eager_us and diagnosis.compiled_us:
        bars, note = _waterfall(diagnosis)
    gpu = diagnosis.device == "cuda"
    return DiagnosisView(diagnosis, diagnosis.stability, bars, diagnosis.findings, note,
                         diagnosis_rules(analysis.rules, gpu))


def diagnosis_rules(rules: DiagnosisRules, gpu: bool) -> tuple[tuple[str, str], ...]:
    """Each rule of ``bench.diagnosis`` in words, its numbers from the constants the code applies."""
    host = (
        ("host-bound", f"the bound verdict's rule ({rules.bound_rule_gpu}); host-bound or mixed: the idle time is "
         "at stake, and the change is CUDA graphs in the mode that keeps the run's autotuning")
        if gpu
        else ("host overhead", f"{rules.bound_rule_cpu}; Python around the kernels (time inside compiled graphs "
              f"outside their kernels) from {rules.overhead_share:.0%} of the step: cpp_wrapper; outside the "
              "graphs: the compiled step minus the time inside compiled graphs (Dynamo's guards, eager code)")
    )
    return (
        host,
        ("graph breaks", "one finding per root cause: a data-dependent scalar (aten._local_scalar_dense, "
         "Tensor.item()) or output shape is named as such however many frames it broke; other breaks fold by "
         "their reason"),
        ("recompiles", "one finding per failed guard (the tensor's name aside), with the dimension to mark dynamic"),
        ("ATen fallbacks", "extern calls that are not library matmuls, convolutions or attention"),
        ("custom ops", "torch.library ops of the model or a library, named namespace::op: Inductor calls them as "
         "they are"),
        ("precision", f"float32 library matmuls (convolutions where cuDNN's TF32 is off) taking "
         f"{rules.precision_share:.0%} of the device time or more with TF32 off; the time at stake is their time x "
         "(1 - float32 / TF32 ceiling), both ceilings measured on this GPU; bfloat16 autocast the same way"),
        ("kernels under the roofline", f"launches of {rules.tiny_kernel_s * 1e6:.0f} µs or more under "
         f"{rules.far_from_roof:.0%} of it, with the tuning the run has not used"),
        ("autotune", f"library matmuls under {rules.autotune_under:.0%} of their roofline in a run that did not "
         "autotune, when the time above the roof is more than the noise (never when they sit near it); picks "
         f"within {rules.close_call:.0%} of the runner-up"),
        ("nothing to gain", f"said as such when no finding puts more than the noise at stake "
         f"({rules.noise_share:.0%} of the compiled step, or half its p10-p90 spread)"),
        ("never", "a change to the mode or options the run used, or one that drops its CUDA graphs; training advice "
         "on an inference run"),
    )


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
