"""Stage 4 of the pipeline (bench), in the check process: does a match compute what Inductor's kernel computes.

``run_verify(task, device)`` runs the ``VerifyTask`` that ``handwritten/verify.py`` planned in the tool's process
(the kernel's FX nodes, the shapes and dtypes of its first launch, the equivalents in the match's order): it
makes inputs of those shapes (values as the reproducer makes them), evaluates the FX nodes in float64, runs the
equivalents' torch references in float64 on the same inputs, and compares the last step's first output with the
kernel's outputs of its size; the best pairing of inputs counts, judged by the catalog's tolerance.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import torch

from ...exchange.files import VerifyInput, VerifyResult, VerifyTask
from ...handwritten.catalog import get
from ..compat import register_inductor_prims
from .check import as_tuple, compare, implementation
from .kernels import Implementation

# Pairings of the kernel's inputs with the equivalents' tried at most.
MAX_PAIRINGS = 64
SEED = 20261127


def run_verify(task: VerifyTask, device: str) -> VerifyResult:
    """The task's equivalents against the kernel's FX nodes, both in float64, on the check process's ``device``
    (how its hand-written kernel modules were loaded): on a GPU there, where float64 takes seconds less per
    pairing than on the CPU (a GPT-2 layer norm's 64 pairings took 34 s on the CPU of an H100 host)."""
    where = torch.device("cuda" if device == "cuda" and torch.cuda.is_available() else "cpu")
    generator = torch.Generator(device=where).manual_seed(SEED)
    values = {i.node: _input(i, generator, where) for i in task.inputs}
    computed = _fx_reference(task, values, where)
    expected = [computed[node] for node in task.outputs]
    tolerance = max(get(s.name).tolerance.get(s.dtype, 0.0) for s in task.steps)
    tensors = {node: v for node, v in values.items() if isinstance(v, torch.Tensor)}
    best: float | None = None
    tried = 0
    impls = [implementation(get(s.name), device) for s in task.steps]
    slots = [as_tuple(impl.make_inputs(s.shape, torch.float64, where, generator))
             for impl, s in zip(impls, task.steps, strict=True)]  # fmt: skip
    # the kernel's inputs first; then also their permuted views, which the kernel reads through (a template's A
    # read through the transpose of attention's heads)
    views = {node: computed[node] for node in task.views if isinstance(computed[node], torch.Tensor)}
    for candidates in (tensors, {**tensors, **views}) if views else (tensors,):
        for final in itertools.islice(_chains(impls, slots, candidates), MAX_PAIRINGS):
            tried += 1
            for exact in expected:
                if isinstance(exact, torch.Tensor) and exact.numel() == final.numel():
                    error = _error(final.reshape(exact.shape), exact)
                    best = error if best is None or error < best else best
            if best is not None and best <= tolerance:
                break
        if best is not None and best <= tolerance:
            break
    names = " -> ".join(s.name for s in task.steps)
    read = sum(1 for i, step in enumerate(slots) for slot in step[i > 0 :] if isinstance(slot, torch.Tensor))
    elementwise = all(get(s.name).family == "elementwise" for s in task.steps)
    if not tried and elementwise and read > len(tensors):
        # an elementwise chain reading more tensors than the kernel (a bias row, a residual it never reads) does
        # another job, whatever the pairing (a rotary embedding's tables may be computed inside the kernel)
        return VerifyResult(False, note=f"computes something else than Inductor's kernel: {names} reads {read} "
                            f"tensors, the kernel {len(tensors)} ({', '.join(_described(i) for i in task.inputs if i.dtype)})")  # fmt: skip
    if not tried:
        return VerifyResult(note=f"not verified: the inputs of {names} could not be paired with the kernel's "
                            f"({', '.join(_described(i) for i in task.inputs if i.dtype)})")  # fmt: skip
    if best is None:
        return VerifyResult(note=f"not verified: no output of the kernel has the size of {names}'s")
    if best <= tolerance:
        return VerifyResult(True, best, tolerance, "computes what Inductor's kernel computes")
    if all(get(s.name).family == "layout" for s in task.steps):
        # a transposing copy stands in for the bytes a kernel moves (a split, a permute), not for their order
        return VerifyResult(note="not verified: the layout copy moves the same bytes in another order")
    return VerifyResult(
        False, best, tolerance,
        f"computes something else than Inductor's kernel: {names} on the kernel's inputs differs from its FX "
        f"nodes by {best:.2e} of the largest value (tolerance {tolerance:.0e}, {tried} pairing{'s' * (tried != 1)} "
        "of inputs tried)",
    )  # fmt: skip


def _error(value: torch.Tensor, exact: torch.Tensor) -> float:
    """``check.compare``'s max |value - exact| / max |exact|, where both are NaN at the same places (random inputs
    give a batch norm a negative variance) counting as equal there; NaN in one only, as infinite."""
    if value.is_floating_point() and exact.is_floating_point():
        value_nan, exact_nan = torch.isnan(value), torch.isnan(exact)
        if bool((value_nan ^ exact_nan).any()):
            return math.inf
        value, exact = value.masked_fill(value_nan, 0.0), exact.masked_fill(exact_nan, 0.0)
    return compare((value,), (exact,))[0].max_rel


def _described(item: VerifyInput) -> str:
    return f"{item.node} {item.dtype}[{', '.join(map(str, item.size))}]"


def _input(item: VerifyInput, generator: torch.Generator, device: torch.device) -> Any:
    """An input as the reproducer's script makes it (floats in float64), on ``device``."""
    if not item.dtype:
        return item.value
    dtype = getattr(torch, item.dtype)
    size = tuple(item.size)
    if item.values.startswith("randint("):
        low, high = (int(v) for v in item.values[len("randint(") : -1].split(","))
        return torch.randint(low, high, size, generator=generator, device=device).to(dtype)
    if item.values == "bool":
        return torch.randint(0, 2, size, generator=generator, device=device).bool()
    if dtype.is_floating_point:
        return torch.randn(size, generator=generator, dtype=torch.float64, device=device)
    return torch.zeros(size, dtype=dtype, device=device)


def _fx_reference(task: VerifyTask, values: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The kernel's FX nodes run eagerly, every floating dtype they name made float64, on ``device``."""
    register_inductor_prims()  # the FX nodes may call them

    code = task.code
    for name in ("torch.float32", "torch.float16", "torch.bfloat16"):
        code = code.replace(name, "torch.float64")
    params = ", ".join(i.node for i in task.inputs)
    body = "".join(f"    {line}\n" for line in code.splitlines())
    returned = list(dict.fromkeys([*task.outputs, *task.views]))
    text = f"def reference({params}):\n{body}    return ({', '.join(returned)},)\n"
    scope: dict[str, Any] = {"torch": torch, "inf": math.inf, "nan": math.nan,
                             "device": lambda type=None, index=None: device}  # fmt: skip
    exec(compile(text, "<kernel's FX nodes>", "exec"), scope)
    return dict(zip(returned, scope["reference"](*(values[i.node] for i in task.inputs)), strict=True))


def _chains(
    impls: list[Implementation], slots: list[tuple[Any, ...]], tensors: dict[str, torch.Tensor]
) -> Iterator[torch.Tensor]:
    """The last step's first output, for each pairing of the kernel's inputs with the steps' own (``slots``:
    inputs of each step's shape, as its ``make_inputs`` makes them)."""
    options = [[_candidates(slot, tensors) for slot in (step if i == 0 else step[1:])] for i, step in enumerate(slots)]
    flat = [choice for step in options for choice in step]
    for pairing in itertools.product(*flat):
        at, value, chosen = 0, None, True
        for i, (impl, step) in enumerate(zip(impls, slots, strict=True)):
            taken = list(pairing[at : at + len(options[i])])
            at += len(options[i])
            nodes = [node for node, _ in taken if node]
            if len(set(nodes)) != len(nodes):
                chosen = False
                break
            args = [v for _, v in taken]
            if i > 0:
                if not isinstance(value, torch.Tensor) or value.numel() != step[0].numel():
                    chosen = False
                    break
                args.insert(0, value.reshape(step[0].shape))
            try:
                value = as_tuple(impl.reference(*args))[0]
            except (RuntimeError, ValueError, TypeError, IndexError):
                chosen = False
                break
        if chosen and isinstance(value, torch.Tensor):
            yield value


def _candidates(slot: Any, tensors: dict[str, torch.Tensor]) -> list[tuple[str, Any]]:
    """The kernel's inputs that can stand in a step's input: of its size and kind, reshaped (a 2-D one also
    transposed); a non-tensor input stays the step's own."""
    if not isinstance(slot, torch.Tensor):
        return [("", slot)]
    found = []
    for node, value in tensors.items():
        if value.is_floating_point() != slot.is_floating_point() or value.numel() != slot.numel():
            continue
        found.append((node, value.reshape(slot.shape).to(slot.dtype)))
        if slot.dim() == 2 and value.dim() == 2 and value.shape != slot.shape and value.shape == slot.shape[::-1]:
            found.append((node, value.t().to(slot.dtype)))
    return found
