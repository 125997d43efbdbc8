"""Stage 1 of the pipeline (capture), in the model process: what the divergence search watches (``divergence.py``).

``Recorder`` is the search compile's ``inner_compile`` and post-fusion pass: a copy of each graph Inductor receives
(before its post-grad passes), its output code and launches, and which FX node each buffer holds.
``CallTracer`` is the ``sys.settrace`` on the generated ``call()``: its inputs at its first line, and a copy of
every buffer a launch writes, right after the launch.
"""

from __future__ import annotations

import contextlib
import copy
import dis
import functools
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch

from ..parse.diagnostics import Diagnostics
from ..parse.output_code import parse_output_code
from ..records import Launch
from ..records.numerics import DivergenceGraph, output_code_hash
from .compat import POST_FUSION_PASS_OPTION, compile_fx_module, inductor_config

# Copies of buffers taken in one step, at most (the rest is not compared, and the report says so).
SNAPSHOT_BYTES = 2 << 30


@dataclass
class CompiledGraph:
    """One graph as the search compiled it."""

    index: int
    reference: torch.fx.GraphModule  # the graph Inductor received, before its post-grad passes
    origins: dict[str, str] = field(default_factory=dict)  # buffer -> the post-grad node it holds
    code: str = ""
    launches: tuple[Launch, ...] = ()

    def record(self) -> DivergenceGraph:
        kernels = tuple(dict.fromkeys(launch.target for launch in self.launches if launch.kind != "extern"))
        return DivergenceGraph(self.index, output_code_hash(self.code), kernels, len(self.launches))


@dataclass
class Written:
    """A buffer a launch wrote, as it was right after the launch (None: past the copy budget)."""

    launch: Launch
    buffer: str
    value: torch.Tensor | None


@dataclass
class GraphCall:
    """One call of a compiled graph's ``call()``: its inputs and the buffers its launches wrote."""

    graph: CompiledGraph
    inputs: list[Any] | None = None
    written: list[Written] = field(default_factory=list)


class Recorder:
    """The ``inner_compile`` and post-fusion pass of the search's compile: each graph, its buffers' nodes."""

    def __init__(self) -> None:
        self.graphs: list[CompiledGraph] = []
        self.compiling: CompiledGraph | None = None
        self.user_pass = getattr(inductor_config(), POST_FUSION_PASS_OPTION)

    def inner_compile(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        graph = CompiledGraph(len(self.graphs), copy.deepcopy(gm))
        self.graphs.append(graph)
        self.compiling = graph
        try:
            compiled = compile_fx_module().compile_fx_inner(gm, example_inputs, **kwargs)
        finally:
            self.compiling = None
        graph.code = getattr(compiled, "source_code", "") or ""
        graph.launches = parse_output_code(graph.code, "divergence search", Diagnostics()).launches
        return compiled

    def post_fusion(self, nodes: list[Any]) -> list[Any]:
        if self.compiling is not None:
            for node in nodes:
                for buffer in node.get_outputs():
                    origin = getattr(buffer.node, "origin_node", None)
                    if origin is not None:
                        self.compiling.origins[buffer.get_name()] = origin.name
        return self.user_pass(nodes) if self.user_pass is not None else nodes


_RECORDING: list[Recorder] = []  # the search's recorder while it compiles


@contextlib.contextmanager
def recording(recorder: Recorder) -> Iterator[None]:
    """While inside, ``post_fusion_pass`` hands the scheduler's nodes to ``recorder``."""
    _RECORDING.append(recorder)
    try:
        yield
    finally:
        _RECORDING.remove(recorder)


def post_fusion_pass(nodes: list[Any]) -> list[Any]:
    """Inductor's ``_post_fusion_custom_pass`` during the search: a module-level function, as Inductor pickles
    its config (a bound method would drag the recorder along)."""
    return _RECORDING[-1].post_fusion(nodes) if _RECORDING else nodes


class CallTracer:
    """``sys.settrace`` on the generated ``call()`` (and the partition functions it calls): inputs at its
    first line, and each launch's written buffers once the line after the launch is reached."""

    def __init__(self, graphs: Sequence[CompiledGraph]) -> None:
        self.graphs = graphs
        self.by_file: dict[str, CompiledGraph | None] = {}
        self.calls: list[GraphCall] = []
        self.open: dict[int, GraphCall] = {}  # graph index -> its call() in progress
        self.pending: dict[int, list[Launch]] = {}  # id(code object) -> its launches not yet copied
        self.copied_bytes = 0

    @contextlib.contextmanager
    def tracing(self) -> Iterator[None]:
        previous = sys.gettrace()
        sys.settrace(self.on_call)
        try:
            yield
        finally:
            sys.settrace(previous)

    def graph_of(self, filename: str) -> CompiledGraph | None:
        if filename not in self.by_file:
            try:
                with open(filename, encoding="utf-8") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                text = None
            self.by_file[filename] = next((g for g in self.graphs if text is not None and g.code == text), None)
        return self.by_file[filename]

    def on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event != "call" or not (code.co_name == "call" or code.co_name.startswith("partition_")):
            return None
        graph = self.graph_of(code.co_filename)
        if graph is None:
            return None
        if code.co_name == "call":
            self.open[graph.index] = GraphCall(graph)
            self.calls.append(self.open[graph.index])
        graph_call = self.open.get(graph.index)
        if graph_call is None:
            return None
        lines = {line for _, line in dis.findlinestarts(code) if line is not None}
        self.pending[id(code)] = [launch for launch in graph.launches if launch.line in lines]
        return functools.partial(self.on_line, graph_call)

    def on_line(self, graph_call: GraphCall, frame: FrameType, event: str, arg: Any) -> Any:
        if graph_call.inputs is None and frame.f_code.co_name == "call" and event == "line":
            graph_call.inputs = [self.keep(value) for value in frame.f_locals.get("args") or []]
        if event in ("line", "return"):
            now = frame.f_lineno if event == "line" else math.inf
            pending = self.pending.get(id(frame.f_code), [])
            while pending and _last_line(pending[0]) < now:
                launch = pending.pop(0)
                for name in launch.writes:
                    value = frame.f_locals.get(name)
                    if isinstance(value, torch.Tensor):
                        graph_call.written.append(Written(launch, name, self.copy(value)))
        return functools.partial(self.on_line, graph_call)

    def keep(self, value: object) -> object:
        return value.detach().clone() if isinstance(value, torch.Tensor) else value

    def copy(self, tensor: torch.Tensor) -> torch.Tensor | None:
        size = tensor.numel() * tensor.element_size()
        if self.copied_bytes + size > SNAPSHOT_BYTES:
            return None
        self.copied_bytes += size
        return tensor.detach().clone()


def _last_line(launch: Launch) -> int:
    return launch.line + launch.code.count("\n")
