"""Stage 4 of the pipeline (bench): the collectives of the profiled steps, wherever they ran.

A collective traced into a compiled graph is in its FX graph (records/rank_causes.py compares those across ranks). DDP's
gradient all-reduce and FSDP2's all-gathers and reduce-scatters are not: they run in the wrappers' hooks, outside
every compiled graph, and only the profiler sees them. ``collectives_per_step(events, steps, device)`` reads them
from the profiled steps' Chrome trace:

- on a GPU, NCCL's kernels (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclKernel_...``): their device time,
  which runs on NCCL's own stream, beside the step's compute; each named by the op torch's metadata on it names
  (``Collective name``), else by the kernel's name;
- on a CPU, gloo's work ranges (``gloo:all_reduce``), recorded on the thread that does the work, beside the step.

Each op's calls, bytes and time per step are the totals over the trace divided by its profiled steps (the profiler
records those steps only); the time overlaps the step's other work, so it is not one of the step's parts.

The bytes are those of each call's input message (``message_bytes``): for an all-reduce its tensor, for an
all-gather the rank's shard, for a reduce-scatter its whole input. torch attaches its ``record_param_comms``
metadata to NCCL's kernels (``In msg nelems``, ``dtype``: ``Float``, ``BFloat16``); gloo's ranges carry their
tensors (``Input Dims``, ``Input type``: ``float``, ``c10::BFloat16``) only when the profiler records shapes, and
torch 2.13 and 2.14 write no ``record_param_comms`` for gloo. Recording shapes slows the timed steps, so a CPU job of
several ranks profiles one more step with them (``COLLECTIVE_SIZES_TRACE_FILE``), and ``sizes``, the bytes per step
``sizes_per_step`` reads from it, give the ops that the timed steps leave unsized. Where some call has no size, the
op has no bytes, and ``CollectiveTime.bytes_method`` says why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..exchange.files import COLLECTIVE_SIZES_TRACE_FILE
from ..records.timing import CollectiveTime
from .trace_ranges import find_steps, load_trace, read_trace

# NCCL's kernel names: ncclDevKernel_<Op>_<Reduction>_<dtype>_<Algorithm>_<Protocol> (NCCL 2.19 and later), or
# ncclKernel_<Op>_... (earlier), or ncclDevKernel_<Op>_<Algorithm>... for ops without a reduction (SendRecv).
_NCCL_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_(?P<op>[A-Z][A-Za-z]*)")
# The process group's own ranges around its work: "gloo:all_reduce", "nccl:all_reduce" (torch's ProcessGroup).
_BACKEND_RANGE = re.compile(r"^(?P<backend>gloo|nccl|ucc|mpi):(?P<op>\w+)$")
_GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
# record_param_comms' collective names (ProcessGroupNCCL's methods: "allreduce", "_allgather_base",
# "allgather_into_tensor_coalesced", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced"), the op named as
# the kernels' and gloo's ranges are, once "_base", "_coalesced" and "_into_tensor" are left out.
_TORCH_COLLECTIVES = {"allreduce": "all_reduce", "allgather": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
                      "alltoall": "all_to_all", "all_to_allv": "all_to_all", "alltoall_base": "all_to_all"}  # fmt: skip
# The profiler's "Input type" of an argument that is no tensor of the message.
_NOT_TENSORS = ("Scalar", "ScalarList", "TensorList", "GenericList", "Tensor?", "None")
# Bytes per element, by the names torch writes for a dtype: c10's ScalarType (record_param_comms' "dtype"), the
# profiler's "Input type" (C++ type names, "c10::" left out) and torch's own; lower case.
_DTYPE_BYTES = {
    **dict.fromkeys(("float", "float32", "fp32", "f32"), 4),
    **dict.fromkeys(("double", "float64", "fp64"), 8),
    **dict.fromkeys(("half", "float16", "fp16", "bfloat16", "bf16"), 2),
    **dict.fromkeys(("long", "int64", "long int", "long long", "long long int", "int64_t"), 8),
    **dict.fromkeys(("int", "int32", "int32_t", "unsigned int", "uint32"), 4),
    **dict.fromkeys(("short", "int16", "short int", "uint16", "unsigned short"), 2),
    **dict.fromkeys(("char", "int8", "signed char", "byte", "uint8", "unsigned char", "bool"), 1),
    **dict.fromkeys(("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"), 1),
    **dict.fromkeys(("complexhalf", "complex32", "complex<c10::half>"), 4),
    **dict.fromkeys(("complexfloat", "complex64", "complex<float>"), 8),
    **dict.fromkeys(("complexdouble", "complex128", "complex<double>"), 16),
    **dict.fromkeys(("unsigned long", "uint64"), 8),
}


def collectives_per_step(
    events: Iterable[Mapping[str, Any]], steps: int, device: str, sizes: Mapping[str, float] | None = None
) -> tuple[CollectiveTime, ...]:
    """The collectives of ``steps`` profiled steps, by op, the most time first; () where there are none.

    ``sizes``: bytes per step by op, from a step profiled with shapes (``sizes_per_step``), for the ops whose calls
    in ``events`` have no size."""
    if steps <= 0:
        return ()
    calls: dict[str, int] = {}
    time_us: dict[str, float] = {}
    sized: dict[str, int] = {}
    size: dict[str, int] = {}
    gpu = device == "cuda"
    backend = "NCCL" if gpu else ""
    for event in events:
        if event.get("ph") != "X":
            continue
        name = str(event.get("name", ""))
        category = event.get("cat")
        if gpu and category in _GPU_WORK:
            found = _NCCL_KERNEL.match(name)
            op = _collective_op(event.get("args"), _snake(found["op"])) if found else None
        elif not gpu and category == "user_annotation":
            found = _BACKEND_RANGE.match(name)
            op = found["op"] if found else None
            backend = found["backend"] if found else backend
        else:
            op = None
        if op is None:
            continue
        calls[op] = calls.get(op, 0) + 1
        time_us[op] = time_us.get(op, 0.0) + float(event.get("dur", 0.0))
        message = message_bytes(event.get("args"))
        if message is not None:
            sized[op] = sized.get(op, 0) + 1
            size[op] = size.get(op, 0) + message
    method = (
        f"the device time of NCCL's kernels (its own stream, beside the step's compute), over the {steps} profiled "
        "steps, per step"
        if gpu
        else f"the time of {backend or 'the backend'}'s own work ranges (its thread, beside the step), over the "
        f"{steps} profiled steps, per step"
    )
    found_ops = sorted(calls, key=lambda op: -time_us[op])
    sizes = sizes or {}
    return tuple(
        CollectiveTime(
            op,
            backend,
            calls[op] / steps,
            time_us[op] / steps,
            method,
            bytes_per_step=size[op] / steps if sized.get(op) == calls[op] else sizes.get(op),
            bytes_method=_bytes_method(gpu, backend, calls[op], sized.get(op, 0), op in sizes),
        )
        for op in found_ops
    )


def sizes_per_step(events: Iterable[Mapping[str, Any]], steps: int, device: str) -> dict[str, float]:
    """Bytes per step by op, of the ops whose every call in ``steps`` profiled steps gives its size: the
    ``sizes`` of ``collectives_per_step``, from a trace recorded with shapes."""
    return {
        found.op: found.bytes_per_step
        for found in collectives_per_step(events, steps, device)
        if found.bytes_per_step is not None
    }


def message_bytes(args: object) -> int | None:
    """The bytes of a collective call's input message, from its event's args; None where they give none.

    ``In msg nelems`` x the size of ``dtype`` (torch's ``record_param_comms`` metadata, on NCCL's kernels), else
    the input tensors' ``Input Dims`` x the size of their ``Input type`` (a range recorded with shapes)."""
    if not isinstance(args, Mapping):
        return None
    nelems, dtype = args.get("In msg nelems"), args.get("dtype")
    if isinstance(nelems, int) and not isinstance(nelems, bool) and isinstance(dtype, str):
        width = dtype_bytes(dtype)
        return nelems * width if width is not None else None
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return None
    total, tensors = 0, 0
    for shape, type_name in zip(dims, types, strict=True):
        if not isinstance(type_name, str) or not type_name or not isinstance(shape, list):
            continue  # a scalar, None or a list of tensors: not the message's own tensor
        width = dtype_bytes(type_name)
        if width is None and (not shape or type_name in _NOT_TENSORS):
            continue
        if width is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            return None
        total += math.prod(shape) * width
        tensors += 1
    return total if tensors else None


