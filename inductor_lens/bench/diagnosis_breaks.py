"""Stage 4 of the pipeline (bench), read back: the diagnosis's findings on graph breaks and recompiles, one per
root cause, and (CPU) the time outside the compiled graphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..records import CompileRun, DynamoFrame, GraphBreak
from ..records.answers import Finding
from ..records.pages import frame_anchor
from ..records.trials import SettingChange
from .bound import is_training
from .diagnosis_thresholds import OVERHEAD_SHARE

_SIZE_MISMATCH = re.compile(r"tensor '(?P<name>[^']+)' size mismatch at index (?P<dim>\d+)")
_TENSOR_NAME = re.compile(r"tensor '[^']+'")
_COMPILE_ID_PREFIX = re.compile(r"^\d+/\d+: ")  # torch names the frame whose guard failed: "0/0: ..."
_HINT = re.compile(r"^\s*Hint:\s*(?P<hint>.+)$", re.MULTILINE)
_USELESS_HINT = re.compile(r"report an issue|file an issue|open an issue", re.IGNORECASE)


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


def graph_breaks(run: CompileRun, compiled_us: float | None) -> list[Finding]:
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


def recompiles(run: CompileRun) -> list[Finding]:
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
