"""Stage 1 of the pipeline (capture), in the model process: does the compiled model compute what eager does?

Floating-point results of a compiled model legitimately differ from eager's: fused kernels reorder
reductions, keep intermediates in registers at higher precision, pick other matmul algorithms. So
compiled and eager are both judged against a float64 run of the same model on the same inputs, with
the rule of Dynamo's own accuracy checker (``torch._dynamo.utils.same`` with ``fp64_ref``): a tensor
passes when it is close to eager, or when the compiled RMSE against float64 is at most a few times
eager's own (2x, 3x for 16-bit dtypes and small tensors) plus ``tol / 10``. Outputs of any structure
(tuples, dicts, HuggingFace ``ModelOutput``, pytree nodes, and objects holding tensors such as HF's
``DynamicCache`` in ``past_key_values``) are compared leaf by leaf and gradients parameter by parameter; a
leaf of another shape, or outputs of another structure, are findings, never a crash; an object with no
tensor inductor-lens can reach is named as not judged, with the reason. Sharded models (FSDP2, tensor
parallel): a DTensor is judged shard by shard, each rank its own part, the name saying so (``kept_leaf``);
a DDP model's float64 copy is wrapped in DDP again, and an FSDP2 model has none (torch cannot copy one).
Without a float64 run (it failed, or ``--accuracy eager``) the check falls back to per-dtype tolerances.
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from ..records.outcome import Accuracy, TensorCheck
from .compat import pytree_children

# Tolerances as Dynamo's benchmark runners use them: 1e-4 for float32 outputs (same()'s default),
# looser for gradients, which sum many more rounded terms, and 1e-2 for 16-bit dtypes.
OUTPUT_TOLERANCE = {"float64": 1e-7, "float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
GRADIENT_TOLERANCE = {"float64": 1e-7, "float32": 1e-3, "float16": 1e-2, "bfloat16": 1e-2}
CHECKS_KEPT = 40


@dataclass
class Results:
    """What one way of running the model (eager, compiled or float64) gave, per call."""

    outputs: list[list[tuple[str, Any]]]  # per call: (leaf name, leaf value)
    gradients: list[list[tuple[str, Any]]]  # per call: (parameter name, gradient or None)
    backward: str = ""  # with --train, what was backpropagated ("outputs.loss", "the sum of 2 outputs")


@dataclass(frozen=True)
class Unjudged:
    """A leaf of the outputs that cannot be compared: its type, and why."""

    type: str
    reason: str


# How deep objects that are neither containers nor pytree nodes are searched for tensors (a cache's layers).
OBJECT_DEPTH = 4


def named_leaves(value: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """The leaves of an output, named by their path: ``[0]``, ``logits``, ``past_key_values.layers[1].keys``.

    Containers and pytree nodes are flattened; another object is searched through its attributes for the
    tensors it holds (HF's ``DynamicCache``: ``.layers[i].keys``, ``.values``), its other attributes left out;
    one holding none is an ``Unjudged`` leaf."""
    if isinstance(value, torch.Tensor) or value is None or isinstance(value, (bool, int, float, str)):
        yield prefix or "output", value
    elif isinstance(value, Mapping):  # dicts, and HuggingFace's ModelOutput (an OrderedDict)
        for key, item in value.items():
            yield from named_leaves(item, f"{prefix}.{key}" if prefix else str(key), depth)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from named_leaves(item, f"{prefix}[{index}]", depth)
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from named_leaves(getattr(value, f.name), f"{prefix}.{f.name}" if prefix else f.name, depth)
    elif (children := pytree_children(value)) is not None:
        for key, item in children:
            yield from named_leaves(item, prefix + key, depth)
    elif hasattr(value, "to_tuple"):  # other ModelOutput-like containers
        yield from named_leaves(value.to_tuple(), prefix, depth)
    else:
        yield from _object_leaves(value, prefix or "output", depth)


def _object_leaves(value: Any, name: str, depth: int) -> Iterator[tuple[str, Any]]:
    kind = type(value).__name__
    attributes = getattr(value, "__dict__", None)
    if isinstance(value, torch.nn.Module) or not isinstance(attributes, dict):
        yield name, Unjudged(kind, "not a container inductor-lens can read")
        return
    found = [
        (leaf_name, leaf)
        for key, item in (attributes.items() if depth < OBJECT_DEPTH else ())
        if not key.startswith("_")
        for leaf_name, leaf in named_leaves(item, f"{name}.{key}", depth + 1)
        if isinstance(leaf, torch.Tensor)
    ]
    if found:
        yield from found
    else:
        yield name, Unjudged(kind, f"no tensor within {OBJECT_DEPTH} levels of its attributes")


def keep(value: Any) -> Any:
    """A leaf as it is now, safe from later in-place changes (tensors detached and cloned); a DTensor's part on
    this rank (see ``kept_leaf``)."""
    if _is_dtensor(value):
        value = value.to_local()
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


# In a leaf's name: the leaf was a DTensor (FSDP2's parameters and gradients, tensor-parallel outputs) and only
# this rank's part of it is judged: a shard, or a replica where every placement is Replicate().
SHARD_NOTE = "this rank's shard"
REPLICA_NOTE = "this rank's replica"
SHARD_METHOD = (
    "DTensors (FSDP2, tensor-parallel) judged shard by shard: each rank compares its own shard (to_local()), "
    "with no collective, so a rank's verdict never waits on another rank"
)


def kept_leaf(name: str, value: Any) -> tuple[str, Any]:
    """``(name, keep(value))``; a DTensor's name says which part is kept: ``grad of w (this rank's shard:
    Shard(dim=0) of [344, 128])``. Shard by shard, not ``full_tensor()``: gathering is a collective that every
    rank would have to issue in the same order, and one rank's finding (a leaf of another shape) would then
    hang the others."""
    if not _is_dtensor(value):
        return name, keep(value)
    placements = ", ".join(repr(p) for p in value.placements)
    shape = ", ".join(str(s) for s in value.shape)
    note = REPLICA_NOTE if all(p.is_replicate() for p in value.placements) else SHARD_NOTE
    return f"{name} ({note}: {placements} of [{shape}])", keep(value)


def _is_dtensor(value: Any) -> bool:
    if "torch.distributed.tensor" not in sys.modules or not isinstance(value, torch.Tensor):
        return False  # no DTensor exists before torch.distributed.tensor is imported
    return isinstance(value, sys.modules["torch.distributed.tensor"].DTensor)


def float64_copy(model: Callable[..., Any]) -> Callable[..., Any]:
    """The same model with every floating parameter and buffer in float64 (a deep copy; ``model`` untouched).
    A DDP model is copied unwrapped and wrapped again as it was, so the copy's gradients are all-reduced as
    eager's are (a copied DDP converted to float64 keeps no working reducer: each rank's own gradients)."""
    if not isinstance(model, torch.nn.Module):
        return model  # a plain function: only its inputs are upcast
    if isinstance(model, DistributedDataParallel):
        # broadcast_buffers only where not the default: torch 2.13 deprecates the argument
        buffers: dict[str, Any] = {} if model.broadcast_buffers else {"broadcast_buffers": False}
        return DistributedDataParallel(
            copy.deepcopy(model.module).to(torch.float64),
            device_ids=model.device_ids,
            output_device=model.output_device,
            process_group=model.process_group,
            find_unused_parameters=model.find_unused_parameters,
            gradient_as_bucket_view=model.gradient_as_bucket_view,
            **buffers,
        )
    return copy.deepcopy(model).to(torch.float64)


def why_no_float64_copy(model: Callable[..., Any]) -> str:
    """Why ``model`` cannot have a float64 copy, or "": FSDP2 refuses a deep copy, and converting it in place
    to float64 breaks its all-gathers (measured, torch 2.13)."""
    fsdp = sys.modules.get("torch.distributed.fsdp")
    module_class = getattr(fsdp, "FSDPModule", None)
    if (
        module_class is not None
        and isinstance(model, torch.nn.Module)
        and any(isinstance(m, module_class) for m in model.modules())
    ):
        return "an FSDP2 (fully_shard) model cannot be copied to float64: torch does not support copying one"
    return ""


def judge(
    eager: Results, compiled: Results, reference: Results | None, *, train: bool, why_no_reference: str = ""
) -> Accuracy:
    """The verdict on every output leaf and gradient of every call."""
    checks: list[TensorCheck] = []
    findings: list[str] = []
    skipped: list[str] = []
    largest = 0.0  # the largest |eager output|, for the overall relative error
    several = len(eager.outputs) > 1
    for number, (want, got) in enumerate(zip(eager.outputs, compiled.outputs, strict=True), 1):
        prefix = f"call {number}: " if several else ""
        names, got_names = [n for n, _ in want], [n for n, _ in got]
        if names != got_names:
            findings.append(f"{prefix}the compiled outputs ({_names(got_names)}) are not eager's ({_names(names)})")
            continue
        ref = reference.outputs[number - 1] if reference else None
        for index, (name, value) in enumerate(want):
            if isinstance(value, Unjudged):
                skipped.append(f"{prefix}{name}: {value.type}, {value.reason}")
                continue
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                largest = max(largest, _finite_max(value.double().abs()))
            ref_value = ref[index][1] if ref and index < len(ref) else None
            check = check_tensor(prefix + name, "output", value, got[index][1], ref_value, OUTPUT_TOLERANCE)
            if isinstance(check, str):
                findings.append(check)
            elif check is not None:
                checks.append(check)
    if train:
        for number, (want, got) in enumerate(zip(eager.gradients, compiled.gradients, strict=True), 1):
            prefix = f"call {number}: " if several else ""
            ref = reference.gradients[number - 1] if reference else None
            for index, ((name, value), (_, got_value)) in enumerate(zip(want, got, strict=True)):
                ref_value = ref[index][1] if ref else None
                if value is None and got_value is None:
                    continue
                if value is None or got_value is None:
                    has_one = "eager" if got_value is None else "compiled"
                    findings.append(f"{prefix}grad of {name}: only {has_one} computed one")
                    continue
                check = check_tensor(f"{prefix}grad of {name}", "gradient", value, got_value, ref_value, GRADIENT_TOLERANCE)
                if isinstance(check, str):
                    findings.append(check)
                elif check is not None:
                    checks.append(check)
    accuracy = _accuracy(checks, findings, reference is not None, train, len(eager.outputs), why_no_reference)
    if any(note in text for text in (*(c.name for c in checks), *findings) for note in (SHARD_NOTE, REPLICA_NOTE)):
        accuracy = replace(accuracy, method=f"{accuracy.method}; {SHARD_METHOD}")
    relative = accuracy.max_abs_error / largest if largest > 0 else accuracy.max_abs_error
    return replace(accuracy, max_rel_error=relative, skipped=tuple(skipped[:CHECKS_KEPT]))


def _names(names: list[str]) -> str:
    return ", ".join(names[:6]) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")


def check_tensor(
    name: str, kind: str, want: Any, got: Any, ref: Any, tolerances: dict[str, float]
) -> TensorCheck | str | None:
    """One leaf; a string for a finding (another type or shape); None for leaves that are not tensors and agree."""
    if not isinstance(want, torch.Tensor):
        if isinstance(got, torch.Tensor) or want != got:
            return f"{name}: compiled gave {_short(got)}, eager {_short(want)}"
        return None
    if not isinstance(got, torch.Tensor):
        return f"{name}: compiled gave {_short(got)}, eager a tensor {_short(want)}"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: compiled gave {_short(got)}, eager {_short(want)}"
    dtype = str(want.dtype).removeprefix("torch.")
    tol = tolerances.get(dtype, 1e-4)
    label = _short(want)
    typed: Any = "output" if kind == "output" else "gradient"
    if not (want.is_floating_point() or want.is_complex()):
        same = bool(torch.equal(want, got))
        return TensorCheck(name, typed, label, same, 0.0, max_abs_error=0.0 if same else None,
                           note="equal" if same else "integer or boolean values differ")  # fmt: skip
    max_abs = _finite_max((got.double() - want.double()).abs())
    if torch.allclose(want, got, atol=tol, rtol=tol, equal_nan=True):
        # the RMSEs against float64 all the same: what a change of numerics (TF32, autocast) costs (--try)
        measured = ref is not None and isinstance(ref, torch.Tensor) and ref.shape == want.shape
        return TensorCheck(name, typed, label, True, tol, max_abs_error=max_abs,
                           compiled_rmse=_rmse(ref.double(), got) if measured else None,
                           eager_rmse=_rmse(ref.double(), want) if measured else None,
                           note=f"within {tol:g} of eager")  # fmt: skip
    if ref is None or not isinstance(ref, torch.Tensor) or ref.shape != want.shape:
        return TensorCheck(name, typed, label, False, tol, max_abs_error=max_abs,
                           note=f"not within {tol:g} of eager, and no float64 run to judge by")  # fmt: skip
    ref64 = ref.double()
    eager_rmse = _rmse(ref64, want)
    compiled_rmse = _rmse(ref64, got)
    multiplier = 3.0 if want.dtype in (torch.float16, torch.bfloat16) or want.numel() < 1000 or tol >= 2e-2 else 2.0
    within = compiled_rmse <= multiplier * eager_rmse + tol / 10
    if not within and math.isnan(eager_rmse) and not math.isnan(compiled_rmse):
        within = True  # eager is the one that lost its numerics here (same()'s corner case)
    note = (
        "as close to float64 as eager" if within and compiled_rmse <= eager_rmse
        else f"within {multiplier:g}x eager's error against float64" if within
        else f"{compiled_rmse / eager_rmse:.1f}x eager's error against float64" if eager_rmse > 0
        else "further from float64 than eager, which matches it"
    )  # fmt: skip
    return TensorCheck(name, typed, label, within, tol, max_abs_error=max_abs, compiled_rmse=compiled_rmse,
                       eager_rmse=eager_rmse, multiplier=multiplier, note=note)  # fmt: skip


def _rmse(ref: torch.Tensor, value: torch.Tensor) -> float:
    if ref.numel() == 0:
        return 0.0
    return float(torch.sqrt(torch.mean(torch.square(ref - value.double()))))


def _finite_max(tensor: torch.Tensor) -> float:
    if tensor.numel() == 0:
        return 0.0
    value = float(tensor.max())
    return value if math.isfinite(value) else float("inf")


def describe_leaf(value: Any) -> str:
    """An output leaf for the report: ``float32[4, 256] on cpu``, or a short repr of a value that is not a tensor."""
    if isinstance(value, torch.Tensor):
        return f"{_short(value)} on {value.device}"
    return _short(value)


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}[{', '.join(str(s) for s in value.shape)}]"
    if isinstance(value, Unjudged):
        return f"{value.type} (not judged: {value.reason})"
    return repr(value)[:60] if isinstance(value, (bool, int, float, str)) or value is None else type(value).__name__


def _severity(check: TensorCheck) -> tuple[int, float]:
    """Failures first, then by how close each came to its limit."""
    if check.limit is not None and check.compiled_rmse is not None:
        ratio = check.compiled_rmse / check.limit if check.limit > 0 else math.inf
    else:
        ratio = (check.max_abs_error or 0.0) / check.tolerance if check.tolerance else 0.0
    return (0 if not check.within else 1, -ratio)


def _accuracy(
    checks: list[TensorCheck], findings: list[str], has_reference: bool, train: bool, calls: int, why: str
) -> Accuracy:
    ordered = sorted(checks, key=_severity)
    failed = sum(1 for c in checks if not c.within)
    outputs = [c for c in checks if c.kind == "output"]
    grads = [c for c in checks if c.kind == "gradient"]
    if has_reference:
        method = ("each output and gradient judged against a float64 run of the same model and inputs, by the rule of "
                  "torch._dynamo.utils.same: within tol of eager, or an RMSE against float64 at most 2x eager's "
                  "(3x for 16-bit dtypes and tensors under 1,000 elements) plus tol/10; tol 1e-4 for float32 outputs, "
                  "1e-3 for float32 gradients, 1e-2 for 16-bit")  # fmt: skip
    else:
        method = (f"no float64 run ({why or 'not asked for'}): each output and gradient must be within tol of eager "
                  "(1e-4 for float32 outputs, 1e-3 for gradients, 1e-2 for 16-bit)")  # fmt: skip
    compared = "outputs and parameter gradients" if train else "outputs"
    if calls > 1:
        compared += f" of {calls} calls"
    return Accuracy(
        compared=compared,
        tensors=len(outputs),
        max_abs_error=max((c.max_abs_error or 0.0 for c in outputs), default=0.0),
        max_rel_error=0.0,
        within_tolerance=failed == 0 and not findings,
        rtol=max((c.tolerance for c in outputs), default=0.0),
        atol=max((c.tolerance for c in outputs), default=0.0),
        grad_max_abs_error=max((c.max_abs_error or 0.0 for c in grads), default=0.0) if train else None,
        method=method,
        reference="float64" if has_reference else "eager",
        checks=tuple(ordered[:CHECKS_KEPT]),
        checked=len(checks),
        failed=failed,
        findings=tuple(findings[:CHECKS_KEPT]),
    )
