"""Stage 4 of the pipeline (bench), read back: why is the compiled step slower (or not faster) than eager,
and what to try.

``diagnose(run) -> Diagnosis`` reads the records only (a saved lens.json re-renders with it; the
comparison pages can call it on each of their runs). Each ``Finding`` (``records.answers``) has a title,
the time at stake per step in µs (None where the records cannot put a time on it) with how it was
estimated, its evidence (numbers, and a link into the report's pages), the one change to try, what the
change may cost (``caveat``), and, where several places share one root cause, how many were folded into it
(``occurrences``, ``root_cause``). Findings are ranked by time at stake. No change repeats the run's own
settings or drops its CUDA graphs: a mode is always the run's mode with one thing changed (``_MODES``). The
rules:

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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..parse import compat
from ..records import BoundVerdict, CompileRun, DynamoFrame, EndToEnd, GraphBreak, GraphRecord, Launch
from ..records.analysis import Diagnosis, Stability
from ..records.answers import Confidence, Finding
from ..records.codec import JsonValue
from ..records.pages import frame_anchor, kernel_url, launch_url
from ..records.trials import SettingChange
from .bound import arithmetic, bound_verdict, is_training, launch_count
from .operations import call_site
from .roofline import FAR_FROM_ROOF, TINY_KERNEL_S, launch_input_types, op_base
from .stability import judge

OVERHEAD_SHARE = 0.1  # share of the compiled step spent in Python around kernels / outside graphs
CLOSE_CALL = 0.02  # autotune winner within 2% of the runner-up
FREEZING_SHARE = 0.1  # CPU inference: library matmul time, share of the time in kernels, that earns freezing
PRECISION_SHARE = 0.2  # float32 matmul time, share of the device time per step, that earns a precision finding
AUTOTUNE_UNDER = 0.5  # library matmuls under half their roofline: measurably under the roof
NOT_FOR_SPEED = "nothing to change for speed"  # how a finding's change starts where it is not about speed
NOISE_SHARE = 0.02  # a time at stake under 2% of the step (or half its p10-p90 spread) is noise
# Extern calls into libraries Inductor does not aim to generate: not fallbacks.
_LIBRARY_OPS = re.compile(
    r"^(?:_?mm|addmm|bmm|baddbmm|bias_addmm|_mm_plus_mm|_int_mm|_scaled_mm|linear|_mkl_linear|_?convolution(?:_backward)?"
    r"|cudnn_\w+|mkldnn_\w+|onednn\w*|_scaled_dot_product\w*|_efficient_attention\w*|_flash_attention\w*"
    r"|_cudnn\w*)$"
)
_MATMUL_OPS = re.compile(r"^(?:_?mm|addmm|bmm|baddbmm|bias_addmm|_int_mm|_scaled_mm|_?convolution(?:_backward)?)$")
_CONVOLUTION = re.compile(r"^_?convolution(?:_backward)?$")
_SIZE_MISMATCH = re.compile(r"tensor '(?P<name>[^']+)' size mismatch at index (?P<dim>\d+)")
_TENSOR_NAME = re.compile(r"tensor '[^']+'")
_COMPILE_ID_PREFIX = re.compile(r"^\d+/\d+: ")  # torch names the frame whose guard failed: "0/0: ..."
_HINT = re.compile(r"^\s*Hint:\s*(?P<hint>.+)$", re.MULTILINE)
_USELESS_HINT = re.compile(r"report an issue|file an issue|open an issue", re.IGNORECASE)
# The four modes as (CUDA graphs, autotuning): a suggested mode is the run's with one of the two changed.
_MODES = {
    (False, False): "default",
    (True, False): "reduce-overhead",
    (False, True): "max-autotune-no-cudagraphs",
    (True, True): "max-autotune",
}
# torch warns in the capture log when float32 matmuls could use TF32 and do not.
_TF32_WARNING = "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled"
# NVIDIA's datasheets (dense): the basis where a capture did not measure the TF32 ceiling.
_TYPICAL_TF32 = ("typical ratio, from NVIDIA's datasheets, not measured here: TF32 tensor cores run about 7-8x the "
                 "float32 rate (H100 SXM 495 vs 67 TFLOP/s dense, A100 156 vs 19.5)")  # fmt: skip
_PRECISION_CAVEAT = (
    "accuracy: TF32 rounds the matmul inputs to a 10-bit mantissa (about 1e-3 relative error, float32's range "
    "kept), bfloat16 to 8 bits (about 1e-2); check the outputs against eager (this report's accuracy check) and, "
    "when training, the loss curve before keeping either"
)
_CUDA_GRAPHS_CAVEAT = (
    "CUDA graphs replay fixed memory addresses: inputs are copied into static buffers, the graphs' memory pool "
    "stays allocated (more memory), and each new input shape records a new graph"
)


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
            findings += _host_bound(run, verdict)
        else:
            findings += _python_overhead(run, compiled_us)
    findings += _graph_breaks(run, compiled_us)
    findings += _recompiles(run)
    findings += _fallbacks(run)
    findings += _custom_ops(run)
    findings += _precision(run)
    findings += _freezing(run)
    findings += _under_roofline(run)
    findings += _autotune(run)
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


def noise_us(e2e: EndToEnd) -> float:
    """The smallest time at stake worth a change: ``NOISE_SHARE`` of the compiled step, or half its spread."""
    compiled = e2e.compiled
    return max(NOISE_SHARE * compiled.median_ms, (compiled.p90_ms - compiled.p10_ms) / 2) * 1e3


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


# --- the run's own settings: every suggested change differs from them -----------------------------------


def _options(run: CompileRun) -> Mapping[str, JsonValue]:
    """The Inductor options in force: the mode's and the ones passed (the passed ones win)."""
    settings = run.settings
    return {**(settings.mode_options if settings else {}), **(settings.options if settings else {})}


