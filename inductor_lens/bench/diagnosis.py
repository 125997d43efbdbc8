"""Stage 4 of the pipeline (bench), read back: why is the compiled step slower (or not faster) than eager,
and what to try.

``diagnose(run) -> Diagnosis`` reads the records only (a saved lens.json re-renders with it; the
comparison pages can call it on each of their runs). Each ``Finding`` has a title, the time at stake
per step in µs (None where the records cannot put a time on it) with how it was estimated, its
evidence (numbers, and a link into the report's pages) and the one change to try. Findings are ranked
by time at stake. The rules:

- host-bound (GPU): the compiled step (``do_bench`` median) minus the GPU's busy time per profiled step
  is the time the GPU waited for the CPU; when it is at least ``HOST_BOUND`` of the step, launches x
  per-launch overhead is the cost, and the change is CUDA graphs (``mode="reduce-overhead"``), or,
  where they were on and skipped, removing what Inductor named as the reason;
- Python around the kernels (CPU): time inside compiled graphs not inside a kernel (``call()``'s
  Python: buffer allocation, launches), when at least ``OVERHEAD_SHARE`` of the step: ``cpp_wrapper``;
- outside the compiled graphs (CPU): the compiled step minus the time inside compiled graphs
  (Dynamo's guards, eager code between graphs), split over the graph breaks when there are any;
- each graph break: its reason and user line, and the fix torch's hint or the reason suggests;
- each recompile: its reason, and ``torch._dynamo.mark_dynamic`` on the dimension that changed;
- ATen fallbacks: extern calls that are not library matmuls, convolutions or attention;
- custom ops (``torch.library``, a namespace torch does not own): the user's or a library's own op, which
  runs outside Inductor's kernels as it is (never called a fallback);
- kernels far under the roofline (``roofline.FAR_FROM_ROOF``, launches of 5 µs or more): the time above
  what the roofline allows;
- autotuning: picks within ``CLOSE_CALL`` of the runner-up, and matmuls or convolutions that take
  ``UNTUNED_SHARE`` of the device time without max-autotune.

A step whose measurements are unstable (``stability.judge``) is still diagnosed on CPU for what needs
no time (breaks, recompiles), but ``noisy`` says its times should not be read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..parse import compat
from ..records import CompileRun, DynamoFrame, GraphBreak, GraphRecord, Launch
from .roofline import FAR_FROM_ROOF, TINY_KERNEL_S
from .stability import Stability, judge

HOST_BOUND = 0.3  # share of the compiled step the GPU idles
OVERHEAD_SHARE = 0.1  # share of the compiled step spent in Python around kernels / outside graphs
CLOSE_CALL = 0.02  # autotune winner within 2% of the runner-up
UNTUNED_SHARE = 0.3
# Extern calls into libraries Inductor does not aim to generate: not fallbacks.
_LIBRARY_OPS = re.compile(
    r"^(?:_?mm|addmm|bmm|baddbmm|bias_addmm|_mm_plus_mm|_int_mm|_scaled_mm|linear|_mkl_linear|_?convolution(?:_backward)?"
    r"|cudnn_\w+|mkldnn_\w+|onednn\w*|_scaled_dot_product\w*|_efficient_attention\w*|_flash_attention\w*"
    r"|_cudnn\w*)$"
)
_MATMUL_OPS = re.compile(r"^(?:_?mm|addmm|bmm|baddbmm|bias_addmm|_int_mm|_scaled_mm|_?convolution(?:_backward)?)$")
_SIZE_MISMATCH = re.compile(r"tensor '(?P<name>[^']+)' size mismatch at index (?P<dim>\d+)")
_COMPILE_ID_PREFIX = re.compile(r"^\d+/\d+: ")  # torch names the frame whose guard failed: "0/0: ..."
_HINT = re.compile(r"^\s*Hint:\s*(?P<hint>.+)$", re.MULTILINE)

Confidence = Literal["high", "medium", "low"]


@dataclass(frozen=True)
class Finding:
    kind: str  # "host-bound", "cuda graphs", "python overhead", "outside graphs", "graph break", ...
    title: str
    at_stake_us: float | None  # per step; None where the records cannot put a time on it
    estimate: str  # how the time at stake was estimated (or why there is none)
    evidence: str  # the facts behind it, with their numbers
    evidence_url: str  # into the report, relative to its root ("compile.html#breaks")
    change: str  # the one change to try
    confidence: Confidence


@dataclass(frozen=True)
class Diagnosis:
    device: str | None
    eager_us: float | None
    compiled_us: float | None
    headline: str
    findings: tuple[Finding, ...]  # ranked by time at stake, untimed ones last
    stability: Stability
    noisy: bool = False  # the times are too noisy to be read (CPU, unstable)

    @property
    def timed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.at_stake_us is not None)


def diagnose(run: CompileRun) -> Diagnosis:
    stability = judge(run)
    bench = run.bench
    e2e = bench.end_to_end if bench is not None and not bench.error else None
    eager_us = e2e.eager.median_ms * 1e3 if e2e else None
    compiled_us = e2e.compiled.median_ms * 1e3 if e2e else None
    device = bench.device if bench is not None else run.environment.device_type
    findings: list[Finding] = []
    if bench is not None and not bench.error and bench.step is not None and compiled_us:
        if bench.device == "cuda":
            findings += _host_bound(run, compiled_us)
        else:
            findings += _python_overhead(run, compiled_us)
    findings += _graph_breaks(run, compiled_us)
    findings += _recompiles(run)
    findings += _fallbacks(run)
    findings += _custom_ops(run)
    findings += _under_roofline(run)
    findings += _autotune(run)
    findings.sort(key=lambda f: (f.at_stake_us is None, -(f.at_stake_us or 0.0)))
    noisy = device != "cuda" and stability.judged and not stability.stable
    return Diagnosis(device, eager_us, compiled_us, _headline(e2e is not None, eager_us, compiled_us, stability),
                     tuple(findings), stability, noisy)  # fmt: skip


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


def _launch_count(run: CompileRun) -> tuple[int, float]:
    """Launches per profiled step (top-level launches of the compiled graphs) and the device kernels they ran."""
    timed = [launch.timing for g in run.graphs for launch in g.launches if launch.timing is not None]
    return len(timed), sum(t.calls for t in timed)


def _host_bound(run: CompileRun, compiled_us: float) -> list[Finding]:
    bench = run.bench
    assert bench is not None and bench.step is not None and bench.end_to_end is not None
    step = bench.step
    if step.busy_us is None:
        return []
    idle = compiled_us - step.busy_us
    if idle < HOST_BOUND * compiled_us:
        return []
    launches, kernels = _launch_count(run)
    per_launch = f"; {launches} launches ({kernels:.0f} GPU kernels) per step: {idle / launches:,.1f} µs of overhead per launch" if launches else ""
    evidence = (
        f"the GPU ran kernels {step.busy_us:,.1f} µs of the {compiled_us:,.1f} µs compiled step "
        f"({step.busy_us / compiled_us:.0%}); it waited {idle:,.1f} µs for the CPU to launch work{per_launch}"
    )
    estimate = ("compiled step (median) minus the GPU's busy time per profiled step: the launch overhead "
                "CUDA graphs remove at most")  # fmt: skip
    cudagraphs = bench.end_to_end.cudagraphs
    confidence: Confidence = "high" if idle >= 0.5 * compiled_us else "medium"
    if cudagraphs is None:
        return [Finding("host-bound", "Host-bound: launch overhead, the GPU waits for the CPU", idle, estimate,
                        evidence, "index.html#timing",
                        'CUDA graphs: torch.compile(model, mode="reduce-overhead") replays the step\'s launches '
                        "as one graph (or options={\"triton.cudagraphs\": True})", confidence)]  # fmt: skip
    if cudagraphs.startswith("skipped"):
        reason = cudagraphs.partition(": ")[2] or "no reason recorded"
        return [Finding("cuda graphs", f"CUDA graphs were skipped ({reason}): the step stays host-bound", idle,
                        estimate, f"{evidence}; Inductor skipped CUDA graphs: {reason}", "compile.html#frames",
                        _cudagraph_fix(reason), confidence)]  # fmt: skip
    use = bench.cudagraphs
    if use is not None and use.rerecords:
        evidence += f"; cudagraph trees re-recorded {use.rerecords} time(s) (recorded {use.graphs_recorded})"
    if use is not None and use.without_graphs is not None and use.with_graphs is not None:
        evidence += (f"; the same compiled code called without the graphs takes {use.without_graphs.median_ms:.3f} ms "
                     f"against {use.with_graphs.median_ms:.3f} ms with them")  # fmt: skip
    return [Finding("cuda graphs", "Host-bound although CUDA graphs were used", idle, estimate,
                    f"{evidence}; the graph replays leave the GPU idle: work outside the graphs, or graphs "
                    "re-recorded for new shapes or inputs", "index.html#timing",
                    "look for re-recording (TORCH_LOGS=cudagraphs) and mark changing sizes with "
                    "torch._dynamo.mark_dynamic, or move eager work between graphs into the compiled function",
                    "low")]  # fmt: skip


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
    if gap < OVERHEAD_SHARE * compiled_us:
        return []
    launches, _ = _launch_count(run)
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
        )
    ]


def _outside_graphs_us(run: CompileRun, compiled_us: float | None) -> float | None:
    """CPU: the compiled step minus the time inside compiled graphs (guards, eager code between graphs)."""
    bench = run.bench
    if compiled_us is None or bench is None or bench.step is None or bench.device == "cuda":
        return None
    return max(0.0, compiled_us - bench.step.total_us)


def _graph_breaks(run: CompileRun, compiled_us: float | None) -> list[Finding]:
    outside = _outside_graphs_us(run, compiled_us)
    breaks: dict[tuple[str, str], GraphBreak] = {}
    for item in run.graph_breaks:
        where = f"{item.location.filename}:{item.location.line}" if item.location else item.compile_id
        breaks.setdefault((item.reason, where), item)
    if not breaks:
        if outside is not None and compiled_us and outside >= OVERHEAD_SHARE * compiled_us:
            return [Finding("outside graphs", "Outside the compiled graph: Dynamo's guards and Python", outside,
                            "compiled step minus the time inside compiled graphs per profiled step (medians)",
                            f"{outside:,.1f} µs of the {compiled_us:,.1f} µs compiled step ran outside the "
                            f"{len(run.graphs)} compiled graph(s)", "compile.html#frames",
                            "compile more of the step (the loss, the optimizer step) in the same torch.compile'd "
                            "function, so fewer calls cross into and out of compiled code", "low")]  # fmt: skip
        return []
    share = outside / len(breaks) if outside is not None else None
    estimate = (
        f"compiled step minus the time inside compiled graphs per profiled step ({outside:,.1f} µs: Dynamo's "
        f"guards and the eager code between the {len(run.graphs)} graphs)"
        + (f", split evenly over {len(breaks)} breaks" if len(breaks) > 1 else "")
        if outside is not None
        else "not timed: the records do not hold the time between compiled graphs on this device"
    )
    findings = []
    for (reason, where), item in breaks.items():
        short = where.rsplit("/", 1)[-1]
        code = f" `{item.location.code}`" if item.location and item.location.code else ""
        function = f" in {item.location.function}()" if item.location and item.location.function else ""
        findings.append(
            Finding(
                "graph break",
                f"Graph break at {short}{function}: {_first_line(reason)}",
                share,
                estimate,
                f"Dynamo stopped tracing at {where}{code}: {reason}; the code from there to the next "
                f"compiled frame runs eager, and each graph pays its guards",
                "compile.html#breaks",
                _break_fix(item),
                "high" if item.location else "medium",
            )
        )
    return findings


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no reason recorded"
    line = line.split(" (Encountered graph break", 1)[0]
    return line if len(line) <= 140 else line[:137] + "..."


def _break_fix(item: GraphBreak) -> str:
    hint = _HINT.search(item.detail)
    if hint:
        return hint["hint"].strip()
    reason = item.reason.lower()
    if ".item()" in reason or "capture_scalar_outputs" in reason:
        return "torch._dynamo.config.capture_scalar_outputs = True, or keep the value a tensor (torch.where)"
    if "data-dependent" in reason or "jump" in reason or "generic_jump" in reason:
        return "replace the Python branch on a tensor's value with torch.where (or torch.cond)"
    if "print" in reason or "logging" in reason:
        return "remove the print or logging call from the compiled function"
    if "nonzero" in reason or "dynamic shape" in reason:
        return "torch._dynamo.config.capture_dynamic_output_shape_ops = True, or avoid the data-dependent shape"
    return "rewrite the line so Dynamo can trace it, or move it out of the compiled function"


def _recompiles(run: CompileRun) -> list[Finding]:
    from ..report.views import frame_anchor  # the report's anchors: one definition

    findings = []
    for frame in run.recompiles:
        reason = _COMPILE_ID_PREFIX.sub("", frame.recompile_reasons[0])
        findings.append(
            Finding(
                "recompile",
                f"Recompiled [{frame.compile_id}]: {_first_line(reason)}",
                None,
                "compile time, not step time"
                + (f" ({frame.compile_time_s:.1f} s for this frame)" if frame.compile_time_s else "")
                + ", unless the inputs keep changing",
                f"Dynamo compiled {_where(frame)} again because a guard failed: {'; '.join(frame.recompile_reasons)}",
                f"compile.html#{frame_anchor(frame.compile_id)}",
                _recompile_fix(reason),
                "medium",
            )
        )
    return findings


def _where(frame: DynamoFrame) -> str:
    return f"{frame.function}()" if frame.function else f"frame [{frame.compile_id}]"


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


def _op_base(launch: Launch) -> str:
    """The op's name without namespace or overload (``mm``, ``_mkl_linear``): never cut to its namespace."""
    found = compat.op_namespace(launch.target)
    if found is not None:
        return found[1]
    op = launch.aten_op or launch.target
    return op.removeprefix("aten.").split(".")[0]


