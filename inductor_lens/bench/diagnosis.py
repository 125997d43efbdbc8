"""Stage 4 of the pipeline (bench), read back: why is the compiled step slower (or not faster) than eager,
and what to try.

``diagnose(run) -> Diagnosis`` reads the records only (a saved lens.json re-renders with it; the
comparison pages can call it on each of their runs). Each ``Finding`` (``records.answers``) has a title,
the time at stake per step in µs (None where the records cannot put a time on it) with how it was
estimated, its evidence (numbers, and a link into the report's pages), the one change to try, what the
change may cost (``caveat``), and, where several places share one root cause, how many were folded into it
(``occurrences``, ``root_cause``). Findings are ranked by time at stake. No change repeats the run's own
settings or drops its CUDA graphs: a mode is always the run's mode with one thing changed
(``diagnosis_settings.suggested_mode``). The rules:

- host-bound (GPU): the bound verdict (``bound.bound_verdict``, the same numbers): when it is host-bound or
  mixed, the idle time per step is at stake, and the change is CUDA graphs in the mode that keeps the
  run's autotuning (``reduce-overhead`` from ``default``, ``max-autotune`` from
  ``max-autotune-no-cudagraphs``), or, where they were on and skipped, removing what Inductor named;
- Python around the kernels (CPU): time inside compiled graphs not inside a kernel (``call()``'s
  Python: buffer allocation, launches), when at least ``OVERHEAD_SHARE`` of the step: ``cpp_wrapper``;
- outside the compiled graphs (CPU): the compiled step minus the time inside compiled graphs
  (Dynamo's guards, eager code between graphs), split over the graph breaks when there are any;
- graph breaks, folded by root cause: a data-dependent scalar (``aten._local_scalar_dense``,
  ``Tensor.item()``, "data dependent" in the reason) or output shape is one finding however many frames
  it broke, with its fix; other breaks fold by their reason;
- recompiles, folded by the guard that failed (the tensor's name aside): ``torch._dynamo.mark_dynamic``
  on the dimension that changed;
- ATen fallbacks: extern calls that are not library matmuls, convolutions or attention;
- custom ops (``torch.library``, a namespace torch does not own): the user's or a library's own op, which
  runs outside Inductor's kernels as it is (never called a fallback);
- precision (GPU): float32 library matmuls (and convolutions where cuDNN's TF32 is off) taking
  ``PRECISION_SHARE`` of the device time with TF32 off: ``torch.set_float32_matmul_precision("high")``,
  then bfloat16 autocast, the time at stake from the MEASURED float32, TF32 and bfloat16 matmul ceilings;
- freezing (CPU inference): library matmuls taking ``FREEZING_SHARE`` of the time in kernels, weights not
  frozen: ``freezing``, not estimated (``--try`` measures it);
- kernels far under the roofline (``roofline.FAR_FROM_ROOF``, launches of 5 µs or more): the time above
  what the roofline allows, with the tuning the run has not used yet (or, all tuning on, the kernel itself);
- autotuning: library matmuls measurably under the roofline (under ``AUTOTUNE_UNDER`` of it) in a run
  that did not autotune, their time above the roof at stake when it is above the noise; picks within
  ``CLOSE_CALL`` of the runner-up;
- nothing to gain: a timed, stable run where no finding puts more than the noise (``noise_us``) at stake
  gets one finding that says so, first, with no change.

A finding whose change is a setting (a mode, Inductor or Dynamo options, the matmul precision, autocast,
``dynamic``) carries it as ``settings`` (``records.trials.SettingChange``, with the time it is expected to save):
what ``--try`` runs (compare/trials.py). Code changes carry the user line they concern (``where``) instead.

Advice for training (compile the loss, the optimizer step) is given only to training runs
(``bound.is_training``). A step whose measurements are unstable (``stability.judge``) is still diagnosed
for what needs no time (breaks, recompiles), but ``noisy`` says its times should not be read.

This module runs the rules and ranks what they find; the rules live by family: ``diagnosis_host.py`` (host-bound,
Python around the kernels), ``diagnosis_breaks.py`` (outside the compiled graphs, graph breaks, recompiles),
``diagnosis_kernels.py`` (fallbacks, custom ops, precision, freezing, the roofline, autotuning), with their
thresholds in ``diagnosis_thresholds.py`` and the run's own settings in ``diagnosis_settings.py``.
"""

from __future__ import annotations

from ..records import BoundVerdict, CompileRun
from ..records.analysis import Diagnosis, Stability
from ..records.answers import Finding
from .bound import bound_verdict
from .diagnosis_breaks import graph_breaks, recompiles
from .diagnosis_host import host_bound, python_overhead
from .diagnosis_kernels import autotune, custom_ops, fallbacks, freezing, precision, under_roofline
from .diagnosis_settings import autotunes, suggested_mode, uses_cudagraphs
from .diagnosis_thresholds import (
    AUTOTUNE_UNDER,
    CLOSE_CALL,
    FREEZING_SHARE,
    NOISE_SHARE,
    NOT_FOR_SPEED,
    OVERHEAD_SHARE,
    PRECISION_SHARE,
    noise_us,
)
from .stability import judge