def _on(options: Mapping[str, JsonValue], *names: str) -> bool:
    return any(bool(options.get(name)) for name in names)


def uses_cudagraphs(run: CompileRun) -> bool:
    """The run's mode or options have CUDA graphs (used, or tried and skipped)."""
    e2e = run.bench.end_to_end if run.bench is not None else None
    return (e2e is not None and e2e.cudagraphs is not None) or _on(_options(run), "triton.cudagraphs")


def autotunes(run: CompileRun) -> bool:
    return _on(_options(run), "max_autotune", "max_autotune_gemm")


def suggested_mode(run: CompileRun, *, cudagraphs: bool | None = None, autotune: bool | None = None) -> str:
    """The run's mode with one thing changed, the rest kept (CUDA graphs are never dropped by this)."""
    graphs = uses_cudagraphs(run) if cudagraphs is None else cudagraphs
    tuned = autotunes(run) if autotune is None else autotune
    return _MODES[(graphs, tuned)]


def _mode_change(mode: str) -> str:
    return f'torch.compile(model, mode="{mode}"), this run\'s other options unchanged'


def _tuning_change(run: CompileRun) -> tuple[str, SettingChange] | None:
    """The next tuning this run has not used, in words and as a setting: block-size search, then autotuning;
    None when both were on."""
    if not _on(_options(run), "coordinate_descent_tuning"):
        return ('add options={"coordinate_descent_tuning": True} to this run\'s torch.compile call: it searches each '
                "kernel's block sizes around the heuristic's",
                SettingChange("coordinate_descent_tuning", options={"coordinate_descent_tuning": True}))  # fmt: skip
    if not autotunes(run):
        mode = suggested_mode(run, autotune=True)
        return (_mode_change(mode) + ": benchmarks each kernel's configurations",
                SettingChange(f"autotuning (mode {mode})", mode=mode))  # fmt: skip
    return None


# --- where the host holds the step back ------------------------------------------------------------------


def _host_bound(run: CompileRun, verdict: BoundVerdict | None) -> list[Finding]:
    """GPU: the bound verdict's idle time, when host-bound or mixed (one rule, the same numbers); GPU-bound with
    more idle time than the step's noise and no CUDA graphs: that idle time, which CUDA graphs remove at most."""
    if verdict is None or not verdict.idle_us:
        return []
    bench = run.bench
    assert bench is not None and bench.end_to_end is not None
    if verdict.verdict == "GPU-bound":
        return _gpu_bound_idle(run, verdict, bench.end_to_end)
    if verdict.verdict not in ("host-bound", "mixed"):
        return []
    idle, share = verdict.idle_us, verdict.idle_share or 0.0
    numbers = arithmetic(verdict.step_us or 0.0, verdict.busy_us or 0.0, True)
    evidence = f"{numbers}; {verdict.detail}" if verdict.detail else numbers
    estimate = ("the idle time per step (the benchmarked step minus the GPU's busy time): what CUDA graphs can "
                "remove at most, since they replay the launches without the host; the kernels themselves stay")  # fmt: skip
    confidence: Confidence = "high" if share >= 0.5 else "medium"
    waits = f"the GPU idles {share:.0%} of the step"
    title = (f"Host-bound: {waits}, waiting for the host to launch work" if verdict.verdict == "host-bound"
             else f"Partly host-bound: {waits} between launches")  # fmt: skip
    cudagraphs = bench.end_to_end.cudagraphs
    if cudagraphs is None and not uses_cudagraphs(run):
        change, settings = _cuda_graphs_change(run, idle)
        return [Finding("host-bound", title, idle, estimate, evidence, "index.html#timing", change, confidence,
                        caveat=_CUDA_GRAPHS_CAVEAT, settings=settings)]  # fmt: skip
    if cudagraphs is not None and cudagraphs.startswith("skipped"):
        reason = cudagraphs.partition(": ")[2] or "no reason recorded"
        return [Finding("cuda graphs", f"CUDA graphs were skipped ({reason}): {waits}", idle, estimate,
                        f"{evidence}; Inductor skipped CUDA graphs: {reason}", "compile.html#frames",
                        _cudagraph_fix(reason), confidence)]  # fmt: skip
    use = bench.cudagraphs
    if use is not None and use.rerecords:
        evidence += f"; cudagraph trees re-recorded {use.rerecords} time(s) (recorded {use.graphs_recorded})"
    if use is not None and use.without_graphs is not None and use.with_graphs is not None:
        evidence += (f"; the same compiled code called without the graphs takes {use.without_graphs.median_ms:.3f} ms "
                     f"against {use.with_graphs.median_ms:.3f} ms with them")  # fmt: skip
    return [Finding("cuda graphs", f"{title} although CUDA graphs were used", idle, estimate,
                    f"{evidence}; the graph replays leave the GPU idle: work outside the graphs, or graphs "
                    "re-recorded for new shapes or inputs", "index.html#timing",
                    "look for re-recording (TORCH_LOGS=cudagraphs) and mark changing sizes with "
                    "torch._dynamo.mark_dynamic, or move eager work between graphs into the compiled function",
                    "low")]  # fmt: skip


