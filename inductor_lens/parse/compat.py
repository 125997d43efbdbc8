"""Parse stage: every difference between torch versions that the parsers know about, in one place.

Each entry says which torch versions it was seen in. "seen" means checked against real captures
(torch 2.11.0+cu130 on an H200, torch 2.13.0+cpu, and torch 2.14.1+cu130 run on a CPU, see
tests/fixtures/PROVENANCE.md); "older" entries come from earlier releases' output and are kept so old debug
folders still parse; entries read from a torch's source name the file.
"""

from __future__ import annotations

import re
from typing import Any

# --- debug folder layout ---------------------------------------------------------------------

# Graph folders: f"{model}__{aot_id}_{kind}_{nth}.{counter}" (torch/_functorch/_aot_autograd/
# logging_utils.py:get_aot_graph_name + torch/_inductor/debug.py:DebugContext.create_debug_dir).
# Seen in 2.11 and 2.13. The ".counter" suffix is a process-global DebugContext counter.
GRAPH_FOLDER = re.compile(
    r"^(?P<model>.+?)__(?P<aot_id>\d+)_(?P<kind>forward|backward|inference)_(?P<nth>\d+)(?:\.(?P<counter>\d+))?$"
)

# The files Inductor writes into a graph folder are declared in readers.py (those read) and known.py
# (those known and not shown), each with the torch versions it was seen in.

TRACE_FILE = re.compile(r"^dedicated_log_torch_trace.*\.log$")

# Logged by torch/_inductor/debug.py for every graph folder (a WARNING on stderr):
#   W1121 21:49:57.841000 994 torch/_inductor/debug.py:520] [0/0] model__0_forward_1 debug trace: /x/model__0_forward_1.0
# The compile id in brackets is the only direct link from a folder to its Dynamo frame in the logs.
DEBUG_TRACE_LINE = re.compile(r"\[(?P<compile_id>[^\]]+)\]\s+(?P<name>\S+) debug trace: (?P<path>\S.*?)\s*$")

# --- output_code.py ---------------------------------------------------------------------------

# `name = async_compile.<definer>(...)` at module level defines a kernel.
#   triton: ('name', '''source''', device_str='cuda')                       seen 2.11, 2.13
#   cpp_pybinding: (['float*', ...], r'''source''')                         seen 2.13
#   cpp: ('''source''')                                                      older (< 2.3)
KERNEL_DEFINERS = {
    "async_compile.triton": "triton",
    "async_compile.cpp_pybinding": "cpp",
    "async_compile.cpp": "cpp",
}
# Other async_compile helpers that define a kernel whose source this version does not read: each is listed with
# a note, and its launches in call() (``name.run(...)``, ``name(...)`` on CPU, ``name.name(..., c_void_p(stream))``
# for CUDA C++) are shown as library calls under the kernel's name, never as unrecognised calls.
OTHER_DEFINERS = {
    "async_compile.multi_kernel",
    "async_compile.cuda",
    "async_compile.rocm",
    "async_compile.halide",
    # read from torch 2.14.1's source (no capture here makes them; CuTe DSL, NVIDIA's universal GEMM, Pallas
    # and Metal need their own hardware or libraries): codegen/cutedsl/cutedsl_scheduling.py (FlexAttention,
    # the FlexGEMM templates and CuTe DSL matmuls), codegen/nv_universal_gemm/, codegen/pallas.py, codegen/mps.py,
    # codegen/multi_kernel.py, codegen/cuda_combined_scheduling.py (CUTLASS on XPU)
    "async_compile.cutedsl",
    "async_compile.nv_universal_gemm",
    "async_compile.pallas",
    "async_compile.metal",
    "async_compile.size_hint_multi_kernel",
    "async_compile.xpu",
    # FlyDSL templates (ROCm), after 2.14.1: `name = async_compile.flydsl('name', r'''...''')` in
    # PyTorch's own tests of its main branch (2026-11); not in the 2.14.1 wheel
    "async_compile.flydsl",
}

