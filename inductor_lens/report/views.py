"""Report stage: view models, built completely from a CompileRun and its analysis before any template runs.

Templates only loop and print; every derived value (links, labels, counts, which FX node ended up
in which kernel) is computed here, once.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..records import Accuracy, CompileRun, DynamoFrame, GraphRecord, Launch, Roofline
from ..records.analysis import RunAnalysis
from ..records.numerics import NumericDivergence, divergence_headline
from ..records.pages import frame_anchor, kernel_url, launch_url
from ..records.wording import FROM_HINTS

KIND_LABELS = {"triton": "Triton", "cpp": "C++", "extern": "extern"}
_NAME_OPS = re.compile(r"^(?:triton_[a-z]+_|cpp_)?fused_(?P<ops>.+?)_\d+$")


def graph_url(graph: GraphRecord) -> str:
    return f"graphs/{graph.id}.html"


# A text longer than this is shown on several pages (the IR of a 48-layer --train graph is ~45,000 lines).
TEXT_PAGE_LINES = 20_000


def text_url(graph: GraphRecord, name: str, line: int = 1) -> str:
    """The page of one of a graph's texts (``output_code``, ``fx_graph_transformed``, ...) that holds ``line``."""
    number = (max(line, 1) - 1) // TEXT_PAGE_LINES + 1
    return f"graphs/{graph.id}/{name}{'' if number == 1 else f'-{number}'}.html"


def stage_url(frame: DynamoFrame, index: int, name: str, line: int = 1) -> str:
    """The page of a compile's ``index``-th IR stage that holds ``line``."""
    number = (max(line, 1) - 1) // TEXT_PAGE_LINES + 1
    return f"compile/{frame_anchor(frame.compile_id)}/{index:02d}-{name}{'' if number == 1 else f'-{number}'}.html"


def file_name(url: str) -> str:
    """A page's link from another page in the same folder (the parts of a drawing, the pages of a text)."""
    return url.rsplit("/", 1)[-1]


def code_line_url(graph: GraphRecord, line: int) -> str:
    """A line of a graph's ``output_code.py`` (where ``call()`` launches a kernel)."""
    return f"{text_url(graph, 'output_code', line)}#code-{line}"


def launch_category(graph: GraphRecord, launch: Launch, custom_ops: frozenset[str]) -> str:
    """The launched kernel's category, ``extern`` for a library call, ``custom op`` for a ``torch.library`` op
    (``custom_ops``: the extern targets that are, ``RunAnalysis.custom_ops``)."""
    if launch.kind == "extern" and launch.target in custom_ops:
        return "custom op"
    return graph.launch_category(launch)


def ops_from_name(name: str) -> str | None:
    """``cpp_fused_tanh_backward_0`` -> ``tanh_backward``: Inductor names fused kernels after their ops."""
    match = _NAME_OPS.match(name)
    return match["ops"] if match else None


@dataclass(frozen=True)
class KernelRow:
    graph: GraphRecord
    position: int
    kind: str
    category: str
    name: str
    url: str
    aten_ops: tuple[str, ...]
    bytes_accessed: int | None
    launches: int
    in_context_us: float | None = None  # per step, all launches
    share: float | None = None  # of the step's device time
    isolated_us: float | None = None
    roofline: Roofline | None = None
    flags: tuple[str, ...] = ()
    spread: str = ""  # of the in-context time over the profiled steps (one launch's)
    kind_is_unique: bool = True  # no other graph of the run has this graph's kind

    @property
    def graph_url(self) -> str:
        return graph_url(self.graph)

    @property
    def graph_label(self) -> str:
        """The graph's kind (``backward``), or its id where the run compiled two graphs of that kind."""
        return self.graph.kind if self.kind_is_unique else self.graph.id

    @property
    def from_hints(self) -> bool:
        """Bytes counted from symbolic sizes at their hints (dynamic shapes)."""
        return self.roofline is not None and FROM_HINTS in self.roofline.cost_source

    @property
    def name_ops(self) -> str | None:
        """Where Inductor recorded no ATen ops (C++ backward kernels), the ops its name lists."""
        return None if self.aten_ops or self.kind == "extern" else ops_from_name(self.name)