def _gpu_bound_idle(run: CompileRun, verdict: BoundVerdict, e2e: EndToEnd) -> list[Finding]:
    idle = verdict.idle_us or 0.0
    if uses_cudagraphs(run) or idle < noise_us(e2e):
        return []
    change, settings = _cuda_graphs_change(run, idle)
    return [Finding("idle time", f"GPU-bound, but the GPU idles {verdict.idle_share or 0.0:.0%} of the step between "
                    "launches", idle, "the idle time per step (the benchmarked step minus the GPU's busy time): what "
                    "CUDA graphs can remove at most", arithmetic(verdict.step_us or 0.0, verdict.busy_us or 0.0, True),
                    "index.html#timing", change, "low", caveat=_CUDA_GRAPHS_CAVEAT, settings=settings)]  # fmt: skip


def _cuda_graphs_change(run: CompileRun, idle_us: float) -> tuple[str, tuple[SettingChange, ...]]:
    """CUDA graphs for a run without them, in words and as the setting --try runs: the run's mode with them on."""
    mode = suggested_mode(run, cudagraphs=True)
    return (f"CUDA graphs: {_mode_change(mode)}; the step's launches replay as one graph",
            (SettingChange(f"CUDA graphs (mode {mode})", mode=mode, predicted_us=idle_us),))  # fmt: skip


def _cudagraph_fix(reason: str) -> str:
    lowered = reason.lower()
    if "mutat" in lowered:
        return "stop mutating inputs inside the compiled function (return new tensors), so CUDA graphs apply"
    if "cpu" in lowered:
        return "keep every tensor of the compiled function on the GPU (CPU tensors or ops stop CUDA graphs)"
    if "dynamic" in lowered or "symint" in lowered or "shape" in lowered:
        return "make the shapes static (pad to a few sizes), so each size gets its graph once"
    if "incompatible op" in lowered or "op" in lowered:
        return "move the incompatible op out of the compiled function, or replace it with one CUDA graphs can record"
    return f"remove the cause Inductor names ({reason}), so CUDA graphs can be recorded"


def _python_overhead(run: CompileRun, compiled_us: float) -> list[Finding]:
    """CPU: time inside compiled graphs but outside their kernels (``call()``'s Python)."""
    bench = run.bench
    assert bench is not None and bench.step is not None
    step = bench.step
    gap = step.total_us - step.attributed_us
    if gap < OVERHEAD_SHARE * compiled_us or _on(_options(run), "cpp_wrapper"):
        return []
    launches, _ = launch_count(run)
    return [
        Finding(
            "python overhead",
            "Python around the kernels: the compiled graphs' call() code",
            gap,
            "time inside compiled graphs minus the time inside their kernels, per profiled step (medians)",
            f"{step.total_us:,.1f} µs inside compiled graphs, {step.attributed_us:,.1f} µs of it inside their "
            f"{launches} launches: {gap:,.1f} µs of Python (buffer allocation, argument handling) per step",
            "index.html#timing",
            'torch.compile(model, options={"cpp_wrapper": True}): the graphs\' call() in C++ instead of Python',
            "medium",
            settings=(SettingChange("cpp_wrapper", options={"cpp_wrapper": True}, predicted_us=gap),),
        )
    ]


def _outside_graphs_us(run: CompileRun, compiled_us: float | None) -> float | None:
    """CPU: the compiled step minus the time inside compiled graphs (guards, eager code between graphs)."""
    bench = run.bench
    if compiled_us is None or bench is None or bench.step is None or bench.device == "cuda":
        return None
    return max(0.0, compiled_us - bench.step.total_us)


def _compile_more(run: CompileRun) -> str:
    """Put more of the step inside the compiled function: the loss and optimizer step only when training."""
    if is_training(run):
        return ("compile more of the step (the loss, the optimizer step) in the same torch.compile'd function, "
                "so fewer calls cross into and out of compiled code")  # fmt: skip
    return ("compile the code around the model call too (input preparation, output post-processing) in the same "
            "torch.compile'd function, so fewer calls cross into and out of compiled code and fewer guards run")  # fmt: skip


# --- graph breaks and recompiles, one finding per root cause ----------------------------------------------


@dataclass(frozen=True)
class _Cause:
    key: str  # what the folded breaks share
    root: str  # the root cause in words; "" where the reason itself is all that is known
    fix: str | None  # the change for the root cause; None: the break's own hint or reason says
    setting: SettingChange | None = None  # the fix as a setting (Dynamo's config), where there is one


_SCALAR_FIX = (
    "torch._dynamo.config.capture_scalar_outputs = True (Dynamo then traces the value as a symbol instead of "
    "breaking the graph), or keep the value on the device: no .item(), .tolist() or int(tensor), and "
    "torch.where (or torch.cond) instead of a Python branch on the value of a tensor"
)
_SCALAR_SETTING = SettingChange("capture_scalar_outputs", dynamo_options={"capture_scalar_outputs": True})
_SHAPE_SETTING = SettingChange("capture_dynamic_output_shape_ops",
                               dynamo_options={"capture_dynamic_output_shape_ops": True})  # fmt: skip
