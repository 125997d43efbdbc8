"""Every hand-written Triton kernel compiles for an H100 (sm_90), on this CPU machine.

Triton's interpreter runs a kernel's Python, not its compilation: a kernel can pass every CPU check and still
fail to compile on a GPU (a global not declared ``tl.constexpr``, a libdevice call, a layout the backend
rejects). Triton ships ptxas, so its compiler runs without a GPU: each kernel launch that a CPU check makes
is recorded (argument types and compile-time constants) and compiled ahead of time for sm_90, through TTIR,
TTGIR, LLVM IR and PTX to a cubin, in a child process that imports the kernel modules without the
interpreter. Pointers are taken as 16-byte aligned and integers divisible by 16 where they are, as Triton
specialises them at a real launch. One shape per catalog entry (its last check shape), in float32.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from inductor_lens.handwritten.catalog import EQUIVALENTS
from inductor_lens.worker.handwritten import check

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
interpreter_module = pytest.importorskip("triton.runtime.interpreter")

PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
pytestmark = pytest.mark.skipif(not os.path.exists(PTXAS), reason="this Triton ships no ptxas")

TYPES = {
    torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
    torch.bool: "i1",
}  # fmt: skip

# The child: compiles each launch read from stdin for sm_90, prints {launch key: error or ""}.
COMPILER = r"""
import importlib, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

results = {}
for launch in json.load(sys.stdin):
    fn = getattr(importlib.import_module(launch["module"]), launch["function"])
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in launch["aligned"]}
    source = ASTSource(fn, dict(launch["signature"]), constexprs=dict(launch["constants"]), attrs=attrs)
    try:
        options = {"num_warps": launch["warps"], "num_stages": launch["stages"]}
        kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
        results[launch["key"]] = "" if kernel.asm.get("cubin") else "no cubin"
    except Exception as error:  # reported per launch by the test
        results[launch["key"]] = f"{type(error).__name__}: {error}"[-2000:]
print(json.dumps(results))
"""


def _launch_of(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """One interpreted launch as the child compiles it: the function, its signature and constants."""
    names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    values = dict(zip(names, args, strict=False))
    values.update({k: v for k, v in kwargs.items() if k in names})
    defaults = dict(zip(names[len(names) - len(fn.__defaults__ or ()) :], fn.__defaults__ or (), strict=True))
    hints = fn.__annotations__
    signature, constants, aligned = [], [], []
    for name in names:
        value = values[name] if name in values else defaults[name]
        if "constexpr" in str(hints.get(name, "")):
            signature.append([name, "constexpr"])
            constants.append([name, value])
        elif isinstance(value, torch.Tensor):
            signature.append([name, "*" + TYPES[value.dtype]])
            aligned.append(name)
        elif isinstance(value, bool):
            signature.append([name, "i1"])
        elif isinstance(value, int):
            signature.append([name, "i32" if -(2**31) <= value < 2**31 else "i64"])
            if value % 16 == 0:
                aligned.append(name)
        elif isinstance(value, float):
            signature.append([name, "fp32"])
        else:
            raise TypeError(f"{fn.__name__}: argument {name} of type {type(value).__name__}")
    launch = {
        "module": fn.__module__, "function": fn.__name__, "signature": signature, "constants": constants,
        "aligned": aligned, "warps": kwargs.get("num_warps", 4), "stages": kwargs.get("num_stages", 3),
    }  # fmt: skip
    launch["key"] = json.dumps(launch, sort_keys=True, default=str)
    return launch


def _record(name: str) -> list[dict[str, Any]]:
    """The distinct launches a CPU check of the entry makes, at its last check shape, in float32."""
    from tests.unit.test_handwritten_kernels import SHAPES

    equivalent = check.get(name)
    launches: dict[str, dict[str, Any]] = {}
    original = interpreter_module.InterpretedFunction.run

    def recording(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        launch = _launch_of(self.fn, args, kwargs)
        launches[launch["key"]] = launch
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    shapes = equivalent.check_shapes or SHAPES[equivalent.family]
    interpreter_module.InterpretedFunction.run = recording
    try:
        check.check(name, equivalent.shape(shapes[-1]), "float32", "cpu")
    finally:
        interpreter_module.InterpretedFunction.run = original
    return list(launches.values())


def _compile(launches: list[dict[str, Any]]) -> dict[str, str]:
    """Each launch's compile error for sm_90 ("" when it compiled), in a child without the interpreter."""
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    child = subprocess.run(
        [sys.executable, "-c", COMPILER],
        input=json.dumps(launches),
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return dict(json.loads(child.stdout.strip().splitlines()[-1]))


@functools.cache
def _compiled() -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """Every entry's launches, and each launch's compile error ("" when it compiled)."""
    launches = {e.name: _record(e.name) for e in EQUIVALENTS}
    distinct = {launch["key"]: launch for entry in launches.values() for launch in entry}
    return launches, _compile(list(distinct.values()))


@pytest.mark.parametrize("name", [e.name for e in EQUIVALENTS])
def test_kernel_compiles_for_sm90(name: str) -> None:
    launches, errors = _compiled()
    assert launches[name], f"{name}: the CPU check launched no kernel"
    failed = {launch["function"]: errors[launch["key"]] for launch in launches[name] if errors[launch["key"]]}
    assert not failed, failed


def test_matmuls_persistent_tma_form_compiles_for_sm90() -> None:
    """The persistent TMA form never runs on a CPU check (it is for 16-bit products on Hopper): two of its
    configurations compiled here in bf16, for nn.Linear's transposed weight and for a row-major b."""
    from inductor_lens.worker.handwritten.kernels import matmul

    a, c, bias = (torch.empty(size, dtype=torch.bfloat16) for size in ((4096, 768), (4096, 2304), (2304,)))
    launches = []
    for config, b in ((matmul.TMA_CONFIGS[0], torch.empty(2304, 768, dtype=torch.bfloat16).t()),
                      (matmul.TMA_CONFIGS[3], torch.empty(768, 2304, dtype=torch.bfloat16))):  # fmt: skip
        args = (a, b, c, bias, 4096, 2304, 768, 768, 1, b.stride(0), b.stride(1), 2304, 1)
        switches = dict(HAS_BIAS=True, ACTIVATION="none", INPUT_PRECISION="ieee", EVEN_K=True, INT64_OFFSETS=False,
                        B_K_CONTIGUOUS=b.stride(0) == 1, NUM_SMS=132, **config.kwargs, num_warps=config.num_warps,
                        num_stages=config.num_stages)  # fmt: skip
        launches.append(_launch_of(matmul.matmul_kernel.fn, args, switches))
    errors = _compile(launches)
    assert len(errors) == 2 and not any(errors.values()), errors
