"""Reproducer, step 1 (from records): what a standalone script needs to run one generated kernel alone.

From a graph's records only (its output code, FX graph, launches, provenance), ``plan_repro`` works out:

- the kernel's source exactly as Inductor handed it to its compiler: the string passed to
  ``async_compile.triton(...)`` (decorator with heuristics, ``triton_meta``, ``inductor_meta``) or to
  ``async_compile.cpp_pybinding(...)`` (with its argument types), read from output_code.py's syntax tree;
- its arguments at its first launch: each tensor's size, strides, offset and dtype (the ``empty_strided``,
  ``assert_size_stride`` (grouped too) and ``reinterpret_tensor`` of ``call()``, read by
  ``parse/call_layouts.py``; symbolic sizes at their hints), the storage it shares with the others, what
  values random inputs get (integers kept within the kernel's own index bounds), and scalars as ``call()``
  passes them;
- the eager reference: the kernel's post-grad FX nodes as the graph's code writes them, the nodes outside
  it they read (each tied to the kernel argument holding it) and the nodes it leaves for others (each tied
  to the argument the kernel writes it to); or why there is none.

``script.py`` turns the plan into the script.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..parse.call_layouts import WrittenLayout, view_layout, written_layouts
from ..parse.symbolic import SYM_TYPE, Hints, evaluate, tensor_dims
from ..records import FxGraph, FxNode, GraphRecord, KernelRecord, Launch

# FX's short dtype names -> torch's.
TORCH_DTYPES = {
    "f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64", "i32": "int32",
    "i16": "int16", "i8": "int8", "u8": "uint8", "b8": "bool", "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}  # fmt: skip
FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2"}
# Ops whose eager result cannot equal the kernel's: random numbers come from another generator.
_RANDOM_OPS = ("rand", "dropout", "bernoulli", "seed", "multinomial", "normal", "uniform", "exponential")
# "index out of bounds: 0 <= tmp4 < 100L": the bound a kernel asserts for an indirect index.
_INDEX_BOUND = re.compile(r"index out of bounds: 0 <= \w+ < (\d+)L?")

class ReproError(ValueError):
    """The records do not hold what a reproducer of this kernel needs."""


@dataclass(frozen=True)
class TensorArg:
    param: str
    role: str  # "in", "out" or "in_out" (Inductor's in_ptr / out_ptr / in_out_ptr)
    written: str  # the launch argument as call() writes it
    storage: str  # the buffer whose storage it is (arguments of one storage share it)
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: str  # torch's name: "float32"
    values: str  # how random values are made: "randn", "randint(0, 100)", "bool", "zeros"
    values_why: str = ""
    layout_why: str = ""  # set where call() states no layout for it and its strides are guessed


@dataclass(frozen=True)
class ScalarArg:
    param: str
    written: str
    value: int | float


@dataclass(frozen=True)
class ReferenceInput:
    node: str
    type: str  # as FX annotates it: "f32[256, 4096]", "Sym(s77)"
    param: str | None = None  # the kernel argument holding it
    value: int | float | None = None  # a size: its value at the hints
    how: str = ""  # how it was tied to the argument


@dataclass(frozen=True)
class ReferenceOutput:
    node: str
    type: str
    param: str
    how: str = ""


@dataclass(frozen=True)
class Reference:
    """The ATen ops the kernel fuses, as eager code: ``code`` computes ``outputs`` from ``inputs``."""

    code: str = ""
    inputs: tuple[ReferenceInput, ...] = ()
    outputs: tuple[ReferenceOutput, ...] = ()
    unchecked: tuple[str, ...] = ()  # written arguments no FX node is tied to (scratch), with why
    missing: str = ""  # why there is no reference: then the script runs and times the kernel, unchecked


@dataclass(frozen=True)
class ReproPlan:
    graph_id: str
    kernel: str
    backend: str  # "triton" or "cpp"
    source: str  # as Inductor passed it to its compiler
    device: str  # "cuda", "cpu", ... (Triton's device_str)
    cpp_arg_types: tuple[str, ...] = ()
    launch_position: int | None = None
    launch_code: str = ""
    args: tuple[TensorArg | ScalarArg, ...] = ()
    reference: Reference = field(default_factory=Reference)
    hints: Mapping[str, int | float] = field(default_factory=dict)
    # Configurations the report recorded for it (the autotuner's pick, its isolated time).
    recorded_config: str = ""
    isolated_us: float | None = None

    @property
    def tensor_args(self) -> tuple[TensorArg, ...]:
        return tuple(a for a in self.args if isinstance(a, TensorArg))


def plan_repro(graph: GraphRecord, kernel: KernelRecord) -> ReproPlan:
    source, device, arg_types = kernel_definition(graph.output_code, kernel.name)
    launch = next((la for la in graph.launches if la.target == kernel.name), None)
    if launch is None:
        raise ReproError(
            f"{kernel.name} is defined in {graph.id} but never launched: no arguments to run it with"
        )
    hints = graph.hints
    params = kernel_params(kernel.backend, source)
    fixed_grid = "'grid_type'" not in source or "'grid_type': 'FixedGrid'" in source
    if kernel.backend == "triton" and len(launch.args) == len(params) + 3 and fixed_grid:
        # a template's launch ends with its grid (Inductor's FixedGrid reads them as _grid_0.._grid_2)
        params += ("_grid_0", "_grid_1", "_grid_2")
    if len(params) != len(launch.args):
        raise ReproError(
            f"{kernel.name}: {len(params)} parameters but launch #{launch.position} passes {len(launch.args)} arguments"
        )
    layouts = call_layouts(graph.output_code, hints)
    declared = declared_dtypes(kernel.backend, source, arg_types, params)
    args = tuple(_argument(graph, kernel, param, written, layouts, hints, source, declared.get(param))
                 for param, written in zip(params, launch.args, strict=True))  # fmt: skip
    timing = kernel.timing
    return ReproPlan(
        graph_id=graph.id,
        kernel=kernel.name,
        backend=kernel.backend,
        source=source,
        device=device,
        cpp_arg_types=arg_types,
        launch_position=launch.position,
        launch_code=launch.code,
        args=args,
        reference=reference_of(graph, kernel, launch, args),
        hints=dict(hints),
        recorded_config=(timing.config or "") if timing else "",
        isolated_us=timing.isolated.median_ms * 1e3 if timing and timing.isolated else None,
    )


# --- the kernel's definition ------------------------------------------------------------------------------


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


# A graph's output code is parsed once for all its kernels (the hand-written stage plans a verification of each
# matched kernel: ResNet-50's backward graph has 160, and parsing it each time took most of 20 s).
_PARSED_GRAPHS = 8


@functools.lru_cache(maxsize=_PARSED_GRAPHS)
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


# --- arguments ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0
    base: str | None = None  # a view's buffer


def call_layouts(output_code: str, hints: Hints) -> dict[str, Layout]:
    """Buffer and input name -> its layout, from call()'s allocations, input checks and views, at the hints."""
    return dict(_call_layouts(output_code, tuple(sorted(hints.items()))))


