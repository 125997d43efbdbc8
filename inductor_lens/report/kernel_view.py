"""Report stage: the view model of a kernel page: what a kernel computes, where its inputs come from,
how its config was chosen, and its source with the lines each op generated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..records import AutotuneTable, CompileRun, GraphRecord, KernelRecord, Launch, SourceLine
from ..records.analysis import GraphAnalysis, RunAnalysis
from ..records.wording import (
    FROM_HINTS,
    OVERCOUNTED,
    REPEATED_LOADS,
    REPEATED_LOADS_WHY,
    far_under_roof,
    flag_tone,
)
from ..units import format_bytes, format_micros
from .dataflow import reads_by_launch
from .handwritten_view import HandwrittenRow, handwritten_row
from .highlight import highlight, reanchored
from .views import KIND_LABELS, SummaryItem, code_line_url, launch_url, one_launch_spread, ops_from_name


@dataclass(frozen=True)
class KernelInput:
    """A buffer a kernel reads, and which launch produced it (None: a graph input)."""

    name: str
    kind: str | None
    producer: Launch | None
    producer_url: str | None
    role: str | None


@dataclass(frozen=True)
class KernelPage:
    run: CompileRun
    graph: GraphRecord
    kernel: KernelRecord
    source: Markup
    fragment: Markup | None
    facts: tuple[SummaryItem, ...]
    launches: tuple[Launch, ...]
    previous: tuple[str, str] | None
    next: tuple[str, str] | None
    name_ops: str | None
    # (parameter, type, argument passed at the first launch, that argument's tensor type)
    arguments: tuple[tuple[str, str, str, str], ...]
    inputs: tuple[KernelInput, ...]
    # FX nodes attributed to this kernel that an earlier kernel, whose output it reads, computed.
    computed_elsewhere: tuple[tuple[Launch, str, tuple[str, ...]], ...]
    autotune: tuple[AutotuneTable, ...]
    # The user lines its ops came from, each with its anchor on the source page (None if not shown there).
    source_lines: tuple[tuple[SourceLine, str | None], ...]
    # Whether the graph's FX files name a source line (``# File:``) for any op at all.
    graph_has_file_notes: bool
    timing: tuple[SummaryItem, ...] = ()
    handwritten: HandwrittenRow | None = None
    # The kernel's source again, for the side-by-side with its hand-written equivalent.
    compact_source: Markup | None = None
    # ``inductor-lens repro`` of this kernel, run from the report's folder ("" when it was never launched).
    repro_command: str = ""
    # Each launch with the link to its line of output_code.py (on the page of the text that holds it).
    launch_sites: tuple[tuple[Launch, str], ...] = ()


def kernel_pages(
    run: CompileRun, graph: GraphRecord, analysis: RunAnalysis, line_urls: dict[tuple[str, int], str] | None = None
) -> list[KernelPage]:
    pages = []
    graph_analysis = analysis.graph(graph.id)
    ordered = sorted(graph.kernels, key=lambda k: (k.launches[0] if k.launches else 1 << 30, k.name))
    reads = reads_by_launch(graph)
    roles = {n.name: n.role for fx in graph.fx_graphs for n in fx.nodes if n.op == "placeholder"}
    by_position = {launch.position: launch for launch in graph.launches}
    has_file_notes = any(node.source is not None for fx in graph.fx_graphs for node in fx.nodes)
    for index, kernel in enumerate(ordered):
        previous = ordered[index - 1] if index > 0 else None
        following = ordered[index + 1] if index + 1 < len(ordered) else None
        language = source_language(kernel)
        launches = tuple(launch for launch in graph.launches if launch.target == kernel.name)
        inputs = tuple(
            KernelInput(
                name=read.name,
                kind=graph_analysis.annotate(read.kind) or None,
                producer=by_position.get(read.producer) if read.producer else None,
                producer_url=launch_url(graph, by_position[read.producer]) if read.producer else None,
                role=roles.get(read.name),
            )
            for read in (reads.get(launches[0].position, []) if launches else [])
        )
        pages.append(
            KernelPage(
                run=run,
                graph=graph,
                kernel=kernel,
                source=(source := highlight(kernel.source, language, "src")),
                fragment=highlight(kernel.graph_fragment, "text", "frag") if kernel.graph_fragment else None,
                facts=_kernel_facts(kernel, graph, graph_analysis),
                launches=launches,
                previous=(previous.name, f"{previous.name}.html") if previous else None,
                next=(following.name, f"{following.name}.html") if following else None,
                name_ops=ops_from_name(kernel.name),
                arguments=_arguments(graph, graph_analysis, kernel, launches[0] if launches else None),
                inputs=inputs,
                computed_elsewhere=_computed_elsewhere(graph, kernel, inputs),
                autotune=tuple(
                    t for t in run.autotune if t.graph_id == graph.id and t.chosen_kernel == kernel.name
                ),
                source_lines=tuple(
                    (line, (line_urls or {}).get((line.filename, line.line))) for line in kernel.source_lines
                ),
                graph_has_file_notes=has_file_notes,
                timing=_timing_facts(run, graph, graph_analysis, kernel),
                handwritten=(row := handwritten_row(run, graph, kernel.name)),
                compact_source=reanchored(source, "src", "ind") if row and row.steps else None,
                repro_command=repro_command(graph, kernel) if launches else "",
                launch_sites=tuple((launch, code_line_url(graph, launch.line)) for launch in launches),
            )
        )
    return pages


def repro_command(graph: GraphRecord, kernel: KernelRecord) -> str:
    """The command a kernel page shows, run from the report's folder (``inductor-lens repro``, repro/writer.py)."""
    return f"inductor-lens repro . {graph.id}/{kernel.name} --out repro-{kernel.name}"


