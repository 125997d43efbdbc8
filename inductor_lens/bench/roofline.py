"""Stage 4 of the pipeline (bench): bytes and FLOPs of a launch, and where it stands on the roofline.

Costs come from Inductor's own metadata where it wrote any (``kernel_num_gb``, ``kernel_flop``, with
TORCHINDUCTOR_BENCHMARK_KERNEL), otherwise they are counted from the tensors the launch passes:
- a Triton or C++ kernel reads each input tensor once and writes each output once (an ``in_out``
  pointer counts twice), which is how Inductor itself counts when it has no metadata;
- an extern matmul (mm, addmm, bmm, baddbmm) reads A, B (and the bias) and writes C, and does
  2*M*N*K FLOPs; other extern calls are not counted.

The roofline at arithmetic intensity I (FLOP/byte) is min(peak FLOP/s, peak bytes/s * I), with both
peaks measured on the device (``DeviceCeilings``). Kernels whose FLOPs are not counted (Inductor
reports 0 for pointwise and reduction kernels) are placed against the bandwidth alone.
"""

from __future__ import annotations

import ast
import math
import re

from ..records import DeviceCeilings, GraphRecord, KernelRecord, Launch, Roofline

ITEMSIZE = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "b8": 1,
            "f8e4m3fn": 1, "f8e5m2": 1, "c64": 8, "c128": 16}  # fmt: skip
_TYPE = re.compile(r"^(?P<dtype>[a-z0-9]+|\?)\[(?P<dims>[^\]]*)\]")
_MATMULS = {"mm", "addmm", "bmm", "baddbmm", "_mm_plus_mm", "bias_addmm"}
# Below this, a launch is bound by launch overhead rather than by the roofline.
TINY_KERNEL_S = 5e-6
FAR_FROM_ROOF = 0.3


def tensor_type(text: str | None) -> tuple[str, list[int]] | None:
    """``bf16[1024, 8192]`` -> ("bf16", [1024, 8192]); symbolic sizes give None."""
    match = _TYPE.match(text or "")
    if match is None:
        return None
    dims = [d.strip() for d in match["dims"].split(",") if d.strip()]
    if not all(d.isdigit() for d in dims):
        return None
    return match["dtype"], [int(d) for d in dims]


def nbytes(text: str | None) -> int | None:
    parsed = tensor_type(text)
    if parsed is None or parsed[0] not in ITEMSIZE:
        return None
    return ITEMSIZE[parsed[0]] * math.prod(parsed[1])


def buffer_type(graph: GraphRecord, name: str) -> str | None:
    """A buffer's tensor type, following reuses (``buf3 = relu; del relu  # reuse``) to the allocation."""
    seen = set()
    while name not in graph.buffers and name in graph.aliases and name not in seen:
        seen.add(name)
        name = graph.aliases[name]
    return graph.buffers.get(name)


