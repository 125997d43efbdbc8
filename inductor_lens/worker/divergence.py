"""Stage 1 of the pipeline (capture), in the model process: the first kernel whose output goes wrong.

``compile --find-divergence``: after the capture, the model is compiled again through Inductor's own
``compile_fx`` with an ``inner_compile`` that keeps a copy of each graph Inductor receives (before its
post-grad passes) and a ``_post_fusion_custom_pass`` that notes which FX node each buffer holds
(``buf3`` -> ``mul_2``, the buffer's ``origin_node``). One compiled step then runs with ``sys.settrace`` on
the generated ``call()``: its inputs are copied at its first line, and every buffer a launch writes (the
launches and their writes as the parse stage reads them from the same output code) right after the
launch. Inductor's ``generate_intermediate_hooks`` would hand over Triton and extern outputs only, not
C++ kernels', and changes the code it hooks; tracing changes nothing. Each graph copy then runs node by
node (torch.fx.Interpreter) on those inputs in the model's dtype and, cast as the accuracy minifier
casts (``torch._dynamo.debug_utils.cast_to_fp64``), in float64, and each buffer is judged against its
node by the accuracy verdict's rule (``accuracy.check_tensor``). The first out of bounds in launch order
is the divergence. The search then runs again with each of a few Inductor options that change numerics,
within a time budget, and says which make it go away (as ``compiler_bisector`` does for its subsystems).

Nothing it compiles reaches the report's graphs: Inductor's debug folders and the TORCH_TRACE log are off
while it runs, and no compile cache is read (a hit would skip the compile it has to watch).
"""

from __future__ import annotations

import contextlib
import copy
import dis
import functools
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..parse.diagnostics import Diagnostics
from ..parse.output_code import parse_output_code
from ..parse.source_lines import from_traceback, user_frames
from ..records import Launch, SourceLine
from ..records.codec import JsonScalar, JsonValue
from ..records.numerics import (
    BufferCheck,
    DivergenceGraph,
    NumericDivergence,
    OptionTrial,
    output_code_hash,
)
from .accuracy import OUTPUT_TOLERANCE, check_tensor, describe_leaf
from .model_file import first_line

# (option, value, when it can change the result): tried in this order after a divergence is found;
# Inductor's graph rewrites first, as compiler_bisector bisects its passes before lowering and codegen.
NUMERIC_OPTIONS: tuple[tuple[str, JsonScalar, str], ...] = (
    ("pattern_matcher", False, "always"),  # Inductor's pattern rewrites of the graph
    ("emulate_precision_casts", True, "16-bit"),  # round where eager rounds, for float16/bfloat16
    ("fallback_random", True, "random"),  # random numbers drawn as eager draws them
    ("cpp.simdlen", 1, "cpu"),  # C++ kernels without SIMD: scalar code
    ("epilogue_fusion", False, "cuda"),
    ("max_autotune", False, "autotuned"),
)
DEFAULT_BUDGET_S = 300.0
# Copies of buffers taken in one step, at most (the rest is not compared, and the report says so).
SNAPSHOT_BYTES = 2 << 30
CHECKS_KEPT = 40
METHOD = ("each buffer a kernel writes, in launch order, judged against the FX node it holds, that node run "
          "(torch.fx.Interpreter) on the same inputs as part of the graph Inductor received before its post-grad "
          "passes, in the model's dtype and in float64, by the rule of the accuracy verdict: within tol of the "
          "node in the model's dtype, or an RMSE against float64 at most 2x (3x for 16-bit dtypes and tensors "
          "under 1,000 elements) that node's own plus tol/10")  # fmt: skip

RunStep = Callable[[Any], None]  # one step of the model (each call of get_inputs(), and backward with --train)


@dataclass
class CompiledGraph:
    """One graph as the search compiled it."""

    index: int
    reference: Any  # torch.fx.GraphModule: the graph Inductor received, before its post-grad passes
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
    value: Any


@dataclass
class GraphCall:
    """One call of a compiled graph's ``call()``: its inputs and the buffers its launches wrote."""

    graph: CompiledGraph
    inputs: list[Any] | None = None
    written: list[Written] = field(default_factory=list)


