"""Records, compiler stages: one Triton kernel's TTIR, TTGIR, LLVM IR, PTX and SASS, its resources and line map.

A KernelStages is built by the stages step of the pipeline (``inductor_lens/stages``), either from the
capture's own Triton cache (what the GPU compiled) or by compiling the kernel's source here for the capture's
GPU target; ``origin`` says which, and with which Triton. The stage texts are stored in the record, each cut
to ``STAGE_TEXT_LIMIT`` characters and zlib-compressed (base64 in lens.json): a PTX or SASS listing is
tens to hundreds of KB of repetitive text that compresses about tenfold, and keeping it inside lens.json
keeps the report folder self-contained and re-renderable without the cache.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .codec import JsonScalar

# Characters kept of one stage's text (PTX of a large template is about 200 KB; its SASS about 400 KB).
STAGE_TEXT_LIMIT = 1_500_000

StageName = Literal["ttir", "ttgir", "llir", "ptx", "sass"]
StagesOrigin = Literal["capture cache", "compiled here"]


@dataclass(frozen=True)
class StageText:
    """One stage's text, compressed (``text`` decompresses it)."""

    stage: StageName
    compressed: str  # base64 of zlib
    lines: int
    chars: int  # of the whole text, before any cut
    cut_chars: int = 0  # characters left out past STAGE_TEXT_LIMIT

    @property
    def text(self) -> str:
        return zlib.decompress(base64.b64decode(self.compressed)).decode("utf-8")

    @classmethod
    def of(cls, stage: StageName, text: str) -> StageText:
        kept = text[:STAGE_TEXT_LIMIT]
        compressed = base64.b64encode(zlib.compress(kept.encode("utf-8"), 9)).decode("ascii")
        lines = kept.count("\n") + (0 if kept.endswith("\n") or not kept else 1)
        return cls(stage, compressed, lines, len(text), len(text) - len(kept))


@dataclass(frozen=True)
class LineSpans:
    """Where one line of the kernel's Python source went: the PTX and SASS lines (1-based, inclusive ranges)
    that carry its debug line (PTX ``.loc``, the cubin's line table as ``nvdisasm -g`` prints it)."""

    line: int  # in the kernel's source as the report shows it (KernelRecord.source, 1-based)
    ptx: tuple[tuple[int, int], ...] = ()
    sass: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Occupancy:
    """How many blocks (programs) of the kernel one SM holds at once, and what limits it (the CUDA occupancy
    calculator's rules; the SM limits of ``stages/occupancy.py``)."""

    arch: str  # "sm_90"
    blocks_per_sm: int
    limited_by: str  # "registers", "shared memory", "warps", "blocks"
    warps_per_sm: int
    max_warps_per_sm: int
    by_registers: int
    by_shared_memory: int
    by_warps: int
    max_blocks_per_sm: int

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm if self.max_warps_per_sm else 0.0


@dataclass(frozen=True)
class KernelStages:
    """One Triton kernel's compiler stages, resources and line map (see the module docstring)."""

    graph_id: str
    kernel: str
    origin: StagesOrigin
    target: str = ""  # "sm_90"
    triton_version: str | None = None  # of the Triton that produced these stages
    capture_triton_version: str | None = None  # of the Triton the capture ran (may differ when compiled here)
    # The launch configuration compiled (block sizes, num_warps, num_stages) and how it was chosen.
    config: Mapping[str, JsonScalar] = field(default_factory=dict)
    config_note: str = ""
    num_warps: int | None = None
    num_stages: int | None = None
    shared_bytes: int | None = None  # Triton's metadata "shared": the dynamic shared memory of a launch
    registers: int | None = None  # per thread, from the cubin (cuobjdump -res-usage: REG)
    spills: int | None = None  # local memory per thread / 4: what Triton's n_spills counts (LOCAL / 4)
    local_bytes: int | None = None
    occupancy: Occupancy | None = None
    texts: tuple[StageText, ...] = ()
    lines: tuple[LineSpans, ...] = ()
    cache_hash: str | None = None  # Triton's hash of the compiled kernel (its cache folder)
    notes: tuple[
        str, ...
    ] = ()  # what is missing and why ("no nvdisasm: no SASS"), or how the entry was found
    error: str = ""  # the kernel could not be compiled or found: why

    def text(self, stage: str) -> StageText | None:
        return next((t for t in self.texts if t.stage == stage), None)
