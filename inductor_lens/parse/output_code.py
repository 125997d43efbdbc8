"""Parse stage: Inductor's ``output_code.py`` -> kernels and the launch order of ``call()``.

The file is valid Python, so it is read with ``ast`` (never imported or run):
- module-level ``name = async_compile.triton('name', '''source''', ...)`` and
  ``name = async_compile.cpp_pybinding([...], r'''source''')`` define the kernels; the comment block
  above each (kernel path, source nodes, ATen ops, node mapping, graph fragment) is read by line;
- ``call()`` is walked statement by statement (``call_flow``); its checks of input and output layouts
  (``assert_size_stride``, torch 2.14's grouped form and ``assert_tensor_metadata``) are read by
  ``call_layouts``, and one that does not read is reported; kernel launches and extern calls become
  Launches, with the ``# Topologically Sorted Source Nodes`` / ``# [Provenance debug handles]``
  comments written since the previous launch, and the buffers each reads and writes;
- the benchmark harness ``get_args()`` gives each argument of ``call()`` a value at the size hints:
  under dynamic shapes, what each symbolic size was when the graph was compiled.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from ..records import KernelArg, KernelRecord, Launch, LaunchKind, NodeMapping
from ..records.codec import int_or_none
from . import compat
from .call_flow import DataFlow, call_statements, find_call, partition_functions, shape_read, tensor_type
from .call_layouts import read_layouts
from .diagnostics import Diagnostics
from .origins import origin_segments
from .pyliteral import dotted_name, literal


@dataclass(frozen=True)
class OutputCode:
    kernels: tuple[KernelRecord, ...]
    launches: tuple[Launch, ...]
    # Buffers call() allocates or views, with their tensor type ("bf16[1024, 8192]").
    buffers: dict[str, str] = field(default_factory=dict)
    # Names that share another's storage (``buf1 = buf0  # reuse``, views), mapped to it.
    aliases: dict[str, str] = field(default_factory=dict)
    # What call() returns, in order.
    outputs: tuple[str, ...] = ()
    # Sizes call() reads or computes under dynamic shapes, as written: {"s53": "arg2_1_size[1]"}.
    sizes: dict[str, str] = field(default_factory=dict)
    # What the benchmark harness passes for each argument of call(): an int (a size) or a tensor's sizes.
    harness: dict[str, int | float | tuple[int, ...]] = field(default_factory=dict)


def parse_output_code(text: str, where: str, diagnostics: Diagnostics) -> OutputCode:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        diagnostics.warn(where, f"not valid Python (line {exc.lineno}): {exc.msg}")
        return OutputCode(kernels=(), launches=())
    except (ValueError, RecursionError) as exc:  # null bytes (Python 3.10), nesting too deep
        diagnostics.warn(where, f"not valid Python: {exc}")
        return OutputCode(kernels=(), launches=())
    lines = text.splitlines()
    kernels: list[KernelRecord] = []
    for statement in tree.body:
        kernel = _kernel_definition(statement, lines, where, diagnostics)
        if kernel is not None:
            kernels.append(kernel)
    harness = _harness(tree)
    call = find_call(tree)
    if call is None:
        diagnostics.warn(where, "no call() function found; launch order unknown")
        return OutputCode(kernels=tuple(kernels), launches=(), harness=harness)
    by_name = {k.name: k for k in kernels}
    others = _other_definitions(tree)
    partitions = partition_functions(tree)
    flow = DataFlow.of(call, partitions)
    layouts = read_layouts(s for s, _ in call_statements(call.body, partitions))
    for written in layouts.unreadable:
        diagnostics.warn(where, f"call(): a layout check not read as sizes and strides: {written}")
    for name, layout in layouts.layouts.items():
        # torch 2.14 states an extern kernel's output type (assert_tensor_metadata); older ones leave it untyped
        if layout.dtype is not None and layout.base is None:
            flow.types.setdefault(name, tensor_type(layout.dtype, layout.size))
    launches = tuple(_launches(call, partitions, lines, by_name, others, flow, where, diagnostics))
    positions: dict[str, list[int]] = {}
    for launch in launches:
        positions.setdefault(launch.target, []).append(launch.position)
    kernels = [replace(k, launches=tuple(positions.get(k.name, ()))) for k in kernels]
    return OutputCode(
        kernels=tuple(kernels),
        launches=launches,
        buffers=flow.types,
        aliases=flow.aliases,
        outputs=flow.outputs,
        sizes=flow.sizes,
        harness=harness,
    )


def _harness(tree: ast.Module) -> dict[str, int | float | tuple[int, ...]]:
    """``arg1_1 = 24`` and ``arg2_1 = rand_strided((2, 24), ...)`` in ``get_args()``: the example inputs."""
    function = next(
        (s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == compat.HARNESS_FUNCTION), None
    )
    found: dict[str, int | float | tuple[int, ...]] = {}
    for statement in function.body if function is not None else ():
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            continue
        target, value = statement.targets[0], literal(statement.value)
        if not isinstance(target, ast.Name):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found[target.id] = value
        elif isinstance(value, dict) and value.get("_call") in compat.HARNESS_TENSOR_MAKERS:
            sizes = (value.get("_args") or [None])[0]
            if isinstance(sizes, list) and all(int_or_none(d) is not None for d in sizes):
                found[target.id] = tuple(sizes)
    return found



# --- kernel definitions ----------------------------------------------------------------------


def _kernel_definition(
    statement: ast.stmt, lines: list[str], where: str, diagnostics: Diagnostics
) -> KernelRecord | None:
    if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call)):
        return None
    if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
        return None
    definer = dotted_name(statement.value.func) or ""
    name = statement.targets[0].id
    if definer in compat.OTHER_DEFINERS:
        diagnostics.note(
            where, f"{name} is defined by {definer}, which this version does not show as a kernel"
        )
        return None
    backend = compat.KERNEL_DEFINERS.get(definer)
    if backend is None:
        if definer.startswith("async_compile."):
            diagnostics.warn(where, f"unrecognised kernel definition {definer} for {name}")
        return None
    source = _string_argument(statement.value)
    if source is None:
        diagnostics.warn(where, f"kernel {name}: no source string in {definer}(...)")
        return None
    header = _comment_block_above(lines, statement.lineno)
    common: dict[str, Any] = {
        "name": name,
        "source": source,
        "definition_line": statement.lineno,
        "origins": origin_segments(source),
        **header,
    }
    if backend == "triton":
        return _triton_kernel(common, where, diagnostics)
    return _cpp_kernel(common, statement.value)


def _other_definitions(tree: ast.Module) -> set[str]:
    """Names defined by ``compat.OTHER_DEFINERS``: kernels whose source is not read, launched all the same."""
    return {
        s.targets[0].id
        for s in tree.body
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
        and isinstance(s.value, ast.Call) and dotted_name(s.value.func) in compat.OTHER_DEFINERS
    }


def _string_argument(call: ast.Call) -> str | None:
    """The kernel source: the longest string constant among the positional arguments."""
    strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return max(strings, key=len) if strings else None


def _comment_block_above(lines: list[str], lineno: int) -> dict[str, Any]:
    """Read the ``# kernel path / Source Nodes / mapping / Graph fragment`` block above a definition."""
    block: list[str] = []
    index = lineno - 2
    while index >= 0 and lines[index].lstrip().startswith("#"):
        block.append(lines[index].strip())
        index -= 1
    block.reverse()
    result: dict[str, Any] = {
        "kernel_path": None,
        "source_nodes": (),
        "aten_ops": (),
        "node_mappings": (),
        "graph_fragment": "",
    }
    section = None
    mappings: list[NodeMapping] = []
    fragment: list[str] = []
    for line in block:
        if match := compat.KERNEL_PATH_COMMENT.match(line):
            result["kernel_path"] = match["path"]
            section = None
        elif match := compat.SOURCE_NODES_COMMENT.match(line):
            result["source_nodes"] = _split_names(match["nodes"])
            result["aten_ops"] = _split_names(match["aten"])
            section = None
        elif line.startswith("# Source node to ATen node mapping:"):
            section = "mapping"
        elif line.startswith("# Graph fragment:"):
            section = "fragment"
        elif section == "mapping" and "=>" in line:
            source, _, targets = line.lstrip("# ").partition("=>")
            mappings.append(NodeMapping(source_node=source.strip(), aten_nodes=_split_names(targets)))
        elif section == "fragment":
            fragment.append(line[1:].removeprefix("   ") if line.startswith("#") else line)
    result["node_mappings"] = tuple(mappings)
    result["graph_fragment"] = "\n".join(fragment)
    return result


