"""Stage 4 of the pipeline (bench), hand-written side: the hand-written kernels as a report records them.

The source of the ``@triton.jit`` functions a catalog entry launches is read from ``kernels/<module>.py``
with ``ast`` (nothing is imported: no torch, no Triton) and kept in the run's records with the catalog
facts the report shows, so a saved report re-renders with the kernels it was built with.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from ..records import HandwrittenKernel
from .catalog import get

KERNELS_DIR = Path(__file__).parents[1] / "worker" / "handwritten" / "kernels"  # read as text, never imported here


@functools.cache
def _module_tree(module: str) -> tuple[str, ast.Module] | None:
    try:
        text = (KERNELS_DIR / f"{module}.py").read_text(encoding="utf-8")
        return text, ast.parse(text)
    except (OSError, SyntaxError):
        return None


def _is_jit(node: ast.FunctionDef) -> bool:
    """Decorated ``@triton.jit`` (or ``@jit``)."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Attribute) and target.attr == "jit") or (
            isinstance(target, ast.Name) and target.id == "jit"
        ):
            return True
    return False


def _with_helpers(names: tuple[str, ...], functions: dict[str, ast.FunctionDef]) -> set[str]:
    """The kernels and every @triton.jit function of the module they call, directly or not."""
    shown: set[str] = set()
    pending = [name for name in names if name in functions]
    while pending:
        name = pending.pop()
        if name in shown:
            continue
        shown.add(name)
        for call in ast.walk(functions[name]):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in functions:
                pending.append(call.func.id)
    return shown


def kernel_source(name: str) -> str:
    """The source of the Triton kernel(s) a hand-written equivalent launches and of the @triton.jit helpers
    they call, decorators included, in the module's order (so helpers come before the kernels)."""
    equivalent = get(name)
    parsed = _module_tree(equivalent.module)
    if parsed is None:
        return ""
    text, tree = parsed
    lines = text.splitlines()
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef) and _is_jit(node)}
    shown = _with_helpers(equivalent.kernels, functions)
    pieces = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in shown:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            pieces.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n\n\n".join(pieces)


def kernel_record(name: str) -> HandwrittenKernel:
    """What the report shows of one hand-written kernel, as this version of inductor-lens has it."""
    equivalent = get(name)
    return HandwrittenKernel(
        name, equivalent.summary, equivalent.formula, equivalent.dims, kernel_source(name)
    )
