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
import functools
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch

from ..parse.source_lines import from_traceback, user_frames
from ..records import SourceLine
from ..records.codec import JsonScalar, JsonValue
from ..records.numerics import (
    BufferCheck,
    NumericDivergence,
    OptionTrial,
)
from .accuracy import OUTPUT_TOLERANCE, check_tensor, describe_leaf
from .compat import (
    POST_FUSION_PASS_OPTION,
    cast_to_fp64,
    compile_fx_module,
    functorch_config,
    inductor_config,
    inductor_options,
    reset_dynamo,
    trace_logger,
)
from .divergence_watch import (
    CallTracer,
    CompiledGraph,
    GraphCall,
    Recorder,
    Written,
    post_fusion_pass,
    recording,
)
from .failure import first_line

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
CHECKS_KEPT = 40
METHOD = ("each buffer a kernel writes, in launch order, judged against the FX node it holds, that node run "
          "(torch.fx.Interpreter) on the same inputs as part of the graph Inductor received before its post-grad "
          "passes, in the model's dtype and in float64, by the rule of the accuracy verdict: within tol of the "
          "node in the model's dtype, or an RMSE against float64 at most 2x (3x for 16-bit dtypes and tensors "
          "under 1,000 elements) that node's own plus tol/10")  # fmt: skip

RunStep = Callable[[Callable[..., Any]], None]  # one step of the model (each call of get_inputs(), and backward with --train)


@contextlib.contextmanager
def quiet_compile() -> Iterator[None]:
    """No TORCH_TRACE records and no debug folders for the search's compiles: the report is the capture's."""
    trace_log = trace_logger()
    handlers = list(trace_log.handlers)
    for handler in handlers:
        trace_log.removeHandler(handler)
    try:
        with functorch_config().patch(enable_autograd_cache=False):
            yield
    finally:
        for handler in handlers:
            trace_log.addHandler(handler)


def search_options(options: Mapping[str, JsonValue]) -> dict[str, Any]:
    """The Inductor config the search compiles with: the capture's options, its own hooks, no caches, no
    debug output, no CUDA graphs (a replay would run no ``call()`` to watch)."""
    known = inductor_options()
    patches: dict[str, Any] = {k: v for k, v in options.items() if k in known}
    patches.update({
        "fx_graph_cache": False,
        "trace.enabled": False,
        "triton.cudagraphs": False,
        POST_FUSION_PASS_OPTION: post_fusion_pass,
    })  # fmt: skip
    return patches