_SHAPE_FIX = (
    "torch._dynamo.config.capture_dynamic_output_shape_ops = True (nonzero, masked_select, unique... traced with "
    "a data-dependent size), or a fixed-size form (torch.where with a mask, padding to a bound)"
)


def _break_cause(item: GraphBreak) -> _Cause:
    # the break's own words, not the user's traceback (whose code lines and comments could say anything)
    text = "\n".join((item.reason, item.explanation, item.detail.split("User code traceback:", 1)[0]))
    if "_local_scalar_dense" in text:
        return _Cause("data-dependent scalar", "a data-dependent scalar: aten._local_scalar_dense, a tensor's value "
                      "read on the host (.item(), int(tensor), a Python branch on a tensor)", _SCALAR_FIX,
                      _SCALAR_SETTING)  # fmt: skip
    if re.search(r"\.item\(\)|Tensor\.item|capture_scalar_outputs", text):
        return _Cause("data-dependent scalar", "a data-dependent scalar: Tensor.item(), a tensor's value read on "
                      "the host", _SCALAR_FIX, _SCALAR_SETTING)  # fmt: skip
    if re.search(r"dynamic output shape|DynamicOutputShape|capture_dynamic_output_shape_ops|\bnonzero\b", text):
        return _Cause("data-dependent shape", "a data-dependent output shape (an op whose output size depends on "
                      "the values: nonzero, masked_select, unique)", _SHAPE_FIX, _SHAPE_SETTING)  # fmt: skip
    if re.search(r"data[- ]dependent|DataDependent|unbacked", text, re.IGNORECASE):
        return _Cause("data-dependent value", "a data-dependent value: the code depends on a tensor's values, "
                      "which are not known while tracing", _SCALAR_FIX, _SCALAR_SETTING)  # fmt: skip
    reason = _COMPILE_ID_PREFIX.sub("", _first_line(item.reason))
    return _Cause(re.sub(r"0x[0-9a-f]+", "0x…", reason), "", None)


def _break_site(item: GraphBreak) -> tuple[str, str]:
    """(where, short label) of a break: its user line, else the last frame of its stack, else its frame."""
    location = item.location or (item.user_stack[-1] if item.user_stack else None)
    if location is not None:
        where = f"{location.filename}:{location.line}"
        function = f" in {location.function}()" if location.function else ""
        return where, where.rsplit("/", 1)[-1] + function
    label = f"frame [{_attempt_free(item.compile_id)}]" if item.compile_id else "an unrecorded place"
    return label, label


def _attempt_free(compile_id: str) -> str:
    """``3/0_1`` -> ``3/0``: a restarted attempt is the same frame compiled again."""
    return re.sub(r"_\d+$", "", compile_id)


def _graph_breaks(run: CompileRun, compiled_us: float | None) -> list[Finding]:
    outside = _outside_graphs_us(run, compiled_us)
    breaks: dict[tuple[str, str], GraphBreak] = {}
    for item in run.graph_breaks:
        breaks.setdefault((item.reason, _break_site(item)[0]), item)
    if not breaks:
        if outside is not None and compiled_us and outside >= OVERHEAD_SHARE * compiled_us:
            return [Finding("outside graphs", "Outside the compiled graph: Dynamo's guards and Python", outside,
                            "compiled step minus the time inside compiled graphs per profiled step (medians)",
                            f"{outside:,.1f} µs of the {compiled_us:,.1f} µs compiled step ran outside the "
                            f"{len(run.graphs)} compiled graph(s)", "compile.html#frames", _compile_more(run),
                            "low")]  # fmt: skip
        return []
    share = outside / len(breaks) if outside is not None else None
    estimate = (
        f"compiled step minus the time inside compiled graphs per profiled step ({outside:,.1f} µs: Dynamo's "
        f"guards and the eager code between the {len(run.graphs)} graphs)"
        + (f", split evenly over {len(breaks)} breaks" if len(breaks) > 1 else "")
        if outside is not None
        else "not timed: the records do not hold the time between compiled graphs on this device"
    )
    groups: dict[str, list[GraphBreak]] = {}
    causes: dict[str, _Cause] = {}
    for item in breaks.values():
        cause = _break_cause(item)
        groups.setdefault(cause.key, []).append(item)
        causes.setdefault(cause.key, cause)
    return [_break_finding(items, causes[key], share, estimate) for key, items in groups.items()]


