"""Parse stage: symbolic sizes (dynamic shapes), and their values at the size hints.

Under dynamic shapes Inductor writes sizes as expressions of symbols: ``f32[s77, 4096]`` and
``Sym(2*s53)`` in the FX graphs, ``empty_strided_cpu((s27*s77, 1536), ...)`` in ``call()``. Each
symbol had one value when the graph was compiled, its *hint*: ``create_symbol``'s ``val`` in the
trace, or the number Inductor's benchmark harness (``get_args()``) passes for it. Sizes worked out at
the hints give bytes, FLOPs and hand-written shapes for the inputs the graph was compiled for.

``evaluate`` is a small evaluator over integers, the symbols, ``+ - * // % **``, parentheses and
sympy's ``Max``/``Min``/``FloorDiv``/``CeilDiv`` as Inductor prints them: nothing is imported or run,
any other name or construct gives None. The bench stage, the hand-written matching and the report
read types through ``tensor_dims`` and ``annotate``, so every one evaluates a size the same way.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping

from . import compat

Hints = Mapping[str, int | float]

# The type FX prints for a tensor: dtype, then its sizes in brackets (strides and device may follow).
_TENSOR = re.compile(r"^(?P<dtype>[a-z0-9]+|\?)\[(?P<dims>[^\]]*)\]")
# The type FX prints for a symbolic int, float or bool: Sym(s53), Sym(2*s53), Sym(Eq(s0, 4)).
SYM_TYPE = re.compile(r"^Sym\((?P<expr>.*)\)$")
_SYMBOL = re.compile(rf"\b(?:{'|'.join(compat.SIZE_SYMBOL_PREFIXES)})\d+\b")
# Values beyond this are not sizes (a guard against ``s0**s0`` blowing up).
_LIMIT = 1 << 62


def symbols_in(text: str | None) -> tuple[str, ...]:
    """The size symbols a type or an expression mentions, in order of first appearance."""
    return tuple(dict.fromkeys(_SYMBOL.findall(text or "")))


def is_symbolic(text: str | None) -> bool:
    return bool(_SYMBOL.search(text or ""))


def is_symbol(name: str) -> bool:
    """``s53``, ``ps0``: a name that is one size symbol."""
    return _SYMBOL.fullmatch(name) is not None


def split_dims(text: str) -> list[str]:
    """``2, s53, (s0//2)`` -> the sizes, split on the commas outside parentheses."""
    dims: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += char in "(["
        depth -= char in ")]"
        if char == "," and depth == 0:
            dims.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        dims.append("".join(current).strip())
    return dims


def tensor_dims(text: str | None, hints: Hints | None = None) -> tuple[str, list[int]] | None:
    """``bf16[1024, 8192]`` -> ("bf16", [1024, 8192]); symbolic sizes at their ``hints`` (else None)."""
    match = _TENSOR.match(text or "")
    if match is None:
        return None
    dims = []
    for dim in split_dims(match["dims"]):
        value = int(dim) if dim.isdigit() else evaluate(dim, hints or {})
        if not isinstance(value, int):
            return None
        dims.append(value)
    return match["dtype"], dims


def evaluate(expression: str, hints: Hints) -> int | float | None:
    """The value of a size expression with each symbol at its hint; None where it cannot be worked out."""
    text = expression.strip()
    if text.isascii() and text.isdigit():  # most sizes and strides of a call() are plain numbers
        number = int(text)
        return number if number <= _LIMIT else None
    tree = _parsed(text)
    if tree is None:
        return None
    try:
        value = _value(tree, hints)
    except (ArithmeticError, RecursionError, ValueError):
        return None
    if value is None or isinstance(value, bool) or abs(value) > _LIMIT:
        return None
    return value


@functools.lru_cache(maxsize=1 << 14)
def _parsed(expression: str) -> ast.expr | None:
    """The expression's tree, parsed once (a graph's sizes repeat the same few expressions thousands of times)."""
    try:
        return ast.parse(expression, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def _value(node: ast.expr, hints: Hints) -> int | float | None:
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(node, ast.Name):
        return hints.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand, hints)
        return None if inner is None else -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, hints), _value(node.right, hints)
        if left is None or right is None:
            return None
        return _binary(node.op, left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_value(a, hints) for a in node.args]
        if not args or any(a is None for a in args):
            return None
        values = [a for a in args if a is not None]
        name = node.func.id
        if name in ("Max", "max"):
            return max(values)
        if name in ("Min", "min"):
            return min(values)
        if name == "FloorDiv" and len(values) == 2:
            return _binary(ast.FloorDiv(), values[0], values[1])
        if name == "CeilDiv" and len(values) == 2 and values[1]:
            return -(-values[0] // values[1])
    return None


def _binary(op: ast.operator, left: int | float, right: int | float) -> int | float | None:
    if isinstance(op, ast.Add):
        return left + right
    if isinstance(op, ast.Sub):
        return left - right
    if isinstance(op, ast.Mult):
        return left * right
    if isinstance(op, ast.FloorDiv):
        return left // right if right else None
    if isinstance(op, ast.Mod):
        return left % right if right else None
    if isinstance(op, ast.Pow) and isinstance(right, int) and 0 <= right <= 64:
        return left**right if abs(left) < _LIMIT ** (1 / max(right, 1)) else None
    return None


def annotate(text: str | None, hints: Hints) -> str:
    """A type with each symbolic size followed by its hint: ``f32[s0, 1024]`` -> ``f32[s0=24, 1024]``."""
    if not text or not is_symbolic(text):
        return text or ""
    match = _TENSOR.match(text)
    if match is not None:
        dims = []
        for dim in split_dims(match["dims"]):
            value = evaluate(dim, hints) if is_symbolic(dim) else None
            dims.append(f"{dim}={_number(value)}" if value is not None else dim)
        return f"{match['dtype']}[{', '.join(dims)}]{text[match.end() :]}"
    if (sym := SYM_TYPE.match(text)) is not None:
        value = evaluate(sym["expr"], hints)
        return f"{text}={_number(value)}" if value is not None else text
    return text


def _number(value: int | float) -> str:
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))
