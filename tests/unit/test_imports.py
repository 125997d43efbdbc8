"""The package map holds: the process boundary is the package boundary, and no module imports itself in a circle.

Every import of every module under ``inductor_lens/`` is read from its source (module level, inside functions,
under ``TYPE_CHECKING``), resolved to the module it names, and checked against the rules of the architecture
(docs/architecture.md):

- the tool side enters ``worker/`` (the side that runs next to torch) through two doors only: the in-process
  capture (``worker/inprocess.py``) and the hand-written check (``worker/handwritten/check.py``);
- ``worker/`` never imports the tool's later stages (bench, report, compare, repro, the pipeline, the CLI);
- ``exchange/``, what crosses the boundary, imports nothing but records and the standard library (no torch);
- ``report/`` reads records only: it imports no parser, no analysis, no other stage (only where its files go);
- no import cycle, counting every import (a cycle broken only by importing inside a function is still one).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "inductor_lens"
DOORS = frozenset({"inductor_lens.worker.inprocess", "inductor_lens.worker.handwritten.check"})
# What worker/ may not import: the tool's stages after the capture, and its front ends.
WORKER_NEVER = ("bench", "analysis", "report", "compare", "repro", "pipeline", "ranked", "ranked_plan", "ranked_reports", "cli",
                "api", "stages", "capture")
# What report/ may import besides itself: the records, and where its files go (the names of a capture's files,
# the render cache's folder).
REPORT_READS = ("records", "errors", "units", "version", "exchange", "caches")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def imports_of(name: str, source: str, known: Iterable[str], *, is_package: bool) -> set[str]:
    """The project's modules ``source`` imports, resolved (``from . import x`` names the module x where x is
    one, else the package)."""
    known = set(known)
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("inductor_lens"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("inductor_lens"):
                continue
            submodules = {f"{target}.{a.name}" for a in node.names} & known
            found.update(submodules or {target})
            if submodules and len(submodules) < len(node.names):
                found.add(target)
    found.discard(name)
    return {m for m in found if m in known}


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    found = modules()
    return {
        name: frozenset(imports_of(name, path.read_text(encoding="utf-8"), found, is_package=path.name == "__init__.py"))
        for name, path in found.items()
    }


def import_graph() -> dict[str, set[str]]:
    """Each module's imports of the project's modules (read once per test session; a fresh copy per call)."""
    return {name: set(imported) for name, imported in _graph().items()}


def _area(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def boundary_violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Each import that breaks a rule of the module docstring, as 'importer -> imported: why'."""
    found = []
    for importer, imported in sorted(graph.items()):
        area = _area(importer)
        for target in sorted(imported):
            to = _area(target)
            if area != "worker" and to == "worker" and target not in DOORS:
                found.append(f"{importer} -> {target}: the tool side enters worker/ by {sorted(DOORS)} only")
            if area == "worker" and to in WORKER_NEVER:
                found.append(f"{importer} -> {target}: worker/ never imports the tool's {to}")
            if area == "exchange" and to not in ("exchange", "records"):
                found.append(f"{importer} -> {target}: exchange/ imports records and the standard library only")
            if area == "report" and to not in (*REPORT_READS, "report"):
                found.append(f"{importer} -> {target}: report/ reads records only")
    return found


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_tool_enters_worker_by_two_doors_and_report_reads_records_only() -> None:
    assert boundary_violations(import_graph()) == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_exchange_never_imports_torch() -> None:
    for path in (PACKAGE / "exchange").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] in ("torch", "triton")], path


def test_the_checks_catch_an_import_put_back() -> None:
    """The rules fail on the imports this layout removed: one across the boundary, one running back up a
    layer, one closing a circle."""
    graph = {name: set(imported) for name, imported in import_graph().items()}
    graph["inductor_lens.bench"].add("inductor_lens.worker.measure")
    graph["inductor_lens.report.kernel_view"].add("inductor_lens.parse.symbolic")
    assert boundary_violations(graph) == [
        "inductor_lens.bench -> inductor_lens.worker.measure: the tool side enters worker/ by "
        "['inductor_lens.worker.handwritten.check', 'inductor_lens.worker.inprocess'] only",
        "inductor_lens.report.kernel_view -> inductor_lens.parse.symbolic: report/ reads records only",
    ]
    graph["inductor_lens.worker.measure"].add("inductor_lens.worker.graph_free")
    assert cycles(graph) == [["inductor_lens.worker.graph_free", "inductor_lens.worker.measure"]]


def test_imports_are_read_as_python_resolves_them() -> None:
    known = {"inductor_lens.a", "inductor_lens.a.b", "inductor_lens.a.c", "inductor_lens.d"}
    source = "from . import b\nfrom .c import thing\nfrom .. import d\ndef f():\n    from inductor_lens.a import b, other\n"
    assert imports_of("inductor_lens.a.x", source, known, is_package=False) == {
        "inductor_lens.a.b", "inductor_lens.a.c", "inductor_lens.d", "inductor_lens.a"}  # fmt: skip


def test_no_module_over_450_lines_outside_the_kernel_library() -> None:
    """A module a reader takes in at once: the kernel library's modules (a kernel, its launcher, reference and
    configurations each) are the exception."""
    kernels = PACKAGE / "worker" / "handwritten" / "kernels"
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if kernels not in path.parents and (lines := len(path.read_text(encoding="utf-8").splitlines())) > 450
    }
    assert not long