# Comment headers above a kernel definition and above launches in call().
# "Topologically Sorted Source Nodes" seen in 2.11 and 2.13; plain "Source Nodes" is older.
SOURCE_NODES_COMMENT = re.compile(
    r"#\s*(?:Topologically Sorted )?Source Nodes: \[(?P<nodes>.*?)\],\s*Original ATen: \[(?P<aten>.*?)\]\s*$"
)
PROVENANCE_HANDLE_COMMENT = re.compile(r"#\s*\[Provenance debug handles\]\s*(?P<handle>\S+)\s*$")
KERNEL_PATH_COMMENT = re.compile(r"#\s*kernel path:\s*(?P<path>\S.*?)\s*$")

# Triton heuristics decorator -> kernel category. Seen in 2.11 (pointwise, persistent_reduction,
# reduction, template); the rest are Inductor's other heuristics of the same family.
TRITON_HEURISTIC_CATEGORIES = {
    "pointwise": "pointwise",
    "reduction": "reduction",
    "persistent_reduction": "persistent reduction",
    "cooperative_reduction": "reduction",
    "split_scan": "reduction",
    "template": "template",
    "foreach": "foreach",
    "user_autotune": "user",
}
# Kernel name prefixes Inductor uses, for kernels whose decorator we could not read.
TRITON_NAME_CATEGORIES = {
    "triton_poi_": "pointwise",
    "triton_red_": "reduction",
    "triton_per_": "persistent reduction",
    "triton_tem_": "template",
    "triton_for_": "foreach",
}

# Where the wrapper's call() lives:
#   class Runner: def call(self, args)   seen 2.11, 2.13 (graph partitions)
#   def call(args) at module level       older (<= 2.8)
CALL_CONTAINERS = ("Runner",)

# Calls in call() that allocate, check or move buffers rather than run a kernel. Seen in 2.11/2.13.
WRAPPER_HELPERS = {
    "assert_size_stride",
    "assert_alignment",
    "reinterpret_tensor",
    "alloc_from_pool",
    "get_raw_stream",
    "args.clear",
    "torch.cuda.set_device",
    "torch.cuda._DeviceGuard",
    "torch.xpu.set_device",
    "run_intermediate_hooks",
    "start_graph",
    "end_graph",
    "torch._dynamo.testing.rand_strided",
    "copy_misaligned_inputs",
    "copy_if_misaligned",  # 2.13 GPU wrappers (seen in a --preview-gpu capture): an input re-aligned for Triton
    "align",
    "torch.empty_strided",
    "empty_strided",
}
WRAPPER_HELPER_PREFIXES = ("empty_strided_", "torch._C._dynamo.guards.")

# Calls in call() that state a tensor's layout, read by parse/call_layouts.py (the parser, the reproducer and
# the hand-written problems): helper -> (position of the tensor, of its sizes, of its strides, of its dtype or
# None), and whether the first three are tuples holding one entry per tensor.
#   assert_size_stride(arg0_1, (16, 8, 3, 3), (72, 9, 3, 1), 'input')          seen 2.11, 2.13, 2.14.1
#   assert_size_stride_grouped((arg2_1, arg1_1), ((2, 8, 16, 16), (16, )), ((2048, 1, 128, 8), (1, )), 'input')
#       first seen 2.14.1 (CPU): each input checked just before its first kernel, those of one kernel in one
#       call (codegen/wrapper.py codegen_deferred_input_asserts); a single input keeps assert_size_stride
#   assert_tensor_metadata(buf1, (2, 16, 16, 16), (4096, 1, 256, 16), torch.float32, 'torch.ops.aten...')
#       first seen 2.14.1 (CPU): an extern or fallback kernel's output, with its dtype
#       (codegen/wrapper.py _codegen_assert_size_stride with a dtype)
LAYOUT_CHECKS: dict[str, tuple[int, int, int, int | None, bool]] = {
    "assert_size_stride": (0, 1, 2, None, False),
    "assert_size_stride_grouped": (0, 1, 2, None, True),
    "assert_tensor_metadata": (0, 1, 2, 3, False),
}
WRAPPER_HELPERS |= set(LAYOUT_CHECKS)
# ``name = empty_strided_cpu(sizes, strides, dtype)`` allocates; ``name = reinterpret_tensor(base, sizes,
# strides, offset)`` views (seen 2.11, 2.13, 2.14.1).
LAYOUT_ALLOCATOR_PREFIX = "empty_strided"
LAYOUT_VIEW = "reinterpret_tensor"

