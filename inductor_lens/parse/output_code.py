"""Parse stage: Inductor's ``output_code.py`` -> kernels and the launch order of ``call()``.

The file is valid Python, so it is read with ``ast`` (never imported or run):
- module-level ``name = async_compile.triton('name', '''source''', ...)`` and
  ``name = async_compile.cpp_pybinding([...], r'''source''')`` define the kernels; the comment block
  above each (kernel path, source nodes, ATen ops, node mapping, graph fragment) is read by line;
- ``call()`` is walked statement by statement; kernel launches and extern calls become Launches,
  with the ``# Topologically Sorted Source Nodes`` / ``# [Provenance debug handles]`` comments
  written since the previous launch.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..records import KernelArg, KernelRecord, Launch, LaunchKind, NodeMapping, OriginSegment
from . import compat
from .diagnostics import Diagnostics
from .pyliteral import dotted_name, literal
from .source_lines import from_traceback, user_frames


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


def parse_output_code(text: str, where: str, diagnostics: Diagnostics) -> OutputCode:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        diagnostics.warn(where, f"not valid Python (line {exc.lineno}): {exc.msg}")
        return OutputCode(kernels=(), launches=())
    lines = text.splitlines()
    kernels: list[KernelRecord] = []
    for statement in tree.body:
        kernel = _kernel_definition(statement, lines, where, diagnostics)
        if kernel is not None:
            kernels.append(kernel)
    call = _find_call(tree)
    if call is None:
        diagnostics.warn(where, "no call() function found; launch order unknown")
        return OutputCode(kernels=tuple(kernels), launches=())
    by_name = {k.name: k for k in kernels}
    partitions = _partition_functions(tree)
    flow = _DataFlow.of(call, partitions)
    launches = tuple(_launches(call, partitions, lines, by_name, flow, where, diagnostics))
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
    )


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
    except SyntaxError as exc:
        diagnostics.warn(where, f"Triton kernel {name}: source is not valid Python ({exc.msg})")
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
    triton_meta = keywords.get("triton_meta") if isinstance(keywords.get("triton_meta"), dict) else {}
    inductor_meta = keywords.get("inductor_meta") if isinstance(keywords.get("inductor_meta"), dict) else {}
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
        num_load=_int_or_none(inductor_meta.get("num_load")),
        num_store=_int_or_none(inductor_meta.get("num_store")),
        num_reduction=_int_or_none(inductor_meta.get("num_reduction")),
        bytes_accessed=round(kernel_num_gb * 1e9) if isinstance(kernel_num_gb, (int, float)) else None,
        flops=_int_or_none(inductor_meta.get("kernel_flop")),
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


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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


def _find_call(tree: ast.Module) -> ast.FunctionDef | None:
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef) and statement.name in compat.CALL_CONTAINERS:
            for item in statement.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == "call":
            return statement
    return None


def _partition_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """Graph partitions (cudagraph trees, seen 2.11): ``runner = Runner(partitions=[partition_0, ...])``."""
    functions = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    for statement in tree.body:
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Call)
            and dotted_name(statement.value.func) in compat.CALL_CONTAINERS
        ):
            for keyword in statement.value.keywords:
                if keyword.arg == "partitions" and isinstance(keyword.value, (ast.List, ast.Tuple)):
                    names = [dotted_name(e) for e in keyword.value.elts]
                    return [functions[n] for n in names if n in functions]
    return []


def _statements(
    body: list[ast.stmt], partitions: list[ast.FunctionDef], partition: int | None = None
) -> Iterator[tuple[ast.stmt, int | None]]:
    """Every simple statement of call() in execution order, with partition bodies inlined."""
    for statement in body:
        if isinstance(statement, (ast.With, ast.If, ast.For, ast.While, ast.Try)):
            yield from _statements(statement.body, partitions, partition)
            yield from _statements(getattr(statement, "orelse", []), partitions, partition)
            continue
        index = _partition_call(statement)
        if index is not None and index < len(partitions):
            yield from _statements(partitions[index].body, partitions, index)
            continue
        yield statement, partition


def _partition_call(statement: ast.stmt) -> int | None:
    """``self.partitions[0](args)`` -> 0."""
    value = getattr(statement, "value", None)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Subscript):
        subscript = value.func
        if dotted_name(subscript.value) == "self.partitions" and isinstance(subscript.slice, ast.Constant):
            index = subscript.slice.value
            return index if isinstance(index, int) else None
    return None


def _launches(
    call: ast.FunctionDef,
    partitions: list[ast.FunctionDef],
    lines: list[str],
    kernels: dict[str, KernelRecord],
    flow: _DataFlow,
    where: str,
    diagnostics: Diagnostics,
) -> Iterator[Launch]:
    kernel_backends = {name: kernel.backend for name, kernel in kernels.items()}
    found: list[tuple[ast.stmt, int | None, LaunchKind, str]] = []
    for statement, partition in _statements(call.body, partitions):
        target = _launch_target(statement, kernel_backends, where, diagnostics)
        if target is not None:
            found.append((statement, partition, *target))
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
        call_node = getattr(statement, "value", None)
        args = tuple(ast.unparse(a) for a in call_node.args) if isinstance(call_node, ast.Call) else ()
        yield Launch(
            position=position,
            kind=kind,
            target=target,
            line=statement.lineno,
            code="\n".join(line.strip() for line in lines[statement.lineno - 1 : end]),
            aten_op=compat.extern_aten_op(target) if kind == "extern" else None,
            source_nodes=nodes,
            aten_ops=aten,
            handle=handle,
            partition=partition,
            reads=reads,
            writes=writes,
            args=args,
        )


def _launch_target(
    statement: ast.stmt, kernel_backends: dict[str, str], where: str, diagnostics: Diagnostics
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
    if method == compat.TRITON_LAUNCH_METHOD and kernel_backends.get(head) == "triton":
        return "triton", head
    if kernel_backends.get(target) == "cpp":
        return "cpp", target
    if compat.is_wrapper_helper(target):
        return None
    if target.startswith(compat.EXTERN_PREFIXES):
        return "extern", target
    if method in ("copy_", "resize_", "set_", "fill_", "zero_", "record_stream", "synchronize"):
        return None
    diagnostics.warn(where, f"call(): unrecognised call {target}")
    return None


# --- data flow between launches ------------------------------------------------------------------

# Short dtype names as FX prints them in its type annotations.
_DTYPES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64", "int32": "i32",
    "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2",
}  # fmt: skip
_ALLOCATORS = ("empty_strided",)
_VIEW_HELPERS = {"reinterpret_tensor", "torch.as_strided", "as_strided"}


@dataclass
class _DataFlow:
    """Buffer types and aliases in call(): ``buf1 = buf0  # reuse`` makes buf1 the same storage as buf0."""

    types: dict[str, str]
    aliases: dict[str, str]
    outputs: tuple[str, ...] = ()

    @classmethod
    def of(cls, call: ast.FunctionDef, partitions: list[ast.FunctionDef]) -> _DataFlow:
        flow = cls(types={}, aliases={})
        for statement in call.body:
            if isinstance(statement, ast.Return) and isinstance(statement.value, (ast.Tuple, ast.List)):
                flow.outputs = tuple(
                    n for e in statement.value.elts if (n := flow._tensor_name(e)) is not None
                )
        for statement, _ in _statements(call.body, partitions):
            if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
                continue
            target = statement.targets[0]
            if not isinstance(target, ast.Name):
                continue
            value = statement.value
            if isinstance(value, ast.Call) and (dotted_name(value.func) or "").startswith(_ALLOCATORS):
                flow.types[target.id] = _allocation_type(value)
            elif not isinstance(value, ast.Call) or dotted_name(value.func) in _VIEW_HELPERS:
                # `buf1 = buf0`, `buf6 = buf5[0]`, `buf16 = reinterpret_tensor(buf15, ...)`: same storage
                base = flow._tensor_name(value)
                if base is not None and base != target.id:
                    flow.aliases[target.id] = base
                    if isinstance(value, ast.Call) and base in flow.types and len(value.args) > 1:
                        flow.types[target.id] = _view_type(flow.types[base], value.args[1])
                    elif base in flow.types:
                        flow.types.setdefault(target.id, flow.types[base])
        return flow

    def resolve(self, name: str) -> str:
        seen = set()
        while name in self.aliases and name not in seen:
            seen.add(name)
            name = self.aliases[name]
        return name

    def accesses(
        self, statement: ast.stmt, kernel: KernelRecord | None
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(reads, writes) of one launch, by the roles of the kernel's parameters or the extern's ``out=``."""
        call = getattr(statement, "value", None)
        if not isinstance(call, ast.Call):
            return (), ()
        reads: list[str] = []
        writes: list[str] = []
        params = [a.name for a in kernel.args] if kernel is not None else []
        for index, argument in enumerate(call.args):
            name = self._tensor_name(argument)
            if name is None:
                continue
            param = params[index] if index < len(params) else ""
            if param.startswith("in_out_ptr"):
                reads.append(name)
                writes.append(name)
            elif param.startswith("out_ptr"):
                writes.append(name)
            else:
                reads.append(name)
        for keyword in call.keywords:
            name = self._tensor_name(keyword.value)
            if name is not None and keyword.arg == "out":
                writes.append(name)
            elif name is not None and keyword.arg not in ("stream", "grid"):
                reads.append(name)
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                writes.extend(e.id for e in elements if isinstance(e, ast.Name))
        return tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes))

    def _tensor_name(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Call) and dotted_name(node.func) in _VIEW_HELPERS and node.args:
            return self._tensor_name(node.args[0])
        if isinstance(node, ast.Subscript):
            return self._tensor_name(node.value)
        return None


def _allocation_type(call: ast.Call) -> str:
    """``empty_strided_cuda((1024, 8192), (8192, 1), torch.bfloat16)`` -> ``bf16[1024, 8192]``."""
    size = literal(call.args[0]) if call.args else []
    dtype = dotted_name(call.args[2]) if len(call.args) > 2 else None
    short = _DTYPES.get((dtype or "").removeprefix("torch."), (dtype or "?").removeprefix("torch."))
    dims = ", ".join(str(s) for s in size) if isinstance(size, list) else str(size)
    return f"{short}[{dims}]"


def _view_type(base_type: str, size: ast.expr) -> str:
    """The type of ``reinterpret_tensor(base, size, ...)``: the base's dtype with the view's size."""
    dtype = base_type.split("[", 1)[0]
    dims = literal(size)
    return f"{dtype}[{', '.join(str(d) for d in dims)}]" if isinstance(dims, list) else base_type


# --- ORIGIN comments -------------------------------------------------------------------------------


def origin_segments(source: str) -> tuple[OriginSegment, ...]:
    """Read Inductor's ``# ORIGIN:`` blocks (written with config.comment_origin) in a kernel's source.

    Each block names the FX ops (and their user stack) whose code follows it, up to the next block::

        # ORIGIN:
        # call_function aten.exp.default seq_nr:-1
        #   File "/m/model.py", line 11, in forward\\    y = torch.softmax(x * 0.5, dim=-1)\\
        # END ORIGIN
        tmp6 = libdevice.exp(tmp5)
    """
    segments: list[OriginSegment] = []
    pending_ops: list[str] = []
    pending_source: list = []
    current: dict[str, Any] | None = None
    in_block = False
    for number, raw in enumerate(source.splitlines(), start=1):
        line = raw.strip()
        if line == "# ORIGIN:":
            in_block = True
            if current is not None:
                segments.append(_segment(current))
                current = None
            continue
        if in_block and line.startswith("#"):
            body = line.lstrip("#").strip()
            if body.startswith("File "):
                pending_source.extend(user_frames(from_traceback(line.lstrip("#"))))
            elif body and body != "END ORIGIN":
                parts = body.split()
                pending_ops.append(parts[1] if len(parts) > 1 else parts[0])
            continue
        in_block = False
        if not line or line.startswith("#"):
            continue
        if pending_ops:
            if current is not None:
                segments.append(_segment(current))
            current = {"first": number, "last": number, "ops": pending_ops, "source": pending_source}
            pending_ops, pending_source = [], []
        elif current is not None:
            current["last"] = number
    if current is not None:
        segments.append(_segment(current))
    return tuple(segments)


def _segment(current: dict[str, Any]) -> OriginSegment:
    return OriginSegment(
        first_line=current["first"],
        last_line=current["last"],
        ops=tuple(dict.fromkeys(current["ops"])),
        source=tuple(dict.fromkeys(current["source"])),
    )