def _split_names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _triton_kernel(common: dict[str, Any], where: str, diagnostics: Diagnostics) -> KernelRecord:
    name = common["name"]
    try:
        tree = ast.parse(common["source"])
    except (SyntaxError, ValueError, RecursionError) as exc:
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        diagnostics.warn(where, f"Triton kernel {name}: source is not valid Python ({message})")
        return KernelRecord(backend="triton", category=_category_from_name(name), **common)
    jit = next(
        (
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and any(_is_triton_jit(d) for d in node.decorator_list)
        ),
        None,
    )
    if jit is None:
        diagnostics.warn(where, f"Triton kernel {name}: no @triton.jit function in its source")
        return KernelRecord(backend="triton", category=_category_from_name(name), **common)
    arg_names = [a.arg for a in jit.args.args]
    heuristic, keywords = _heuristics_decorator(jit)
    category = compat.TRITON_HEURISTIC_CATEGORIES.get(heuristic or "", "")
    if not category:
        category = _category_from_name(name)
        if heuristic is not None:
            diagnostics.warn(where, f"Triton kernel {name}: unknown heuristics decorator {heuristic!r}")
    triton_meta = _object(keywords.get("triton_meta"))
    inductor_meta = _object(keywords.get("inductor_meta"))
    signature = compat.normalize_signature(triton_meta.get("signature"), arg_names)
    args = tuple(KernelArg(name=a, type=signature.get(a, _annotation(jit, a))) for a in arg_names)
    launch_config: dict[str, Any] = {}
    for key in ("num_warps", "num_stages", "reduction_hint", "min_elem_per_thread"):
        if key in keywords:
            launch_config[key] = keywords[key]
    for key in ("grid_type", "config_args", "tiling_scores"):
        if key in inductor_meta:
            launch_config[key] = inductor_meta[key]
    if isinstance(triton_meta.get("device"), dict):
        launch_config["device"] = {k: v for k, v in triton_meta["device"].items() if k != "_call"}
    kernel_num_gb = inductor_meta.get("kernel_num_gb")
    return KernelRecord(
        backend="triton",
        category=category,
        args=args,
        size_hints=compat.normalize_size_hints(keywords.get("size_hints")),
        num_load=int_or_none(inductor_meta.get("num_load")),
        num_store=int_or_none(inductor_meta.get("num_store")),
        num_reduction=int_or_none(inductor_meta.get("num_reduction")),
        bytes_accessed=round(kernel_num_gb * 1e9) if _finite(kernel_num_gb) else None,
        flops=int_or_none(inductor_meta.get("kernel_flop")),
        launch_config=launch_config,
        inductor_meta=inductor_meta,
        **common,
    )


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return dotted_name(target) in ("triton.jit", "jit")