class Recorder:
    """The ``inner_compile`` and post-fusion pass of the search's compile: each graph, its buffers' nodes."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.graphs: list[CompiledGraph] = []
        self.compiling: CompiledGraph | None = None
        self.user_pass = torch._inductor.config._post_fusion_custom_pass

    def inner_compile(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        from torch._inductor.compile_fx import compile_fx_inner

        graph = CompiledGraph(len(self.graphs), copy.deepcopy(gm))
        self.graphs.append(graph)
        self.compiling = graph
        try:
            compiled = compile_fx_inner(gm, example_inputs, **kwargs)
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


def post_fusion_pass(nodes: list[Any]) -> list[Any]:
    """Inductor's ``_post_fusion_custom_pass`` during the search: a module-level function, as Inductor pickles
    its config (a bound method would drag the recorder along)."""
    return _RECORDING[-1].post_fusion(nodes) if _RECORDING else nodes


class CallTracer:
    """``sys.settrace`` on the generated ``call()`` (and the partition functions it calls): inputs at its
    first line, and each launch's written buffers once the line after the launch is reached."""

    def __init__(self, torch: Any, graphs: Sequence[CompiledGraph]) -> None:
        self.torch = torch
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

    def on_call(self, frame: Any, event: str, arg: Any) -> Any:
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

    def on_line(self, graph_call: GraphCall, frame: Any, event: str, arg: Any) -> Any:
        if graph_call.inputs is None and frame.f_code.co_name == "call" and event == "line":
            graph_call.inputs = [self.keep(value) for value in frame.f_locals.get("args") or []]
        if event in ("line", "return"):
            now = frame.f_lineno if event == "line" else math.inf
            pending = self.pending.get(id(frame.f_code), [])
            while pending and _last_line(pending[0]) < now:
                launch = pending.pop(0)
                for name in launch.writes:
                    value = frame.f_locals.get(name)
                    if isinstance(value, self.torch.Tensor):
                        graph_call.written.append(Written(launch, name, self.copy(value)))
        return functools.partial(self.on_line, graph_call)

    def keep(self, value: Any) -> Any:
        return value.detach().clone() if isinstance(value, self.torch.Tensor) else value

    def copy(self, tensor: Any) -> Any:
        size = tensor.numel() * tensor.element_size()
        if self.copied_bytes + size > SNAPSHOT_BYTES:
            return None
        self.copied_bytes += size
        return tensor.detach().clone()


def _last_line(launch: Launch) -> int:
    return launch.line + launch.code.count("\n")


@contextlib.contextmanager
def quiet_compile(torch: Any) -> Iterator[None]:
    """No TORCH_TRACE records and no debug folders for the search's compiles: the report is the capture's."""
    from torch._logging._internal import trace_log

    handlers = list(trace_log.handlers)
    for handler in handlers:
        trace_log.removeHandler(handler)
    try:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            yield
    finally:
        for handler in handlers:
            trace_log.addHandler(handler)


def search_options(torch: Any, options: Mapping[str, JsonValue]) -> dict[str, Any]:
    """The Inductor config the search compiles with: the capture's options, its own hooks, no caches, no
    debug output, no CUDA graphs (a replay would run no ``call()`` to watch)."""
    config = torch._inductor.config
    patches: dict[str, Any] = {k: v for k, v in options.items() if k in config._config}
    patches.update({
        "fx_graph_cache": False,
        "trace.enabled": False,
        "triton.cudagraphs": False,
        "_post_fusion_custom_pass": post_fusion_pass,
    })  # fmt: skip
    return patches


