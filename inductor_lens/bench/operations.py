"""Stage 4 of the pipeline (bench), read back: every launch in a group of the same work.

A profiled step is a list of launches; the reader's first question is which *operations* take the time, so
launches doing the same work are summed: one Triton or C++ kernel (the same generated code, wherever the
graph launches it), or one library call on the same shapes, dtypes and backend from the same user line (a
layer's projection, called once per repeated layer). ``operation_groups(run)`` ranks them by per-step time.

A library call's backend is read from the op Inductor called and, on a GPU, from the device kernels the
profiler saw for it: attention is cuDNN, flash, efficient (memory-efficient, CUTLASS) or math; matmuls are
cuBLAS (its own ``sm90_xmma_gemm_*`` kernels and the CUTLASS ``sgemm`` kernels it dispatches to);
convolutions cuDNN. Shapes are the tensors of the call as Inductor recorded them (torch 2.14+) or as
``call()`` typed its arguments.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import PurePath

from ..parse.compat import custom_op
from ..parse.module_stacks import fold_module_path, innermost_line, launch_traces, mixed_parents
from ..records import CompileRun, GraphRecord, GroupMember, KernelRecord, Launch, OperationGroup
from .modules import module_classes
from .roofline import launch_input_types, op_base, place

# Which attention implementation ran, from the ATen op's name first, else from its device kernels' names.
_ATTENTION_OPS = (
    ("_cudnn_attention", "cuDNN"),
    ("_flash_attention", "flash"),
    ("_efficient_attention", "efficient"),
    ("_attention_math", "math"),
    ("scaled_dot_product_attention", None),  # the composite op: the kernels say which ran
)
_ATTENTION_KERNELS = (("cudnn", "cuDNN"), ("flash", "flash"), ("fmha_cutlass", "efficient"), ("memeff", "efficient"))
_MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "bias_addmm", "_mm_plus_mm", "_int_mm", "_scaled_mm", "linear"}
_CONV_OPS = {"convolution", "_convolution", "convolution_backward", "cudnn_convolution", "mkldnn_convolution"}
# Device kernels that are bookkeeping of a call, not its work: not shown as "the library kernel".
_BOOKKEEPING = ("Memset", "Memcpy")


def attention_backend(op: str, device_kernels: Iterable[str]) -> str | None:
    """cuDNN, flash, efficient or math for an attention op; None for any other op."""
    for part, backend in _ATTENTION_OPS:
        if part in op:
            if backend is not None:
                return backend
            break
    else:
        if "attention" not in op:
            return None
    for kernel in device_kernels:
        lowered = kernel.lower()
        for part, backend in _ATTENTION_KERNELS:
            if part in lowered:
                return backend
    return None


def library_of(op: str, device_kernels: Iterable[str], gpu: bool) -> str | None:
    """The library a call ran in, where its op or kernels say: cuBLAS, cuDNN, oneDNN, or an attention backend."""
    kernels = tuple(device_kernels)
    if (backend := attention_backend(op, kernels)) is not None:
        return backend
    if op in _MATMUL_OPS:
        return "cuBLAS" if gpu else None
    if op in _CONV_OPS or op.startswith("cudnn"):
        return "cuDNN" if gpu else "oneDNN"
    if op.startswith(("mkldnn", "onednn", "_mkl")):
        return "oneDNN"
    return None


def call_site(graph: GraphRecord, launch: Launch) -> str | None:
    """The user line of the launch's first stack trace that has one (``modeling_gpt2.py:239``), where recorded."""
    for trace in launch_traces(graph, launch):
        if (line := innermost_line(trace)) is not None:
            return f"{PurePath(line.filename).name}:{line.line}"
    return None


@dataclass
class _Group:
    kind: str
    name: str
    op: str | None
    backend: str | None
    types: list[str | None]  # positional input types; None where call() does not say (a reused buffer)
    source: str | None
    members: list[tuple[GraphRecord, Launch]] = field(default_factory=list)

    def accepts(self, other: _Group) -> bool:
        """The same work where both know: equal types position by position (an unknown one matches any)."""
        return len(self.types) == len(other.types) and all(
            a is None or b is None or _same_type(a, b) for a, b in zip(self.types, other.types, strict=True)
        )

    def absorb(self, other: _Group) -> None:
        self.types = [a if a is not None and not a.startswith("?") else b for a, b in zip(self.types, other.types, strict=True)]
        self.members.extend(other.members)


def _same_type(a: str, b: str) -> bool:
    """``f32[4096, 768]`` and ``?[4096, 768]`` (a view whose dtype call() does not state) are the same."""
    return a == b or (a.split("[", 1)[-1] == b.split("[", 1)[-1] and (a.startswith("?") or b.startswith("?")))


