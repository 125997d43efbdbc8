"""Parse stage: valid content this version knows and does not show, each with the reason.

A capture of torch 2.11 or 2.13 holds much more than the report uses; declaring it here keeps
``--strict`` quiet about it while anything new (a record kind a later torch adds) is still reported
as "not known to this version". Each group names the torch versions it was seen in (the captures of
tests/fixtures and /work/shared/fixtures) or the torch source (2.13, 2.14.1) that writes it. A ``*`` in a name
stands for a family of names torch builds at run time (``<pass name>_post_grad``).
"""

from __future__ import annotations

from .registry import Parser, Source


def _known(source: Source, description: str, reason: str, torch: str, *names: str) -> tuple[Parser, ...]:
    return tuple(Parser(source, name, description, reason=reason, torch=torch) for name in names)


_GRAPH_FILES = (
    *_known("graph file", "Inductor's drawings of the post-fusion graph and of the FX graph "
            "(trace.graph_diagram, trace.draw_orig_fx_graph)", "listed with the graph's files; the report "
            "draws its own graphs", "svg seen in 2.13; other formats from _inductor/debug.py",
            "graph_diagram.*", "orig_fx_graph_diagram.*"),
    *_known("graph file", "Inductor's debug and info log of this graph (trace.debug_log, trace.info_log)",
            "listed with the graph's files; the process log is read instead", "seen in 2.13",
            "debug.log", "info.log"),
    *_known("graph file", "cProfile of the graph's compile (trace.compile_profile)", "a profile for pstats, "
            "not shown", "2.13 _inductor/debug.py:_save_profile_data", "compile.prof", "compile.stats"),
    *_known("graph file", "max-autotune's timing of each choice as JSON lines (trace.log_autotuning_results)",
            "the AUTOTUNE tables of the process log are read instead", "2.13 _inductor/debug.py",
            "autotuning_result_json_list.txt"),
)  # fmt: skip

_TRACE_RECORDS = (
    *_known("trace record", "metrics logged at run time, after the compile (runtime autotuning, CUDA graph "
            "recording)", "not part of the compile the report shows", "seen in 2.11 (37 in one capture); "
            "2.13 _dynamo/utils.py:log_compilation_event", "compilation_metrics_runtime",
            "bwd_compilation_metrics_runtime"),
    *_known("trace record", "the fake tensors Dynamo made for the inputs", "shapes and dtypes come from the "
            "FX graphs", "seen in 2.11 and 2.13", "describe_storage", "describe_tensor", "describe_source"),
    *_known("trace record", "AOTAutograd's graphs around saved-tensor hooks", "not shown",
            "2.13 _functorch/_aot_autograd/graph_compile.py:maybe_log_graph",
            "aot_*_saved_tensors_hooks", "aot_saved_tensors_hooks_*"),
    *_known("trace record", "the guards as a structured list", "dynamo_cpp_guards_str is read instead",
            "2.13 _dynamo/guards.py", "dynamo_guards"),
    *_known("trace record", "dynamic-shape reasoning: every symbolic expression built (TORCH_DTRACE), sizes "
            "guessed from real tensors, data-dependent guard errors", "the symbols, specializations and "
            "guards they lead to are shown (readers.py)", "2.13 fx/experimental/symbolic_shapes.py, "
            "sym_node.py", "expression_created", "propagate_real_tensors", "propagate_real_tensors_provenance",
            "guard_on_data_dependent_error"),
    *_known("trace record", "fake-tensor kernels missing or disagreeing with the real ones (draft export)",
            "export diagnostics, not shown", "2.13 _subclasses/fake_tensor.py", "missing_fake_kernel",
            "mismatched_fake_kernel"),
    *_known("trace record", "torch.export's program", "export is not shown", "2.13 export/_trace.py",
            "export", "exported_program"),
    *_known("trace record", "DDPOptimizer's split of a graph at bucket boundaries", "each compiled piece has "
            "a graph folder", "2.13 _dynamo/backends/distributed.py", "optimize_ddp_split_graph",
            "optimize_ddp_split_child"),
    *_known("trace record", "the graph compiled autograd traced", "its Inductor graphs have graph folders",
            "2.13 _dynamo/compiled_autograd.py", "compiled_autograd_graph"),
    *_known("trace record", "a link for tlparse's index", "not content of the compile",
            "2.13 _dynamo/convert_frame.py", "link"),
    *_known("trace record", "a source file dumped for tlparse", "the report reads the user's files itself",
            "2.13 _logging/structured.py:dump_file", "dump_file"),
    *_known("trace record", "a graph Inductor's FX graph cache logs with its key", "the graph folders hold "
            "the graphs", "2.13 _inductor/codecache.py", "graph_dump"),
)  # fmt: skip