def _break_finding(items: list[GraphBreak], cause: _Cause, share: float | None, estimate: str) -> Finding:
    first = items[0]
    fix = cause.fix or _break_fix(first)
    located = any(item.location for item in items)
    at_stake = share * len(items) if share is not None else None
    settings = (replace(cause.setting, predicted_us=at_stake),) if cause.setting is not None else ()
    where = _break_site(first)[0] if first.location or first.user_stack else ""
    sites = list(dict.fromkeys(_break_site(item)[1] for item in items))  # a break logged twice is one place
    if len(sites) == 1:
        where, short = _break_site(first)
        code = f" `{first.location.code}`" if first.location and first.location.code else ""
        root = f"; the root cause: {cause.root}" if cause.root else ""
        return Finding("graph break", f"Graph break at {short}: {_first_line(first.reason)}", at_stake, estimate,
                       f"Dynamo stopped tracing at {where}{code}: {first.reason}{root}; the code from there to the "
                       "next compiled frame runs eager, and each graph pays its guards", "compile.html#breaks", fix,
                       "high" if located else "medium", root_cause=cause.root, settings=settings,
                       where=where)  # fmt: skip
    named = "; ".join(sites[:5]) + (f"; and {len(sites) - 5} more" if len(sites) > 5 else "")
    frames = len({_attempt_free(item.compile_id) for item in items if item.compile_id})
    reasons = list(dict.fromkeys(_first_line(item.reason) for item in items))
    said = "; ".join(reasons[:3]) + (f" (and {len(reasons) - 3} more wordings)" if len(reasons) > 3 else "")
    title_cause = cause.root.split(":", 1)[0] if cause.root else reasons[0]
    return Finding(
        "graph break",
        f"{len(sites)} graph breaks, one cause: {title_cause}",
        at_stake,
        estimate,
        f"Dynamo stopped tracing at {len(sites)} places"
        + (f" in {frames} compiled frames" if frames > 1 else "")
        + f": {named}. Torch's words: {said}"
        + (f". The root cause: {cause.root}" if cause.root else "")
        + "; the code from each break to the next compiled frame runs eager, and each graph pays its guards",
        "compile.html#breaks",
        fix,
        "high" if located else "medium",
        occurrences=len(sites),
        root_cause=cause.root or reasons[0],
        settings=settings,
        where=where,
    )


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no reason recorded"
    line = line.split(" (Encountered graph break", 1)[0]
    return line if len(line) <= 140 else line[:137] + "..."


def _break_fix(item: GraphBreak) -> str:
    hint = next((h["hint"].strip() for h in _HINT.finditer(item.detail) if not _USELESS_HINT.search(h["hint"])), None)
    if hint:
        return hint
    reason = item.reason.lower()
    if "print" in reason or "logging" in reason:
        return "remove the print or logging call from the compiled function"
    if "jump" in reason or "generic_jump" in reason:
        return "replace the Python branch on a tensor's value with torch.where (or torch.cond)"
    return "rewrite the line so Dynamo can trace it, or move it out of the compiled function"


def _recompile_key(reason: str) -> str:
    """A failed guard without the tensor's name: one input size change fails the same guard in every frame."""
    return _TENSOR_NAME.sub("tensor", _first_line(_COMPILE_ID_PREFIX.sub("", reason)))


def _recompiles(run: CompileRun) -> list[Finding]:
    groups: dict[str, list[DynamoFrame]] = {}
    for frame in run.recompiles:
        groups.setdefault(_recompile_key(frame.recompile_reasons[0]), []).append(frame)
    findings = []
    for frames in groups.values():
        first = frames[0]
        reason = _COMPILE_ID_PREFIX.sub("", first.recompile_reasons[0])
        seconds = sum(f.compile_time_s or 0.0 for f in frames)
        which = "these frames" if len(frames) > 1 else "this frame"
        estimate = ("compile time, not step time" + (f" ({seconds:.1f} s for {which})" if seconds else "")
                    + ", unless the inputs keep changing")  # fmt: skip
        url = f"compile.html#{frame_anchor(first.compile_id)}"
        settings = _recompile_settings(run, reason)
        if len(frames) == 1:
            findings.append(Finding("recompile", f"Recompiled [{first.compile_id}]: {_first_line(reason)}", None,
                                    estimate, f"Dynamo compiled {_where(first)} again because a guard failed: "
                                    f"{'; '.join(first.recompile_reasons)}", url, _recompile_fix(reason),
                                    "medium", settings=settings))  # fmt: skip
            continue
        each = "; ".join(f"{_where(f)} [{f.compile_id}]: {_first_line(_COMPILE_ID_PREFIX.sub('', f.recompile_reasons[0]))}"
                         for f in frames[:5])  # fmt: skip
        findings.append(
            Finding(
                "recompile",
                f"{len(frames)} recompiles, one cause: {_recompile_key(reason)}",
                None,
                estimate,
                f"Dynamo compiled {len(frames)} frames again because the same guard failed in each: {each}",
                url,
                _recompile_fix(reason),
                "medium",
                occurrences=len(frames),
                root_cause=_recompile_key(reason),
                settings=settings,
            )
        )
    return findings


def _where(frame: DynamoFrame) -> str:
    return f"{frame.function}()" if frame.function else f"frame [{frame.compile_id}]"


def _recompile_settings(run: CompileRun, reason: str) -> tuple[SettingChange, ...]:
    """A size that changed: dynamic shapes as a setting (``mark_dynamic`` is a code change), unless they were on."""
    if not _SIZE_MISMATCH.search(reason) or (run.settings is not None and run.settings.dynamic):
        return ()
    return (SettingChange("dynamic shapes", dynamic=True),)


def _recompile_fix(reason: str) -> str:
    mismatch = _SIZE_MISMATCH.search(reason)
    if mismatch:
        name = re.sub(r"^L\['([^']+)'\]$", r"\1", mismatch["name"])
        return (
            f"torch._dynamo.mark_dynamic({name}, {mismatch['dim']}) before the first call, so one graph serves "
            "every size of that dimension (or torch.compile(..., dynamic=True))"
        )
    if "grad_mode" in reason:
        return ("call the compiled model under one grad mode: each of torch.no_grad() and grad enabled gets its own "
                "graph (expected when a model is evaluated after training)")  # fmt: skip
    if "GLOBAL_STATE" in reason:
        return "keep torch's global state (autocast, deterministic algorithms, default dtype) the same between calls"
    return "torch.compile(..., dynamic=True) if sizes change, or keep the guarded value constant between calls"


