"""Parse stage: Dynamo frames and graph breaks, built from what the trace recorded per compile id.

Compile time comes from the ``compilation_metrics`` record of each frame. Its fields nest (the whole
frame > the backend > Inductor > code generation, which holds the scheduler: fusion runs in it), and autotuning and kernel compilation happen
inside Inductor's time, so the phases are: four slices that add up to the frame's time, plus
"within" items that are part of those slices, and the backward graph, which compiles later, at the
first ``.backward()``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ..records import CompilePhase, DynamoFrame, GraphBreak, SourceLine
from . import compat
from .graph_break_registry import registry_entry
from .source_lines import from_traceback, is_tool_file, is_user_file, user_frames
from .trace import FrameTrace

_BREAK_LOCATION = re.compile(r"^Graph break in user code at (?P<file>.+):(?P<line>\d+)\s*$", re.M)
_BREAK_REASON = re.compile(r"^Graph Break Reason:\s*(?P<reason>.*)$", re.M)
GUARDS_LINE_LIMIT = 400


def fold_restarts(frames: dict[str, FrameTrace]) -> list[FrameTrace]:
    """One Python frame whose first attempt restarted (``0/0``, then ``0/0_1`` after a graph break) is
    shown once: each stub attempt, which has no compilation metrics, is folded into the final one, which
    lists the attempts folded into it (``restarted``)."""
    folded = {key: trace for key, trace in frames.items()}
    for key, trace in sorted(frames.items(), key=lambda item: -_attempt(item[0])):
        if trace.metrics:
            continue
        base = _without_attempt(key)
        later = sorted(
            (k for k in frames if _without_attempt(k) == base and _attempt(k) > _attempt(key)), key=_attempt
        )
        if not later:
            continue
        target = folded[later[-1]]
        target.restarted[:0] = [key]
        target.cache_lookups[:0] = trace.cache_lookups
        target.graph_breaks[:0] = trace.graph_breaks
        target.recompile_reasons[:0] = trace.recompile_reasons
        target.stages[:0] = trace.stages
        target.stack = target.stack or trace.stack
        # The restarted attempt traces again and creates its symbols and guards anew.
        target.symbols = target.symbols or trace.symbols
        target.specializations = target.specializations or trace.specializations
        target.shape_guards = target.shape_guards or trace.shape_guards
        target.cudagraph_recordings += trace.cudagraph_recordings
        target.cudagraph_record_us += trace.cudagraph_record_us
        del folded[key]
    return [folded[key] for key in sorted(folded, key=compile_id_order)]


def compile_id_order(compile_id: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.split(r"[/_]", compile_id.replace("!", "")) if p.isdecimal())


def _attempt(compile_id: str) -> int:
    _, _, attempt = compile_id.rpartition("_")
    return int(attempt) if attempt.isdecimal() else 0


def _without_attempt(compile_id: str) -> str:
    head, _, attempt = compile_id.rpartition("_")
    return head if head and attempt.isdecimal() else compile_id


def own_graph_breaks(traces: list[FrameTrace]) -> dict[str, int | None]:
    """The graph breaks of each compile itself. ``num_graph_breaks`` in compilation_metrics is torch's
    process-wide running count (a resume frame that never broke shows the breaks before it), so a compile's
    own are its ``dynamo_graph_break_reason`` records; a trace without any of them, though the count grew,
    gets the count's growth since the compile before it."""
    if any(t.graph_breaks for t in traces):
        return {t.compile_id: len(t.graph_breaks) if t.metrics or t.graph_breaks else None for t in traces}
    counts: dict[str, int | None] = {t.compile_id: None for t in traces}
    previous = 0
    for trace in sorted((t for t in traces if t.metrics), key=lambda t: _number(t.metrics.get("start_time"))):
        running = trace.metrics.get("num_graph_breaks")
        if isinstance(running, int):
            counts[trace.compile_id] = max(running - previous, 0)
            previous = max(previous, running)
    return counts


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def dynamo_frame(trace: FrameTrace, graph_breaks: int | None = None) -> DynamoFrame:
    metrics = trace.metrics
    guards = trace.guards
    lines = guards.splitlines()
    if len(lines) > GUARDS_LINE_LIMIT:
        guards = "\n".join(lines[:GUARDS_LINE_LIMIT]) + f"\n[... {len(lines) - GUARDS_LINE_LIMIT} more lines]"
    recompile = list(trace.recompile_reasons)
    if (
        not recompile
        and isinstance(metrics.get("recompile_reason"), str)
        and metrics["recompile_reason"].strip()
    ):
        recompile = [metrics["recompile_reason"].strip()]
    return DynamoFrame(
        compile_id=trace.compile_id,
        function=metrics.get("co_name"),
        filename=metrics.get("co_filename"),
        line=metrics.get("co_firstlineno"),
        compile_time_s=metrics.get("entire_frame_compile_time_s"),
        graph_breaks=graph_breaks,
        fail_reason=metrics.get("fail_reason"),
        call_site=_call_site(trace.stack),
        phases=compile_phases(metrics, trace.backward_metrics),
        guard_count=metrics.get("guard_count"),
        guards=guards,
        recompile_reasons=tuple(recompile),
        restart_reasons=tuple(str(r) for r in metrics.get("restart_reasons") or ()),
        cache=_cache_state(metrics),
        cudagraph_skip_reason=metrics.get("cudagraph_skip_reason")
        if isinstance(metrics.get("cudagraph_skip_reason"), str)
        else None,
        symbols=tuple(trace.symbols),
        specializations=tuple(trace.specializations),
        shape_guards=tuple(trace.shape_guards),
        cudagraph_recordings=trace.cudagraph_recordings or None,
        cudagraph_record_s=trace.cudagraph_record_us / 1e6 if trace.cudagraph_recordings else None,
        stages=tuple(trace.stages),
        stack=tuple(trace.stack),
        fail_type=metrics.get("fail_type"),
        fail_user_frame=_fail_user_frame(metrics),
        restarted=tuple(trace.restarted),
        graph_op_count=metrics.get("graph_op_count"),
        graph_node_count=metrics.get("graph_node_count"),
        graph_input_count=metrics.get("graph_input_count"),
        cache_size=metrics.get("cache_size"),
        accumulated_cache_size=metrics.get("accumulated_cache_size"),
        non_compliant_ops=tuple(str(op) for op in metrics.get("non_compliant_ops") or ()),
        compliant_custom_ops=tuple(str(op) for op in metrics.get("compliant_custom_ops") or ()),
        cache_lookups=tuple(trace.cache_lookups),
    )


