"""Stage 1 of the pipeline (capture), in the model process: which ``nn.Module`` each FX node came from.

Dynamo records, on every node of the graph it hands to Inductor, the module stack the op ran under
(``node.meta["nn_module_stack"]``: outermost first, ``"L['self'].layers[0].mlp"`` and the module's class)
and the user's stack trace. Neither reaches the debug folder or the trace log, so the graph is read as
Inductor receives it (``torch._inductor.compile_fx.compile_fx`` wrapped for the compile) and written to
``capture/module_stacks.json`` (``files.ModuleStacks``). The parent joins it to the kernels through the
provenance maps (pre-grad node names) and, for backward kernels, through their stack traces.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..exchange.files import MODULE_STACKS_FILE, GraphModuleStacks, ModuleStacks, write_json_file
from .compat import compile_fx_module, current_compile_id


@contextlib.contextmanager
def module_stacks(folder: Path) -> Iterator[None]:
    """Record each compiled graph's node -> module stack and stack trace while the block runs."""
    inductor = compile_fx_module()
    original = inductor.compile_fx
    found = ModuleStacks()
    stack_index: dict[tuple[tuple[str, str], ...], int] = {}
    trace_index: dict[str, int] = {}
    seen: set[str | None] = set()

    def recording(model_: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
        key = current_compile_id()
        if key not in seen and hasattr(model_, "graph"):  # compile_fx calls itself once with its config patches
            seen.add(key)
            try:
                found.graphs.append(_graph_stacks(model_, key, found, stack_index, trace_index))
                write_json_file(folder / MODULE_STACKS_FILE, found)
            except Exception as exc:
                found.errors.append(f"{type(exc).__name__}: {exc}")
        return original(model_, *args, **kwargs)

    inductor.compile_fx = recording
    try:
        yield
    finally:
        inductor.compile_fx = original
        if found.errors:
            write_json_file(folder / MODULE_STACKS_FILE, found)


def _graph_stacks(
    graph_module: torch.fx.GraphModule,
    compile_id: str | None,
    found: ModuleStacks,
    stack_index: dict[tuple[tuple[str, str], ...], int],
    trace_index: dict[str, int],
) -> GraphModuleStacks:
    graph = GraphModuleStacks(compile_id=compile_id)
    for node in graph_module.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        raw = node.meta.get("nn_module_stack") or {}
        stack = tuple((str(path), _class_name(cls)) for path, cls in raw.values())
        trace = node.meta.get("stack_trace") or ""
        if not stack and not trace:
            continue
        if stack not in stack_index:
            stack_index[stack] = len(found.stacks)
            found.stacks.append([list(entry) for entry in stack])
        if trace not in trace_index:
            trace_index[trace] = len(found.traces)
            found.traces.append(trace)
        graph.nodes[node.name] = [stack_index[stack], trace_index[trace]]
    return graph


def _class_name(cls: type | str) -> str:
    if isinstance(cls, str):  # some torch versions keep the qualified name as a string
        return cls.rsplit(".", 1)[-1]
    return str(getattr(cls, "__qualname__", None) or getattr(cls, "__name__", None) or cls)