@dataclass(frozen=True)
class SummaryItem:
    label: str
    value: str
    detail: str = ""
    tone: str = ""


@dataclass(frozen=True)
class IndexPage:
    run: CompileRun
    summary: tuple[SummaryItem, ...]
    kernel_rows: tuple[KernelRow, ...]
    graph_rows: tuple[dict[str, Any], ...]
    compile_summary: str

    @property
    def isolated(self) -> bool:
        """Whether any kernel was timed alone (never on CPU); without one the column is left out."""
        return any(row.isolated_us is not None for row in self.kernel_rows)


# --- index ---------------------------------------------------------------------------------------


def index_page(run: CompileRun, analysis: RunAnalysis) -> IndexPage:
    rows: list[KernelRow] = []
    counts: Counter[str] = Counter()
    step_us = run.bench.step.total_us if run.bench and run.bench.step else None
    kinds = Counter(graph.kind for graph in run.graphs)
    for graph in run.graphs:
        unique_kind = kinds[graph.kind] == 1
        for launch in graph.launches:
            if launch.kind == "extern":
                counts["extern"] += 1
                launch_timing = launch.timing
                rows.append(
                    KernelRow(
                        graph,
                        launch.position,
                        "extern",
                        launch_category(graph, launch, analysis.custom_ops),
                        launch.label,
                        launch_url(graph, launch),
                        launch.aten_ops,
                        launch_timing.roofline.bytes if launch_timing and launch_timing.roofline else None,
                        1,
                        in_context_us=launch_timing.median_us if launch_timing else None,
                        share=launch_timing.share if launch_timing else None,
                        roofline=launch_timing.roofline if launch_timing else None,
                        spread=launch_timing.spread if launch_timing else "",
                        kind_is_unique=unique_kind,
                    )
                )
        for kernel in graph.kernels:
            counts[kernel.backend] += 1
            counts[f"{kernel.backend}:{kernel.category}"] += 1
            timing = kernel.timing
            rows.append(
                KernelRow(
                    graph,
                    kernel.launches[0] if kernel.launches else 0,
                    kernel.backend,
                    kernel.category,
                    kernel.name,
                    kernel_url(graph, kernel.name),
                    kernel.aten_ops,
                    kernel.bytes_accessed
                    if kernel.bytes_accessed is not None
                    else (timing.roofline.bytes if timing and timing.roofline else None),
                    len(kernel.launches),
                    in_context_us=timing.in_context_us if timing else None,
                    share=timing.in_context_us / step_us if timing and step_us else None,
                    isolated_us=timing.isolated.median_ms * 1e3 if timing and timing.isolated else None,
                    roofline=timing.roofline if timing else None,
                    flags=timing.flags if timing else (),
                    spread=one_launch_spread(graph, kernel.name),
                    kind_is_unique=unique_kind,
                )
            )
    if step_us:
        rows.sort(key=lambda r: -(r.in_context_us or 0.0))
    else:
        rows.sort(key=lambda r: (run.graphs.index(r.graph), r.position or 1 << 30, r.name))
    graph_rows = tuple(
        {
            "graph": g,
            "url": graph_url(g),
            "kernels": len(g.kernels),
            "externs": sum(1 for launch in g.launches if launch.kind == "extern"),
            "launches": len(g.launches),
            "frame": frame_of(run, g),
            "frame_anchor": frame_anchor(g.compile_id) if g.compile_id else "",
        }
        for g in run.graphs
    )
    return IndexPage(run, _summary(run, counts), tuple(rows), graph_rows, compile_summary(run))