# Under dynamic shapes call() reads the sizes of its inputs before the first launch (seen 2.13):
#   s77 = arg0_1                      a size passed as an int argument
#   arg2_1_size = arg2_1.size()       then  s53 = arg2_1_size[1]
#   ps0 = 32*s53                      a size Inductor precomputes for the kernels (older and GPU wrappers)
# These are tensor methods that only read a shape.
SHAPE_READS = ("size", "stride", "storage_offset", "numel", "dim")

# Prefixes of the sympy symbols of sizes (torch/utils/_sympy/symbol.py, 2.13; s and u since 2.1):
# s backed sizes (s53), u unbacked ones (.item(), nonzero), zf / zuf floats, ps sizes the wrapper
# precomputes. The other prefixes of that file (x, r0_, tmp, ...) name loop indices inside kernels.
SIZE_SYMBOL_PREFIXES = ("zuf", "zf", "ps", "s", "u")

# output_code.py's benchmark harness: ``def get_args()`` assigns each argument of call() a value at the
# size hints, ``arg1_1 = 24`` for a size and ``rand_strided((2, 24), (24, 1), device=..., dtype=...)`` for a
# tensor (seen 2.11, 2.13).
HARNESS_FUNCTION = "get_args"
HARNESS_TENSOR_MAKERS = ("rand_strided",)

# Calls in call() that run an op outside Inductor's generated kernels ("extern kernels").
#   extern_kernels.mm(...) / addmm / bmm / convolution       seen 2.11, 2.13
#   torch.ops.aten._scaled_dot_product_efficient_attention.default(...)   seen 2.11 (fallback kernels)
#   torch.ops.mkl._mkl_linear.default(...)                    seen 2.13 (CPU, freezing)
EXTERN_PREFIXES = ("extern_kernels.", "torch.ops.", "aten.", "inductor_ops.", "torch._C._nn.", "torch._ops.")

# Old-style Triton launches passed `grid=grid(...)` to .run (torch < 2.7); newer ones compute the
# grid inside the launcher from inductor_meta['grid_type']. Both are `<kernel>.run(...)` calls.
TRITON_LAUNCH_METHOD = "run"


# Python helpers among Inductor's extern kernels, by the ATen op they call (what the profiler shows):
#   extern_kernels.bias_addmm(bias, a, b) -> torch.addmm with a broadcast bias   seen 2.11 (max-autotune)
EXTERN_HELPER_OPS = {"bias_addmm": "addmm"}


def extern_aten_op(target: str) -> str:
    """The ATen op an extern call runs: extern_kernels.addmm -> aten.addmm."""
    if target.startswith("extern_kernels."):
        name = target.removeprefix("extern_kernels.")
        return "aten." + EXTERN_HELPER_OPS.get(name, name)
    if target.startswith("torch.ops."):
        return target.removeprefix("torch.ops.")
    return target


# An extern call's "Original ATen" comment lists the ops of the nodes around it too; the call runs its own op,
# or the matmul of the op it was decomposed from (an mm split off an addmm whose bias add went elsewhere).
EXTERN_DECOMPOSED_FROM = {"mm": ("addmm", "bmm", "matmul"), "bmm": ("baddbmm", "matmul"), "addmm": ("linear",)}


def extern_own_ops(listed: tuple[str, ...], aten_op: str) -> tuple[str, ...]:
    """The ops of ``listed`` that an extern call running ``aten_op`` computes (its own op if none of them is)."""
    if not listed:
        return ()
    base = aten_op.removeprefix("aten.").split(".")[0]
    allowed = {base, *EXTERN_DECOMPOSED_FROM.get(base, ())}
    own = tuple(op for op in listed if op.removeprefix("aten.").split(".")[0] in allowed)
    return own or (f"aten.{base}",)