def source_language(kernel: KernelRecord) -> str:
    """How a kernel's source is highlighted: C++ for Inductor's CPU kernels, Python (Triton) for the rest."""
    return "cpp" if kernel.backend == "cpp" else "python"


def kernel_source_blocks(run: CompileRun) -> list[tuple[str, str, str]]:
    """Every kernel's source as ``highlight`` is asked for it on the kernel pages, for ``highlight.prepare``."""
    return [(k.source, source_language(k), "src") for g in run.graphs for k in g.kernels]


def _arguments(
    graph: GraphRecord, analysis: GraphAnalysis, kernel: KernelRecord, launch: Launch | None
) -> tuple[tuple[str, str, str, str], ...]:
    passed = launch.args if launch is not None else ()
    hints = graph.hints
    rows = []
    for index, arg in enumerate(kernel.args):
        value = passed[index] if index < len(passed) else ""
        # a symbolic size passed as an int (dynamic shapes) is shown with its hint
        tensor = (
            f"size {value}={hints[value]}"
            if value in hints
            else analysis.annotate(graph.buffers.get(value, ""))
        )
        rows.append((arg.name, arg.type, value, tensor))
    return tuple(rows)


def _computed_elsewhere(
    graph: GraphRecord, kernel: KernelRecord, inputs: tuple[KernelInput, ...]
) -> tuple[tuple[Launch, str, tuple[str, ...]], ...]:
    """Nodes Inductor attributes to this kernel that a producer of one of its inputs also lists:
    the kernel reads their result rather than computing them (its name may still mention them)."""
    mine = {n for m in kernel.node_mappings for n in m.aten_nodes} | set(kernel.post_grad_nodes)
    found = []
    for read in inputs:
        if read.producer is None or read.producer.kind == "extern":
            continue
        producer = graph.kernel(read.producer.target)
        if producer is None or producer.name == kernel.name:
            continue
        theirs = {n for m in producer.node_mappings for n in m.aten_nodes} | set(producer.post_grad_nodes)
        shared = tuple(sorted(mine & theirs))
        if shared:
            found.append((read.producer, launch_url(graph, read.producer), shared))
    return tuple(found)


