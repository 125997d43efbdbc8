"""Parse stage: read the Python expressions Inductor writes (decorator arguments) without running them.

``ast.literal_eval`` refuses ``DeviceProperties(...)``, ``ReductionHint.INNER`` and ``set()``, all of
which appear in ``triton_meta`` / ``inductor_meta``. This evaluator turns such an expression into
JSON-safe data: calls become ``{"_call": name, **kwargs}``, attributes become dotted strings,
anything else its source text. Nothing is imported or executed.
"""

from __future__ import annotations

import ast
from typing import Any

_NAMED_CONSTANTS = {"True": True, "False": False, "None": None, "inf": float("inf"), "nan": float("nan")}


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` -> "a.b.c"; None for anything that is not a plain dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
    if isinstance(node, ast.Dict):
        return {_key(k): literal(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e) for e in node.elts]
    if isinstance(node, ast.Set):
        items = [literal(e) for e in node.elts]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(node, ast.Name):
        return _NAMED_CONSTANTS.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        return dotted_name(node) or ast.unparse(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = literal(node.operand)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Call):
        name = dotted_name(node.func) or ast.unparse(node.func)
        if name in ("set", "frozenset", "dict", "list", "tuple") and not node.args and not node.keywords:
            return {} if name == "dict" else []
        result: dict[str, Any] = {"_call": name}
        if node.args:
            result["_args"] = [literal(a) for a in node.args]
        for keyword in node.keywords:
            if keyword.arg is not None:
                result[keyword.arg] = literal(keyword.value)
        return result
    return ast.unparse(node)


def _key(node: ast.AST) -> str:
    """Dict keys as text: strings as they are, anything else (ints, tuples) as written."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)