def argument_type(graph: GraphRecord, argument: str) -> str | None:
    """The tensor type of a launch argument: a buffer name, or ``reinterpret_tensor(buf, size, ...)``."""
    if (known := buffer_type(graph, argument)) is not None:
        return known
    try:
        node = ast.parse(argument, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and len(node.args) > 1:
        parsed = tensor_type(buffer_type(graph, node.args[0].id))
        dtype = parsed[0] if parsed else "?"  # a view of a buffer whose type the graph does not say
        size = node.args[1]
        if isinstance(size, ast.Tuple):
            values = [e.value for e in size.elts if isinstance(e, ast.Constant)]
            if len(values) == len(size.elts):
                return f"{dtype}[{', '.join(map(str, values))}]"
    return None


def kernel_cost(
    graph: GraphRecord, kernel: KernelRecord, launch: Launch | None
) -> tuple[int | None, int | None, str]:
    """(bytes, FLOPs, where they come from) for one launch of a generated kernel."""
    flops = kernel.flops if kernel.flops else None
    if kernel.bytes_accessed is not None:
        return kernel.bytes_accessed, flops, "Inductor's kernel_num_gb / kernel_flop"
    if launch is None:
        return None, flops, "not counted"
    total = 0
    for param, argument in zip(kernel.args, launch.args, strict=False):
        size = nbytes(argument_type(graph, argument))
        if size is None:
            continue
        total += 2 * size if param.name.startswith("in_out_ptr") else size
    return (total or None), flops, "counted from the tensors passed (each read or written once)"


def extern_cost(graph: GraphRecord, launch: Launch) -> tuple[int | None, int | None, str]:
    """(bytes, FLOPs, source) of an extern matmul; other extern calls are not counted."""
    op = (launch.aten_op or launch.target).removeprefix("aten.").split(".")[0]
    if op not in _MATMULS:
        return None, None, "not counted for this op"
    shapes = [tensor_type(argument_type(graph, a)) for a in launch.args]
    tensors = [s for s in shapes if s is not None]
    operands = [s for s in tensors if len(s[1]) >= 2]
    if len(operands) < 2:
        return None, None, "not counted (operand shapes unknown)"
    (_, a), (_, b) = operands[-2], operands[-1]
    dtype = next((t[0] for t in reversed(operands) if t[0] in ITEMSIZE), None)
    if dtype is None:
        return None, None, "not counted (operand dtypes unknown)"
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    m, k, n = a[-2], a[-1], b[-1]
    itemsize = ITEMSIZE[dtype]
    moved = (batch * (m * k + k * n + m * n)) * itemsize
    moved += sum(ITEMSIZE.get(t, itemsize) * math.prod(d) for t, d in tensors if len(d) < 2)  # a bias
    return moved, 2 * batch * m * n * k, "counted: A, B (and bias) read, C written; 2*M*N*K FLOPs"


def place(
    cost: tuple[int | None, int | None, str],
    seconds: float,
    time_source: str,
    ceilings: DeviceCeilings | None,
) -> Roofline | None:
    moved, flops, source = cost
    if seconds <= 0 or (moved is None and flops is None):
        return None
    gb_per_s = moved / seconds / 1e9 if moved else None
    tflops = flops / seconds / 1e12 if flops else None
    intensity = flops / moved if flops and moved else None
    percent = bound = None
    if ceilings is not None:
        peak_bw = ceilings.copy_gb_per_s * 1e9
        peak_flops = ceilings.matmul_tflops * 1e12
        if flops and intensity is not None:
            roof = min(peak_flops, peak_bw * intensity)
            percent = 100.0 * (flops / seconds) / roof
            bound = "compute" if peak_bw * intensity >= peak_flops else "memory"
        elif gb_per_s is not None:
            percent = 100.0 * gb_per_s * 1e9 / peak_bw
            bound = "memory"
    return Roofline(
        bytes=moved,
        flops=flops,
        cost_source=source,
        seconds=seconds,
        time_source=time_source,
        gb_per_s=gb_per_s,
        tflops=tflops,
        intensity=intensity,
        percent=percent,
        bound=bound,
    )


def flags(roofline: Roofline | None, in_context_s: float | None, isolated_s: float | None) -> tuple[str, ...]:
    found = []
    if (
        roofline is not None
        and roofline.percent is not None
        and roofline.seconds >= TINY_KERNEL_S
        and roofline.percent < 100 * FAR_FROM_ROOF
    ):
        found.append(f"at {roofline.percent:.0f}% of the roofline")
    if (
        roofline is not None
        and roofline.percent is not None
        and roofline.percent > 100
        and roofline.bound == "memory"
    ):
        found.append("above the copy bandwidth: inputs served from L2")
    if in_context_s and isolated_s and max(in_context_s, isolated_s) >= 20e-6:
        difference = abs(in_context_s - isolated_s) / isolated_s
        if difference > 0.15:
            found.append(f"in context {100 * (in_context_s / isolated_s - 1):+.0f}% vs isolated")
    return tuple(found)