@functools.lru_cache(maxsize=_PARSED_GRAPHS)
def _call_layouts(output_code: str, hints: tuple[tuple[str, int | float], ...]) -> dict[str, Layout]:
    found: dict[str, Layout] = {}
    values = dict(hints)
    for name, written in written_layouts(output_code).items():
        layout = _layout(written, values)
        if layout is not None:
            found[name] = layout
    return found


def _layout(written: WrittenLayout, hints: Hints) -> Layout | None:
    sizes = _ints(written.size, hints)
    strides = _ints(written.stride, hints)
    start = _ints([written.offset], hints)
    if sizes is None or strides is None or start is None or len(sizes) != len(strides):
        return None
    return Layout(sizes, strides, start[0], written.base)


def _ints(texts: Iterable[str], hints: Hints) -> tuple[int, ...] | None:
    values = []
    for text in texts:
        if not text:
            continue
        value = evaluate(text, hints)
        if not isinstance(value, int):
            return None
        values.append(value)
    return tuple(values)


def contiguous(size: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(size):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def extent(size: tuple[int, ...], stride: tuple[int, ...], offset: int) -> int:
    """Elements of storage a view reaches (0 for an empty one)."""
    if any(s == 0 for s in size):
        return offset
    return offset + 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))


def alias_chain(graph: GraphRecord, name: str) -> list[str]:
    """``buf3`` and every name it reuses (``buf3 = buf0; del buf0  # reuse``), nearest first."""
    chain = [name]
    while chain[-1] in graph.aliases and graph.aliases[chain[-1]] not in chain:
        chain.append(graph.aliases[chain[-1]])
    return chain