def _timing_facts(
    run: CompileRun, graph: GraphRecord, analysis: GraphAnalysis, kernel: KernelRecord
) -> tuple[SummaryItem, ...]:
    timing = kernel.timing
    if timing is None:
        return ()
    step = run.bench.step if run.bench else None
    facts = []
    if timing.launches:
        spread = one_launch_spread(graph, kernel.name)
        share = (
            f", {100 * timing.in_context_us / step.total_us:.1f}% of the step"
            if step and step.total_us
            else ""
        )
        per_launch = (
            f"; {format_micros(timing.in_context_us / timing.launches)} per launch" if timing.launches > 1 else ""
        )
        facts.append(
            SummaryItem(
                "In context, per step",
                f"{format_micros(timing.in_context_us)} per step",
                f"{timing.launches} launch(es){per_launch}, median over {step.steps if step else '?'} profiled "
                f"steps{share}" + (f"; {spread}" if spread else ""),
            )
        )
    if timing.isolated is not None:
        iso = timing.isolated
        facts.append(
            SummaryItem(
                "Isolated, per launch",
                f"{format_micros(iso.median_ms * 1e3)} per launch",
                f"median of {iso.samples}, L2 cleared before each; "
                f"p10-p90 {iso.p10_ms * 1e3:,.1f}-{iso.p90_ms * 1e3:,.1f} µs",
            )
        )
    for label, roofline in (
        ("Achieved (in context, one launch)", timing.roofline),
        ("Achieved (isolated, one launch)", timing.isolated_roofline),
    ):
        if roofline is None:
            continue
        rates = [
            f"{roofline.gb_per_s:,.0f} GB/s" if roofline.gb_per_s else "",
            f"{roofline.tflops:,.2f} TFLOP/s" if roofline.tflops else "",
        ]
        value = " · ".join(r for r in rates if r) or "—"
        detail = f"{format_bytes(roofline.bytes)} in {format_micros(roofline.seconds * 1e6)}" if roofline.bytes else ""
        if FROM_HINTS in roofline.cost_source:
            # "...; from size hints s77=8, s27=256": counted for the sizes the graph was compiled for
            detail += f" ({_hints_note(roofline.cost_source)})"
        if roofline.percent is not None:
            detail += f"; {roofline.percent:.0f}% of the {roofline.bound}-bound roofline of this device"
        facts.append(SummaryItem(label, value, detail.strip("; "), "bad" if far_under_roof(roofline) else ""))
    if timing.config:
        facts.append(
            SummaryItem("Config after autotuning", timing.config, "the launcher Inductor kept", tone="config")
        )
    if timing.registers is not None:
        facts.append(
            SummaryItem(
                "Registers / spills / shared memory",
                " / ".join(
                    "?" if value is None else f"{value:,}{unit}"
                    for value, unit in (
                        (timing.registers, ""),
                        (timing.spills, ""),
                        (timing.shared_mem, " B"),
                    )
                ),
                "per thread / spilled / per block, from Triton's compiled launcher",
            )
        )
    for flag in timing.flags:
        detail = _recounted(run, analysis, kernel) if flag == OVERCOUNTED else ""
        facts.append(SummaryItem("Flag", flag, detail, flag_tone(flag)))
    return tuple(facts)


def _recounted(run: CompileRun, analysis: GraphAnalysis, kernel: KernelRecord) -> str:
    """The rate of a kernel whose byte count overestimates, at the bytes of the tensors it is passed."""
    timing = kernel.timing
    roofline = (timing.isolated_roofline or timing.roofline) if timing else None
    passed = analysis.kernel_costs[kernel.name].passed
    if roofline is None or passed is None:
        return ""
    rate = passed / roofline.seconds / 1e9
    ceilings = run.bench.ceilings if run.bench else None
    percent = f", {100 * rate / ceilings.copy_gb_per_s:.0f}% of the memory-bound roofline" if ceilings else ""
    return f"at the {format_bytes(passed)} of the tensors passed: {rate:,.0f} GB/s {roofline.time_source}{percent}"


def _hints_note(cost_source: str) -> str:
    """``from size hints s77=8, s27=256`` out of a cost source (the notes after it are shown elsewhere)."""
    return cost_source[cost_source.index(FROM_HINTS) :].split("; ", 1)[0]