def _op_name(launch: Launch) -> str:
    """What a fallback is called: ATen's by its name (``index_put``), another namespace's as ``mkl::_mkl_linear``."""
    found = compat.op_namespace(launch.target)
    return f"{found[0]}::{found[1]}" if found is not None and found[0] != "aten" else op_base(launch)


def _fallbacks(run: CompileRun) -> list[Finding]:
    found: list[tuple[GraphRecord, Launch]] = [
        (graph, launch)
        for graph in run.graphs
        for launch in graph.launches
        if launch.kind == "extern"
        and compat.custom_op(launch.target) is None
        and not _LIBRARY_OPS.match(op_base(launch))
    ]
    if not found:
        return []
    ops = sorted({_op_name(launch) for _, launch in found})
    times = [launch.timing.median_us for _, launch in found if launch.timing is not None]
    graph, first = found[0]
    return [
        Finding(
            "fallback",
            f"{len(found)} ATen fallback call(s) Inductor did not generate: {', '.join(ops[:6])}",
            sum(times) if times else None,
            "their time in context per step: what they cost, not all of which a generated kernel would save"
            if times
            else "not timed",
            f"extern calls that are not library matmuls, convolutions or attention: {', '.join(ops)}; they run "
            "eager kernels and cannot be fused with their neighbours",
            launch_url(graph, first),
            "rewrite the model with ops Inductor lowers (or register a decomposition for the op), so it is fused",
            "low",
            where=call_site(graph, first) or "",
        )
    ]


def _custom_ops(run: CompileRun) -> list[Finding]:
    """Calls of custom ops (``torch.library``): the user's or a library's own code, opaque to Inductor."""
    found = [
        (graph, launch, name)
        for graph in run.graphs
        for launch in graph.launches
        if launch.kind == "extern" and (name := compat.custom_op(launch.target)) is not None
    ]
    if not found:
        return []
    ops = sorted({name for _, _, name in found})
    times = [launch.timing.median_us for _, launch, _ in found if launch.timing is not None]
    graph, first, _ = found[0]
    return [
        Finding(
            "custom op",
            f"{len(found)} custom op call(s) run outside Inductor's kernels: {', '.join(ops[:6])}",
            sum(times) if times else None,
            "their time in context per step (the op's own profiler range): the op's own implementation sets it"
            if times
            else "not timed",
            f"ops registered with torch.library (the model's or a library's own code), which Inductor calls as they "
            f"are: {', '.join(ops)}; it neither generates nor fuses them, so the tensors around them go through memory",
            launch_url(graph, first),
            "speed up the op's own implementation (a fused or compiled kernel of its own); where its body is plain "
            "torch ops, calling them directly instead of through the op lets Inductor compile and fuse them",
            "low",
            where=call_site(graph, first) or "",
        )
    ]


# --- the kernels: precision, the roofline, autotuning ------------------------------------------------------


def _timed_externs(run: CompileRun) -> Iterable[tuple[GraphRecord, Launch]]:
    for graph in run.graphs:
        for launch in graph.launches:
            if launch.kind == "extern" and launch.timing is not None:
                yield graph, launch


def _input_dtype(graph: GraphRecord, launch: Launch) -> str | None:
    """The dtype of a library call's first typed input as FX prints it ("f32", "bf16"), None where unknown."""
    for text in launch_input_types(graph, launch):
        dtype = text.split("[", 1)[0] if text and "[" in text else "?"
        if dtype != "?":  # "?": a view of a buffer whose type the graph does not say
            return dtype
    return None


