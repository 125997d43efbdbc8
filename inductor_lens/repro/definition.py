"""Reproducer, step 1 (from records): the kernel's definition, its source exactly as Inductor handed it to its
compiler: the string passed to ``async_compile.triton(...)`` (decorator with heuristics, ``triton_meta``,
``inductor_meta``) or to ``async_compile.cpp_pybinding(...)`` (with its argument types), read from
output_code.py's syntax tree; its parameters and the dtypes its pointer types declare.
"""

from __future__ import annotations

import ast
import functools
import re

from .parts import PARSED_GRAPHS, ReproError


def kernel_definition(output_code: str, name: str) -> tuple[str, str, tuple[str, ...]]:
    """(source, device, C++ argument types) of ``name = async_compile.triton(name, source, device_str=...)``
    or ``name = async_compile.cpp_pybinding(types, source)`` in the output code."""
    definitions = _definitions(output_code)
    if isinstance(definitions, str):
        raise ReproError(definitions)
    if name not in definitions:
        raise ReproError(f"{name}: no async_compile definition of it in the graph's output code")
    method, call = definitions[name]
    try:
        values = [ast.literal_eval(a) for a in call.args]
        keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except ValueError:
        raise ReproError(f"{name}: its definition in the output code is not made of literals") from None
    if method == "triton" and len(values) >= 2 and isinstance(values[1], str):
        return values[1], str(keywords.get("device_str", "cuda")), ()
    if method == "cpp_pybinding" and len(values) >= 2 and isinstance(values[1], str):
        return values[1], "cpu", tuple(str(t) for t in values[0])
    raise ReproError(f"{name}: async_compile.{method}(...) of a shape this version does not know")


@functools.lru_cache(maxsize=PARSED_GRAPHS)
def _definitions(output_code: str) -> dict[str, tuple[str, ast.Call]] | str:
    """Kernel name -> (async_compile method, its call) of the output code's top-level definitions; a string: why
    the code does not parse."""
    try:
        tree = ast.parse(output_code)
    except SyntaxError as exc:
        return f"the graph's output code does not parse ({exc.msg}, line {exc.lineno})"
    found: dict[str, tuple[str, ast.Call]] = {}
    for statement in tree.body:
        if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call)):
            continue
        call = statement.value
        method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        if method not in ("triton", "cpp_pybinding", "cpp"):
            continue
        for target in statement.targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, (method, call))
    return found


def kernel_params(backend: str, source: str) -> tuple[str, ...]:
    """The parameters a launch passes, in order: a Triton kernel's non-constexpr ones, a C++ kernel's all."""
    if backend == "cpp":
        match = re.search(r'extern "C"\s+void\s+kernel\(([^)]*)\)', source)
        if match is None:
            raise ReproError('no extern "C" void kernel(...) in the C++ source')
        return tuple(p.split()[-1].lstrip("*&") for p in match[1].split(",") if p.strip())
    match = re.search(r"^@triton\.jit\s*\ndef\s+\w+\((.*?)\):", source, re.MULTILINE | re.DOTALL)
    if match is None:
        raise ReproError("no @triton.jit function in the Triton source")
    params = [p.strip() for p in match[1].split(",") if p.strip()]
    return tuple(p.split(":")[0].strip() for p in params if "constexpr" not in p)


# Pointer types as the kernels declare them -> torch dtypes.
_CPP_POINTERS = {"float": "float32", "double": "float64", "at::BFloat16": "bfloat16", "at::Half": "float16",
                 "bfloat16": "bfloat16", "half": "float16", "int64_t": "int64", "int32_t": "int32",
                 "int16_t": "int16", "int8_t": "int8", "uint8_t": "uint8", "bool": "bool"}  # fmt: skip
_TRITON_POINTERS = {"fp32": "float32", "fp64": "float64", "bf16": "bfloat16", "fp16": "float16", "i64": "int64",
                    "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "i1": "bool",
                    "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}  # fmt: skip


def declared_dtypes(
    backend: str, source: str, arg_types: tuple[str, ...], params: tuple[str, ...]
) -> dict[str, str]:
    """Parameter -> the dtype its pointer type says (a C++ ``const float*``, a Triton signature's ``*fp32``)."""
    found: dict[str, str] = {}
    if backend == "cpp":
        for param, declared in zip(params, arg_types, strict=False):
            if declared.endswith("*"):
                base = declared.rstrip("*").replace("const", "").strip()
                if base in _CPP_POINTERS:
                    found[param] = _CPP_POINTERS[base]
        return found
    signature = re.search(r"'signature': \{([^}]*)\}", source)
    for param, declared in re.findall(r"'(\w+)': '\*(\w+)'", signature[1] if signature else ""):
        if declared in _TRITON_POINTERS:
            found[param] = _TRITON_POINTERS[declared]
    return found
