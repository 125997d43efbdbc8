"""Stage 4 of the pipeline (bench), hand-written side: the Triton kernels, one module per family.

Each module is written like Triton's tutorials (``@triton.jit`` kernel, launcher, torch reference,
input maker) and exposes ``IMPLEMENTATIONS``: catalog name -> ``Implementation``. Importing a module
imports torch and Triton; ``load(module, interpret=True)`` imports it with Triton's interpreter on, so
the kernels run on CPU tensors, without leaving ``TRITON_INTERPRET`` set for anything else.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Implementation:
    # The launcher: takes make_inputs()'s tensors, returns a tensor or a tuple of tensors.
    run: Callable[..., Any]
    # The torch reference, same arguments, same outputs; called on inputs upcast to the reference dtype.
    reference: Callable[..., Any]
    # (shape, torch dtype, torch device, torch.Generator) -> the input tensors, on that device.
    make_inputs: Callable[[Mapping[str, int], Any, Any, Any], tuple[Any, ...]]
    # The @triton.jit functions it launches, for the report to show their source.
    kernels: tuple[Any, ...]
    # How its float32 products run now ("tf32" or "ieee"), where a torch flag decides it: a TF32 kernel is
    # checked at TF32's tolerance (check.py).
    float32_products: Callable[[], str] | None = None


# Whether the kernel modules were imported (so their @triton.jit functions made) under the interpreter.
_interpreted_at_import: bool | None = None


def cdiv(numerator: int, denominator: int) -> int:
    """Ceiling division of sizes, for grids: ``triton.cdiv`` is a jit function, about 2 µs a call from Python
    (measured on the CPU machine), more than some kernels take on the GPU. Written as Triton's, since the
    interpreter hands grids its own integers, whose ``//`` truncates toward zero."""
    return (numerator + denominator - 1) // denominator


def interpreting() -> bool:
    """True when the kernels run in Triton's CPU interpreter: launchers then skip autotuning."""
    if _interpreted_at_import is not None:
        return _interpreted_at_import
    return os.environ.get("TRITON_INTERPRET") == "1"


@contextlib.contextmanager
def interpreter(enabled: bool) -> Iterator[None]:
    """Triton's interpreter on (``TRITON_INTERPRET=1``) inside the block only, where ``enabled``.

    Triton reads the variable when a kernel is decorated and again while the interpreter runs it,
    so kernel imports and CPU runs happen inside; nothing else in the process sees it.
    """
    if not enabled:
        yield
        return
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = previous


def load(module: str, *, interpret: bool) -> dict[str, Implementation]:
    """The module's implementations; ``interpret`` says how its kernels run, fixed at the first import."""
    global _interpreted_at_import
    if _interpreted_at_import is None:
        _interpreted_at_import = interpret
    if _interpreted_at_import != interpret:
        where = "Triton's interpreter (CPU)" if _interpreted_at_import else "the GPU"
        raise RuntimeError(
            f"the hand-written kernels were loaded for {where} in this process; use a new process"
        )
    with interpreter(interpret):
        return importlib.import_module(f"{__name__}.{module}").IMPLEMENTATIONS