def is_wrapper_helper(target: str) -> bool:
    return target in WRAPPER_HELPERS or target.startswith(WRAPPER_HELPER_PREFIXES)


def normalize_size_hints(value: Any) -> dict[str, int]:
    """size_hints is a dict such as {'x': 2048, 'r0_': 512} (2.6 and later, seen 2.11);
    older releases wrote a plain list [2048, 512], kept here by position."""
    if isinstance(value, dict):
        return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}
    if isinstance(value, list):
        return {f"dim{i}": int(v) for i, v in enumerate(value) if isinstance(v, int)}
    return {}


def normalize_signature(value: Any, arg_names: list[str]) -> dict[str, str]:
    """triton_meta['signature'] maps argument names to types (seen 2.11); before triton 3.0 /
    torch 2.5 it mapped argument *indices* to types."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, str] = {}
    for key, kind in value.items():
        name = str(key)
        if name.isdecimal() and int(name) < len(arg_names):
            name = arg_names[int(name)]
        out[name] = str(kind)
    return out


# With comment_origin, Inductor writes "#pragma CMT ORIGIN:" blocks into a kernel's code and turns the
# pragma into the language's comment: "#" for Triton (codegen/triton.py), "//" for C++ (codegen/cpp.py).
# Seen in 2.13 (Triton, from the CPU Triton backend); the C++ form read from 2.13's source.
ORIGIN_COMMENT = {"triton": "#", "cpp": "//"}

# --- provenance tracking json ------------------------------------------------------------------
# inductor_provenance_tracking_node_mappings.json: "preToPost"/"postToPre" plus kernel maps, whose
# keys are "cppCodeToPost"/"postToCppCode" in 2.11 and 2.13 for Triton and C++ kernels alike;
# tlparse also reads "pyCodeToPost"/"postToPyCode", the names for Python wrapper code.
PROVENANCE_KERNEL_TO_POST_KEYS = ("cppCodeToPost", "pyCodeToPost")
PROVENANCE_KNOWN_KEYS = {
    "preToPost",
    "postToPre",
    "cppCodeToPost",
    "postToCppCode",
    "pyCodeToPost",
    "postToPyCode",
    "version",
}

# --- TORCH_TRACE structured log --------------------------------------------------------------
# One glog-prefixed line with a JSON envelope, then payload lines each starting with a TAB
# (torch/_logging/structured.py; format documented by tlparse's types.rs). Seen in 2.11 and 2.13.
TRACE_LINE = re.compile(r"^[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ [^\]]*\] (?P<json>\{.*\})\s*$")
TRACE_ENVELOPE_FIELDS = {
    "frame_id",
    "frame_compile_id",
    "attempt",
    "has_payload",
    "compiled_autograd_id",
    "rank",
    # torch/_logging/_internal.py:trace_structured adds these after the record's kind, which comes first:
    # "stack" (the logging call's stack when there is no compile id; seen 2.11, 2.13) and
    # "subgraph_name" (regional Inductor; 2.13 source).
    "stack",
    "subgraph_name",
}
# The record kinds and artifact names are declared in readers.py (those read) and known.py (those known
# and not shown), each with the torch versions it was seen in or the torch source that writes it.

# --- extern attention calls -------------------------------------------------------------------

# Where `is_causal` sits among the positional arguments of each SDPA kernel Inductor calls
# (native_functions.yaml). Seen in 2.11 (efficient, flash on the H200) and 2.13 (flash_attention_for_cpu).
SDPA_CAUSAL_POSITION = {
    "_scaled_dot_product_efficient_attention": 6,  # q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal
    "_scaled_dot_product_flash_attention": 4,  # q, k, v, dropout_p, is_causal
    "_scaled_dot_product_flash_attention_for_cpu": 4,  # q, k, v, dropout_p, is_causal
    "_scaled_dot_product_cudnn_attention": 6,  # q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal
    "_scaled_dot_product_attention_math": 5,  # q, k, v, attn_mask, dropout_p, is_causal
    "scaled_dot_product_attention": 5,  # q, k, v, attn_mask, dropout_p, is_causal
}
# The backward calls (torch 2.11-2.13 native_functions.yaml): where is_causal sits; q is their second argument.
SDPA_BACKWARD_CAUSAL_POSITION = {
    # grad_out, q, k, v, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p, grad_input_mask, is_causal
    "_scaled_dot_product_efficient_attention_backward": 11,
    # grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal
    "_scaled_dot_product_flash_attention_backward": 11,
    # grad_out, q, k, v, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k, max_q,
    # max_k, dropout_p, is_causal
    "_scaled_dot_product_cudnn_attention_backward": 14,
}

# --- CUDA graphs, as the process log tells of them ----------------------------------------------

# Lines torch prints when CUDA graph trees skip a graph or record another one. From
# torch/_inductor/cudagraph_utils.py (log_cudagraph_skip_and_bump_counter: "skipping cudagraphs due to
# ...") and torch/_inductor/cudagraph_trees.py (the warning on many distinct input sizes); messages as in
# 2.11 and 2.13 (read from their sources, not seen in the fixtures: no capture here skipped).
CUDAGRAPH_LOG_MARKERS = {
    "skipping cudagraphs due to": "CUDA graphs skipped",
    "recording a new graph for each distinct input size": "CUDA graphs re-recorded for new input sizes",
    "CUDAGraph supports dynamic shapes by recording a new graph": "CUDA graphs re-recorded for new input sizes",
}


# Lookups in the compile caches, logged as artifacts named after the cache and the answer -> (cache, result).
# Their JSON payload is the cache's CacheInfo (2.13 _inductor/codecache.py, _functorch/_aot_autograd/
# autograd_cache.py): ``key`` (null on a bypass), ``components`` (the "[hash] name: value" lines hashed into the
# key; AOTAutograd's are empty on CPU in 2.13), ``cache_status_detailed`` ("full_miss", "guard_miss", "hit"),
# ``cache_bypass_reason``, ``time_taken_ns`` (a miss: the compile it cost), ``time_saved_ns`` (a hit). Both misses
# seen in 2.11 and 2.13; the FX graph cache's hit and bypass and AOTAutograd's bypass seen in 2.13
# (cpu-torch2.13-compile-failure); aotautograd_cache_hit from 2.13's autograd_cache.py. The same names as
# chromium_event spans (``fx_graph_cache_miss``) are timeline events, not lookups.
CACHE_LOOKUP_ARTIFACTS: dict[str, tuple[str, str]] = {
    f"{prefix}_{result}": (cache, result)
    for prefix, cache in (("aotautograd_cache", "AOTAutograd"), ("fx_graph_cache", "FX graph"))
    for result in ("hit", "miss", "bypass")
}
# CacheInfo's fields the report reads, with the JSON type torch writes (null allowed).
CACHE_LOOKUP_FIELDS: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "cache_status_detailed": (str,),
    "cache_bypass_reason": (str,),
    "time_taken_ns": (int, float),
    "time_saved_ns": (int, float),
    "components": (list,),
}

# A bare TORCH_TRACE log (no debug folder): the records and artifacts that hold a graph folder's files,
# by (record kind, artifact name or None) -> the file they stand for. Their FX graphs print types with
# strides and device (``f32[4, 8][8, 1]cuda:0``: ``print_readable(include_stride=True, include_device=True)``),
# which ``plain_fx_types`` cuts to the folder's ``f32[4, 8]``. Seen in 2.11 and 2.13; the post-grad
# graph is an artifact there and a record of its own in older releases (and on an FX graph cache hit).
TRACE_GRAPH_FILES: dict[tuple[str, str | None], str] = {
    ("inductor_output_code", None): "output_code.py",
    ("artifact", "before_post_grad_graph"): "fx_graph_readable.py",
    ("artifact", "inductor_post_grad_graph"): "fx_graph_transformed.py",
    ("inductor_post_grad_graph", None): "fx_graph_transformed.py",
    ("artifact", "fx_graph_runnable"): "fx_graph_runnable.py",
}
# AOTAutograd's graph records (IR stages), logged before Inductor compiles each: which kind of graph a
# compile id made.
TRACE_AOT_GRAPH_KINDS = {"aot_forward_graph": "forward", "aot_backward_graph": "backward",
                         "aot_inference_graph": "inference"}  # fmt: skip
# What a debug folder has and a trace does not: Inductor's IR dumps (TORCH_COMPILE_DEBUG only).
TRACE_MISSING_FILES = ("ir_pre_fusion.txt", "ir_post_fusion.txt")
_STRIDE_DEVICE = re.compile(r'"(\w+\[[^\]"]*\])\[[^\]"]*\][a-z]+(?::\d+)?"')


def trace_graph_file(kind: str, body: Any) -> str | None:
    """The graph-folder file a trace record stands for, or None."""
    artifact = body.get("name") if kind == "artifact" and isinstance(body, dict) else None
    return TRACE_GRAPH_FILES.get((kind, artifact if isinstance(artifact, str) else None))


def plain_fx_types(text: str) -> str:
    """An FX graph as the trace prints it, with the types as a graph folder's file has them."""
    return _STRIDE_DEVICE.sub(r'"\1"', text)



