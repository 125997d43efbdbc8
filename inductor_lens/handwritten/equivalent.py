"""Stage 4 of the pipeline (bench), hand-written side: what one catalog entry is (``Equivalent``: a hand-written
kernel and the job it does), the dtypes the kernels take, and the tolerances their checks use.

No torch or Triton import: the report and the worker's check read it alike (catalog.py holds the entries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import UsageError
from ..records import shape_text

DTYPES = ("float32", "float16", "bfloat16")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}

Shape = Mapping[str, int]
Cost = tuple[int, int]  # (bytes moved, FLOPs)


@dataclass(frozen=True)
class Equivalent:
    """One hand-written kernel (or launcher configuration of one) and the job it does."""

    name: str
    family: str  # "elementwise", "row-wise", "matmul", "attention"
    summary: str
    formula: str  # what it computes, in torch terms
    module: str  # kernels/<module>.py
    dims: tuple[str, ...]  # the names of the --shape dimensions, in order
    # Concepts of the ATen work it covers (see match.CONCEPTS): what it stands in for.
    covers: frozenset[str]
    cost: Callable[[Shape, int], Cost]
    bound: str  # "memory" or "compute": which ceiling its roofline percentage uses
    # Bound on max |out - ref| / max |ref| per output, by dtype.
    tolerance: Mapping[str, float] = field(default_factory=dict)
    # The reference runs in this dtype ("float64", or "float32" where float64 is impractical on a GPU).
    reference_dtype: str = "float64"
    # Dtypes the Triton interpreter (CPU) runs correctly for this kernel, with the reason for any gap.
    interpreter_dtypes: tuple[str, ...] = DTYPES
    interpreter_note: str = ""
    default_shape: tuple[int, ...] = ()
    bench_shape: tuple[int, ...] = ()
    # The @triton.jit functions it launches (kernels/<module>.py), named here so their source can be
    # recorded for the report without importing Triton (source.py); tests check them against the
    # implementation.
    kernels: tuple[str, ...] = ()
    # Shapes the interpreter tests check it on (odd sizes, block-crossing); empty: its family's list in
    # tests/unit/test_handwritten_kernels.py.
    check_shapes: tuple[tuple[int, ...], ...] = ()
    # The dimensions a CPU check under the interpreter may halve, in order, until the work is small
    # (``interpreter_shape``); empty: the family's rule.
    shrink: tuple[str, ...] = ()
    # The program steps of its launches under the interpreter, which its time there follows
    # (``interpreter_shape`` holds them to INTERPRETER_STEPS); None: bytes and MACs bound it.
    interpreter_steps: Callable[[Shape], int] | None = None

    def shape(self, values: tuple[int, ...]) -> dict[str, int]:
        if len(values) != len(self.dims):
            raise UsageError(
                f"{self.name} takes a shape of {len(self.dims)} dimensions "
                f"({'x'.join(self.dims)}), got {'x'.join(map(str, values))}"
            )
        return dict(zip(self.dims, values, strict=True))

    def shape_text(self, shape: Shape) -> str:
        return shape_text(shape, self.dims)


MEMORY_TOLERANCE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}
REDUCTION_TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 3e-2}
DOT_TOLERANCE = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}
# float32 operands rounded to TF32 keep float16's 10-bit mantissa: float16's tolerance.
TF32_TOLERANCE = DOT_TOLERANCE["float16"]
# Triton 3.7's interpreter returns garbage from tl.dot on bfloat16 operands (errors of 1e10 on a 32x32
# product, measured 2026-11-22); the kernels are checked in bfloat16 on a GPU instead.
DOT_INTERPRETER_NOTE = "bfloat16 tl.dot is wrong under Triton 3.7's interpreter; bfloat16 is checked on a GPU"