def own_frame(frame: DynamoFrame, model_built: tuple[SourceLine, ...] = ()) -> DynamoFrame:
    """The frame as the model's author knows it. Torch's wrap_inline frame (``compat.WRAP_INLINE_FRAME``)
    compiles a module whose forward is torch's own code (nn.Sequential): it is named by the model's type, at
    the line where get_model() built it where the capture recorded one (``CaptureOutcome.model_built``), else
    ``nn.Module`` with no file, never as a file of torch's; torch's frame stays in ``stack``."""
    if not compat.is_wrap_inline_frame(frame.filename, frame.function):
        return frame
    if model_built:
        model = model_built[0]
        return replace(frame, function=model.function, filename=model.filename, line=model.line)
    return replace(frame, function="nn.Module", filename=None, line=None)


def _fail_user_frame(metrics: dict[str, Any]) -> SourceLine | None:
    """The user line a failed compile raised at, where torch named one (a Dynamo error; Inductor's have none)."""
    filename, line = metrics.get("fail_user_frame_filename"), metrics.get("fail_user_frame_lineno")
    return SourceLine(filename, line) if filename and isinstance(line, int) else None


def _call_site(stack: list[SourceLine]) -> SourceLine | None:
    """The last line of user code that led to the compiled frame (the frame itself excluded)."""
    callers = [f for f in stack[:-1] if is_user_file(f.filename) and f.code]
    return callers[-1] if callers else None