# --- custom ops (torch.library) ---------------------------------------------------------------

# The op namespaces torch registers itself (torch._C._dispatch_get_all_op_names() with torch._inductor loaded,
# and higher_order, its higher-order ops).
# An extern call ``torch.ops.<ns>.<op>.<overload>(...)`` into any other namespace runs a custom op, a user's or
# a library's (``transformers::grouped_mm_fallback``), which Inductor calls as it is. The profiler names an op's
# range ``<ns>::<op>``, without its overload, torch's ops and custom ops alike (seen 2.13.0 CPU, lens_demo::mix).
#   seen 2.13.0 (CPU): all below but coor and mempool;  seen 2.14.1 (CPU build of the CUDA wheel): + coor, mempool
TORCH_OP_NAMESPACES = frozenset({
    "aten", "prims", "inductor", "inductor_prims", "debugprims", "rngprims", "quantized", "_quantized",
    "quantized_decomposed", "quantization", "mkl", "mkldnn", "mkldnn_prepacked", "onednn", "c10d", "_c10d_functional",
    "_c10d_functional_autograd", "c10d_functional", "_dtensor", "fsdp", "symm_mem", "profiler", "sparse", "streams",
    "static_runtime", "onnx", "onnx_symbolic", "export", "flex_lib", "debug_mode_ops", "_native", "_test",
    "_inductor_test", "higher_order", "coor", "mempool",
})  # fmt: skip
TORCH_OPS_PREFIX = "torch.ops."