def _kernel_facts(kernel: KernelRecord, graph: GraphRecord, analysis: GraphAnalysis) -> tuple[SummaryItem, ...]:
    facts = [
        SummaryItem("Backend", KIND_LABELS[kernel.backend]),
        SummaryItem("Category", kernel.category),
    ]
    if graph.symbols:
        facts.append(
            SummaryItem(
                "Symbolic sizes",
                ", ".join(f"{name}={hint}" for name, hint in graph.hints.items()) or "no hints recorded",
                "dynamic shapes: call() passes these sizes at run time; the numbers on this page are at these "
                "hints, their values when the graph was compiled",
            )
        )
    if kernel.size_hints:
        facts.append(
            SummaryItem(
                "Size hints",
                ", ".join(f"{k}={v:,}" for k, v in kernel.size_hints.items()),
                "iteration space Inductor planned for (x: pointwise, r0_: reduction)",
            )
        )
    cost = analysis.kernel_costs[kernel.name]
    moved, source, passed = cost.moved, cost.source, cost.passed
    if kernel.bytes_accessed is not None:
        detail = "inductor_meta kernel_num_gb: reads + writes Inductor counted for one launch" + (
            f", {FROM_HINTS}" if graph.symbols else ""
        )
        if REPEATED_LOADS in source and passed is not None:
            detail += (
                f"; {kernel.bytes_accessed / passed:.2f}x the {passed:,} bytes of the tensors passed: "
                f"{REPEATED_LOADS_WHY}, so the rates and % of the roofline on this page overestimate"
            )
        facts.append(SummaryItem("Bytes moved", _bytes_text(kernel.bytes_accessed), detail))
    elif moved is not None:
        # no kernel_num_gb: Inductor writes it only with TORCHINDUCTOR_BENCHMARK_KERNEL (a production trace has none)
        facts.append(
            SummaryItem(
                "Bytes moved",
                _bytes_text(moved),
                f"{source}, at its first launch: Inductor wrote no kernel_num_gb for it "
                "(it does with TORCHINDUCTOR_BENCHMARK_KERNEL=1)",
            )
        )
    if kernel.flops:
        facts.append(SummaryItem("FLOPs", f"{kernel.flops:,}", "inductor_meta kernel_flop, one launch"))
    counts = [
        f"{n} {label}"
        for n, label in (
            (kernel.num_load, "loads"),
            (kernel.num_store, "stores"),
            (kernel.num_reduction, "reductions"),
        )
        if n is not None
    ]
    if counts:
        facts.append(
            SummaryItem("Memory ops", ", ".join(counts), "tl.load / tl.store / reductions in the source")
        )
    config = kernel.launch_config
    for key, label in (
        ("num_warps", "Warps"),
        ("num_stages", "Pipeline stages"),
        ("grid_type", "Grid"),
        ("reduction_hint", "Reduction hint"),
    ):
        if key in config:
            facts.append(SummaryItem(label, str(config[key])))
    info = kernel.autotune_info
    if info:
        facts.append(SummaryItem("Autotuning", *autotune_summary(info)))
    if isinstance(config_args := config.get("config_args"), dict):
        config_text = ", ".join(f"{k}={v}" for k, v in config_args.items())
        facts.append(SummaryItem("Template config", config_text, tone="config"))
    return tuple(facts)


def _bytes_text(count: int) -> str:
    """Exact, and in the report's unit: ``263,323,648 B (263.3 MB)``."""
    return f"{count:,} B ({format_bytes(count)})" if count >= 1000 else f"{count:,} B"


def autotune_summary(info: Any) -> tuple[str, str]:
    """What triton_kernel_info says about how a kernel's launch config was chosen."""

    def config(pairs: Any) -> str:
        return ", ".join(f"{k}={v}" for k, v in pairs) if isinstance(pairs, list) else str(pairs)

    compile_s = info.get("compile_time_us")
    detail = f"compiled in {compile_s / 1e6:.2f} s" if isinstance(compile_s, (int, float)) else ""
    cache = info.get("autotune_cache_state")
    if "best_config" in info:
        value = f"best: {config(info['best_config'])}"
    elif "only_config" in info:
        value = f"one config: {config(info['only_config'])}"
    elif "num_configs" in info:
        value = f"{info['num_configs']} config(s) benchmarked at the first run"
    else:
        value = str(cache or "recorded")
    if info.get("coordesc_tuning"):
        start = info.get("coordesc_tuning_start_config")
        detail += f"; coordinate descent from {config(start)}" if start else "; coordinate descent"
    if cache and cache not in value:
        detail += f"; autotune cache: {cache}"
    if info.get("best_config_logged_in"):
        tried = f"{info['num_configs']} config(s) benchmarked at the first run; " if "num_configs" in info else ""
        detail += f"; {tried}the best as logged by another process in {info['best_config_logged_in']}"
    return value, detail.strip("; ")