def _op_name(launch: Launch) -> str:
    """What a fallback is called: ATen's by its name (``index_put``), another namespace's as ``mkl::_mkl_linear``."""
    found = compat.op_namespace(launch.target)
    return f"{found[0]}::{found[1]}" if found is not None and found[0] != "aten" else _op_base(launch)


def _fallbacks(run: CompileRun) -> list[Finding]:
    from ..report.views import launch_url

    found: list[tuple[GraphRecord, Launch]] = [
        (graph, launch)
        for graph in run.graphs
        for launch in graph.launches
        if launch.kind == "extern"
        and compat.custom_op(launch.target) is None
        and not _LIBRARY_OPS.match(_op_base(launch))
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
        )
    ]


def _custom_ops(run: CompileRun) -> list[Finding]:
    """Calls of custom ops (``torch.library``): the user's or a library's own code, opaque to Inductor."""
    from ..report.views import launch_url

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
        )
    ]


def _under_roofline(run: CompileRun) -> list[Finding]:
    from ..report.views import kernel_url

    slow = []
    for graph, kernel in run.all_kernels():
        timing = kernel.timing
        roofline = timing.roofline if timing else None
        if timing is None or roofline is None or roofline.percent is None or not timing.launches:
            continue
        if roofline.seconds >= TINY_KERNEL_S and roofline.percent < 100 * FAR_FROM_ROOF:
            above = timing.in_context_us * (1 - roofline.percent / 100)
            slow.append((above, graph, kernel.name, roofline.percent))
    if not slow:
        return []
    slow.sort(key=lambda item: -item[0])
    named = ", ".join(f"{name} at {percent:.0f}%" for _, _, name, percent in slow[:3])
    return [
        Finding(
            "roofline",
            f"{len(slow)} kernel(s) far under the roofline (under {FAR_FROM_ROOF:.0%} of it)",
            sum(item[0] for item in slow),
            "their in-context time per step minus what the roofline allows: an upper bound, rarely all recoverable",
            f"launches of {TINY_KERNEL_S * 1e6:.0f} µs or more at under {FAR_FROM_ROOF:.0%} of this device's measured "
            f"roofline: {named}",
            kernel_url(slow[0][1], slow[0][2]),
            'torch.compile(model, options={"coordinate_descent_tuning": True}) to tune each kernel\'s block sizes, '
            'or mode="max-autotune-no-cudagraphs"',
            "low",
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
                "nothing to change for speed; to make runs repeatable, pin the choice "
                '(options={"max_autotune_gemm_backends": "ATEN"} keeps cuBLAS)',
                "low",
            )
        )
    settings, bench = run.settings, run.bench
    step = bench.step if bench is not None else None
    if run.autotune or step is None or not step.total_us or bench is None or bench.device != "cuda":
        return findings
    options = {**(settings.mode_options if settings else {}), **(settings.options if settings else {})}
    if options.get("max_autotune") or options.get("max_autotune_gemm"):
        return findings
    matmul_us = sum(
        launch.timing.median_us
        for g in run.graphs
        for launch in g.launches
        if launch.timing is not None and launch.kind == "extern" and _MATMUL_OPS.match(_op_base(launch))
    )
    if matmul_us >= UNTUNED_SHARE * step.total_us:
        findings.append(
            Finding(
                "autotune",
                f"Matmuls and convolutions take {matmul_us / step.total_us:.0%} of the device time, not autotuned",
                None,
                "not estimated: autotuning may find a faster kernel (or fuse an epilogue), or keep the library's",
                f"{matmul_us:,.1f} of {step.total_us:,.1f} µs of device time per step in library matmuls and "
                "convolutions, with no AUTOTUNE table in the log",
                "index.html#kernels",
                'mode="max-autotune-no-cudagraphs" (benchmarks Triton templates against the library at compile time)',
                "low",
            )
        )
    return findings