def op_namespace(target: str) -> tuple[str, str] | None:
    """``torch.ops.lens_demo.mix.default`` -> (``lens_demo``, ``mix``); None for a call that is not a torch.ops op."""
    parts = target.removeprefix(TORCH_OPS_PREFIX).split(".") if target.startswith(TORCH_OPS_PREFIX) else []
    return (parts[0], parts[1]) if len(parts) >= 2 and all(parts[:2]) else None


def custom_op(target: str) -> str | None:
    """``lens_demo::mix`` where an extern call's target is an op of a namespace torch does not own, else None."""
    found = op_namespace(target)
    return f"{found[0]}::{found[1]}" if found is not None and found[0] not in TORCH_OP_NAMESPACES else None


# A custom op written in Python (torch.library.custom_op, as transformers' and samples/custom_op.py's are) leaves no
# ``<ns>::<op>`` range of its own since 2.14: it dispatches through the PyObject dispatcher (torch/_ops.py
# _PyObjectDispatcher, switched on by torch/_library/custom_ops.py), which records none, so the ranges of the ops it
# runs (aten::matmul ...) sit at the top level of the graph's call. Seen 2.14.1 (CPU build of the CUDA wheel); 2.13.0
# (CPU) nests them in ``lens_demo::mix``. The timing stage then times the op by those ranges.
RANGELESS_CUSTOM_OPS = "torch 2.14 and later record no profiler range for a custom op written in Python"