def _role(param: str) -> str:
    if param.startswith("in_out_ptr"):
        return "in_out"
    if param.startswith("out_ptr"):
        return "out"
    return "in"


def _argument(
    graph: GraphRecord,
    kernel: KernelRecord,
    param: str,
    written: str,
    layouts: Mapping[str, Layout],
    hints: Hints,
    source: str,
    declared: str | None,
) -> TensorArg | ScalarArg:
    """One launch argument; ``declared``: the dtype the kernel's signature gives its pointer."""
    text = written.strip()
    base, layout = _tensor_layout(graph, text, layouts, hints)
    if base is None:
        value = _scalar(text, hints)
        if value is None:
            raise ReproError(
                f"{kernel.name}: argument {param} = {text!r} is neither a known buffer nor a number"
            )
        return ScalarArg(param, text, value)
    buffer_type = _buffer_type(graph, base)
    parsed = tensor_dims(buffer_type, hints) if buffer_type else None
    dtype = declared or (TORCH_DTYPES.get(parsed[0]) if parsed else None)
    layout_why = ""
    if layout is None and parsed is not None:
        layout = Layout(tuple(parsed[1]), contiguous(tuple(parsed[1])))
        layout_why = "call() states no layout for it: taken as contiguous"
    if layout is None or dtype is None:
        raise ReproError(
            f"{kernel.name}: the type of {base} ({buffer_type or 'unknown'}) is not one a script can build"
        )
    role = _role(param)
    values, why = _values(dtype, role, source)
    # the storage the argument lives in: the allocation its view or reuse chain ends at
    storage = alias_chain(graph, base)[-1]
    return TensorArg(
        param, role, text, storage, layout.size, layout.stride, layout.offset, dtype, values, why, layout_why
    )


def _tensor_layout(
    graph: GraphRecord, text: str, layouts: Mapping[str, Layout], hints: Hints
) -> tuple[str | None, Layout | None]:
    """(buffer, layout as the kernel sees it) of a tensor argument; (None, None) for a scalar."""
    if text.startswith("reinterpret_tensor("):
        view = view_layout(text)
        if view is None:
            return None, None
        return view.base, _layout(view, hints)
    if not re.fullmatch(r"\w+", text) or text[0].isdigit():
        return None, None
    for name in alias_chain(graph, text):
        if name in layouts:
            return text, layouts[name]
    return (
        (text, None) if _buffer_type(graph, text) is not None and not _is_sym(graph, text) else (None, None)
    )


def _buffer_type(graph: GraphRecord, name: str) -> str | None:
    for alias in alias_chain(graph, name):
        if alias in graph.buffers:
            return graph.buffers[alias]
    return None


def _is_sym(graph: GraphRecord, name: str) -> bool:
    return (_buffer_type(graph, name) or "").startswith("Sym(")


def _scalar(text: str, hints: Hints) -> int | float | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = evaluate(text, hints)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _values(dtype: str, role: str, source: str) -> tuple[str, str]:
    if role == "out":
        return "zeros", "written by the kernel"
    if dtype in FLOAT_DTYPES:
        return "randn", "normal random values"
    if dtype == "bool":
        return "bool", "random booleans"
    bounds = [int(b) for b in _INDEX_BOUND.findall(source)]
    if bounds:
        return (
            f"randint(0, {min(bounds)})",
            f"integers in [0, {min(bounds)}): the smallest index bound the kernel asserts",
        )
    return "randint(0, 2)", "integers in [0, 2): the kernel asserts no index bound"


# --- the eager reference ------------------------------------------------------------------------------------


