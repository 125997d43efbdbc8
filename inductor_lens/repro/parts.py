"""Reproducer, step 1 (from records): the parts of a plan (plan.py's ``ReproPlan``): its tensor and scalar
arguments, its eager reference, the dtypes a script can build, and ``ReproError`` for records that lack them.
"""

from __future__ import annotations

from dataclasses import dataclass

# FX's short dtype names -> torch's.
TORCH_DTYPES = {
    "f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64", "i32": "int32",
    "i16": "int16", "i8": "int8", "u8": "uint8", "b8": "bool", "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}  # fmt: skip
FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2"}
# A graph's output code is parsed once for all its kernels (the hand-written stage plans a verification of each
# matched kernel: ResNet-50's backward graph has 160, and parsing it each time took most of 20 s).
PARSED_GRAPHS = 8


class ReproError(ValueError):
    """The records do not hold what a reproducer of this kernel needs."""


@dataclass(frozen=True)
class TensorArg:
    param: str
    role: str  # "in", "out" or "in_out" (Inductor's in_ptr / out_ptr / in_out_ptr)
    written: str  # the launch argument as call() writes it
    storage: str  # the buffer whose storage it is (arguments of one storage share it)
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: str  # torch's name: "float32"
    values: str  # how random values are made: "randn", "randint(0, 100)", "bool", "zeros"
    values_why: str = ""
    layout_why: str = ""  # set where call() states no layout for it and its strides are guessed


@dataclass(frozen=True)
class ScalarArg:
    param: str
    written: str
    value: int | float


@dataclass(frozen=True)
class ReferenceInput:
    node: str
    type: str  # as FX annotates it: "f32[256, 4096]", "Sym(s77)"
    param: str | None = None  # the kernel argument holding it
    value: int | float | None = None  # a size: its value at the hints
    how: str = ""  # how it was tied to the argument


@dataclass(frozen=True)
class ReferenceOutput:
    node: str
    type: str
    param: str
    how: str = ""


@dataclass(frozen=True)
class Reference:
    """The ATen ops the kernel fuses, as eager code: ``code`` computes ``outputs`` from ``inputs``."""

    code: str = ""
    inputs: tuple[ReferenceInput, ...] = ()
    outputs: tuple[ReferenceOutput, ...] = ()
    unchecked: tuple[str, ...] = ()  # written arguments no FX node is tied to (scratch), with why
    missing: str = ""  # why there is no reference: then the script runs and times the kernel, unchecked