def _precision(run: CompileRun) -> list[Finding]:
    """Float32 library matmuls (convolutions where cuDNN's TF32 is off) that TF32 or bfloat16 would speed up."""
    bench = run.bench
    if bench is None or bench.device != "cuda" or bench.step is None or not bench.step.total_us:
        return []
    ceilings = bench.ceilings
    if ceilings is None:
        return []
    matmul_tf32 = ceilings.tf32 or ceilings.float32_matmul_precision not in (None, "highest")
    cudnn_tf32 = ceilings.cudnn_tf32 is not False  # None: not recorded, and cuDNN's default is on
    calls: list[tuple[float, GraphRecord, Launch, bool]] = []
    for graph, launch in _timed_externs(run):
        op = op_base(launch)
        if not _MATMUL_OPS.match(op) or _input_dtype(graph, launch) != "f32":
            continue
        convolution = bool(_CONVOLUTION.match(op))
        if (convolution and not cudnn_tf32) or (not convolution and not matmul_tf32):
            assert launch.timing is not None
            calls.append((launch.timing.median_us, graph, launch, convolution))
    total = sum(us for us, *_ in calls)
    device_us = bench.step.total_us
    if not calls or total < PRECISION_SHARE * device_us:
        return []
    convolutions = any(conv for *_, conv in calls)
    what = "float32 matmuls" + (" and convolutions" if convolutions else "")
    placed = [(us, t.roofline.percent) for us, _, launch, _ in calls
              if (t := launch.timing) is not None and t.roofline is not None and t.roofline.percent is not None]  # fmt: skip
    at_roof = ""
    if placed:
        weighted = sum(us * percent for us, percent in placed) / sum(us for us, _ in placed)
        at_roof = (f"; they run at {weighted:.0f}% of the measured float32 roofline (time-weighted; "
                   f"{min(p for _, p in placed):.0f}-{max(p for _, p in placed):.0f}% each)")  # fmt: skip
        if weighted >= 100 * (1 - AUTOTUNE_UNDER / 2):
            at_roof += ": no tuning closes the gap, a faster number format does"
    kernels = list(dict.fromkeys(k for _, _, launch, _ in calls if launch.timing for k in launch.timing.device_kernels
                                 if not k.startswith("Memset")))  # fmt: skip
    off = []
    if not matmul_tf32:
        off.append(f'torch.get_float32_matmul_precision() is "{ceilings.float32_matmul_precision or "highest"}" '
                   "(TF32 off for matmuls)")  # fmt: skip
    if convolutions:
        off.append("torch.backends.cudnn.allow_tf32 is False")
    warned = f'; torch warned in the capture log: "{_TF32_WARNING}"' if _TF32_WARNING in run.log_text else ""
    evidence = (
        f"{total:,.1f} of the {device_us:,.1f} µs of device time per step ({total / device_us:.0%}) is {what} in "
        f"{len(calls)} library calls on the float32 cores ({'; '.join(off)}){at_roof}"
        + (f"; their kernels: {', '.join(k[:90] for k in kernels[:2])}" if kernels else "")
        + warned
    )
    fp32, tf32, bf16 = ceilings.matmul_tflops, ceilings.matmul_tf32_tflops, ceilings.matmul_bf16_tflops
    measured = ceilings.matmul_dtype == "float32" and not ceilings.tf32
    at_stake = total * (1 - fp32 / tf32) if measured and tf32 else None
    bf16_stake = total * (1 - fp32 / bf16) if measured and bf16 else None
    size = f"{ceilings.matmul_size}³ matmuls on this GPU"
    if at_stake is not None and tf32:
        estimate = (f"the {what} time x (1 - float32 / TF32 ceiling) = {total:,.1f} µs x (1 - {fp32:,.1f} / "
                    f"{tf32:,.1f} TFLOP/s), both ceilings measured ({size}): what is left if the calls run at the "
                    "same fraction of the TF32 ceiling as they do of the float32 one")  # fmt: skip
    else:
        estimate = f"not estimated: this capture did not measure the TF32 ceiling (basis: {_TYPICAL_TF32})"
    if bf16_stake is not None and bf16:
        estimate += (f"; bfloat16 autocast: {total:,.1f} µs x (1 - {fp32:,.1f} / {bf16:,.1f} TFLOP/s, the measured "
                     f"bfloat16 ceiling) = {bf16_stake:,.1f} µs, before the casts it adds")  # fmt: skip
    first = "torch.set_float32_matmul_precision(\"high\") before compiling (TF32 tensor cores for float32 matmuls)"
    if convolutions:
        first += " and torch.backends.cudnn.allow_tf32 = True (for the convolutions)"
    second = '; further: torch.autocast("cuda", dtype=torch.bfloat16) around the forward pass'
    if bf16_stake is not None:
        second += f" (about {bf16_stake:,.1f} µs at stake by the bfloat16 ceiling)"
    largest = max(calls, key=lambda call: call[0])
    settings = [SettingChange("TF32 matmuls" + (" and convolutions" if convolutions else ""),
                              matmul_precision="high" if not matmul_tf32 else None,
                              cudnn_allow_tf32=True if convolutions else None, predicted_us=at_stake)]  # fmt: skip
    if not (run.settings is not None and run.settings.autocast):
        settings.append(SettingChange("bfloat16 autocast", autocast="bfloat16", predicted_us=bf16_stake))
    return [
        Finding(
            "precision",
            f"{what.capitalize()} take {total / device_us:.0%} of the device time with TF32 off",
            at_stake,
            estimate,
            evidence,
            launch_url(largest[1], largest[2]),
            first + second,
            "high" if at_stake is not None else "medium",
            caveat=_PRECISION_CAVEAT,
            settings=tuple(settings),
        )
    ]


def _freezing(run: CompileRun) -> list[Finding]:
    """CPU inference with unfrozen weights: library matmuls whose weights Inductor could fold and prepack."""
    bench = run.bench
    if (bench is None or bench.device != "cpu" or bench.step is None or not bench.step.total_us or is_training(run)
            or _on(_options(run), "freezing")):  # fmt: skip
        return []
    calls = [(launch.timing.median_us, graph, launch) for graph, launch in _timed_externs(run)
             if launch.timing is not None and _MATMUL_OPS.match(op_base(launch))]  # fmt: skip
    total, kernels_us = sum(us for us, *_ in calls), bench.step.attributed_us or bench.step.total_us
    if not calls or total < FREEZING_SHARE * kernels_us:
        return []
    _, graph, largest = max(calls, key=lambda call: call[0])
    return [
        Finding(
            "freezing",
            f"Library matmuls take {total / kernels_us:.0%} of the time in kernels, with the weights not frozen",
            None,
            "not estimated: what folding and prepacking the weights saves depends on the shapes and the CPU's oneDNN "
            "kernels; trying it measures it (inductor-lens try REPORT)",
            f"{total:,.1f} of the {kernels_us:,.1f} µs in kernels per step is {len(calls)} library matmul call(s) "
            f"({', '.join(sorted({op_base(launch) for _, _, launch in calls}))}) on weights passed as inputs; this is "
            "inference (no --train) and the run did not set freezing",
            launch_url(graph, largest),
            'torch.compile(model, options={"freezing": True}) for inference: the parameters become constants, '
            "folded into the graph and prepacked for oneDNN's matmul kernels",
            "medium",
            caveat="the weights are baked into the compiled graph: changing them after the compile (training, loading "
            "another checkpoint) is not seen; the compile takes longer and holds a second copy while it folds",
            settings=(SettingChange("freezing", options={"freezing": True}),),
        )
    ]