# --- the model's own frame ---------------------------------------------------------------------------------------
# The frame Dynamo compiles for an nn.Module whose forward is torch's own code (nn.Sequential, a bare nn.Linear):
# OptimizedModule wraps the module in torch/_dynamo/external_utils.py's wrap_inline, whose ``inner`` is the
# compiled frame, so no frame, FX note or stack trace of the compile names a line of the model file. Seen in
# 2.11.0 (H200, the mlp_default fixture), 2.13.0 (CPU) and 2.14.1 (CPU).
WRAP_INLINE_FRAME = ("/torch/_dynamo/external_utils.py", "inner")


def is_wrap_inline_frame(filename: str | None, function: str | None) -> bool:
    return filename is not None and filename.endswith(WRAP_INLINE_FRAME[0]) and function == WRAP_INLINE_FRAME[1]


# --- the Triton helpers the kernels inline; the preview's C++ build ---------------------------------------------

# Inductor's Triton kernels import torch._inductor.runtime.triton_helpers (libdevice and math through its
# triton_compat) and inline its @triton.jit functions, whose signatures change between torch versions. Seen
# 2.14.1: online_softmax_combine, online_softmax_combine_with_sum and online_softmax_reduce take a required
# `strict_signed_zero` that 2.11 and 2.13 kernels do not pass; max2_strict, min2_strict, fmax2, fmaximum are new.
# A capture keeps these modules (capture/triton_cache.py) and the compiler stages compile against them.
TRITON_HELPER_MODULES = ("triton_helpers", "triton_compat")
# --preview-gpu's stand-in CUDA guard: torch 2.14.1's c10 headers need C++20 (std::strong_ordering in
# c10/util/intrusive_ptr.h; 2.13's build as C++17). The flag is the one torch's own C++ builder passes
# (worker/compat.py, cpp_standard_flag), not a version switch here.


# --- module stacks (capture/module_stacks.json) ------------------------------------------------------------------
# Dynamo names each module of a node's nn_module_stack by the source it was reached through
# (torch/_dynamo/variables/nn_module.py, record_nn_module_stack: ``source.name``, with ``._modules['x']``,
# ``._parameters['x']`` and ``._buffers['x']`` already rewritten to ``.x``). The root is the local or global the
# frame got the model from: ``L['self']`` for a compiled module, ``L['<arg>']`` for a function given one (seen
# 2.11.0 on the H100 fixtures, 2.13.0 CPU: ``L['self'].transformer.h.0.mlp``, ``L['s'].layers.0.fc``), ``G['x']``
# for a global. Older spellings kept so old captures fold the same: ``._modules['x']`` (before torch rewrote it),
# ``[0]`` / ``['x']`` (a GetItemSource: a ModuleList or ModuleDict indexed), ``getattr(base, '0x')`` (an
# AttrSource whose member is not an identifier, torch/_dynamo/source.py), ``self.layers.0`` (2.0's values).
MODULE_PATH_ROOT = re.compile(r"^(?:[LG]\[(['\"])[^'\"]*\1\]|self)(?=[.\[]|$)")
MODULE_PATH_GETATTR = re.compile(r"getattr\((?P<base>[^()]*), (['\"])(?P<member>[^'\"]*)\2\)")
MODULE_PATH_ITEM = re.compile(r"(?:\._(?:modules|parameters|buffers))?\[(['\"]?)(?P<key>[^'\"\]]*)\1\]")

# The stack trace AOT autograd gives a gradient accumulation node in the backward (torch/fx/traceback.py,
# GRADIENT_ACC_SPECIAL_STACK) is the forward node's trace followed by this line. Seen 2.11.0 (H100, ResNet-50
# --train: the backward's ``triton_poi_fused_add_195``).
GRADIENT_ADDITION_NOTE = "Gradient addition node due to multiple use of tensor around:"
