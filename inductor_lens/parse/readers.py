"""Parse stage: one declaration per parser: what it reads, what it is, where its result goes.

``REGISTRY`` holds these and the content known and not shown (``known.py``). Graph folders
(``graph.py``), the TORCH_TRACE log (``trace.py``) and the process log (``__init__.py``) are read
through it: a name not declared here or in ``known.py`` is "not known to this version". Graph-file
parsers take ``(text, where, diagnostics)``; trace readers ``(record, state, diagnostics)``; process-log
parsers the log's text. The ``goes_to`` values below are the record fields the callers fill.
"""

from __future__ import annotations

from typing import Any

from . import compat
from . import trace_artifacts as ta
from . import trace_kinds as tk
from . import trace_shapes as ts
from .autotune import parse_autotune_tables
from .diagnostics import Diagnostics
from .fx_graph import parse_fx_graph
from .ir import parse_ir
from .known import KNOWN
from .logs import debug_log_graph_breaks, debug_trace_compile_ids, parse_bench_k, parse_runnable_header
from .output_code import parse_output_code
from .provenance import load_json_object
from .registry import Parser, Registry

# Where graph-folder results go; graph.py and __init__.py ask for the parsers of each.
KERNELS = "GraphRecord.kernels, .launches, .buffers, .aliases, .outputs"
FX_GRAPHS = "GraphRecord.fx_graphs"
IR_DUMPS = "GraphRecord.ir"
PROVENANCE = "GraphRecord.provenance"
BENCHMARKS = "KernelRecord.inductor_benchmark"
SETTINGS = "CompileRun.environment, CompileRun.settings.options"
AUTOTUNE = "CompileRun.autotune"
COMPILE_IDS = "GraphRecord.compile_id"
DEBUG_LOG_BREAKS = "CompileRun.graph_breaks (without a TORCH_TRACE log)"
IR_STAGES = "DynamoFrame.stages"


def _fx(stage: Any) -> Any:
    return lambda text, where, diagnostics: parse_fx_graph(text, stage, where, diagnostics)


def _ir(stage: Any) -> Any:
    return lambda text, where, diagnostics: parse_ir(text, stage, where, diagnostics)


def _runnable(text: str, where: str, diagnostics: Diagnostics) -> Any:
    return parse_runnable_header(text)


# Files in a graph folder, in the order their results are joined. Names seen in 2.11 and 2.13.
GRAPH_FILES = (
    Parser("graph file", "output_code.py", "generated wrapper and kernels", KERNELS, parse_output_code),
    Parser("graph file", "fx_graph_readable.py", "ATen FX graph as Inductor received it", FX_GRAPHS,
           _fx("readable")),
    Parser("graph file", "fx_graph_transformed.py", "FX graph after Inductor's post-grad passes", FX_GRAPHS,
           _fx("transformed")),
    Parser("graph file", "ir_pre_fusion.txt", "scheduler nodes before fusion", IR_DUMPS, _ir("pre_fusion")),
    Parser("graph file", "ir_post_fusion.txt", "scheduler nodes after fusion", IR_DUMPS, _ir("post_fusion")),
    Parser("graph file", "inductor_provenance_tracking_node_mappings.json", "provenance: nodes to kernels",
           PROVENANCE, load_json_object),
    # Not written by Inductor: `python output_code.py -k` output saved beside the graph by capture
    # scripts (the shared GPU fixtures have it).
    Parser("graph file", "bench_k.txt", "output of `python output_code.py -k`", BENCHMARKS, parse_bench_k),
    # Read from the first graph folder that has one: versions, GPU, non-default Inductor config.
    Parser("graph file", "fx_graph_runnable.py", "standalone repro script", SETTINGS, _runnable),
)  # fmt: skip

# TORCH_TRACE record kinds this version reads (torch/_logging/structured.py and the trace_structured
# calls of Dynamo and Inductor). Seen in 2.11 and 2.13.
TRACE_RECORDS = (
    Parser("trace record", "str", "an interned file name of the stacks", "SourceLine.filename", tk.read_str),
    Parser("trace record", "inductor_output_code", "md5 of a graph's output code, tying it to a compile id",
           "GraphRecord.compile_id", tk.read_output_code),
    Parser("trace record", "artifact", "a named artifact, dispatched on its name (below, and known.py)",
           "(by artifact name)", ta.read_artifact),
    Parser("trace record", "dynamo_start", "the Python stack that triggered the compile",
           "DynamoFrame.call_site", tk.read_dynamo_start),
    Parser("trace record", "dynamo_cpp_guards_str", "the frame's guards as text", "DynamoFrame.guards",
           tk.read_guards, payload=True),
    Parser("trace record", "dynamo_output_graph", "Dynamo's graph; its placeholders name the parameters",
           "FxNode.role, FxNode.origin", tk.read_output_graph, payload=True),
    Parser("trace record", "compilation_metrics", "a frame's compile times, cache counts and versions",
           "DynamoFrame, Environment versions", tk.read_metrics),
    Parser("trace record", "chromium_event", "a timeline event (begin, end, instant) of the compile timeline; "
           "CUDA-graph recordings (CUDAGraphNode.record) are also counted per compile",
           "CompileRun.timeline, DynamoFrame.cudagraph_recordings", tk.read_chromium_event, payload=True),
    Parser("trace record", "bwd_compilation_metrics", "the backward graph's compile time (at .backward())",
           "DynamoFrame.phases", tk.read_backward_metrics),
    # Dynamic shapes: seen in 2.13 (create_symbol, guard_added_fast, symbolic_shape_specialization); the
    # other two from 2.13 fx/experimental/symbolic_shapes.py (create_unbacked_symbol for .item() and
    # nonzero sizes, guard_added only with TORCH_DTRACE).
    Parser("trace record", "create_symbol", "a symbolic size: its hint (value at compile time), range and "
           "source", "DynamoFrame.symbols, GraphRecord.symbols", ts.read_create_symbol),
    Parser("trace record", "create_unbacked_symbol", "a data-dependent symbolic size (no hint)",
           "DynamoFrame.symbols", ts.read_create_symbol),
    Parser("trace record", "symbolic_shape_specialization", "a symbolic size turned back into a constant",
           "DynamoFrame.specializations", ts.read_specialization),
    Parser("trace record", "guard_added_fast", "a guard on symbolic sizes, with the user line traced",
           "DynamoFrame.shape_guards", ts.read_guard_added),
    Parser("trace record", "guard_added", "a guard on symbolic sizes (the TORCH_DTRACE form)",
           "DynamoFrame.shape_guards", ts.read_guard_added),
    # AOTAutograd's graphs, and the post-grad graph as a record of its own (older releases; 2.13 on an FX
    # graph cache hit, _inductor/codecache.py): the compile's IR stages.
    *(Parser("trace record", name, description, IR_STAGES, tk.read_ir_stage, payload=True)
      for name, description in (
          ("aot_joint_graph", "AOTAutograd's joint forward-backward graph"),
          ("aot_forward_graph", "AOTAutograd's forward graph (of a graph that needs gradients)"),
          ("aot_backward_graph", "AOTAutograd's backward graph"),
          ("aot_inference_graph", "AOTAutograd's graph when no gradient is needed"),
          ("inductor_pre_grad_graph", "the pre-grad graph, as a record (older releases)"),
          ("inductor_post_grad_graph", "the post-grad graph, as a record"))),
)  # fmt: skip

# Artifact names this version reads. Seen in 2.11 and 2.13.
TRACE_ARTIFACTS = (
    Parser("trace artifact", "inductor_provenance_tracking_node_mappings",
           "provenance maps of the graph just logged (backward graphs have no json file)",
           "GraphRecord.provenance", ta.read_node_mappings, payload=True),
    Parser("trace artifact", "inductor_provenance_tracking_kernel_stack_traces",
           "user stack of each kernel of the graph just logged", "KernelRecord.user_stack",
           ta.read_kernel_stack_traces, payload=True),
    # A compile's lookups in AOTAutograd's cache and Inductor's FX graph cache (compat.CACHE_LOOKUP_ARTIFACTS);
    # an FX graph cache key also names the graph just logged.
    *(Parser("trace artifact", name, f"a lookup in the {cache} cache: a {result}",
             "DynamoFrame.cache_lookups" + (", GraphRecord.fx_cache_key" if cache == "FX graph" else ""),
             ta.read_cache_lookup, payload=True)
      for name, (cache, result) in compat.CACHE_LOOKUP_ARTIFACTS.items()),
    Parser("trace artifact", "dynamo_graph_break_reason", "why Dynamo broke the graph, with the user stack",
           "CompileRun.graph_breaks", ta.read_graph_break, payload=True),
    Parser("trace artifact", "recompile_reasons", "the guard failures that made Dynamo recompile",
           "DynamoFrame.recompile_reasons", ta.read_recompile_reasons, payload=True),
    Parser("trace artifact", "triton_kernel_info", "per Triton kernel: configs, autotune cache, compile time",
           "KernelRecord.autotune_info", ta.read_kernel_info, payload=True),
    # The graph before and after each group of Inductor's passes, and AOTAutograd's view of the inputs and
    # outputs: the compile's IR stages (seen in 2.11 and 2.13).
    *(Parser("trace artifact", name, description, IR_STAGES, tk.read_ir_stage, payload=True)
      for name, description in (
          ("before_pre_grad_graph", "the graph Inductor received from Dynamo, before its pre-grad passes"),
          ("after_pre_grad_graph", "the same graph after the pre-grad passes"),
          ("aot_forward_graph_fw_metadata", "AOTAutograd's view of the inputs and outputs (mutations, aliasing)"),
          ("before_joint_graph", "the joint graph before Inductor's joint-graph passes"),
          ("after_joint_graph", "the joint graph after them"),
          ("before_post_grad_graph", "the graph Inductor lowers, before its post-grad passes"),
          ("inductor_post_grad_graph", "the graph after the post-grad passes: what the kernels compute"))),
)  # fmt: skip

# The process log saved beside the debug tree (capture.log, run.log).
PROCESS_LOG = (
    Parser("process log", "AUTOTUNE tables", "max-autotune's benchmark of each choice", AUTOTUNE,
           parse_autotune_tables),
    Parser("process log", "debug trace lines", "`[0/1] model__1_inference_3 debug trace: <folder>`",
           COMPILE_IDS, debug_trace_compile_ids),
    Parser("process log", "torchdynamo/debug.log", "Dynamo's debug log: the graph breaks it warned about",
           DEBUG_LOG_BREAKS, debug_log_graph_breaks),
)  # fmt: skip

REGISTRY = Registry((*GRAPH_FILES, *TRACE_RECORDS, *TRACE_ARTIFACTS, *PROCESS_LOG, *KNOWN))
