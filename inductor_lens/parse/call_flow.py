"""Parse stage: the wrapper's ``call()``: where it is, its statements in execution order (graph
partitions inlined), and its buffers: their types, aliases, and what each launch reads and writes.

Inductor reuses storage (``buf1 = buf0; del buf0  # reuse``) and views it (``reinterpret_tensor``);
the aliases recorded here let the report match each read to the launch that wrote the same storage.
Under dynamic shapes call() first reads its sizes (``s77 = arg0_1``, ``arg2_1_size = arg2_1.size()``,
``s53 = arg2_1_size[1]``): those are sizes, kept apart from the buffers, and passed to kernels as ints.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..records import KernelRecord
from . import compat
from .pyliteral import dotted_name, literal
from .symbolic import is_symbol


def find_call(tree: ast.Module) -> ast.FunctionDef | None:
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef) and statement.name in compat.CALL_CONTAINERS:
            for item in statement.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == "call":
            return statement
    return None


def partition_functions(tree: ast.Module) -> list[ast.FunctionDef]:
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


def call_statements(
    body: list[ast.stmt], partitions: list[ast.FunctionDef], partition: int | None = None
) -> Iterator[tuple[ast.stmt, int | None]]:
    """Every simple statement of call() in execution order, with partition bodies inlined."""
    for statement in body:
        if isinstance(statement, (ast.With, ast.If, ast.For, ast.While, ast.Try)):
            yield from call_statements(statement.body, partitions, partition)
            yield from call_statements(getattr(statement, "orelse", []), partitions, partition)
            continue
        index = _partition_call(statement)
        if index is not None and index < len(partitions):
            yield from call_statements(partitions[index].body, partitions, index)
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


# Short dtype names as FX prints them in its type annotations.
_DTYPES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64", "int32": "i32",
    "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2",
}  # fmt: skip
# empty_strided_cuda / empty_strided_cpu / empty_strided, and torch.empty (seen 2.11-2.13).
_ALLOCATORS = ("empty_strided", "empty", "torch.empty", "torch.empty_strided")
_VIEW_HELPERS = {"reinterpret_tensor", "torch.as_strided", "as_strided"}


@dataclass
class DataFlow:
    """Buffer types and aliases in call(): ``buf1 = buf0  # reuse`` makes buf1 the same storage as buf0."""

    types: dict[str, str]
    aliases: dict[str, str]
    outputs: tuple[str, ...] = ()
    # Sizes call() reads or computes (dynamic shapes), as written: {"s53": "arg2_1_size[1]"}.
    sizes: dict[str, str] = field(default_factory=dict)
    # Storages call() allocates itself, and those a launch has written so far (``accesses`` runs in
    # launch order): a fresh buffer passed as ``in_out_ptr`` before any write holds nothing to read.
    allocated: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, call: ast.FunctionDef, partitions: list[ast.FunctionDef]) -> DataFlow:
        flow = cls(types={}, aliases={})
        for statement, _ in call_statements(call.body, partitions):
            if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
                continue
            target = statement.targets[0]
            if not isinstance(target, ast.Name):
                continue
            value = statement.value
            if is_symbol(target.id) or _is_shape_read(value):
                flow.sizes[target.id] = ast.unparse(value)
            elif isinstance(value, ast.Call) and _is_allocation(value):
                flow.types[target.id] = _allocation_type(value)
                flow.allocated.add(target.id)
            elif not isinstance(value, ast.Call) or dotted_name(value.func) in _VIEW_HELPERS:
                # `buf1 = buf0`, `buf6 = buf5[0]`, `buf16 = reinterpret_tensor(buf15, ...)`: same storage
                base = flow._tensor_name(value)
                if base is not None and base != target.id:
                    flow.aliases[target.id] = base
                    if isinstance(value, ast.Call) and base in flow.types and len(value.args) > 1:
                        flow.types[target.id] = _view_type(flow.types[base], value.args[1])
                    elif base in flow.types:
                        flow.types.setdefault(target.id, flow.types[base])
        for statement in call.body:
            if isinstance(statement, ast.Return) and isinstance(statement.value, (ast.Tuple, ast.List)):
                flow.outputs = tuple(
                    n for e in statement.value.elts if (n := flow._tensor_name(e)) is not None
                )
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
        # A buffer call() allocated and no launch wrote yet is not read, whatever the parameter's role:
        # Inductor passes fresh buffers as in_out_ptr and writes them before loading.
        reads = [n for n in reads if self.resolve(n) not in self.allocated or self.resolve(n) in self.written]
        self.written.update(self.resolve(n) for n in writes)
        return tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes))

    def _tensor_name(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return None if node.id in self.sizes else node.id
        if isinstance(node, ast.Call) and dotted_name(node.func) in _VIEW_HELPERS and node.args:
            return self._tensor_name(node.args[0])
        if isinstance(node, ast.Subscript):
            return self._tensor_name(node.value)
        return None


def _is_allocation(call: ast.Call) -> bool:
    """``empty_strided_cuda(...)``, ``empty_strided_cpu(...)``, ``torch.empty(...)``: a new buffer."""
    name = dotted_name(call.func) or ""
    return name in _ALLOCATORS or name.startswith("empty_strided")


def _is_shape_read(value: ast.expr) -> bool:
    """``arg2_1.size()``, ``arg2_1.stride()[0]``, ``64*s53``, ``1024``: a size, not a tensor (Triton
    wrappers name the numel of a launch, ``triton_poi_fused_0_xnumel = 64*s53``)."""
    if isinstance(value, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int) and not isinstance(value.value, bool)
    if isinstance(value, ast.Subscript):
        value = value.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        return value.func.attr in compat.SHAPE_READS
    return False


def shape_read(statement: ast.stmt) -> bool:
    """A call() statement that only reads a shape (a bare ``x.size()`` expression included)."""
    value = getattr(statement, "value", None)
    return isinstance(value, ast.expr) and _is_shape_read(value)


def _allocation_type(call: ast.Call) -> str:
    """``empty_strided_cuda((1024, 8192), (8192, 1), torch.bfloat16)`` -> ``bf16[1024, 8192]``."""
    size = literal(call.args[0]) if call.args else []
    dtype = dotted_name(call.args[2]) if len(call.args) > 2 else None
    dtype = dtype or next((dotted_name(k.value) for k in call.keywords if k.arg == "dtype"), None)
    return tensor_type(dtype, size if isinstance(size, list) else str(size))


def tensor_type(dtype: str | None, size: list[object] | tuple[object, ...] | str) -> str:
    """``torch.bfloat16`` and ``(1024, 8192)`` -> ``bf16[1024, 8192]``, the type as FX prints it."""
    short = _DTYPES.get((dtype or "").removeprefix("torch."), (dtype or "?").removeprefix("torch."))
    dims = size if isinstance(size, str) else ", ".join(fx_dim(s) for s in size)
    return f"{short}[{dims}]"


def fx_dim(size: object) -> str:
    """A size as FX prints it: ``2048``, ``s77``, ``2*s53`` (ast.unparse spaces its operators)."""
    return str(size).replace(" ", "")


def _view_type(base_type: str, size: ast.expr) -> str:
    """The type of ``reinterpret_tensor(base, size, ...)``: the base's dtype with the view's size."""
    dtype = base_type.split("[", 1)[0]
    dims = literal(size)
    return f"{dtype}[{', '.join(fx_dim(d) for d in dims)}]" if isinstance(dims, list) else base_type