def operation_groups(run: CompileRun) -> tuple[OperationGroup, ...]:
    """Every timed launch of the profiled step, grouped and ranked by per-step time (empty without timings)."""
    bench = run.bench
    if bench is None or bench.step is None:
        return ()
    gpu = bench.device.startswith("cuda")
    buckets: dict[tuple[object, ...], list[_Group]] = {}
    for graph in run.graphs:
        kernels = {k.name: k for k in graph.kernels}
        for launch in graph.launches:
            if launch.timing is None:
                continue
            key, group = _group_of(graph, launch, kernels, gpu)
            group.members.append((graph, launch))
            candidates = buckets.setdefault(key, [])
            into = next((c for c in candidates if c.accepts(group)), None)
            if into is None:
                candidates.append(group)
            else:
                into.absorb(group)
    mixed = mixed_parents(module_classes(run))
    built = [_build((*key, n), g, run, mixed) for key, found in buckets.items() for n, g in enumerate(found)]
    return tuple(sorted(built, key=lambda g: (-g.per_step_us, g.name)))


def _group_of(
    graph: GraphRecord, launch: Launch, kernels: dict[str, KernelRecord], gpu: bool
) -> tuple[tuple[object, ...], _Group]:
    site = call_site(graph, launch)
    if launch.kind != "extern":
        kernel = kernels.get(launch.target)
        kind = "cpp" if launch.kind == "cpp" else ("template" if kernel and kernel.category == "template" else "triton")
        digest = hashlib.sha1(kernel.source.encode()).hexdigest()[:12] if kernel and kernel.source else graph.id
        return ("kernel", launch.target, digest), _Group(kind, launch.target, None, None, [], site)
    device_kernels = launch.timing.device_kernels if launch.timing else ()
    op = op_base(launch)
    types = launch_input_types(graph, launch)
    dtype = next((t.split("[", 1)[0] for t in types if t and "[" in t and not t.startswith("?")), None)
    if dtype is not None:  # a view whose dtype call() does not state has its neighbours' (one library call)
        types = [f"{dtype}{t[1:]}" if t and t.startswith("?") else t for t in types]
    backend = library_of(op, device_kernels, gpu)
    kind = "custom op" if custom_op(launch.target) is not None else "library"
    short = launch.label.removeprefix("aten.").replace(".default", "")
    if attention_backend(op, device_kernels) is not None or "attention" in op:
        name = f"{backend} attention" if backend else short
    else:
        name = f"{short} ({backend})" if backend else short
    return ("extern", name, site), _Group(kind, name, launch.aten_op, backend, types, site)


def _build(key: tuple[object, ...], group: _Group, run: CompileRun, mixed: Collection[str]) -> OperationGroup:
    bench = run.bench
    ceilings = bench.ceilings if bench is not None else None
    members = group.members
    per_step = sum(launch.timing.median_us for _, launch in members if launch.timing)
    share = sum(launch.timing.share for _, launch in members if launch.timing)
    count = len(members)
    per_launch = per_step / count if count else 0.0
    first = members[0][1].timing
    roof = first.roofline if first is not None else None
    flops = roof.flops if roof is not None else None
    moved = roof.bytes if roof is not None else None
    placed = (
        place((moved, flops, roof.cost_source), per_launch * 1e-6, "in context", ceilings)
        if roof is not None and per_launch > 0
        else None
    )
    device_kernels = tuple(
        dict.fromkeys(
            k
            for _, launch in members
            if launch.timing
            for k in launch.timing.device_kernels
            if not k.startswith(_BOOKKEEPING)
        )
    )
    modules = tuple(dict.fromkeys(m for _, launch in members for m in launch.modules))
    digest = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
    return OperationGroup(
        key=f"{group.kind.replace(' ', '-')}-{digest}",
        kind=group.kind,  # type: ignore[arg-type]
        name=group.name,
        op=group.op,
        backend=group.backend,
        shapes=", ".join(t for t in group.types if t),
        launches_per_step=float(count),
        per_step_us=per_step,
        share=share,
        per_launch_us=per_launch,
        members=tuple(GroupMember(g.id, launch.position) for g, launch in members),
        device_kernels=device_kernels if group.kind in ("library", "custom op") else (),
        flops=flops,
        bytes=moved,
        roofline_percent=placed.percent if placed is not None else None,
        bound=placed.bound if placed is not None else None,
        module=fold_modules(modules, mixed),
        source=group.source,
        graphs=tuple(dict.fromkeys(g.id for g, _ in members)),
        dtype=next((t.split("[", 1)[0] for t in group.types if t and "[" in t), None),
    )


def fold_modules(paths: Iterable[str], mixed: Collection[str]) -> str | None:
    """One label for the module paths of a group's launches: repeated instances folded (``h.0.mlp``, ``h.1.mlp``
    -> ``h.*.mlp``, ``parse.module_stacks``); several distinct paths are joined with " | " (three, then a count)."""
    folded = list(dict.fromkeys(fold_module_path(path, mixed) for path in paths))
    if not folded:
        return None
    shown = " | ".join(folded[:3])
    return shown + (f" (+{len(folded) - 3} more)" if len(folded) > 3 else "")