__all__ = [
    "AUTOTUNE_UNDER",
    "CLOSE_CALL",
    "FREEZING_SHARE",
    "NOISE_SHARE",
    "NOT_FOR_SPEED",
    "OVERHEAD_SHARE",
    "PRECISION_SHARE",
    "Diagnosis",
    "autotunes",
    "diagnose",
    "noise_us",
    "suggested_mode",
    "uses_cudagraphs",
]


def diagnose(run: CompileRun) -> Diagnosis:
    stability = judge(run)
    bench = run.bench
    e2e = bench.end_to_end if bench is not None and not bench.error else None
    eager_us = e2e.eager.median_ms * 1e3 if e2e else None
    compiled_us = e2e.compiled.median_ms * 1e3 if e2e else None
    device = bench.device if bench is not None else run.environment.device_type
    verdict = bound_verdict(run)
    findings: list[Finding] = []
    timed = bench is not None and not bench.error and bench.step is not None and bool(compiled_us)
    if timed and compiled_us:
        if device == "cuda":
            findings += host_bound(run, verdict)
        else:
            findings += python_overhead(run, compiled_us)
    findings += graph_breaks(run, compiled_us)
    findings += recompiles(run)
    findings += fallbacks(run)
    findings += custom_ops(run)
    findings += precision(run)
    findings += freezing(run)
    findings += under_roofline(run)
    findings += autotune(run)
    noise = noise_us(e2e) if e2e is not None else None
    # a mode change that costs compile time, for less than the step's noise: not advice
    findings = [f for f in findings if not (f.kind == "autotune" and f.at_stake_us is not None
                                            and noise is not None and f.at_stake_us < noise)]  # fmt: skip
    findings.sort(key=lambda f: (f.at_stake_us is None, -(f.at_stake_us or 0.0)))
    noisy = device != "cuda" and stability.judged and not stability.stable
    if timed and noise is not None and not (stability.judged and not stability.stable):
        nothing = _nothing_to_gain(findings, noise, verdict, device == "cuda")
        if nothing is not None:
            findings.insert(0, nothing)
    headline = _headline(e2e is not None, eager_us, compiled_us, stability)
    return Diagnosis(device, eager_us, compiled_us, headline, tuple(findings), stability, noisy, verdict, noise)


def _headline(timed: bool, eager_us: float | None, compiled_us: float | None, stability: Stability) -> str:
    if not timed or not eager_us or not compiled_us:
        return "Not timed: what the compile itself shows that costs time or can be improved."
    ratio = eager_us / compiled_us
    numbers = f"eager {eager_us / 1e3:.3f} ms, compiled {compiled_us / 1e3:.3f} ms: {ratio:.2f}x"
    if not stability.stable:
        return f"Not judged: the measurements are unstable ({numbers}). What the records show all the same:"
    if stability.speedup_within_noise:
        return f"Compiled is about as fast as eager, within the spread ({numbers}). What holds it back:"
    if ratio < 1:
        return f"Compiled is slower than eager ({numbers}). Why, and what to try:"
    return f"Compiled is faster than eager ({numbers}). What still costs time, and what to try:"


def _nothing_to_gain(
    findings: list[Finding], noise: float, verdict: BoundVerdict | None, gpu: bool
) -> Finding | None:
    """One finding that says so, when no change the records show would save more than the noise."""
    actionable = {"graph break", "fallback", "custom op", "precision", "freezing"}
    if any((f.at_stake_us or 0.0) >= noise for f in findings) or any(
        f.at_stake_us is None and f.kind in actionable for f in findings
    ):
        return None
    largest = max((f for f in findings if f.at_stake_us is not None), key=lambda f: f.at_stake_us or 0.0, default=None)
    facts = []
    if verdict is not None and verdict.verdict != "unknown" and verdict.idle_share is not None:
        facts.append(f"{verdict.verdict} ({'GPU idle' if gpu else 'host overhead'} {verdict.idle_share:.0%} of the step)")
    facts.append(f"the largest time at stake: {largest.at_stake_us:,.1f} µs ({largest.title})"
                 if largest is not None and largest.at_stake_us is not None else "no cost found that takes time")  # fmt: skip
    return Finding(
        "nothing to gain",
        "Nothing to gain here: no change found that would save more than the noise",
        None,
        f"{NOISE_SHARE:.0%} of the compiled step or half its p10-p90 spread, whichever is larger ({noise:,.1f} µs)",
        "; ".join(facts),
        "index.html#timing",
        "",
        "medium",
    )