def dtype_bytes(name: str) -> int | None:
    """Bytes per element of a dtype as a trace names it (``Float``, ``c10::BFloat16``, ``long int``)."""
    return _DTYPE_BYTES.get(name.strip().lower().removeprefix("c10::").removeprefix("torch.").removeprefix("at::"))


def _bytes_method(gpu: bool, backend: str, calls: int, sized: int, sized_apart: bool = False) -> str:
    if gpu and sized == calls:
        return ("the input message of each call: In msg nelems x the dtype's size, torch's record_param_comms "
                "metadata on NCCL's kernel (for an all-gather the rank's shard, for a reduce-scatter its whole input)")  # fmt: skip
    if sized == calls:
        return (f"the input tensors of each of {backend or 'the backend'}'s ranges: Input Dims x Input type, recorded "
                "with the profiler's shapes (for an all-gather the rank's shard, for a reduce-scatter its whole input)")  # fmt: skip
    if sized_apart:
        return (f"the input tensors of {backend or 'the backend'}'s ranges in one more step profiled after the timed "
                "ones with the profiler's shapes (record_shapes=True, which would slow the timed steps): Input Dims "
                "x Input type, per step (for an all-gather the rank's shard, for a reduce-scatter its whole input)")  # fmt: skip
    missing = f"{calls - sized} of {calls} calls" if sized else "its calls"
    if gpu:
        return (f"no bytes: {missing} in this trace are NCCL kernels without torch's record_param_comms metadata "
                "(In msg nelems, dtype), which coalesced collectives and older torch releases lack")  # fmt: skip
    return (f"no bytes: {missing} in this trace are {backend or 'the backend'}'s ranges without their tensors' "
            "sizes, which the profiler records only with record_shapes=True (the timed steps do not; a CPU job of "
            "several ranks profiles one more step with them, absent here)")  # fmt: skip


