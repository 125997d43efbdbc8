"""Report stage: a Triton kernel's compiler stages (``kernels/<graph>/<kernel>/stages.html``), from its KernelStages.

The page puts the kernel's Python source, its PTX and its SASS side by side, linked by the line map (a click
on a line marks the lines it became, or came from, in the other panes: ``stages.js``), above the kernel's
resources (registers, spills, shared memory, occupancy). Each stage's whole text (TTIR, TTGIR, LLVM IR, PTX,
SASS) also has a page of its own beside it (``<stage>.html``, paged like the graph's texts).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from markupsafe import Markup

from ..records import CompileRun, GraphRecord, KernelRecord, KernelStages
from ..units import format_bytes
from .highlight import highlight, plain
from .text_view import GraphText, TextPage, paged_text
from .views import TEXT_PAGE_LINES, kernel_url

# stage -> (title, explanation), in compiler order
STAGE_TITLES = {
    "ttir": ("Triton IR (TTIR)", "Triton's own IR of the kernel, after its first passes: block-level operations on "
             "tensors (loads, stores, reductions, dots), constants folded, no layout yet."),
    "ttgir": ("Triton GPU IR (TTGIR)", "TTIR with a layout for every tensor (how its elements spread over threads, "
              "warps and shared memory), pipelining and the target's instructions (wgmma, TMA) chosen."),
    "llir": ("LLVM IR", "TTGIR lowered to LLVM's IR, per thread, with NVVM intrinsics; libdevice calls inlined."),
    "ptx": ("PTX", "NVIDIA's virtual ISA, as LLVM's NVPTX backend wrote it; ptxas compiles it to SASS. Its "
            "<code>.loc</code> lines name the kernel's Python line of each instruction."),
    "sass": ("SASS", "The machine code the GPU runs, disassembled from the cubin (nvdisasm, with the cubin's line "
             "table)."),
}  # fmt: skip
PANES = ("ptx", "sass")


def stages_url(graph: GraphRecord, kernel: str) -> str:
    return f"kernels/{graph.id}/{kernel}/stages.html"


def stage_text_url(graph: GraphRecord, kernel: str, stage: str, line: int = 1) -> str:
    number = (max(line, 1) - 1) // TEXT_PAGE_LINES + 1
    return f"kernels/{graph.id}/{kernel}/{stage}{'' if number == 1 else f'-{number}'}.html"


@dataclass(frozen=True)
class StagePane:
    key: str  # "py", "ptx", "sass": also the prefix of its line anchors
    title: str
    code: Markup | None
    lines: int
    mapped_lines: int
    url: str | None  # the stage's own page, from the report's root


@dataclass(frozen=True)
class StageLink:
    stage: str
    title: str
    url: str
    lines: int
    chars: int
    cut_chars: int


@dataclass(frozen=True)
class StagesPage:
    run: CompileRun
    graph: GraphRecord
    kernel: KernelRecord
    stages: KernelStages
    kernel_url: str
    origin: str  # a sentence: where the stages come from
    facts: tuple[tuple[str, str, str], ...]  # (label, value, note)
    panes: tuple[StagePane, ...]
    links: tuple[StageLink, ...]
    data: dict[str, Any]  # the line map for stages.js


def stages_pages(run: CompileRun, graph: GraphRecord) -> tuple[dict[str, StagesPage], dict[str, TextPage]]:
    """The stages page of every kernel of ``graph`` that has stages, and the text pages of their stages."""
    pages: dict[str, StagesPage] = {}
    texts: dict[str, TextPage] = {}
    for kernel in graph.kernels:
        stages = run.stages_of(graph.id, kernel.name)
        if stages is None or stages.error:
            continue
        url = stages_url(graph, kernel.name)
        pages[url] = _page(run, graph, kernel, stages)
        origin = origin_sentence(stages)
        for text in stages.texts:
            title, explanation = STAGE_TITLES[text.stage]
            cut = (
                f" The text was {text.cut_chars:,} characters longer; the rest is not kept."
                if text.cut_chars
                else ""
            )
            shown = GraphText(
                text.stage,
                f"{kernel.name}.{text.stage}",
                title,
                Markup(explanation) + cut,
                "text",
                "L",
                text.text,
            )
            texts.update(
                paged_text(
                    kernel.name, url, origin, shown, partial(stage_text_url, graph, kernel.name, text.stage)
                )
            )
    return pages, texts


def origin_sentence(stages: KernelStages) -> str:
    """Where the stages come from, as the end of a sentence."""
    if stages.origin == "capture cache":
        return (
            f"from the capture's Triton cache (compiled on the GPU by Triton {stages.triton_version or '?'})"
        )
    said = (
        f"compiled here for {stages.target or 'the capture GPU'} with Triton {stages.triton_version or '?'}"
    )
    if stages.capture_triton_version and stages.capture_triton_version != stages.triton_version:
        said += f"; the capture used Triton {stages.capture_triton_version}, whose code may differ"
    return said


def _page(run: CompileRun, graph: GraphRecord, kernel: KernelRecord, stages: KernelStages) -> StagesPage:
    ptx, sass = stages.text("ptx"), stages.text("sass")
    mapped_ptx = sum(b - a + 1 for spans in stages.lines for a, b in spans.ptx)
    mapped_sass = sum(b - a + 1 for spans in stages.lines for a, b in spans.sass)
    source_lines = kernel.source.count("\n") + 1
    panes = (
        StagePane("py", "Python (the kernel's source)", highlight(kernel.source, "python", "py"), source_lines,
                  len(stages.lines), kernel_url(graph, kernel.name)),
        StagePane("ptx", "PTX", plain(ptx.text, "ptx") if ptx else None, ptx.lines if ptx else 0, mapped_ptx,
                  stage_text_url(graph, kernel.name, "ptx") if ptx else None),
        StagePane("sass", "SASS", plain(sass.text, "sass") if sass else None, sass.lines if sass else 0, mapped_sass,
                  stage_text_url(graph, kernel.name, "sass") if sass else None),
    )  # fmt: skip
    links = tuple(
        StageLink(
            t.stage,
            STAGE_TITLES[t.stage][0],
            stage_text_url(graph, kernel.name, t.stage),
            t.lines,
            t.chars,
            t.cut_chars,
        )
        for t in stages.texts
    )
    data = {
        "lines": [
            {"l": s.line, "ptx": [list(r) for r in s.ptx], "sass": [list(r) for r in s.sass]}
            for s in stages.lines
        ]
    }
    return StagesPage(run, graph, kernel, stages, kernel_url(graph, kernel.name), origin_sentence(stages),
                      _facts(kernel, stages), panes, links, data)  # fmt: skip


def _facts(kernel: KernelRecord, stages: KernelStages) -> tuple[tuple[str, str, str], ...]:
    measured = kernel.inductor_benchmark
    at_capture = "the GPU reported {} at capture time (output_code.py -k)"
    facts = [
        ("Target", stages.target or "unknown", ""),
        ("Configuration", ", ".join(f"{k}={v}" for k, v in stages.config.items()) or "unknown", stages.config_note),
        ("Registers", _count(stages.registers, "per thread"),
         at_capture.format(measured.registers) if measured and measured.registers is not None else ""),
        ("Spills", _count(stages.spills, f"32-bit values ({_bytes(stages.local_bytes)} of local memory per thread)"
                          if stages.local_bytes else "(no local memory)"),
         at_capture.format(measured.spills) if measured and measured.spills is not None else ""),
        ("Shared memory", _bytes(stages.shared_bytes) if stages.shared_bytes is not None else "unknown",
         at_capture.format(_bytes(measured.shared_mem)) if measured and measured.shared_mem is not None else ""),
        ("Warps, stages", f"{stages.num_warps} warps ({(stages.num_warps or 0) * 32} threads), {stages.num_stages} stages", ""),
    ]  # fmt: skip
    occupancy = stages.occupancy
    if occupancy is not None:
        facts.append((
            "Occupancy",
            f"{occupancy.blocks_per_sm} blocks per SM: {occupancy.warps_per_sm} of {occupancy.max_warps_per_sm} warps "
            f"({occupancy.fraction:.0%}), limited by {occupancy.limited_by}",
            f"blocks that fit by registers {occupancy.by_registers}, by shared memory {occupancy.by_shared_memory}, "
            f"by warps {occupancy.by_warps}; the SM holds at most {occupancy.max_blocks_per_sm}",
        ))  # fmt: skip
    else:
        facts.append(
            ("Occupancy", "not computed", f"no SM limits known for {stages.target}" if stages.target else "")
        )
    return tuple(facts)


def _count(value: int | None, unit: str) -> str:
    return "unknown" if value is None else f"{value} {unit}"


def _bytes(value: int | None) -> str:
    """Exact bytes, as a launch asks for them: "98,304 bytes (98.3 KB)" (the report's one unit system)."""
    if value is None:
        return "unknown"
    return f"{value:,} bytes" + (f" ({format_bytes(value)})" if value >= 1000 else "")