def reference_of(
    graph: GraphRecord, kernel: KernelRecord, launch: Launch, args: tuple[TensorArg | ScalarArg, ...]
) -> Reference:
    fx = graph.fx_graph("transformed")
    if fx is None:
        return Reference(
            missing="the capture holds no post-grad FX graph (fx_graph_transformed.py) for this graph"
        )
    by_name = {n.name: n for n in fx.nodes}
    members = [n for n in kernel.post_grad_nodes if n in by_name]
    if not members:
        return Reference(missing="the records name no post-grad FX node for this kernel (a capture without "
                         "Inductor's provenance tracking or comment_origin)")  # fmt: skip
    inside = _closure(fx, set(members))
    random_ops = sorted(
        n.target for n in fx.nodes if n.name in inside and any(w in n.target.lower() for w in _RANDOM_OPS)
    )
    if random_ops:
        return Reference(
            missing=f"it draws random numbers ({', '.join(random_ops)}): eager's generator gives others"
        )
    users: dict[str, set[str]] = {}
    for node in fx.nodes:
        for name in node.inputs:
            users.setdefault(name, set()).add(node.name)
    ordered = [n for n in fx.nodes if n.name in inside]
    external = list(dict.fromkeys(i for n in ordered for i in n.inputs if i not in inside and i in by_name))
    # a node another kernel computes again for its own use (``add_78`` of a residual, recomputed by the
    # LayerNorm after it) is not one this kernel hands on
    # (a template that lists its prologue's ops but reads them from this kernel's output is not such a one)
    written = {n for name in launch.writes for n in alias_chain(graph, name)}
    elsewhere = [set(k.post_grad_nodes) for k in graph.kernels if k.name != kernel.name
                 and not any(n in written for la in graph.launches if la.target == k.name
                             and la.position > launch.position for r in la.reads for n in alias_chain(graph, r))]  # fmt: skip

    def needed_outside(node: FxNode) -> bool:
        outside = [u for u in users.get(node.name, ()) if u not in inside]
        return any(not any(node.name in nodes and u in nodes for nodes in elsewhere) for u in outside)

    escaping = [n for n in ordered if needed_outside(n) and not _is_size(n)]
    tensors = [a for a in args if isinstance(a, TensorArg)]
    inputs, why = _tie_inputs(graph, launch, [by_name[e] for e in external], tensors)
    if why:
        return Reference(missing=why)
    outputs, unchecked = _tie_outputs(escaping, tensors, graph.hints)
    if not outputs:
        return Reference(
            missing="no node of the kernel is read outside it, so nothing it writes can be tied to an FX node"
        )
    lines = fx.code.splitlines()
    code = []
    for node in ordered:
        text = lines[node.line - 1].strip() if 0 < node.line <= len(lines) else ""
        if not text.startswith(f"{node.name}"):
            return Reference(missing=f"the FX graph's code has no line for {node.name}")
        code.append(_without_deletions(text))
    return Reference(
        code="\n".join(code), inputs=tuple(inputs), outputs=tuple(outputs), unchecked=tuple(unchecked)
    )


def _closure(fx: FxGraph, members: set[str]) -> set[str]:
    """The kernel's nodes, plus the getitems of its multi-output nodes and the constants it reads
    (``full``, ``scalar_tensor``: nodes with no tensor input, which the kernel computes itself)."""
    inside = set(members)
    changed = True
    while changed:
        changed = False
        read = {i for n in fx.nodes if n.name in inside for i in n.inputs}  # a node added now counts next pass
        for node in fx.nodes:
            if node.name in inside or node.op != "call_function":
                continue
            getitem = "getitem" in node.target and node.inputs and node.inputs[0] in inside
            constant = not any(i for i in node.inputs) and not _is_size(node)
            if getitem or (constant and node.name in read):
                inside.add(node.name)
                changed = True
    return inside


def _is_size(node: FxNode) -> bool:
    return bool(SYM_TYPE.match(node.type or ""))


def _without_deletions(line: str) -> str:
    """An FX code line without its ``;  x = y = None`` (a deletion at a value's last use in the whole graph,
    which may be the fragment's own output)."""
    return re.sub(r";\s+(?:\w+ = )+None\s*$", "", line)


def _numel(size: Iterable[int]) -> int:
    return math.prod(size)


def _node_dims(node: FxNode, hints: Hints) -> tuple[str, tuple[int, ...]] | None:
    parsed = tensor_dims(node.type, hints)
    if parsed is None or parsed[0] not in TORCH_DTYPES:
        return None
    return TORCH_DTYPES[parsed[0]], tuple(parsed[1])