def _under_roofline(run: CompileRun) -> list[Finding]:
    slow = []
    for graph, kernel in run.all_kernels():
        timing = kernel.timing
        roofline = timing.roofline if timing else None
        if timing is None or roofline is None or roofline.percent is None or not timing.launches:
            continue
        if roofline.seconds >= TINY_KERNEL_S and roofline.percent < 100 * FAR_FROM_ROOF:
            above = timing.in_context_us * (1 - roofline.percent / 100)
            slow.append((above, graph, kernel.name, roofline.percent, roofline.bound))
    if not slow:
        return []
    slow.sort(key=lambda item: -item[0])
    named = ", ".join(f"{name} at {percent:.0f}%" for _, _, name, percent, _ in slow[:3])
    memory = sum(1 for *_, bound in slow if bound == "memory")
    tuning = _tuning_change(run)
    above = sum(item[0] for item in slow)
    change = tuning[0] if tuning else (
        "tuning is already on (coordinate descent and autotuning): open the kernel's page; a memory-bound kernel "
        "this far under the copy bandwidth usually reads strided or gathered data (a transpose, cat or index), "
        "which no block size fixes: give its inputs a contiguous layout, or keep the op fused into its consumer"
    )
    return [
        Finding(
            "roofline",
            f"{len(slow)} kernel(s) far under the roofline (under {FAR_FROM_ROOF:.0%} of it)",
            above,
            "their in-context time per step minus what the roofline allows: an upper bound, rarely all recoverable",
            f"launches of {TINY_KERNEL_S * 1e6:.0f} µs or more at under {FAR_FROM_ROOF:.0%} of this device's measured "
            f"roofline: {named}"
            + (f"; {memory} of them memory-bound (under the measured copy bandwidth)" if memory else ""),
            kernel_url(slow[0][1], slow[0][2]),
            change,
            "low",
            settings=(replace(tuning[1], predicted_us=above),) if tuning else (),
        )
    ]


def _autotune(run: CompileRun) -> list[Finding]:
    findings = []
    close = []
    for table in run.autotune:
        ranked = sorted(table.choices, key=lambda c: c.ms)
        if len(ranked) >= 2 and ranked[0].ms > 0 and (ranked[1].ms - ranked[0].ms) / ranked[0].ms <= CLOSE_CALL:
            close.append(f"{table.op} ({ranked[0].name} {ranked[0].ms:.4f} ms vs {ranked[1].name} {ranked[1].ms:.4f} ms)")
    if close:
        findings.append(
            Finding(
                "autotune",
                f"{len(close)} autotune pick(s) within {CLOSE_CALL:.0%} of the runner-up",
                None,
                "close calls: another run may pick the other choice, for about the same time",
                "; ".join(close[:4]),
                "compile.html#autotune",
                f"{NOT_FOR_SPEED}; to make runs repeatable, pin the choice "
                '(options={"max_autotune_gemm_backends": "ATEN"} keeps cuBLAS)',
                "low",
            )
        )
    findings += _untuned_matmuls(run)
    return findings


def _untuned_matmuls(run: CompileRun) -> list[Finding]:
    """Library matmuls measurably under their roofline in a run that did not autotune: the time above the roof."""
    bench = run.bench
    if bench is None or bench.device != "cuda" or autotunes(run):
        return []
    under = []
    for graph, launch in _timed_externs(run):
        timing = launch.timing
        roofline = timing.roofline if timing is not None else None
        if timing is None or roofline is None or roofline.percent is None or not _MATMUL_OPS.match(op_base(launch)):
            continue
        if roofline.seconds >= TINY_KERNEL_S and roofline.percent < 100 * AUTOTUNE_UNDER:
            under.append((timing.median_us * (1 - roofline.percent / 100), graph, launch, roofline.percent))
    if not under:
        return []
    under.sort(key=lambda item: -item[0])
    named = ", ".join(f"{launch.label} #{launch.position} at {percent:.0f}%" for _, _, launch, percent in under[:3])
    mode = suggested_mode(run, autotune=True)
    at_stake = sum(item[0] for item in under)
    return [
        Finding(
            "autotune",
            f"{len(under)} library matmul(s) under {AUTOTUNE_UNDER:.0%} of the roofline, not autotuned",
            at_stake,
            "their in-context time per step minus what the roofline allows: what a better kernel could save at most",
            f"library matmul calls of {TINY_KERNEL_S * 1e6:.0f} µs or more at under {AUTOTUNE_UNDER:.0%} of this "
            f"device's measured roofline: {named}; the run did not autotune",
            launch_url(under[0][1], under[0][2]),
            f"{_mode_change(mode)}: benchmarks Triton matmul templates against the library's kernel at compile "
            "time and keeps the faster",
            "medium",
            caveat="longer compiles: every matmul shape is benchmarked once (minutes on a large model)",
            settings=(SettingChange(f"autotuning (mode {mode})", mode=mode, predicted_us=at_stake),),
        )
    ]


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