def _collective_op(args: object, kernel_op: str) -> str:
    """The op torch's metadata names (``Collective name``), else the kernel's: NCCL names a kernel after one op it
    was built for, and one kernel can run others (``ncclDevKernel_Generic``, grouped calls)."""
    named = args.get("Collective name") if isinstance(args, Mapping) else None
    if not isinstance(named, str) or not named:
        return kernel_op
    plain = named.strip("_").removesuffix("_coalesced").removesuffix("_base").removesuffix("_into_tensor")
    return _TORCH_COLLECTIVES.get(plain, plain)


def _snake(camel: str) -> str:
    """``AllReduce`` -> ``all_reduce``, ``ReduceScatter`` -> ``reduce_scatter``, as torch names the ops."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def collective_sizes(trace: Path, device: str) -> dict[str, float] | None:
    """The collectives' bytes per step by op from the step profiled with shapes beside ``trace``
    (``COLLECTIVE_SIZES_TRACE_FILE``, a CPU job of several ranks); None where there is none."""
    sized = trace.with_name(COLLECTIVE_SIZES_TRACE_FILE)
    if not sized.is_file():
        return None
    profiled = read_trace(load_trace(sized)["traceEvents"])
    steps, _ = find_steps(profiled, [], infer_steps=False)
    return sizes_per_step(profiled.events, len(steps), device) if steps else None