def _heuristics_decorator(function: ast.FunctionDef) -> tuple[str | None, dict[str, Any]]:
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call):
            name = dotted_name(decorator.func) or ""
            if name.startswith("triton_heuristics."):
                keywords = {k.arg: literal(k.value) for k in decorator.keywords if k.arg is not None}
                return name.removeprefix("triton_heuristics."), keywords
    return None, {}


def _annotation(function: ast.FunctionDef, arg_name: str) -> str:
    for arg in function.args.args:
        if arg.arg == arg_name and arg.annotation is not None:
            return ast.unparse(arg.annotation).removeprefix("tl.")
    return ""


def _category_from_name(name: str) -> str:
    for prefix, category in compat.TRITON_NAME_CATEGORIES.items():
        if name.startswith(prefix):
            return category
    return "other"


def _finite(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)



_CPP_SIGNATURE = re.compile(r'extern\s+"C"\s+[\w\s]*?\bkernel\s*\((?P<params>[^)]*)\)', re.S)


def _cpp_kernel(common: dict[str, Any], call: ast.Call) -> KernelRecord:
    source: str = common["source"]
    types: list[str] = []
    if call.args and isinstance(call.args[0], ast.List):
        types = [str(literal(e)) for e in call.args[0].elts]
    names: list[str] = []
    if match := _CPP_SIGNATURE.search(source):
        for param in match["params"].split(","):
            param = " ".join(param.split())
            if param:
                names.append(re.split(r"[\s*&]+", param)[-1])
    count = max(len(types), len(names))
    args = tuple(
        KernelArg(
            name=names[i] if i < len(names) else f"arg{i}",
            type=types[i] if i < len(types) else "",
        )
        for i in range(count)
    )
    # C++ kernels carry no heuristics decorator: the category is read off the generated loops.
    if "MicroGemm" in common["name"] or "cpp_CppMicroGemm" in source:
        category = "template"
    elif "tmp_acc" in source:
        category = "reduction"
    else:
        category = "pointwise"
    return KernelRecord(backend="cpp", category=category, args=args, **common)


