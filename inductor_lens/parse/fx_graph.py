"""Parse stage: ``fx_graph_readable.py`` / ``fx_graph_transformed.py`` -> FxGraph nodes.

These files are FX's printed code (``class <lambda>(torch.nn.Module)`` is not valid Python), one
node per line::

    def forward(self, arg0_1: "f32[128, 64]", ...):
        # File: model.py:17 in forward, code: return self.fc2(self.relu(self.fc1(x)))
        permute: "f32[64, 128]" = torch.ops.aten.permute.default(arg0_1, [1, 0]);  arg0_1 = None
        getitem: "f32[8, 256, 1]" = var_mean[0]
        return (addmm_1,)

so they are read line by line. The ``# File:`` comment above a run of nodes is the user source
line they came from. Under dynamic shapes, sizes are symbols (``f32[s53, 32]``) and FX computes
sizes with Python operators on symbolic ints, a node typed ``Sym(...)``::

    mul_8: "Sym(2*s53)" = 2 * arg1_1

which becomes a ``call_function`` node whose target is the operator (``operator.mul``).
"""

from __future__ import annotations

import ast
import re
from typing import Literal

from ..records import FxGraph, FxNode, SourceLine
from .diagnostics import Diagnostics
from .source_lines import from_fx_comment

# The dtypes as FX graphs print them in tensor annotations (``f32[8, 512]``), by their torch names.
FX_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64", "fp8": "float8"}

_CLASS = re.compile(r"^class \S+\(.*\):\s*$")
_FORWARD = re.compile(r"^def forward\(self,?\s*(?P<params>.*)\):\s*$")
_PARAM = re.compile(r'(?P<name>\w+)\s*(?::\s*"(?P<type>[^"]*)")?')
_NODE = re.compile(r'^(?P<name>\w+)(?:\s*:\s*"(?P<type>[^"]*)")?\s*=\s*(?P<expr>.+?)\s*$')
_CLEANUP = re.compile(r";\s+(?:\w+\s*=\s*)+None\s*$")
_CALL = re.compile(r"^(?P<target>[\w.]+)\((?P<args>.*)\)$")
_GETITEM = re.compile(r"^(?P<base>\w+)\[(?P<index>[^\]]+)\]$")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_FILE_COMMENT = re.compile(r"^#\s*File:\s*(?P<source>.+)$")
_NO_STACK = "# No stacktrace found"


def parse_fx_graph(
    text: str, stage: Literal["readable", "transformed"], where: str, diagnostics: Diagnostics
) -> FxGraph:
    nodes: list[FxNode] = []
    known: set[str] = set()
    source: SourceLine | None = None
    seen_forward = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if _CLASS.match(line):
            if seen_forward:
                # FX prints the submodules of higher-order ops after the top-level forward.
                diagnostics.note(where, "nested subgraph modules (higher-order ops) are not listed")
                break
            continue
        if match := _FORWARD.match(line):
            if seen_forward:
                diagnostics.warn(where, "a second forward() outside any nested module")
                break
            seen_forward = True
            for param in _split_top_level(match["params"]):
                if p := _PARAM.match(param.strip()):
                    nodes.append(
                        FxNode(
                            name=p["name"], op="placeholder", target=p["name"], type=p["type"], line=number
                        )
                    )
                    known.add(p["name"])
            continue
        if line.startswith("#"):
            if match := _FILE_COMMENT.match(line):
                source = from_fx_comment(match["source"])
            elif line.startswith(_NO_STACK):
                source = None
            continue
        if line.startswith("return"):
            returned = line.removeprefix("return").strip()
            inputs = tuple(t for t in _IDENT.findall(returned) if t in known)
            nodes.append(FxNode(name="output", op="output", target="output", inputs=inputs, line=number))
            continue
        node = _node(line, number, known, source)
        if node is None:
            diagnostics.warn(where, f"unrecognised FX line: {line[:80]}")
            continue
        nodes.append(node)
        known.add(node.name)
    if not nodes:
        diagnostics.warn(where, "no FX nodes found")
    return FxGraph(stage=stage, nodes=tuple(nodes), code=text)


def _node(line: str, number: int, known: set[str], source: SourceLine | None) -> FxNode | None:
    match = _NODE.match(line)
    if match is None:
        return None
    expr = _CLEANUP.sub("", match["expr"]).strip()
    if call := _CALL.match(expr):
        target = call["target"].removeprefix("torch.ops.")
        inputs = tuple(dict.fromkeys(t for t in _IDENT.findall(call["args"]) if t in known))
        return FxNode(
            name=match["name"],
            op="call_function",
            target=target,
            type=match["type"],
            inputs=inputs,
            source=source,
            line=number,
        )
    if item := _GETITEM.match(expr):
        inputs = (item["base"],) if item["base"] in known else ()
        return FxNode(
            name=match["name"],
            op="call_function",
            target="getitem",
            type=match["type"],
            inputs=inputs,
            source=source,
            line=number,
        )
    if (operator := _operator(expr)) is not None:
        inputs = tuple(dict.fromkeys(t for t in _IDENT.findall(expr) if t in known))
        return FxNode(
            name=match["name"],
            op="call_function",
            target=f"operator.{operator}",
            type=match["type"],
            inputs=inputs,
            source=source,
            line=number,
        )
    if expr.startswith("self."):
        return FxNode(
            name=match["name"], op="get_attr", target=expr, type=match["type"], source=source, line=number
        )
    return None


# Python operators FX prints in place of a call for symbolic ints (torch.fx.graph's magic methods).
_OPERATORS: dict[type, str] = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.FloorDiv: "floordiv", ast.Div: "truediv",
    ast.Mod: "mod", ast.Pow: "pow", ast.USub: "neg", ast.UAdd: "pos", ast.Eq: "eq", ast.NotEq: "ne",
    ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.And: "and_", ast.Or: "or_", ast.Not: "not_",
    ast.BitAnd: "and_", ast.BitOr: "or_",
}  # fmt: skip


def _operator(expr: str) -> str | None:
    """``2 * arg1_1`` -> "mul": one operator applied to names and numbers, else None."""
    try:
        node = ast.parse(expr, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    op: ast.AST
    if isinstance(node, ast.BinOp):
        op, operands = node.op, [node.left, node.right]
    elif isinstance(node, ast.UnaryOp):
        op, operands = node.op, [node.operand]
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        op, operands = node.ops[0], [node.left, *node.comparators]
    elif isinstance(node, ast.BoolOp):
        op, operands = node.op, list(node.values)
    else:
        return None
    if not all(isinstance(o, (ast.Name, ast.Constant)) for o in operands):
        return None
    return _OPERATORS.get(type(op))


def _split_top_level(params: str) -> list[str]:
    """Split ``a: "f32[1, 2]", b`` on the commas that are not inside quotes or brackets."""
    parts: list[str] = []
    depth = 0
    quoted = False
    current: list[str] = []
    for char in params:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "([":
            depth += 1
        elif not quoted and char in ")]":
            depth -= 1
        if char == "," and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts
