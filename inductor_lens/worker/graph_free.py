"""Stage 4 of the pipeline (bench), in the model process: the compiled code again, without CUDA graphs.

Under CUDA graphs (``reduce-overhead``, ``max-autotune``) a compiled step is one ``cudaGraphLaunch`` per
graph: the profiler ties every replayed kernel to that one call, Triton launches never reach Python (so no
launch can be copied and timed alone), and nothing says what the graph saved. So, when the profiled steps
replayed CUDA graphs, this module runs the very code Inductor generated, called directly:

- every output-code module this process loaded (``PyCodeCache.modules``) with Inductor's benchmark harness
  (``get_args()``: inputs of the graph's sizes, strides and dtypes, random values) is called through a
  fresh ``Runner`` over its raw partitions (cudagraph trees wrap ``runner.partitions`` in place) or its
  ``call``, inside a ``## Call CompiledFxGraph <md5 of the module> ##`` range the parent matches to the
  graph whose output_code.py has that md5;
- a profiled run of those calls (``GRAPH_FREE_TRACE_FILE``) shows which kernels each launch issues, in
  order: the parent aligns the CUDA-graph replays of the real steps with it (``bench/graph_replay.py``);
- one round of calls is timed (``do_bench``): the step without CUDA graphs and without Dynamo's guards;
- the Triton launches of one round are copied and replayed alone, as ``measure.isolated_kernels`` does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..exchange.files import GRAPH_FREE_REGION, STEP_MARKS, CudaGraphData
from .compat import cudagraph_tree_manager, dynamo_counters, output_code_modules
from .measure import PROFILED_STEPS, gpu_step_time, recording_launches, replay_launches


def graphs_replayed(trace_path: str) -> bool:
    """Whether the profiled steps replayed CUDA graphs (the runtime call is in the trace)."""
    try:
        return '"cudaGraphLaunch"' in Path(trace_path).read_text(encoding="utf-8")
    except OSError:
        return False


def graph_free(device: torch.device, trace_path: str) -> CudaGraphData:
    """Profile, time and isolate the compiled graphs' own code, without CUDA graphs. Never raises: what fails
    is reported in ``errors``, and the measurements of the real steps stand on their own."""
    try:
        return _graph_free(device, trace_path)
    except Exception as exc:
        return CudaGraphData(trace=trace_path, errors=[f"{type(exc).__name__}: {exc}"[:300]])


def _graph_free(device: torch.device, trace_path: str) -> CudaGraphData:
    data = CudaGraphData(trace=trace_path)
    data.graphs_recorded, data.rerecords = _tree_counts(device)
    data.skips = _skips()
    runs = []
    for module in _output_code_modules():
        try:
            args = module.get_args()
        except Exception as exc:  # a harness that cannot build its inputs here: the others still run
            data.errors.append(
                f"{Path(getattr(module, '__file__', '?')).name}: get_args() raised {exc!r}"[:300]
            )
            continue
        runs.append((_source_md5(module), _raw_call(module), args))
    if not runs:
        data.errors.append("no output-code module with a benchmark harness was loaded")
        return data
    data.graphs = len(runs)
    from torch.profiler import ProfilerActivity, profile, record_function

    def one_round() -> None:
        for md5, call, args in runs:
            with record_function(f"{GRAPH_FREE_REGION} {md5} ##"):
                call(list(args))

    try:
        for _ in range(3):
            one_round()
        torch.cuda.synchronize(device)
        data.step = gpu_step_time(one_round)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for index in range(PROFILED_STEPS):
                with record_function(f"{STEP_MARKS[0]}{index}"):
                    one_round()
                torch.cuda.synchronize(device)
        prof.export_chrome_trace(trace_path)
        data.steps = PROFILED_STEPS
        with recording_launches(device) as launches:
            one_round()
            torch.cuda.synchronize(device)
        data.isolated = replay_launches(list(launches.values()))
    except Exception as exc:  # reported on the page; the graph-replayed measurements stand on their own
        data.errors.append(f"{type(exc).__name__}: {exc}"[:300])
    finally:
        runs.clear()
        torch.cuda.empty_cache()
    return data


def _output_code_modules() -> list[Any]:
    return [
        module
        for module in output_code_modules()
        if callable(getattr(module, "call", None))
        and callable(getattr(module, "get_args", None))
        and callable(getattr(module, "benchmark_compiled_module", None))
    ]


def _raw_call(module: Any) -> Callable[[list[Any]], Any]:
    """The module's ``call`` over its own partition functions: cudagraph trees replace the runner's
    partitions by CUDA-graph wrappers, but the module-level ``partition_<i>`` stay the generated code."""
    runner = getattr(module, "runner", None)
    partitions = getattr(runner, "partitions", None)
    if runner is not None and isinstance(partitions, list) and hasattr(module, "Runner"):
        raw = [getattr(module, f"partition_{i}", None) for i in range(len(partitions))]
        if all(callable(fn) for fn in raw):
            call: Callable[[list[Any]], Any] = module.Runner(partitions=raw).call
            return call
    direct: Callable[[list[Any]], Any] = module.call
    return direct


def _source_md5(module: Any) -> str:
    try:
        return hashlib.md5(Path(module.__file__).read_bytes()).hexdigest()
    except (OSError, AttributeError, TypeError):
        return "unknown"


def _tree_counts(device: torch.device) -> tuple[int | None, int | None]:
    """CUDA graphs recorded and re-recorded, from cudagraph trees' manager (private: None when it moved)."""
    try:
        manager = cudagraph_tree_manager(device.index or 0)
        if manager is None:
            return None, None
        recorded, stack = 0, [node for nodes in manager.roots.values() for node in nodes]
        while stack:
            node = stack.pop()
            recorded += 1
            stack.extend(child for children in node.children.values() for child in children)
        rerecords = sum(sum(counts.values()) for counts in manager.num_rerecord.values())
        return recorded, rerecords
    except Exception:
        return None, None


def _skips() -> int | None:
    try:
        return int(dynamo_counters()["inductor"]["cudagraph_skips"])
    except Exception:
        return None