# --- call() ------------------------------------------------------------------------------------


def _launches(
    call: ast.FunctionDef,
    partitions: list[ast.FunctionDef],
    lines: list[str],
    kernels: dict[str, KernelRecord],
    others: set[str],
    flow: DataFlow,
    where: str,
    diagnostics: Diagnostics,
) -> Iterator[Launch]:
    kernel_backends: dict[str, str] = {name: _OTHER for name in others}
    kernel_backends.update({name: kernel.backend for name, kernel in kernels.items()})
    found: list[tuple[ast.stmt, int | None, LaunchKind, str]] = []
    for statement, partition in call_statements(call.body, partitions):
        launched = _launch_target(statement, kernel_backends, where, diagnostics)
        if launched is not None:
            found.append((statement, partition, *launched))
    launch_ends = sorted((s.end_lineno or s.lineno) for s, *_ in found)
    for position, (statement, partition, kind, target) in enumerate(found, start=1):
        # The comments that describe a launch sit between it and the launch before it in the file.
        function_start = call.lineno if partition is None else partitions[partition].lineno
        start = max([function_start] + [e for e in launch_ends if e < statement.lineno])
        nodes: tuple[str, ...] = ()
        aten: tuple[str, ...] = ()
        handle = None
        for line in lines[start : statement.lineno - 1]:
            stripped = line.strip()
            if match := compat.SOURCE_NODES_COMMENT.match(stripped):
                nodes, aten = _split_names(match["nodes"]), _split_names(match["aten"])
            elif match := compat.PROVENANCE_HANDLE_COMMENT.match(stripped):
                handle = match["handle"]
        end = statement.end_lineno or statement.lineno
        reads, writes = flow.accesses(statement, kernels.get(target))
        # a kernel of another kind runs no one ATen op: its comment's ops are its own
        aten_op = compat.extern_aten_op(target) if kind == "extern" and target not in others else None
        if aten_op is not None:
            aten = compat.extern_own_ops(aten, aten_op)
        call_node = getattr(statement, "value", None)
        args = tuple(ast.unparse(a) for a in call_node.args) if isinstance(call_node, ast.Call) else ()
        yield Launch(
            position=position,
            kind=kind,
            target=target,
            line=statement.lineno,
            code="\n".join(line.strip() for line in lines[statement.lineno - 1 : end]),
            aten_op=aten_op,
            source_nodes=nodes,
            aten_ops=aten,
            handle=handle,
            partition=partition,
            reads=reads,
            writes=writes,
            args=args,
        )


# The backend given to kernels of compat.OTHER_DEFINERS while call() is read: launched as library calls.
_OTHER = "other"


def _launch_target(
    statement: ast.stmt, kernel_backends: Mapping[str, str], where: str, diagnostics: Diagnostics
) -> tuple[LaunchKind, str] | None:
    if isinstance(statement, (ast.Expr, ast.Assign, ast.AnnAssign)):
        value = statement.value
    elif isinstance(statement, (ast.Delete, ast.Return, ast.Pass, ast.Assert, ast.AugAssign)):
        return None
    else:
        diagnostics.warn(where, f"call(): unrecognised statement {type(statement).__name__}")
        return None
    if not isinstance(value, ast.Call):
        return None
    target = dotted_name(value.func)
    if target is None:
        diagnostics.warn(where, f"call(): unrecognised call {ast.unparse(value.func)[:60]}")
        return None
    head, _, method = target.rpartition(".")
    if shape_read(statement):
        return None
    if method == compat.TRITON_LAUNCH_METHOD and kernel_backends.get(head) == "triton":
        return "triton", head
    if kernel_backends.get(target) == "cpp":
        return "cpp", target
    if _OTHER in (kernel_backends.get(target), kernel_backends.get(head)):
        return "extern", target if kernel_backends.get(target) == _OTHER else head
    if compat.is_wrapper_helper(target):
        return None
    if target.startswith(compat.EXTERN_PREFIXES):
        return "extern", target
    if method in ("copy_", "resize_", "set_", "fill_", "zero_", "record_stream", "synchronize"):
        return None
    diagnostics.warn(where, f"call(): unrecognised call {target}")
    return None


def _object(value: Any) -> dict[str, Any]:
    """A literal the decorator passed as a dict (triton_meta, inductor_meta); anything else reads as empty."""
    return value if isinstance(value, dict) else {}