def compile_summary(run: CompileRun) -> str:
    """One line: how many graphs, Dynamo frames, graph breaks, recompiles and autotuned ops."""

    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    parts = [count(len(run.graphs), "graph")]
    if run.frames:
        # Compile ids 0/0 and 0/1 are one Python frame compiled twice, not two frames.
        frames = len(run.python_frames)
        parts[0] += f" from {count(frames, 'Dynamo frame')}"
        if len(run.frames) > frames:
            times = {2: "twice", 3: "three times"}.get(len(run.frames), f"{len(run.frames)} times")
            parts[0] += f" compiled {times} in all"
        parts.append(count(len(run.graph_breaks), "graph break"))
        parts.append(count(len(run.recompiles), "recompile"))
    else:
        # Without a TORCH_TRACE log only Dynamo's debug.log speaks of breaks, once per place; recompiles are unknown.
        if run.graph_breaks:
            parts.append(f"{count(len(run.graph_breaks), 'graph break')} named in Dynamo's debug.log")
        parts.append(
            "recompiles not recorded (no TORCH_TRACE log)"
            if run.graph_breaks
            else "graph breaks and recompiles not recorded (no TORCH_TRACE log)"
        )
    if run.autotune:
        parts.append(count(len(run.autotune), "autotuned op"))
        failed = sum(len(table.failed) for table in run.autotune)
        if failed:
            parts.append(count(failed, "failed autotune choice"))
    recordings = sum(f.cudagraph_recordings or 0 for f in run.frames)
    if recordings:
        parts.append(count(recordings, "CUDA-graph recording"))
    return ", ".join(parts)


def frame_of(run: CompileRun, graph: GraphRecord) -> DynamoFrame | None:
    if graph.compile_id is None:
        return None
    return next((f for f in run.frames if f.compile_id == graph.compile_id), None)


def _summary(run: CompileRun, counts: Counter[str]) -> tuple[SummaryItem, ...]:
    items: list[SummaryItem] = []
    capture, settings, env = run.capture, run.settings, run.environment
    if settings is not None:
        mode = settings.mode if settings.mode != "unknown" else "not recorded"
        options = ", ".join(f"{k}={v}" for k, v in settings.options.items())
        if settings.mode_inferred:
            mode += " (inferred from options)"
            sets = ", ".join(f"{k}={v}" for k, v in settings.mode_options.items())
            why = f"fx_graph_runnable.py's non-default Inductor config has {sets}, what this mode sets" if sets else (
                "fx_graph_runnable.py's non-default Inductor config holds none of the other modes' options"
            )
            options = f"{why}; other options: {options}" if options else why
        elif settings.mode == "unknown" and options:
            options = f"non-default Inductor config (fx_graph_runnable.py): {options}"
        extra = " · ".join(
            x
            for x in (
                f"forward + backward of {settings.backward}" if settings.backward
                else "forward + backward" if settings.train else "",
                settings.dtype or "",
                "fullgraph" if settings.fullgraph else "",
                {True: "dynamic=True", False: "dynamic=False"}.get(settings.dynamic, ""),  # type: ignore[arg-type]
            )
            if x
        )
        items.append(SummaryItem("Mode", mode, "; ".join(x for x in (options, extra) if x)))
    device = env.device_name or env.device_type or "unknown"
    device_detail = " · ".join(
        x
        for x in (
            env.device_type or "",
            f"compute capability {env.device_capability}" if env.device_capability else "",
            f"{env.multiprocessor_count} SMs"
            if env.multiprocessor_count and env.device_type == "cuda"
            else "",
        )
        if x
    )
    items.append(SummaryItem("Device", device, device_detail))
    if env.preview_of:
        items.append(SummaryItem("CPU preview", f"Triton code for {env.preview_of}",
                                 "generated by Inductor for that GPU; nothing ran on a GPU and nothing is timed; "
                                 + (env.preview_check or ""), "warn"))  # fmt: skip
    versions = f"torch {env.torch_version or '?'}"
    if env.triton_version:
        versions += f" · triton {env.triton_version}"
    detail = " · ".join(
        x
        for x in (
            f"Python {env.python_version}" if env.python_version else "",
            f"CUDA {env.cuda_version}" if env.cuda_version else "",
        )
        if x
    )
    items.append(SummaryItem("Versions", versions, detail))
    if capture is not None:
        if capture.cold_compile_s is not None:
            items.append(
                SummaryItem(
                    "Cold compile",
                    f"{capture.cold_compile_s:.2f} s",
                    "first compiled call, fresh caches (includes running it once)",
                )
            )
        if capture.accuracy is not None:
            items.append(accuracy_item(capture.accuracy, capture.divergence))
    kinds = Counter(g.kind for g in run.graphs)
    items.append(
        SummaryItem(
            "Graphs",
            str(len(run.graphs)),
            ", ".join(f"{n} {k}" for k, n in kinds.items()) or "none",
            "" if run.graphs else "bad",
        )
    )
    dynamic = [g for g in run.graphs if g.symbols]
    if dynamic:
        hints = {s.name: s for g in dynamic for s in g.symbols}
        listed = ", ".join(
            f"{n}={s.hint}" if s.hint is not None else f"{n} (no hint)" for n, s in hints.items()
        )
        items.append(
            SummaryItem(
                "Shapes",
                "dynamic"
                if len(dynamic) == len(run.graphs)
                else f"dynamic in {len(dynamic)} of {len(run.graphs)} graphs",
                f"{listed}; bytes, FLOPs and hand-written shapes are worked out at these size hints",
            )
        )
    by_category = ", ".join(
        f"{n} {key.split(':', 1)[1]}"
        for key, n in sorted(counts.items())
        if key.startswith(("triton:", "cpp:"))
    )
    kernel_value = (
        " · ".join(f"{counts[k]} {KIND_LABELS[k]}" for k in ("triton", "cpp", "extern") if counts.get(k))
        or "none"
    )
    items.append(SummaryItem("Kernels", kernel_value, by_category))
    return tuple(items)


