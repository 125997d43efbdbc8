"""Parse stage: the layout call() gives each tensor (sizes, strides, storage offset), as written.

One reader for everyone who needs a tensor's strides from the output code: the parser (which reports a
layout check that does not read), the reproducer (``repro/plan.py``) and the hand-written problems
(``handwritten/problem.py``). The statements (``compat.LAYOUT_CHECKS``, allocations, views):

- ``assert_size_stride(arg0_1, (16, 8, 3, 3), (72, 9, 3, 1), 'input')``: an input, checked;
- ``assert_size_stride_grouped((arg2_1, arg1_1), ((2, 8, 16, 16), (16, )), ((2048, 1, 128, 8), (1, )), 'input')``:
  several inputs checked in one call (torch 2.14), each exactly as the single form gives it;
- ``assert_tensor_metadata(buf1, sizes, strides, torch.float32, op)``: an extern kernel's output (torch 2.14);
- ``buf0 = empty_strided_cpu(sizes, strides, dtype)``: an allocation;
- ``buf8 = reinterpret_tensor(buf2, sizes, strides, offset)``: a view of another buffer.

Sizes, strides and offsets stay text (``s27*s77`` under dynamic shapes); ``ints`` reads them as numbers. The
first statement that gives a name its layout wins. Nothing is imported or run.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass

from . import compat
from .call_flow import call_statements, find_call, fx_dim, partition_functions
from .pyliteral import dotted_name


@dataclass(frozen=True)
class WrittenLayout:
    size: tuple[str, ...]
    stride: tuple[str, ...]
    offset: str = "0"
    base: str | None = None  # the buffer a view's storage belongs to
    dtype: str | None = None  # where the statement says it (assert_tensor_metadata, allocations): "torch.float32"

    def ints(self) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """Sizes and strides as numbers, or None where one is symbolic."""
        if not all(d.isdecimal() for d in (*self.size, *self.stride)):
            return None
        return tuple(int(d) for d in self.size), tuple(int(d) for d in self.stride)


@dataclass(frozen=True)
class CallLayouts:
    layouts: dict[str, WrittenLayout]
    # Layout checks whose arguments did not read as tensors with sizes and strides, as written.
    unreadable: tuple[str, ...] = ()


def read_layouts(statements: Iterable[ast.stmt]) -> CallLayouts:
    """The layouts stated by ``statements`` (call()'s, in execution order)."""
    layouts: dict[str, WrittenLayout] = {}
    unreadable: list[str] = []
    for statement in statements:
        value = getattr(statement, "value", None)
        if not isinstance(value, ast.Call):
            continue
        name = dotted_name(value.func) or ""
        found: list[tuple[str, WrittenLayout]] | None = None
        if name in compat.LAYOUT_CHECKS and isinstance(statement, ast.Expr):
            found = _checked(value, *compat.LAYOUT_CHECKS[name])
            if found is None:
                unreadable.append(ast.unparse(value)[:120])
        elif (
            isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and (name.startswith(compat.LAYOUT_ALLOCATOR_PREFIX) or name == compat.LAYOUT_VIEW)
        ):  # fmt: skip
            # allocations and views in another form (sizes from a variable) are left to the types of call_flow
            found = _made(statement.targets[0].id, value, name == compat.LAYOUT_VIEW)
        for tensor, layout in found or ():
            layouts.setdefault(tensor, layout)
    return CallLayouts(layouts, tuple(unreadable))


@functools.lru_cache(maxsize=16)
def written_layouts(output_code: str) -> dict[str, WrittenLayout]:
    """Tensor name -> its layout as call() states it, from an output_code.py's text ({} if it does not parse)."""
    try:
        tree = ast.parse(output_code)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    call = find_call(tree)
    if call is None:
        return {}
    return read_layouts(s for s, _ in call_statements(call.body, partition_functions(tree))).layouts


def _checked(
    call: ast.Call, tensor_at: int, size_at: int, stride_at: int, dtype_at: int | None, grouped: bool
) -> list[tuple[str, WrittenLayout]] | None:
    if len(call.args) <= max(tensor_at, size_at, stride_at, dtype_at or 0):
        return None
    dtype = dotted_name(call.args[dtype_at]) if dtype_at is not None else None
    tensors, sizes, strides = (call.args[i] for i in (tensor_at, size_at, stride_at))
    if grouped:
        if not (isinstance(tensors, ast.Tuple) and isinstance(sizes, ast.Tuple) and isinstance(strides, ast.Tuple)):
            return None
        groups = [tensors.elts, sizes.elts, strides.elts]
    else:
        groups = [[tensors], [sizes], [strides]]
    if not len(groups[0]) == len(groups[1]) == len(groups[2]):
        return None
    found = []
    for tensor, size, stride in zip(*groups, strict=True):
        layout = _layout(size, stride, dtype)
        if not isinstance(tensor, ast.Name) or layout is None:
            return None
        found.append((tensor.id, layout))
    return found


def _made(name: str, call: ast.Call, view: bool) -> list[tuple[str, WrittenLayout]] | None:
    """``empty_strided_cpu(sizes, strides, ...)`` or ``reinterpret_tensor(base, sizes, strides, offset)``."""
    args = call.args[1:] if view else call.args
    if len(args) < (3 if view else 2):
        return None
    dtype = dotted_name(args[2]) if not view and len(args) > 2 else None
    layout = _layout(args[0], args[1], dtype)
    if layout is None:
        return None
    if view:
        base = call.args[0]
        if not isinstance(base, ast.Name):
            return None
        layout = WrittenLayout(layout.size, layout.stride, fx_dim(ast.unparse(args[2])), base.id)
    return [(name, layout)]


def _layout(size: ast.expr, stride: ast.expr, dtype: str | None = None) -> WrittenLayout | None:
    if not (isinstance(size, ast.Tuple) and isinstance(stride, ast.Tuple)) or len(size.elts) != len(stride.elts):
        return None
    return WrittenLayout(_dims(size), _dims(stride), dtype=dtype)


def _dims(node: ast.Tuple) -> tuple[str, ...]:
    return tuple(fx_dim(ast.unparse(d)) for d in node.elts)


def view_layout(expression: str) -> WrittenLayout | None:
    """A launch argument written as ``reinterpret_tensor(base, sizes, strides, offset)``: its layout and base."""
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not (isinstance(node, ast.Call) and dotted_name(node.func) == compat.LAYOUT_VIEW):
        return None
    made = _made("", node, view=True)
    return made[0][1] if made else None
