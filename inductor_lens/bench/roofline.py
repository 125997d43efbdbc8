"""Stage 4 of the pipeline (bench): bytes and FLOPs of a launch, and where it stands on the roofline.

Costs come from Inductor's own metadata where it wrote any (``kernel_num_gb``, ``kernel_flop``, with
TORCHINDUCTOR_BENCHMARK_KERNEL), otherwise they are counted from the tensors the launch passes:
- a Triton or C++ kernel reads each input tensor once and writes each output once (an ``in_out``
  pointer counts twice), which is how Inductor itself counts when it has no metadata;
- an extern matmul (mm, addmm, bmm, baddbmm) reads A, B (and the bias) and writes C, and does
  2*M*N*K FLOPs, with the shapes Inductor recorded (``Launch.tensors``, torch 2.14+) or else those of the
  arguments in call(); other extern calls are not counted.

Under dynamic shapes sizes are symbolic (``f32[s77, 4096]``): they are worked out at the graph's size
hints (each symbol's value when it was compiled, ``GraphRecord.symbols``) and the cost source says so.

The roofline at arithmetic intensity I (FLOP/byte) is min(peak FLOP/s, peak bytes/s * I), with both
peaks measured on the device (``DeviceCeilings``). Kernels whose FLOPs are not counted (Inductor
reports 0 for pointwise and reduction kernels) are placed against the bandwidth alone.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable

from ..parse import compat
from ..parse.symbolic import Hints, is_symbolic, symbols_in, tensor_dims
from ..records import DeviceCeilings, GraphRecord, KernelRecord, Launch, Roofline
from ..records.wording import (
    AT_MEMORY_ROOF,
    FROM_HINTS,
    FROM_L2,
    LESS_TIME,
    MORE_TIME,
    OVERCOUNTED,
    REPEATED_LOADS,
    far_under_roof,
)
from ..records.wording import FAR_FROM_ROOF as FAR_FROM_ROOF
from ..records.wording import TINY_KERNEL_S as TINY_KERNEL_S
from ..records.wording import flag_tone as flag_tone

ITEMSIZE = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "b8": 1,
            "f8e4m3fn": 1, "f8e5m2": 1, "c64": 8, "c128": 16}  # fmt: skip
_MATMULS = {"mm", "addmm", "bmm", "baddbmm", "_mm_plus_mm", "bias_addmm"}
# Forward attention ops whose FLOPs and bytes are counted (their backward ops are not): the position of their
# is_causal argument (a causal mask skips half the scores).
_ATTENTION_FORWARD = {
    "_scaled_dot_product_efficient_attention": 6,
    "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_cudnn_attention": 6,
    "_scaled_dot_product_flash_attention_for_cpu": 4,
}
# Inductor's byte count of a pointwise or reduction kernel over the bytes of the tensors it is passed, from
# which the count is said to overestimate (codegen's estimate_kernel_num_bytes): a max-pool's nine window loads
# of a 4x larger input count 2.25x that input.
OVERCOUNT_RATIO = 1.1
_LOADS_COUNTED = frozenset({"pointwise", "reduction", "persistent reduction"})


def tensor_type(text: str | None, hints: Hints | None = None) -> tuple[str, list[int]] | None:
    """``bf16[1024, 8192]`` -> ("bf16", [1024, 8192]); symbolic sizes at their ``hints``, else None."""
    return tensor_dims(text, hints)


def nbytes(text: str | None, hints: Hints | None = None) -> int | None:
    parsed = tensor_type(text, hints)
    if parsed is None or parsed[0] not in ITEMSIZE:
        return None
    return ITEMSIZE[parsed[0]] * math.prod(parsed[1])


def hinted(source: str, hints: Hints, types: Iterable[str | None]) -> str:
    """A cost source, marked when symbolic sizes were worked out at the hints: "...; from size hints s77=2048"."""
    used = dict.fromkeys(name for text in types if is_symbolic(text) for name in symbols_in(text))
    values = ", ".join(f"{name}={hints[name]}" for name in used if name in hints)
    return f"{source}; {FROM_HINTS} {values}" if values else source


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
        base = buffer_type(graph, node.args[0].id) or ""
        # "?": a view of a buffer whose type the graph does not say
        dtype = base.split("[", 1)[0] if "[" in base else "?"
        size = node.args[1]
        if isinstance(size, ast.Tuple):
            # sizes as FX prints them: 24, s77, 2*s53 (ast.unparse spaces the operators)
            dims = [ast.unparse(e).replace(" ", "") for e in size.elts]
            return f"{dtype}[{', '.join(dims)}]"
    return None


def op_base(launch: Launch) -> str:
    """A library call's op without namespace or overload (``mm``, ``_mkl_linear``,
    ``_scaled_dot_product_efficient_attention``): never cut to its namespace."""
    found = compat.op_namespace(launch.target)
    if found is not None:
        return found[1]
    op = launch.aten_op or launch.target
    return op.removeprefix("aten.").split(".")[0]


def launch_input_types(graph: GraphRecord, launch: Launch) -> list[str | None]:
    """A library call's input tensor types: Inductor's own record (torch 2.14+), else its arguments' in call()."""
    if launch.tensors is not None:
        return list(launch.tensors.inputs)
    return [argument_type(graph, a) for a in launch.args]