def _cache_state(metrics: dict[str, Any]) -> str | None:
    hits, misses = (
        metrics.get("inductor_fx_local_cache_hit_count"),
        metrics.get("inductor_fx_local_cache_miss_count"),
    )
    if not isinstance(hits, int) or not isinstance(misses, int):
        return None
    return f"FX graph cache: {hits} hit(s), {misses} miss(es)"


def compile_phases(metrics: dict[str, Any], backward: list[dict[str, Any]]) -> tuple[CompilePhase, ...]:
    entire = _seconds(metrics, "entire_frame_compile_time_s")
    backend = _seconds(metrics, "backend_compile_time_s")
    inductor = _seconds(metrics, "inductor_compile_time_s")
    codegen = _seconds(metrics, "code_gen_time_s")
    phases: list[CompilePhase] = []

    def add(name: str, seconds: float | None, how: str, within: bool = False) -> None:
        if seconds is not None and seconds >= 0:
            phases.append(CompilePhase(name=name, seconds=seconds, how=how, within=within))

    if entire is not None and backend is not None:
        add("Dynamo tracing", entire - backend, "entire_frame_compile_time_s - backend_compile_time_s")
    if backend is not None and inductor is not None:
        add("AOTAutograd", backend - inductor, "backend_compile_time_s - inductor_compile_time_s")
    if inductor is not None and codegen is not None:
        add(
            "Inductor graph passes and lowering",
            inductor - codegen,
            "inductor_compile_time_s - code_gen_time_s (post-grad passes, lowering to Inductor IR)",
        )
    # The scheduler (fusion, kernel grouping) runs inside code_gen: Scheduler.__init__ nests in its trace span.
    add(
        "Inductor scheduling and code generation",
        codegen,
        "code_gen_time_s (scheduler and fusion, kernel code, waiting for kernel compilation)",
    )
    add(
        "of which kernel compilation",
        _micro(metrics, "triton_compile_time_us"),
        "triton_compile_time_us (Triton, or the C++ compiler on CPU)",
        within=True,
    )
    add(
        "of which autotuning",
        _micro(metrics, "compile_time_autotune_time_us"),
        "compile_time_autotune_time_us (max-autotune benchmarking of choices)",
        within=True,
    )
    for index, record in enumerate(backward, start=1):
        suffix = f" {index}" if len(backward) > 1 else ""
        add(
            f"Backward graph{suffix} (compiled at the first .backward())",
            _seconds(record, "inductor_compile_time_s"),
            "bwd_compilation_metrics inductor_compile_time_s",
        )
    return tuple(phases)


def _seconds(metrics: dict[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _micro(metrics: dict[str, Any], key: str) -> float | None:
    value = _seconds(metrics, key)
    return value / 1e6 if value is not None else None


def graph_breaks(trace: FrameTrace) -> list[GraphBreak]:
    breaks = []
    for text in trace.graph_breaks:
        location = None
        if match := _BREAK_LOCATION.search(text):
            location = SourceLine(match["file"], int(match["line"]))
        frames = from_traceback(text.split("User code traceback:", 1)[-1])
        # A break inside a library (transformers' loss, say) has no user frame: its library frames say where.
        stack = user_frames(frames) or tuple(f for f in frames if not is_tool_file(f.filename))
        if location is not None:
            # The frame of the break carries the function and code text the location line lacks.
            location = next(
                (f for f in reversed(frames) if f.filename == location.filename and f.line == location.line),
                location,
            )
        entry = registry_entry(text)
        breaks.append(
            GraphBreak(
                compile_id=trace.compile_id,
                reason=_reason(text),
                detail=text.strip(),
                location=location,
                user_stack=stack,
                code=entry.code if entry else None,
                explanation=entry.explanation if entry else "",
                hints=entry.hints if entry else (),
            )
        )
    return breaks


def _reason(text: str) -> str:
    """The short cause: the first line after "Graph Break Reason:" that says what was unsupported."""
    match = _BREAK_REASON.search(text)
    if match is None:
        return next((line.strip() for line in text.splitlines() if line.strip()), "graph break")
    after = text[match.end() :].splitlines()
    detail = next((line.strip() for line in after if line.strip()), "")
    headline = match["reason"].strip().rstrip(":")
    return f"{detail} ({headline})" if detail else headline