def examine(
    torch: Any, model: Any, run_step: RunStep, options: Mapping[str, JsonValue], *, fullgraph: bool,
    dynamic: bool | None,
) -> tuple[list[BufferCheck], list[str], list[CompiledGraph]]:  # fmt: skip
    """Compile, run one step with its buffers recorded, judge each: the checks in launch order, what was
    skipped (counted by reason), and the graphs."""
    from torch._inductor.compile_fx import compile_fx

    torch._dynamo.reset()
    recorder = Recorder(torch)
    backend = functools.partial(compile_fx, inner_compile=recorder.inner_compile)
    tracer = CallTracer(torch, recorder.graphs)
    _RECORDING.append(recorder)
    try:
        with quiet_compile(torch), torch._inductor.config.patch(search_options(torch, options)):
            compiled = torch.compile(model, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
            run_step(compiled)  # compiles (the backward too, with --train)
            # CUDA backwards run on autograd's device threads, out of a settrace's reach: keep them on this one
            with tracer.tracing(), torch.autograd.set_multithreading_enabled(False):
                run_step(compiled)
    finally:
        _RECORDING.remove(recorder)
        torch._dynamo.reset()
    skipped: Counter[str] = Counter()
    checks: list[BufferCheck] = []
    calls_seen: Counter[int] = Counter()
    for graph_call in tracer.calls:
        calls_seen[graph_call.graph.index] += 1
        checks.extend(judge_call(torch, graph_call, calls_seen[graph_call.graph.index], skipped))
    notes = [f"{n} buffer{'s' if n > 1 else ''}: {why}" for why, n in skipped.items()]
    untraced = [g for g in recorder.graphs if not calls_seen[g.index]]
    if untraced:
        notes.append(f"{len(untraced)} graph(s) not compared: no call() of theirs ran in the traced step")
    return checks, notes, recorder.graphs


def judge_call(torch: Any, graph_call: GraphCall, call: int, skipped: Counter[str]) -> list[BufferCheck]:
    """Every buffer one call wrote, against its node in the graph Inductor received."""
    graph = graph_call.graph
    nodes = {node.name: node for node in graph.reference.graph.nodes}
    wanted: dict[str, Written] = {}
    for written in graph_call.written:
        node = graph.origins.get(written.buffer)
        if written.value is None:
            skipped["past the copy budget"] += 1
        elif node is None:
            skipped["no FX node recorded for them (graph inputs updated in place, helper buffers)"] += 1
        elif node not in nodes:
            skipped["their node was made by a post-grad pass, so the graph Inductor received has none"] += 1
        else:
            wanted[written.buffer] = written
    names = {graph.origins[b] for b in wanted}
    inputs = graph_call.inputs or []
    try:
        eager = run_nodes(torch, graph.reference, inputs, names)
    except Exception as exc:  # one graph that cannot run again eagerly leaves the others to judge
        why = f"{type(exc).__name__}: {first_line(exc)[:300]}"
        skipped[f"graph {graph.index} could not run again node by node ({why})"] += len(wanted)
        return []
    try:
        from torch._dynamo.debug_utils import cast_to_fp64

        model64, inputs64 = cast_to_fp64(copy.deepcopy(graph.reference), list(inputs))
        reference: dict[str, Any] | None = run_nodes(torch, model64, inputs64, names)
    except Exception:
        reference = None
    checks = []
    for written in graph_call.written:
        if written.buffer not in wanted:
            continue
        node = graph.origins[written.buffer]
        want = eager.get(node)
        check = compare(torch, written, node, want, reference.get(node) if reference else None, skipped)
        if check is not None:
            checks.append(replace(check, graph=graph.index, call=call, source=node_line(nodes[node])))
    return checks


def compare(torch: Any, written: Written, node: str, want: Any, ref: Any, skipped: Counter[str]) -> BufferCheck | None:
    """One buffer against its node's value (``want``, the model's dtype) and float64 value (``ref``)."""
    got = written.value
    if not isinstance(want, torch.Tensor):
        skipped["their node gives several tensors or none (var_mean, a tuple)"] += 1
        return None
    if got.shape != want.shape and [s for s in got.shape if s != 1] == [s for s in want.shape if s != 1]:
        got = got.reshape(want.shape)  # a (1, 10) buffer for a (10,) node
    if isinstance(ref, torch.Tensor) and ref.shape != want.shape:
        ref = None
    check = check_tensor(written.buffer, "output", want, got, ref, OUTPUT_TOLERANCE)
    if isinstance(check, str) or check is None:
        skipped["of another shape or dtype than their node"] += 1
        return None
    launch = written.launch
    return BufferCheck(
        graph=0, launch=launch.position, target=launch.target, kind=launch.kind, buffer=written.buffer, node=node,
        tensor=describe_leaf(got).removesuffix(f" on {got.device}"), within=check.within,
        tolerance=check.tolerance, max_abs_error=check.max_abs_error, compiled_rmse=check.compiled_rmse,
        eager_rmse=check.eager_rmse, multiplier=check.multiplier, note=check.note,
    )  # fmt: skip


def run_nodes(torch: Any, module: Any, inputs: Sequence[Any], names: set[str]) -> dict[str, Any]:
    """The values of the named nodes when ``module`` runs on ``inputs``, node by node."""
    values: dict[str, Any] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, node: Any) -> Any:
            value = super().run_node(node)
            if node.name in names:
                values[node.name] = value
            return value

    with torch.no_grad():
        Recording(module).run(*[value.clone() if isinstance(value, torch.Tensor) else value for value in inputs])
    return values


def node_line(node: Any) -> SourceLine | None:
    """The model line a node was traced from: the innermost user frame of its stack trace."""
    frames = user_frames(from_traceback(node.meta.get("stack_trace") or ""))
    return frames[-1] if frames else None


