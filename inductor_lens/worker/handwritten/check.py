"""Stage 4 of the pipeline (bench), hand-written side: run one kernel against its torch reference, and time it.

``check(...)`` makes inputs of the given shape and dtype, runs the hand-written kernel and its torch
reference (on inputs upcast to float64, or float32 for dot products) and compares every output.
On a CPU device the kernel runs under Triton's interpreter, which this module switches on itself.
``bench(...)`` (GPU) times the kernel, torch eager and torch.compile of the reference with
``triton.testing.do_bench`` and places the kernel against the device's measured ceilings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...handwritten.catalog import get
from ...handwritten.equivalent import ITEMSIZE, TF32_TOLERANCE, Equivalent, Shape

if TYPE_CHECKING:  # the tool's side imports this module (``handwritten check``): torch only inside its functions
    import torch

    from .kernels import Implementation

# Inputs are made from this seed, so a check is repeatable.
SEED = 20261122


@dataclass(frozen=True)
class OutputError:
    max_abs: float
    max_rel: float  # max |out - ref| / max |ref|


@dataclass(frozen=True)
class CheckResult:
    name: str
    shape: Shape
    dtype: str
    device: str
    ok: bool
    tolerance: float
    errors: tuple[OutputError, ...]
    seconds: float
    interpreter: bool
    note: str = ""

    def line(self) -> str:
        equivalent = get(self.name)
        worst = max((e.max_rel for e in self.errors), default=0.0)
        where = "Triton interpreter" if self.interpreter else self.device
        verdict = "ok" if self.ok else "MISMATCH"
        return (
            f"{verdict}: {self.name} {equivalent.shape_text(self.shape)} {self.dtype} on {where}: "
            f"max error {worst:.2e} of the largest reference value (tolerance {self.tolerance:.0e}), "
            f"{len(self.errors)} output{'s' if len(self.errors) != 1 else ''}, {self.seconds:.2f} s"
        )


def implementation(equivalent: Equivalent, device: str = "cuda") -> Implementation:
    """The kernel's implementation; on a CPU device its kernels run under Triton's interpreter."""
    from .kernels import load

    return load(equivalent.module, interpret=device == "cpu")[equivalent.name]


def make_inputs(equivalent: Equivalent, shape: Shape, dtype: str, device: str) -> tuple[Any, ...]:
    import torch

    generator = torch.Generator(device=device).manual_seed(SEED)
    return implementation(equivalent, device).make_inputs(
        shape, getattr(torch, dtype), torch.device(device), generator
    )


def as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def compare(
    outputs: tuple[torch.Tensor, ...], references: tuple[torch.Tensor, ...]
) -> tuple[OutputError, ...]:
    errors = []
    for out, ref in zip(outputs, references, strict=True):
        if out.shape != ref.shape:
            raise ValueError(
                f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}"
            )
        if not ref.is_floating_point():
            ref = ref.double()  # integer outputs (window offsets, indices): no wrap-around in the difference
        diff = (out.to(ref.dtype) - ref).abs()
        max_abs = float(diff.max()) if diff.numel() else 0.0
        scale = float(ref.abs().max()) if ref.numel() else 0.0
        max_rel = max_abs / scale if scale > 0 else max_abs
        if out.isnan().any() and not ref.isnan().any():
            max_rel = max_abs = float("inf")
        errors.append(OutputError(max_abs, max_rel))
    return tuple(errors)


def check(name: str, shape: Shape, dtype: str, device: str = "cpu") -> CheckResult:
    import torch

    from .kernels import interpreter

    equivalent = get(name)
    impl = implementation(equivalent, device)
    interpreted = device == "cpu"
    started = time.perf_counter()
    inputs = make_inputs(equivalent, shape, dtype, device)
    with interpreter(interpreted):
        outputs = as_tuple(impl.run(*inputs))
    reference_dtype = getattr(torch, equivalent.reference_dtype)
    upcast = tuple(t.to(reference_dtype) if t.is_floating_point() else t for t in inputs)
    references = as_tuple(impl.reference(*upcast))
    errors = compare(outputs, references)
    tolerance, note = equivalent.tolerance[dtype], ""
    if dtype == "float32" and impl.float32_products is not None and impl.float32_products() == "tf32":
        tolerance, note = TF32_TOLERANCE, "float32 products in TF32, as torch's flag allows its own"
    ok = all(e.max_rel <= tolerance for e in errors)
    return CheckResult(
        name, dict(shape), dtype, device, ok, tolerance, errors, time.perf_counter() - started, interpreted, note
    )


@dataclass(frozen=True)
class BenchResult:
    """Medians (ms) of the hand-written kernel, torch eager and torch.compile, with rates and ceilings."""

    name: str
    shape: Shape
    dtype: str
    bytes: int
    flops: int
    timings_ms: dict[str, float] = field(default_factory=dict)
    ceilings: dict[str, float] = field(default_factory=dict)

    def rate(self, ms: float) -> str:
        if self.flops and get(self.name).bound == "compute":
            return f"{self.flops / (ms * 1e-3) / 1e12:,.1f} TFLOP/s"
        return f"{self.bytes / (ms * 1e-3) / 1e9:,.0f} GB/s"

    def percent_of_ceiling(self, ms: float) -> float:
        if self.flops and get(self.name).bound == "compute":
            return 100 * self.flops / (ms * 1e-3) / 1e12 / self.ceilings["matmul_tflops"]
        return 100 * self.bytes / (ms * 1e-3) / 1e9 / self.ceilings["copy_gb_per_s"]


def time_kernel(fn: Callable[[], object]) -> float:
    """The do_bench median (ms), measured exactly as the bench stage times Inductor's kernels."""
    from ..measure import gpu_time

    return gpu_time(fn).median_ms


def bench(name: str, shape: Shape, dtype: str, *, compiled: bool = True) -> BenchResult:
    """Time the hand-written kernel next to torch eager and torch.compile of its reference (CUDA only)."""
    import torch

    from ..measure import ceilings

    equivalent = get(name)
    impl = implementation(equivalent)
    inputs = make_inputs(equivalent, shape, dtype, "cuda")
    timings = {"hand-written": time_kernel(lambda: impl.run(*inputs))}
    timings["torch eager"] = time_kernel(lambda: impl.reference(*inputs))
    if compiled:
        torch.compiler.reset()
        reference = torch.compile(impl.reference, dynamic=False)
        timings["torch.compile"] = time_kernel(lambda: reference(*inputs))
    measured = ceilings(torch.device("cuda"), getattr(torch, dtype))
    moved, flops = equivalent.cost(shape, ITEMSIZE[dtype])
    limits = {"copy_gb_per_s": measured.copy_gb_per_s, "matmul_tflops": measured.matmul_tflops}
    return BenchResult(name, dict(shape), dtype, moved, flops, timings, limits)
