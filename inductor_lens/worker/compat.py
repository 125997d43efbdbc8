"""Stage 1 of the pipeline (capture), in the model process: torch's private APIs the worker uses, in one place.

The model-process side of ``parse/compat.py``: each entry is a constant or a small function standing for one
private API (``torch._dynamo``, ``torch._inductor``, ``torch._C``, ``torch._guards``, ``torch._functorch``,
``torch._logging``, ...), with the torch versions it was checked on and, where they differ, what changed.
"checked" means called on that version: torch 2.13.0+cpu (``.venv``) and 2.14.1+cu130 run on a CPU
(``.venv-torch-newest``); 2.11.0+cu130 (the GPU machines) where a capture there used it. The worker's modules
import these names from here and call no private API of their own.

Private submodules are imported inside the functions: this module is imported once torch is, but before
Dynamo and Inductor are (``capture.run_settings`` imports Dynamo's config first, the in-process API imports
nothing until a capture starts).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

import torch

# --- Dynamo and Inductor, their configs and entry points ----------------------------------------------------


def dynamo_config() -> Any:
    """``torch._dynamo.config`` (a ConfigModule: ``.patch(dict)``, attributes). Checked 2.11, 2.13, 2.14.1."""
    return importlib.import_module("torch._dynamo.config")


def inductor_config() -> Any:
    """``torch._inductor.config``: ``.patch(dict)``, ``_config`` (name -> entry with ``.default``, every option
    this torch knows), ``_post_fusion_custom_pass``, ``compile_threads``. Checked 2.11, 2.13, 2.14.1."""
    return importlib.import_module("torch._inductor.config")


def functorch_config() -> Any:
    """``torch._functorch.config``: ``enable_autograd_cache`` (AOTAutograd's cache). Checked 2.13, 2.14.1."""
    return importlib.import_module("torch._functorch.config")


def inductor_options() -> dict[str, Any]:
    """Every Inductor option this torch knows, by name, each with its ``.default`` (``config._config``, a dict
    of ``_ConfigEntry`` in 2.13 and 2.14.1)."""
    return dict(inductor_config()._config)


# The Inductor option that runs a pass over the scheduler's nodes after fusion (a callable, None by default;
# checked 2.13, 2.14.1). Inductor pickles its config for its cache key: the pass must be a module-level function.
POST_FUSION_PASS_OPTION = "_post_fusion_custom_pass"


def list_mode_options(mode: str | None, dynamic: bool | None) -> dict[str, Any]:
    """The Inductor options a ``torch.compile`` mode stands for (``torch._inductor.list_mode_options``).
    Checked 2.11, 2.13, 2.14.1."""
    return dict(torch._inductor.list_mode_options(mode, dynamic))


def reset_dynamo() -> None:
    """Forget every compiled frame and graph (``torch._dynamo.reset``). Checked 2.11, 2.13, 2.14.1."""
    torch._dynamo.reset()


def compile_fx_module() -> Any:
    """``torch._inductor.compile_fx``: ``compile_fx`` (Inductor's backend, patched by module_stacks.py) and
    ``compile_fx_inner`` (its per-graph compile, an ``inner_compile``). Checked 2.11, 2.13, 2.14.1."""
    return importlib.import_module("torch._inductor.compile_fx")


def fresh_cache() -> Any:
    """A context manager giving Inductor fresh private caches (``torch._inductor.utils.fresh_cache``; called
    ``fresh_inductor_cache`` before 2.6). Checked 2.13, 2.14.1."""
    return importlib.import_module("torch._inductor.utils").fresh_cache()


def optimized_module() -> type[torch.nn.Module]:
    """The module ``torch.compile`` returns for an nn.Module (``torch._dynamo.eval_frame.OptimizedModule``,
    the compiled module's ``_orig_mod``). Checked 2.11, 2.13, 2.14.1."""
    found: type[torch.nn.Module] = importlib.import_module("torch._dynamo.eval_frame").OptimizedModule
    return found


def cast_to_fp64(model: torch.fx.GraphModule, inputs: list[Any]) -> tuple[torch.fx.GraphModule, list[Any]]:
    """A graph and its inputs cast to float64 as the accuracy minifier casts them
    (``torch._dynamo.debug_utils.cast_to_fp64``). Checked 2.13, 2.14.1."""
    cast: Callable[..., tuple[torch.fx.GraphModule, list[Any]]]
    cast = importlib.import_module("torch._dynamo.debug_utils").cast_to_fp64
    return cast(model, inputs)


def tree_leaves(value: Any) -> list[Any]:
    """Every leaf of nested lists, tuples and dicts (``torch.utils._pytree.tree_leaves``). Checked 2.13, 2.14.1."""
    return list(torch.utils._pytree.tree_leaves(value))


def tree_map(fn: Callable[[Any], Any], value: Any) -> Any:
    """``value`` with ``fn`` applied to each leaf, its lists, tuples and dicts rebuilt
    (``torch.utils._pytree.tree_map``). Checked 2.13, 2.14.1."""
    return torch.utils._pytree.tree_map(fn, value)


# --- the compile being traced ----------------------------------------------------------------------------------


def current_compile_id() -> str | None:
    """The compile id of the frame being compiled, as the trace and the parser name it ("0/0", "0/0_1" for a
    restarted compile), or None outside a compile (``torch._guards.CompileContext.current_trace_id``).
    Checked 2.11, 2.13, 2.14.1."""
    compile_id = torch._guards.CompileContext.current_trace_id()
    return str(compile_id) if compile_id else None


def inductor_debug() -> Any:
    """``torch._inductor.debug``, whose kernel information (a library call's input and output shapes and
    dtypes) capture's ``kernel_information`` keeps: ``reset_provenance_globals`` (a context manager each compile
    enters), ``create_kernel_information_json()`` and ``_inductor_kernel_extern_info``. Checked 2.14.1: all
    three. 2.13: the first two, without the shapes (no ``_inductor_kernel_extern_info``: see
    ``has_kernel_information``)."""
    return importlib.import_module("torch._inductor.debug")


def has_kernel_information(debug: Any) -> bool:
    """Whether this torch's Inductor keeps the kernel information (2.14 and later; 2.13: no)."""
    return hasattr(debug, "reset_provenance_globals") and hasattr(debug, "_inductor_kernel_extern_info")


# --- the TORCH_TRACE log -----------------------------------------------------------------------------------------


def trace_logger() -> logging.Logger:
    """The logger of torch's structured trace (``torch._logging._internal.trace_log``, "torch.__trace"). Without
    TORCH_TRACE, torch's own handler removes itself on its first record. Checked 2.13, 2.14.1."""
    found: logging.Logger = importlib.import_module("torch._logging._internal").trace_log
    return found


def trace_file_handler(folder: str) -> logging.Handler:
    """A handler writing the structured trace into ``folder`` as TORCH_TRACE would
    (``torch._logging._internal.LazyTraceHandler`` with ``TorchLogsFormatter(trace=True)``). Checked 2.13, 2.14.1."""
    internal = importlib.import_module("torch._logging._internal")
    handler: logging.Handler = internal.LazyTraceHandler(folder)
    handler.setFormatter(internal.TorchLogsFormatter(trace=True))
    return handler


def torch_logs_formatter() -> logging.Formatter:
    """The formatter of torch's own log lines (``torch._logging._internal.TorchLogsFormatter``: "W1121 21:49:57
    ... torch/_inductor/debug.py:520] [0/0] ..."). Checked 2.13, 2.14.1."""
    found: logging.Formatter = importlib.import_module("torch._logging._internal").TorchLogsFormatter()
    return found


def interned_strings() -> dict[str, int]:
    """The strings the trace has numbered in this process, each logged once as a ``str`` record
    (``torch._logging.structured.INTERN_TABLE``). Checked 2.13, 2.14.1."""
    return dict(importlib.import_module("torch._logging.structured").INTERN_TABLE)


def trace_structured(kind: str, metadata: Callable[[], Any]) -> None:
    """Log one structured trace record (``torch._logging.trace_structured``, without the compile context).
    Checked 2.13, 2.14.1."""
    torch._logging.trace_structured(kind, metadata, suppress_context=True)


# --- Inductor's Triton runtime -------------------------------------------------------------------------------------

# The Triton helper module the kernels import and inline (its @triton.jit functions change between versions:
# parse/compat.py TRITON_HELPER_MODULES). Checked 2.11, 2.13, 2.14.1.
TRITON_HELPERS_MODULE = "torch._inductor.runtime.triton_helpers"


def triton_helpers() -> Any:
    """``torch._inductor.runtime.triton_helpers``: ``libdevice`` (Triton's, which the preview swaps for NumPy
    under the interpreter) and ``set_driver_to_gpu`` (which the compile child stubs). Checked 2.13, 2.14.1."""
    return importlib.import_module(TRITON_HELPERS_MODULE)


def triton_heuristics() -> Any:
    """``torch._inductor.runtime.triton_heuristics``: ``cached_autotune`` (the decorator of Inductor's kernels) and
    ``CachingAutotuner`` (whose ``_create_compile_meta`` and ``_create_compile_options`` the compile child calls on a
    stand-in). Checked 2.13, 2.14.1."""
    return importlib.import_module("torch._inductor.runtime.triton_heuristics")


# Functions of torch._C that a CUDA build has and a CPU build lacks: checked 2.14.1+cu130 (present, run on a CPU),
# 2.13.0+cpu (absent). Kernel modules import the raw stream getter; Inductor plans CUDA graphs only where the
# caching allocator says it is on.
CUDA_RAW_STREAM = "_cuda_getCurrentRawStream"
CUDA_CACHING_ALLOCATOR_ENABLED = "_cuda_cudaCachingAllocator_is_enabled"


# --- the GPU preview's stand-in device (gpu_preview*.py) --------------------------------------------------------


def cxx11_abi() -> int:
    """Whether torch was built with the C++11 ABI (``torch._C._GLIBCXX_USE_CXX11_ABI``), for a library linked
    against c10. Checked 2.13, 2.14.1 (both 1)."""
    return int(torch._C._GLIBCXX_USE_CXX11_ABI)


def cpp_standard_flag() -> str:
    """The C++ standard torch's own C++ builder passes (``torch._inductor.cpp_builder._get_cpp_std_cflag``: 2.13 and
    2.14.1 ``-std=c++20``, which 2.14's c10 headers need: ``std::strong_ordering`` in ``c10/util/intrusive_ptr.h``);
    ``-std=c++17`` for a torch without that helper."""
    try:
        return "-" + str(importlib.import_module("torch._inductor.cpp_builder")._get_cpp_std_cflag()[0])
    except (ImportError, AttributeError, IndexError):
        return "-std=c++17"


def sdp_priority_order() -> list[int]:
    """The SDPA backends in the order the user set, or the default (``torch._C._get_sdp_priority_order``; SDPBackend
    values, default [1, 2, 0, 3, 4] in 2.13 and 2.14.1)."""
    return list(torch._C._get_sdp_priority_order())


def alloc_with_matching_layout(query: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """An empty tensor of ``shape`` laid out as cuDNN attention's meta function lays its output out
    (``torch._meta_registrations.alloc_with_matching_layout``). Checked 2.13, 2.14.1."""
    alloc: Callable[[torch.Tensor, tuple[int, ...]], torch.Tensor]
    alloc = importlib.import_module("torch._meta_registrations").alloc_with_matching_layout
    return alloc(query, shape)


def dynamo_guards() -> Any:
    """``torch._C._dynamo.guards``, whose ``_empty_strided_cuda`` the output code allocates CUDA buffers with
    (``EMPTY_STRIDED_CUDA``). Checked 2.13, 2.14.1."""
    return importlib.import_module("torch._C._dynamo.guards")


EMPTY_STRIDED_CUDA = "_empty_strided_cuda"


def torch_triton() -> Any:
    """``torch.utils._triton``, whose cached answers (``TRITON_CHECKS``) say whether Triton and a GPU backend are
    there. Checked 2.13, 2.14.1."""
    return importlib.import_module("torch.utils._triton")


TRITON_CHECKS = ("has_triton", "triton_backend", "triton_hash_with_backend")


def cuda_interface() -> Any:
    """Dynamo's CUDA device interface (``torch._dynamo.device_interface.CudaInterface``), its static methods
    answering for the device while Inductor compiles. Checked 2.13, 2.14.1."""
    return importlib.import_module("torch._dynamo.device_interface").CudaInterface


def cuda_private_answers() -> dict[str, Callable[..., Any]]:
    """Stand-ins for torch.cuda's private functions Inductor and the output code call (what a single GPU answers):
    ``_exchange_device``, ``_maybe_exchange_device`` (2.13: Python functions; 2.14.1: torch._C builtins),
    ``_DeviceGuard`` and ``_lazy_init`` (a real tensor made "on CUDA" while tracing is allocated on the CPU)."""
    import contextlib

    return {
        "_exchange_device": lambda device: 0,
        "_maybe_exchange_device": lambda device: 0,
        "_DeviceGuard": lambda index: contextlib.nullcontext(),
        "_lazy_init": lambda: None,
    }


def fake_tensor_mode() -> Any:
    """``torch._subclasses.fake_tensor.FakeTensorMode`` (the class; its ``avoid_device_init`` property keeps a CPU
    build's behaviour). Checked 2.13, 2.14.1."""
    return importlib.import_module("torch._subclasses.fake_tensor").FakeTensorMode


def fake_from_meta(mode: Any, meta: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A fake tensor of ``mode`` shaped as ``meta``, on ``device`` (``FakeTensorConverter.from_meta_and_device``).
    Checked 2.13, 2.14.1."""
    fake: torch.Tensor = mode.fake_tensor_converter.from_meta_and_device(mode, meta, device)
    return fake


def tracing_with(mode: Any) -> Any:
    """A context manager tracing in ``mode`` as Dynamo would hand a graph to Inductor
    (``torch._guards.tracing(TracingContext(mode))``). Checked 2.13, 2.14.1."""
    return torch._guards.tracing(torch._guards.TracingContext(mode))


# --- the bench stage and the hand-written checks (measure, graph_free, saved_inputs, accuracy, handwritten/) ------


def output_code_modules() -> list[Any]:
    """Every output-code module this process loaded (``torch._inductor.codecache.PyCodeCache.modules``; empty
    where the attribute is gone). Checked 2.13, 2.14.1."""
    code_cache = importlib.import_module("torch._inductor.codecache").PyCodeCache
    return list(getattr(code_cache, "modules", []))


def caching_autotuner() -> Any:
    """Inductor's launcher of a Triton kernel (``triton_heuristics.CachingAutotuner``), whose ``run`` the bench
    stage wraps to copy a launch; it reads ``fn.src``, ``fn.__name__`` and ``launchers`` (each with ``config``,
    ``n_regs``, ``n_spills``, ``shared``). Checked 2.13, 2.14.1."""
    return triton_heuristics().CachingAutotuner


def cudagraph_tree_manager(device_index: int) -> Any:
    """cudagraph trees' manager of a device, or None before any graph was recorded
    (``torch._inductor.cudagraph_trees.get_container(index).tree_manager``): ``roots`` and each node's
    ``children`` (lists by function id), ``num_rerecord`` (counts by function id). Checked 2.13, 2.14.1 (read
    from their source: a CPU build records no graph)."""
    return importlib.import_module("torch._inductor.cudagraph_trees").get_container(device_index).tree_manager


def dynamo_counters() -> Any:
    """Dynamo's counters (``torch._dynamo.utils.counters``: ``counters["inductor"]["cudagraph_skips"]``, ...).
    Checked 2.13, 2.14.1."""
    return importlib.import_module("torch._dynamo.utils").counters


def pytree_children(value: Any) -> list[tuple[str, Any]] | None:
    """One level of a type registered with torch's pytree, its children named by their keys (``[0]``, ``.a``,
    ``['k']``) or, where no keys are registered, by position; None for a type not registered
    (``torch.utils._pytree``: ``SUPPORTED_NODES``, a node's ``flatten_with_keys_fn`` and ``flatten_fn``,
    ``keystr``). Checked 2.13, 2.14.1."""
    pytree = torch.utils._pytree
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return None
    if node.flatten_with_keys_fn is not None:
        keyed, _ = node.flatten_with_keys_fn(value)
        return [(pytree.keystr((key,)), child) for key, child in keyed]
    children, _ = node.flatten_fn(value)
    return [(f"[{index}]", child) for index, child in enumerate(children)]


def register_inductor_prims() -> None:
    """Register Inductor's own prims (``torch._inductor.inductor_prims``: softmax's
    ``prepare_softmax_online``), which the FX nodes of a kernel call. Checked 2.13, 2.14.1."""
    importlib.import_module("torch._inductor.inductor_prims")


# Triton's runtime: checked on Triton 3.7.1 (beside torch 2.13) and 3.8.0 (beside 2.14.1), the GPU driver's parts
# read from their source (a CPU has none to call); Triton is imported inside the functions (a CPU build of torch may
# come without it).


def triton_driver() -> Any:
    """Triton's active driver (``triton.runtime.driver.driver.active``): ``get_current_device()``,
    ``get_current_stream(device)``, ``get_empty_cache_for_benchmark()`` and ``clear_cache(cache)`` (the L2
    clearing do_bench does). Raises without a GPU driver (the interpreter on a CPU)."""
    return importlib.import_module("triton.runtime.driver").driver.active


def async_compile_mode() -> Any | None:
    """``triton.runtime._async_compile.AsyncCompileMode(executor, ignore_errors=...)``, inside which a warm-up
    launch compiles in the executor; None where this Triton has none."""
    try:
        return importlib.import_module("triton.runtime._async_compile").AsyncCompileMode
    except ImportError:
        return None


def launch_compiled(compiled: Any, grid: tuple[int, int, int], stream: Any, values: tuple[Any, ...]) -> None:
    """Launch a ``CompiledKernel`` Triton returned, as ``JITFunction.run`` ends: ``run(grid_0, grid_1, grid_2,
    stream, function, packed_metadata, launch_metadata, enter_hook, exit_hook, *every parameter)``, with no
    launch metadata and no hooks (the caller checked none is set)."""
    compiled.run(*grid, stream, compiled.function, compiled.packed_metadata, None, None, None, *values)