def examine(
    model: Callable[..., Any], run_step: RunStep, options: Mapping[str, JsonValue], *, fullgraph: bool,
    dynamic: bool | None,
) -> tuple[list[BufferCheck], list[str], list[CompiledGraph]]:  # fmt: skip
    """Compile, run one step with its buffers recorded, judge each: the checks in launch order, what was
    skipped (counted by reason), and the graphs."""
    reset_dynamo()
    recorder = Recorder()
    backend = functools.partial(compile_fx_module().compile_fx, inner_compile=recorder.inner_compile)
    tracer = CallTracer(recorder.graphs)
    try:
        with recording(recorder), quiet_compile(), inductor_config().patch(search_options(options)):
            compiled = torch.compile(model, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
            run_step(compiled)  # compiles (the backward too, with --train)
            # CUDA backwards run on autograd's device threads, out of a settrace's reach: keep them on this one
            with tracer.tracing(), torch.autograd.set_multithreading_enabled(False):
                run_step(compiled)
    finally:
        reset_dynamo()
    skipped: Counter[str] = Counter()
    checks: list[BufferCheck] = []
    calls_seen: Counter[int] = Counter()
    for graph_call in tracer.calls:
        calls_seen[graph_call.graph.index] += 1
        checks.extend(judge_call(graph_call, calls_seen[graph_call.graph.index], skipped))
    notes = [f"{n} buffer{'s' if n > 1 else ''}: {why}" for why, n in skipped.items()]
    untraced = [g for g in recorder.graphs if not calls_seen[g.index]]
    if untraced:
        notes.append(f"{len(untraced)} graph(s) not compared: no call() of theirs ran in the traced step")
    return checks, notes, recorder.graphs


def judge_call(graph_call: GraphCall, call: int, skipped: Counter[str]) -> list[BufferCheck]:
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
        eager = run_nodes(graph.reference, inputs, names)
    except Exception as exc:  # one graph that cannot run again eagerly leaves the others to judge
        why = f"{type(exc).__name__}: {first_line(exc)[:300]}"
        skipped[f"graph {graph.index} could not run again node by node ({why})"] += len(wanted)
        return []
    try:
        model64, inputs64 = cast_to_fp64(copy.deepcopy(graph.reference), list(inputs))
        reference: dict[str, Any] | None = run_nodes(model64, inputs64, names)
    except Exception:
        reference = None
    checks = []
    for written in graph_call.written:
        if written.buffer not in wanted:
            continue
        node = graph.origins[written.buffer]
        want = eager.get(node)
        check = compare(written, node, want, reference.get(node) if reference else None, skipped)
        if check is not None:
            checks.append(replace(check, graph=graph.index, call=call, source=node_line(nodes[node])))
    return checks


def compare(written: Written, node: str, want: object, ref: object, skipped: Counter[str]) -> BufferCheck | None:
    """One buffer against its node's value (``want``, the model's dtype) and float64 value (``ref``)."""
    got = written.value
    assert got is not None, "a buffer past the copy budget is skipped before it is compared"
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


def run_nodes(module: torch.fx.GraphModule, inputs: Sequence[Any], names: set[str]) -> dict[str, Any]:
    """The values of the named nodes when ``module`` runs on ``inputs``, node by node."""
    values: dict[str, Any] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            value = super().run_node(node)
            if node.name in names:
                values[node.name] = value
            return value

    with torch.no_grad():
        Recording(module).run(*[value.clone() if isinstance(value, torch.Tensor) else value for value in inputs])
    return values


def node_line(node: torch.fx.Node) -> SourceLine | None:
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


def applicable(name: str, when: str, graphs: Sequence[CompiledGraph], device: str, options: Mapping[str, Any]) -> str:
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
    model: Callable[..., Any], run_step: RunStep, options: Mapping[str, JsonValue], *, device: str, fullgraph: bool,
    dynamic: bool | None, budget_s: float = DEFAULT_BUDGET_S,
) -> NumericDivergence:  # fmt: skip
    """The first divergent buffer of one step, and which of NUMERIC_OPTIONS make it go away (within ``budget_s``)."""
    started = time.perf_counter()
    try:
        checks, skipped, graphs = examine(model, run_step, options, fullgraph=fullgraph, dynamic=dynamic)
    except Exception as exc:
        return NumericDivergence(status="failed", method=METHOD, error=f"{type(exc).__name__}: {first_line(exc)}",
                                 seconds=time.perf_counter() - started)  # fmt: skip
    found = summarize(checks, skipped, graphs)
    if found.first is None:
        return replace(found, seconds=time.perf_counter() - started)
    trials = []
    budget_end = time.perf_counter() + budget_s
    known = inductor_options()
    for name, value, when in NUMERIC_OPTIONS:
        if name not in known:
            continue
        current = options.get(name, known[name].default)
        why_not = applicable(name, when, graphs, device, options) or ("already set" if current == value else "")
        if why_not:
            trials.append(OptionTrial(name, value, "not tried", why_not))
            continue
        if time.perf_counter() > budget_end:
            trials.append(OptionTrial(name, value, "not tried", f"the {budget_s:g} s budget was spent"))
            continue
        trial_started = time.perf_counter()
        try:
            trial_checks, _, _ = examine(model, run_step, {**options, name: value}, fullgraph=fullgraph,
                                         dynamic=dynamic)  # fmt: skip
        except Exception as exc:
            trials.append(OptionTrial(name, value, "failed", f"{type(exc).__name__}: {first_line(exc)}",
                                      time.perf_counter() - trial_started))  # fmt: skip
            continue
        index = first_divergence(trial_checks)
        outcome, detail = ("fixes", "") if index is None else ("still diverges", f"first: {trial_checks[index].place}")
        trials.append(OptionTrial(name, value, outcome, detail, time.perf_counter() - trial_started))  # type: ignore[arg-type]
    return replace(found, options=tuple(trials), budget_s=budget_s, seconds=time.perf_counter() - started)
