"""Stage 4 of the pipeline (bench), read back: the diagnosis's findings on the kernels and library calls: ATen
fallbacks, custom ops, float32 precision, freezing (CPU inference), kernels far under the roofline, autotuning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from ..parse import compat
from ..records import CompileRun, DeviceCeilings, GraphRecord, Launch
from ..records.answers import Finding
from ..records.pages import kernel_url, launch_url
from ..records.trials import SettingChange
from .bound import is_training
from .diagnosis_settings import autotunes, inductor_options, is_on, mode_change, suggested_mode, tuning_change
from .diagnosis_thresholds import AUTOTUNE_UNDER, CLOSE_CALL, FREEZING_SHARE, NOT_FOR_SPEED, PRECISION_SHARE
from .operations import call_site
from .roofline import FAR_FROM_ROOF, TINY_KERNEL_S, launch_input_types, op_base

# Extern calls into libraries Inductor does not aim to generate: not fallbacks.
_LIBRARY_OPS = re.compile(
    r"^(?:_?mm|addmm|bmm|baddbmm|bias_addmm|_mm_plus_mm|_int_mm|_scaled_mm|linear|_mkl_linear|_?convolution(?:_backward)?"
    r"|cudnn_\w+|mkldnn_\w+|onednn\w*|_scaled_dot_product\w*|_efficient_attention\w*|_flash_attention\w*"
    r"|_cudnn\w*)$"
)
_MATMUL_OPS = re.compile(r"^(?:_?mm|addmm|bmm|baddbmm|bias_addmm|_int_mm|_scaled_mm|_?convolution(?:_backward)?)$")
_CONVOLUTION = re.compile(r"^_?convolution(?:_backward)?$")
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


def _op_name(launch: Launch) -> str:
    """What a fallback is called: ATen's by its name (``index_put``), another namespace's as ``mkl::_mkl_linear``."""
    found = compat.op_namespace(launch.target)
    return f"{found[0]}::{found[1]}" if found is not None and found[0] != "aten" else op_base(launch)


def fallbacks(run: CompileRun) -> list[Finding]:
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


def custom_ops(run: CompileRun) -> list[Finding]:
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


# a float32 library call on the float32 cores: its time in context, its graph and launch, whether a convolution
_Float32Call = tuple[float, GraphRecord, Launch, bool]


def precision(run: CompileRun) -> list[Finding]:
    """Float32 library matmuls (convolutions where cuDNN's TF32 is off) that TF32 or bfloat16 would speed up."""
    bench = run.bench
    if bench is None or bench.device != "cuda" or bench.step is None or not bench.step.total_us:
        return []
    ceilings = bench.ceilings
    if ceilings is None:
        return []
    matmul_tf32 = ceilings.tf32 or ceilings.float32_matmul_precision not in (None, "highest")
    cudnn_tf32 = ceilings.cudnn_tf32 is not False  # None: not recorded, and cuDNN's default is on
    calls = _float32_library_calls(run, matmul_tf32, cudnn_tf32)
    total = sum(us for us, *_ in calls)
    device_us = bench.step.total_us
    if not calls or total < PRECISION_SHARE * device_us:
        return []
    convolutions = any(conv for *_, conv in calls)
    what = "float32 matmuls" + (" and convolutions" if convolutions else "")
    evidence = _precision_evidence(run, calls, ceilings, matmul_tf32, what, device_us)
    at_stake, bf16_stake, estimate = _precision_estimate(ceilings, what, total)
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


def _float32_library_calls(run: CompileRun, matmul_tf32: bool, cudnn_tf32: bool) -> list[_Float32Call]:
    """The timed library matmuls and convolutions on float32 inputs that TF32 is off for."""
    calls: list[_Float32Call] = []
    for graph, launch in _timed_externs(run):
        op = op_base(launch)
        if not _MATMUL_OPS.match(op) or _input_dtype(graph, launch) != "f32":
            continue
        convolution = bool(_CONVOLUTION.match(op))
        if (convolution and not cudnn_tf32) or (not convolution and not matmul_tf32):
            assert launch.timing is not None
            calls.append((launch.timing.median_us, graph, launch, convolution))
    return calls


def _precision_evidence(
    run: CompileRun, calls: list[_Float32Call], ceilings: DeviceCeilings, matmul_tf32: bool, what: str, device_us: float
) -> str:
    """Their share of the device time, where they sit under the float32 roofline, why TF32 is off, their kernels."""
    total = sum(us for us, *_ in calls)
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
    if any(conv for *_, conv in calls):
        off.append("torch.backends.cudnn.allow_tf32 is False")
    warned = f'; torch warned in the capture log: "{_TF32_WARNING}"' if _TF32_WARNING in run.log_text else ""
    return (
        f"{total:,.1f} of the {device_us:,.1f} µs of device time per step ({total / device_us:.0%}) is {what} in "
        f"{len(calls)} library calls on the float32 cores ({'; '.join(off)}){at_roof}"
        + (f"; their kernels: {', '.join(k[:90] for k in kernels[:2])}" if kernels else "")
        + warned
    )


def _precision_estimate(ceilings: DeviceCeilings, what: str, total: float) -> tuple[float | None, float | None, str]:
    """The time at stake with TF32 and with bfloat16, by the measured ceilings (None where not measured), in words."""
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
    return at_stake, bf16_stake, estimate


def freezing(run: CompileRun) -> list[Finding]:
    """CPU inference with unfrozen weights: library matmuls whose weights Inductor could fold and prepack."""
    bench = run.bench
    if (bench is None or bench.device != "cpu" or bench.step is None or not bench.step.total_us or is_training(run)
            or is_on(inductor_options(run), "freezing")):  # fmt: skip
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


def under_roofline(run: CompileRun) -> list[Finding]:
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
    tuning = tuning_change(run)
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


def autotune(run: CompileRun) -> list[Finding]:
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
            f"{mode_change(mode)}: benchmarks Triton matmul templates against the library's kernel at compile "
            "time and keeps the faster",
            "medium",
            caveat="longer compiles: every matmul shape is benchmarked once (minutes on a large model)",
            settings=(SettingChange(f"autotuning (mode {mode})", mode=mode, predicted_us=at_stake),),
        )
    ]