_TRACE_ARTIFACTS = (
    *_known("trace artifact", "FX graphs after single passes of Inductor's (the IR stages before and after "
            "each group of passes are read)", "not shown", "2.13 _inductor/compile_fx.py, fx_passes/, "
            "_functorch/_aot_autograd/graph_compile.py", "aot_inference_graph_after_hop_passes", "*_pre_grad",
            "*_post_grad", "optimus_*", "cff_*"),
    *_known("trace artifact", "the standalone repro script",
            "the graph folder's fx_graph_runnable.py is read instead", "seen in 2.11 and 2.13",
            "fx_graph_runnable"),
    *_known("trace artifact", "AOTAutograd's view of tensor subclasses' inputs and outputs", "not shown",
            "2.13 _functorch/_aot_autograd/", "aot_forward_graph_fw_subclass_metadata"),
    *_known("trace artifact", "configuration and versions at compile time", "versions come from "
            "compilation_metrics and fx_graph_runnable.py", "seen in 2.11 and 2.13",
            "torch._functorch.config", "torch_version"),
    *_known("trace artifact", "other events of the compile caches: AOTAutograd's failure to pickle an entry, "
            "the bundled FX graph cache, Dynamo's precompile cache (the lookups in AOTAutograd's cache and the FX "
            "graph cache are read)", "not shown", "2.13 _functorch/_aot_autograd/autograd_cache.py, "
            "_inductor/compile_fx.py, _dynamo/package.py, precompile_context.py, output_graph.py",
            "aotautograd_cache_pickle_failure", "fx_graph_bundled_cache_hit", "dynamo_cache_bypass",
            "dynamo_cache_entries", "dynamo_cache_exception", "precompile_cache_bypass"),
    *_known("trace artifact", "Python source AOTAutograd generated for its runtime wrappers", "wrapper code "
            "around the compiled graph, not shown", "the first six seen in 2.13; the rest 2.13 "
            "_functorch/_aot_autograd/runtime_wrappers.py, subclass_codegen.py",
            "runtime_wrapper_orchestration", "backward_prologue", "backward_epilogue",
            "compiled_function_forward", "compiled_function_backward", "compiled_fn_wrapper",
            "output_alias_wrapper", "mutation_epilogue", "functionalized_rng_wrapper",
            "effect_tokens_wrapper", "dedup_wrapper", "synthetic_base_wrapper", "debug_assert_wrapper",
            "subclass_wrapper", "backward_subclass_wrapper", "backward_subclass_unwrap"),
    *_known("trace artifact", "side effects Dynamo replays after the graph", "not shown", "seen in 2.11",
            "dynamo_side_effects"),
    *_known("trace artifact", "a frame's bytecode before and after Dynamo", "not shown",
            "2.13 _dynamo/convert_frame.py", "*_ORIGINAL_BYTECODE", "*_MODIFIED_BYTECODE"),
    *_known("trace artifact", "an error while tracing or compiling", "the capture's outcome and process log "
            "carry the failure", "2.13 _dynamo/convert_frame.py, _functorch/_aot_autograd/graph_compile.py, "
            "fx/interpreter.py, fx/experimental/proxy_tensor.py, _higher_order_ops/invoke_subgraph.py, "
            "_inductor/fx_passes/spmd_check.py", "dynamo_error", "eager_compile_backwards_failure",
            "fx_interpreter_error", "make_fx_fail_partial", "invoke_subgraph_backward_duplicate",
            "inductor_spmd_graph_mismatch"),
    *_known("trace artifact", "compiled autograd's compile reasons and graph", "not shown",
            "2.13 _dynamo/compiled_autograd.py", "compiled_autograd_compile_reasons",
            "compiled_autograd_graph_pre_reordering"),
    *_known("trace artifact", "the partitioner's decisions (min-cut, activation quantization, saved-tensor "
            "hooks)", "not shown", "2.13 _functorch/partitioners.py, _activation_checkpointing/, "
            "_aot_autograd/", "min_cut_information", "min_cut_failed_edge_list", "min_cut_failed_fx_graph",
            "min_cut_failed_svg", "aot_joint_graph_sync_decision_cross_ranks",
            "aot_saved_tensors_hooks_graphs",
            "before_activation_quantization_fwd_aten_pass", "after_activation_quantization_fwd_aten_pass",
            "before_activation_quantization_bwd_aten_pass", "after_activation_quantization_bwd_aten_pass"),
    *_known("trace artifact", "collective scheduling and bucketing of distributed graphs", "captures here "
            "are single-process", "2.13 _dynamo/output_graph.py, _inductor/comms.py, comms_debug.py, "
            "scheduler.py, debug.py, augmented_graph_helper.py, fx_passes/", "compiler_collective",
            "fx_bucketing_passes_all_gather_buckets", "fx_bucketing_passes_reduce_scatter_buckets",
            "fx_collectives_analytical_estimation", "fx_collectives_estimations_after_overlap_bucketing",
            "fx_compute_nodes_runtime_estimation", "inductor_collective_schedule",
            "inductor_fx_passes_overlap_bucketing", "inductor_overlap_cyclic_extra_deps",
            "overlap_scheduling_graph_before", "overlap_scheduling_graph_after", "pge_profile_vs_analytical",
            "pre_decomp_comms", "post_decomp_comms", "pre_bucketing_collective_sizes",
            "pre_bucketing_collective_sizes_after", "pre_bucketing_fsdp_collectives",
            "reorder_communication_preserving_peak_memory", "scheduler_nodes_before_comm_overlap",
            "sink_waits_iterative_info", "*_ITERATIVE_RECOMPUTE_ERROR"),
    *_known("trace artifact", "other Inductor debug dumps: execution order, runtime estimates, the "
            "autotune-at-compile-time code, memory planning, FX splitter events", "not shown",
            "2.13 _inductor/debug.py, codegen/wrapper.py, memory.py, fx/passes/splitter_base.py",
            "graph_execution", "inductor_runtime_and_tensor_meta", "inductor_autotune_at_compile_time_code",
            "*__*_fused", "fx_net_acc_splitter_finder_events"),
    *_known("trace artifact", "profile-guided dynamic shapes state (automatic dynamic)", "which sizes "
            "changed between calls; the symbols they became are shown", "2.13 _dynamo/pgo.py", "get_local_code_state", "get_remote_code_state",
            "get_extra_remote_code_state", "put_local_code_state", "put_remote_code_state",
            "put_extra_remote_code_state"),
    *_known("trace artifact", "the compile worker pool's health: a worker's status report, a crashed "
            "sidecar's last output", "not part of the compile the report shows; a failed compile is "
            "reported from the capture's outcome", "2.14.1 _inductor/compile_worker/subproc_pool.py "
            "(first in 2.14)", "compile_worker_status", "compile_worker_sidecar_death"),
    *_known("trace artifact", "FlexGEMM's lowering phases as text (flex_gemm_<phase>)", "its kernels are "
            "CuTe DSL kernels, listed with a note", "2.14.1 _inductor/kernel/flex_gemm/debug.py (first in 2.14)",
            "flex_gemm_*"),
    *_known("trace artifact", "AOTAutograd's runtime wrappers", "wrapper code around the compiled graph, not "
            "shown", "named for torch 2.15 by issue 30; not in 2.14.1's source (checked 2026-11-27)",
            "aot_autograd_runtime_wrappers"),
)  # fmt: skip

KNOWN = (*_GRAPH_FILES, *_TRACE_RECORDS, *_TRACE_ARTIFACTS)