def first_divergence(checks: Sequence[BufferCheck]) -> int | None:
    """The index of the first check out of bounds, in the order given (launch order)."""
    return next((index for index, check in enumerate(checks) if not check.within), None)


def closeness(check: BufferCheck) -> float:
    """How near a check came to its limit (1: at it)."""
    limit = check.limit
    if limit is not None and check.compiled_rmse is not None:
        return check.compiled_rmse / limit if limit > 0 else math.inf
    return (check.max_abs_error or 0.0) / check.tolerance if check.tolerance else 0.0


def summarize(
    checks: Sequence[BufferCheck], skipped: Sequence[str], graphs: Sequence[CompiledGraph]
) -> NumericDivergence:
    """The checks of one search as the record keeps them: up to the first divergence, or the closest calls."""
    first = first_divergence(checks)
    if first is None:
        kept = tuple(sorted(checks, key=closeness, reverse=True)[:CHECKS_KEPT])
        earlier = 0
    else:
        kept = tuple(checks[max(0, first + 1 - CHECKS_KEPT) : first + 1])
        earlier = first + 1 - len(kept)
    return NumericDivergence(
        status="agrees" if first is None else "diverged", method=METHOD, graphs=tuple(g.record() for g in graphs),
        checks=kept, earlier=earlier, compared=len(checks), skipped=tuple(skipped),
    )  # fmt: skip


def applicable(name: str, when: str, graphs: Sequence[CompiledGraph], device: str, options: Mapping[str, Any],
               torch: Any) -> str:  # fmt: skip
    """Why an option cannot change this model's result, or ``""`` when it may."""
    nodes = [node for graph in graphs for node in graph.reference.graph.nodes]
    if when == "16-bit":
        low = (torch.float16, torch.bfloat16)
        if not any(getattr(n.meta.get("val"), "dtype", None) in low for n in nodes):
            return "no float16 or bfloat16 values in the graphs"
    if when == "random":
        seeded = torch.Tag.nondeterministic_seeded
        if not any(seeded in getattr(n.target, "tags", ()) for n in nodes if n.op == "call_function"):
            return "no random ops in the graphs"
    if when in ("cpu", "cuda") and device != when:
        return f"a {when} option (the model runs on {device})"
    if when == "autotuned" and not options.get("max_autotune"):
        return "max_autotune is off already"
    return ""


def search(
    torch: Any, model: Any, run_step: RunStep, options: Mapping[str, JsonValue], *, device: str, fullgraph: bool,
    dynamic: bool | None, budget_s: float = DEFAULT_BUDGET_S,
) -> NumericDivergence:  # fmt: skip
    """The first divergent buffer of one step, and which of NUMERIC_OPTIONS make it go away (within ``budget_s``)."""
    started = time.perf_counter()
    try:
        checks, skipped, graphs = examine(torch, model, run_step, options, fullgraph=fullgraph, dynamic=dynamic)
    except Exception as exc:
        return NumericDivergence(status="failed", method=METHOD, error=f"{type(exc).__name__}: {first_line(exc)}",
                                 seconds=time.perf_counter() - started)  # fmt: skip
    found = summarize(checks, skipped, graphs)
    if found.first is None:
        return replace(found, seconds=time.perf_counter() - started)
    trials = []
    budget_end = time.perf_counter() + budget_s
    config = torch._inductor.config
    for name, value, when in NUMERIC_OPTIONS:
        if name not in config._config:
            continue
        current = options.get(name, config._config[name].default)
        why_not = applicable(name, when, graphs, device, options, torch) or ("already set" if current == value else "")
        if why_not:
            trials.append(OptionTrial(name, value, "not tried", why_not))
            continue
        if time.perf_counter() > budget_end:
            trials.append(OptionTrial(name, value, "not tried", f"the {budget_s:g} s budget was spent"))
            continue
        trial_started = time.perf_counter()
        try:
            trial_checks, _, _ = examine(torch, model, run_step, {**options, name: value}, fullgraph=fullgraph,
                                         dynamic=dynamic)  # fmt: skip
        except Exception as exc:
            trials.append(OptionTrial(name, value, "failed", f"{type(exc).__name__}: {first_line(exc)}",
                                      time.perf_counter() - trial_started))  # fmt: skip
            continue
        index = first_divergence(trial_checks)
        outcome, detail = ("fixes", "") if index is None else ("still diverges", f"first: {trial_checks[index].place}")
        trials.append(OptionTrial(name, value, outcome, detail, time.perf_counter() - trial_started))  # type: ignore[arg-type]
    return replace(found, options=tuple(trials), budget_s=budget_s, seconds=time.perf_counter() - started)