def accuracy_item(acc: Accuracy, divergence: NumericDivergence | None = None) -> SummaryItem:
    """The verdict card: against a float64 run (schema 7 on), or eager with tolerances (older reports); with
    --find-divergence, the first kernel whose output diverged."""
    value = "agrees with eager" if acc.within_tolerance else "differs from eager"
    if not acc.reference:  # a report from before the float64 verdict
        detail = (
            f"max abs error {acc.max_abs_error:.2e}, max rel error {acc.max_rel_error:.2e} "
            f"(rtol {acc.rtol:g}, atol {acc.atol:g}; {acc.compared})"
        )
        if acc.grad_max_abs_error is not None:
            detail += f"; gradients: max abs {acc.grad_max_abs_error:.2e}"
        return SummaryItem("Accuracy", value, detail, "good" if acc.within_tolerance else "bad")
    judged = "against a float64 run" if acc.reference == "float64" else "against eager (no float64 run)"
    parts = [f"{acc.checked} tensor{'s' if acc.checked != 1 else ''} of the {acc.compared} judged {judged}"]
    if acc.failed:
        parts.append(f"{acc.failed} out of bounds")
    if acc.findings:
        parts.append(f"{len(acc.findings)} of another structure or shape")
    if acc.skipped:
        parts.append(f"{len(acc.skipped)} output{'s' if len(acc.skipped) != 1 else ''} not judged ({acc.skipped[0]})")
    worst = acc.worst
    if worst is not None:
        parts.append(f"{'worst' if acc.within_tolerance else 'first'}: {worst.name} ({worst.note})")
    if divergence is not None:
        parts.append(divergence_headline(divergence))
    return SummaryItem("Accuracy", value, "; ".join(parts), "good" if acc.within_tolerance else "bad")


# --- log page ------------------------------------------------------------------------------------

_GLOG_LEVEL = re.compile(r"^(?P<level>[WE])\d{4} ")


def log_lines(run: CompileRun) -> tuple[tuple[str, str], ...]:
    """Each log line with a CSS class: ``line-warn`` for warnings, ``line-error`` for errors."""
    lines = []
    for line in run.log_text.splitlines():
        level = _GLOG_LEVEL.match(line)
        if (level and level["level"] == "E") or "Error" in line or line.startswith("Traceback"):
            css = "line-error"
        elif (level and level["level"] == "W") or "Warning" in line:
            css = "line-warn"
        else:
            css = ""
        lines.append((css, line))
    return tuple(lines)


def one_launch_spread(graph: GraphRecord, kernel_name: str) -> str:
    """The spread of a kernel launched once per step (a sum of several launches has no one spread)."""
    timed = [launch.timing for launch in graph.launches if launch.target == kernel_name and launch.timing]
    return timed[0].spread if len(timed) == 1 else ""