def kernel_cost(
    graph: GraphRecord, kernel: KernelRecord, launch: Launch | None
) -> tuple[int | None, int | None, str]:
    """(bytes, FLOPs, where they come from) for one launch of a generated kernel."""
    flops = kernel.flops if kernel.flops else None
    passed = passed_bytes(graph, kernel, launch) if launch is not None else None
    if kernel.bytes_accessed is not None:
        # Inductor counts a dynamic graph's kernels at the size hints too (codegen's size_hint)
        mark = f"; {FROM_HINTS}" if graph.symbols else ""
        source = f"Inductor's kernel_num_gb / kernel_flop{mark}"
        if passed is not None and _loads_overcounted(kernel, kernel.bytes_accessed, passed):
            source += f"; {kernel.bytes_accessed / passed[0]:.2f}x the {passed[0]:,} bytes of the tensors passed"
            source += f" ({REPEATED_LOADS})"
        return kernel.bytes_accessed, flops, source
    if passed is None:
        return None, flops, "not counted"
    total, _, counted = passed
    source = hinted("counted from the tensors passed (each read or written once)", graph.hints, counted)
    return (total or None), flops, source


def _loads_overcounted(kernel: KernelRecord, counted: int, passed: tuple[int, bool, list[str]]) -> bool:
    """Inductor's count of a pointwise or reduction kernel over the bytes of all the tensors it is passed."""
    total, complete, _ = passed
    return complete and kernel.category in _LOADS_COUNTED and counted > OVERCOUNT_RATIO * total


def passed_bytes(graph: GraphRecord, kernel: KernelRecord, launch: Launch) -> tuple[int, bool, list[str]]:
    """(bytes, whether every pointer's tensor was known, their types) of the tensors a launch passes, each
    read or written once (an ``in_out_ptr`` twice)."""
    total = 0
    complete = True
    counted = []
    for param, argument in zip(kernel.args, launch.args, strict=False):
        text = argument_type(graph, argument)
        size = nbytes(text, graph.hints)
        if size is None or text is None:
            complete = complete and "ptr" not in param.name
            continue
        counted.append(text)
        total += 2 * size if param.name.startswith("in_out_ptr") else size
    return total, complete and total > 0, counted