def _tie_inputs(
    graph: GraphRecord, launch: Launch, external: list[FxNode], tensors: list[TensorArg]
) -> tuple[list[ReferenceInput], str]:
    hints = graph.hints
    readable = [a for a in tensors if a.role in ("in", "in_out")]
    producers = {a.param: _producer_nodes(graph, launch, a) for a in readable}
    tied: dict[str, tuple[str, str]] = {}  # node -> (param, how)
    for node in external:
        if _is_size(node):
            continue
        by_name = [a for a in readable if node.name in alias_chain(graph, _written_base(a))]
        by_producer = [a for a in readable if node.name in producers[a.param]]
        for candidates, how in (
            (by_name, "by name"),
            (by_producer, "written by the launch that computes it"),
        ):
            free = [a for a in candidates if a.param not in {p for p, _ in tied.values()}]
            if len(free) >= 1 and node.name not in tied:
                tied[node.name] = (free[0].param, how)
    for node in external:
        if _is_size(node) or node.name in tied:
            continue
        dims = _node_dims(node, hints)
        if dims is None:
            return [], f"the FX input {node.name} has a type a script cannot build ({node.type})"
        used = {p for p, _ in tied.values()}
        same = [
            a
            for a in readable
            if a.param not in used and a.dtype == dims[0] and _numel(a.size) == _numel(dims[1])
        ]
        if not same:
            return [], f"no argument of the kernel holds its FX input {node.name} ({node.type})"
        tied[node.name] = (same[0].param, "the only argument of its dtype and size" if len(same) == 1
                           else "the first free argument of its dtype and size")  # fmt: skip
    inputs = []
    for node in external:
        if _is_size(node):
            match = SYM_TYPE.match(node.type or "")
            value = evaluate(match["expr"], hints) if match else None
            if value is None:
                return [], f"the size {node.name} ({node.type}) has no value at the recorded hints"
            inputs.append(
                ReferenceInput(node.name, node.type or "", value=value, how="its value at the size hints")
            )
        else:
            param, how = tied[node.name]
            inputs.append(ReferenceInput(node.name, node.type or "", param=param, how=how))
    return inputs, ""


def _written_base(arg: TensorArg) -> str:
    match = re.match(r"reinterpret_tensor\((\w+),", arg.written)
    return match[1] if match else arg.written


def _producer_nodes(graph: GraphRecord, launch: Launch, arg: TensorArg) -> set[str]:
    """The post-grad nodes of the last earlier launch that wrote the argument's buffer (or one it reuses)."""
    chain = set(alias_chain(graph, _written_base(arg)))
    writer = None
    for earlier in graph.launches:
        if earlier.position >= launch.position:
            break
        if chain & set(earlier.writes):
            writer = earlier
    if writer is None:
        return set()
    nodes: set[str] = set()
    if graph.provenance is not None and writer.handle:
        nodes.update(graph.provenance.kernel_to_post.get(writer.handle, ()))
    producer = graph.kernel(writer.target)
    if producer is not None:
        nodes.update(producer.post_grad_nodes)
    return nodes


def _creation(arg: TensorArg) -> int:
    """The number of the buffer the launch writes (``buf12`` -> 12); graph inputs written in place first."""
    match = re.fullmatch(r"buf(\d+)", _written_base(arg))
    return int(match[1]) if match else -1


def _tie_outputs(
    escaping: list[FxNode], tensors: list[TensorArg], hints: Hints
) -> tuple[list[ReferenceOutput], list[str]]:
    writable = [a for a in tensors if a.role in ("out", "in_out")]
    outputs: list[ReferenceOutput] = []
    used: set[str] = set()
    pending = []
    for node in escaping:
        parsed = tensor_dims(node.type, hints) if node.type else None
        dims = (TORCH_DTYPES.get(parsed[0]), _numel(parsed[1])) if parsed else None
        same = [a for a in writable if dims is None or (a.dtype, _numel(a.size)) == dims]
        pending.append((node, same))
    # nodes with one candidate first; then each other node, in graph order, takes the free candidate whose
    # buffer Inductor created first (it numbers buffers as it lowers the nodes in graph order)
    for node, same in [p for p in pending if len(p[1]) == 1] + [p for p in pending if len(p[1]) != 1]:
        free = sorted((a for a in same if a.param not in used), key=_creation)
        if not free:
            continue
        how = "the only written argument of its dtype and size" if len(same) == 1 else \
            "of the written arguments of its dtype and size, the first Inductor created (buffer number)"  # fmt: skip
        outputs.append(ReferenceOutput(node.name, node.type or "", free[0].param, how))
        used.add(free[0].param)
    order = {n.name: i for i, n in enumerate(escaping)}
    outputs.sort(key=lambda o: order[o.node])
    unchecked = [f"{a.param} ({a.written}): no FX node read outside the kernel is tied to it (a scratch buffer)"
                 for a in writable if a.param not in used]  # fmt: skip
    return outputs, unchecked