def extern_cost(graph: GraphRecord, launch: Launch) -> tuple[int | None, int | None, str]:
    """(bytes, FLOPs, source) of an extern matmul or forward attention; other extern calls are not counted."""
    op = op_base(launch)
    if op in _ATTENTION_FORWARD:
        return _attention_cost(graph, launch, _ATTENTION_FORWARD[op])
    if op not in _MATMULS:
        return None, None, "not counted for this op"
    hints = graph.hints
    # Inductor's own record of the call's inputs first (torch 2.14+), else the types of the arguments in call()
    recorded = launch.tensors is not None
    types = launch_input_types(graph, launch)
    shapes = [tensor_type(t, hints) for t in types]
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
    counted = "counted from Inductor's kernel information" if recorded else "counted"
    source = hinted(f"{counted}: A, B (and bias) read, C written; 2*M*N*K FLOPs", hints, types)
    return moved, 2 * batch * m * n * k, source


def _attention_cost(graph: GraphRecord, launch: Launch, causal_at: int) -> tuple[int | None, int | None, str]:
    """Forward attention on q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev]: Q·Kᵀ and P·V, 2·B·H·L·S·(E + Ev)
    FLOPs, half that with is_causal (the scores a causal mask skips are not computed); q, k, v and a mask read,
    the output written once."""
    hints = graph.hints
    types = launch_input_types(graph, launch)
    shapes = [tensor_type(t, hints) for t in types]
    tensors = [s for s in shapes if s is not None and len(s[1]) == 4]
    if len(tensors) < 3:
        return None, None, "not counted (q, k, v shapes unknown)"
    (_, q), (_, k), (_, v) = tensors[:3]
    dtype = next((t for t, _ in tensors[:3] if t in ITEMSIZE), None)
    if dtype is None or q[:2] != k[:2] or k[2] != v[2]:
        return None, None, "not counted (q, k, v dtypes or shapes not as attention's)"
    batch_heads, length, source_length = q[0] * q[1], q[2], k[2]
    itemsize = ITEMSIZE[dtype]
    moved = sum(math.prod(d) for _, d in tensors[:3]) * itemsize + batch_heads * length * v[3] * itemsize
    moved += sum(ITEMSIZE.get(t, itemsize) * math.prod(d) for t, d in tensors[3:])  # a mask or bias
    flops = 2 * batch_heads * length * source_length * (q[3] + v[3])
    causal = "is_causal=True" in launch.code or (len(launch.args) > causal_at and launch.args[causal_at] == "True")
    what = "2*B*H*L*S*(E+Ev) FLOPs, halved: is_causal" if causal else "2*B*H*L*S*(E+Ev) FLOPs"
    source = hinted(f"counted: q, k, v (and mask) read, the output written; {what}", hints, types)
    return moved, flops // 2 if causal else flops, source


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
    """What stands out in a kernel's times, each flag saying what it compares (``flag_tone``: how it is shown).
    ``roofline`` is one launch in the profiled steps (``in_context_s``), ``isolated_s`` one launch replayed
    alone with L2 cleared."""
    found = []
    if roofline is not None and far_under_roof(roofline):
        found.append(f"at {roofline.percent:.0f}% of the roofline")
    if roofline is not None and roofline.percent is not None and roofline.bound == "memory":
        # the same bytes over the isolated time: the rate with L2 cleared before the launch
        isolated = roofline.percent * roofline.seconds / isolated_s if isolated_s else None
        if REPEATED_LOADS in roofline.cost_source and max(roofline.percent, isolated or 0) > 100:
            found.append(OVERCOUNTED)
        elif isolated is not None and isolated > 100:
            found.append(AT_MEMORY_ROOF)
        elif roofline.percent > 100:
            cleared = f" (isolated, L2 cleared: {isolated:.0f}%)" if isolated is not None else ""
            found.append(f"{FROM_L2}{cleared}")
    if in_context_s and isolated_s and max(in_context_s, isolated_s) >= 20e-6:
        difference = in_context_s / isolated_s - 1
        if abs(difference) > 0.15:
            found.append(
                f"one launch takes {abs(100 * difference):.0f}% {LESS_TIME if difference < 0 else MORE_TIME} "
                f"isolated (L2 cleared): {in_context_s * 1e6:,.1f} vs {isolated_s * 1e6:,.1f} µs"
            )
    return tuple(found)
