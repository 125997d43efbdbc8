"""Stage 1 of the pipeline (capture), in the model process: a CPU preview of the Triton code a GPU would get.

``inductor-lens compile MODEL --preview-gpu [H200|H100]`` on a machine without a GPU. Dynamo traces the model
on the CPU as usual; the graph it hands to its backend goes to Inductor's own ``compile_fx`` with fake tensors
on ``cuda:0`` and, for as long as Inductor compiles, ``torch.cuda`` answering as the chosen GPU would (its
properties from the table below, compute capability 9.0) and a Triton driver whose target is
``GPUTarget("cuda", 90, 32)``. Inductor therefore takes its GPU paths (its CUDA decompositions and pattern
passes, online softmax, the CUDA heuristics and ``DeviceProperties``) and writes the output code and
``TORCH_COMPILE_DEBUG`` folders it writes on that GPU: every kernel name comes out of Inductor's own codegen.
The compiled graph then runs on the CPU with every Triton kernel under Triton's interpreter
(``TRITON_INTERPRET=1``) and its extern calls (``mm``, ``addmm``, attention) as ATen CPU ops, so the usual
accuracy verdict compares the previewed kernels' results with eager. Nothing is timed (there is no GPU).

How this was arrived at (torch 2.13.0+cpu, triton 3.7.1; measured on samples/mlp.py, softmax_ln.py, block.py
against the H200 fixtures tests/fixtures/{mlp,softmax_ln,block}_default, torch 2.11):

(a) ``torch._inductor.config.cpu_backend = "triton"``, with or without ``TRITON_INTERPRET=1``: Inductor
    stops in ``TritonKernel.inductor_meta_common`` -> ``triton_hash_with_backend()`` ->
    ``driver.active.get_current_target()`` with ``RuntimeError: 0 active drivers ([]). There should only be
    one.`` (Triton 3.7's interpreter registers no driver.) With that hash mocked (as PyTorch's
    test_triton_extension_backend.py does) it generates code, but for device ``cpu``: the devices differ in
    what Inductor does before codegen, e.g. ``prepare_softmax_extra_check`` (fx_passes/post_grad.py) allows
    online softmax only for ``cuda``/``xpu``, the CUDA-only bias-add unfusion and SDPA choices do not apply,
    and ``DeviceProperties`` describe the CPU. Not the GPU's kernels; not used.
(b) Inductor told the device is CUDA (this module). What stood in the way, in order, and what answers it:
    - ``RuntimeError: PyTorch is not linked with support for cuda devices`` (C++ ``getDeviceGuardImpl``,
      from a pattern pass tracing ``torch.randperm(device=cuda)``; as an abort, ``terminate called``, when a
      fake CUDA tensor requires grad): torch's own ``torch._C._ensureCUDADeviceGuardSet()``, which
      ``FakeTensorMode`` calls for CPU-only builds, did not keep it away inside ``compile_fx``; a device
      guard registered for CUDA does (``c10::impl::FakeGuardImpl<CUDA>``, a 3-line library built once with
      the C++ compiler Inductor's CPU backend needs anyway, cached under the user's cache folder).
    - ``AssertionError: Torch not compiled with CUDA enabled`` (``torch.cuda.get_device_properties``,
      ``get_rng_state``, ``_exchange_device``), ``TritonMissing`` (``has_triton()`` cached False),
      ``ImportError: cannot import name '_cuda_getCurrentRawStream'`` (the output code's imports) and
      ``AssertionError: libcuda.so cannot found!`` (``set_driver_to_gpu()`` making a real CUDA driver):
      ``pretend_gpu()`` below answers each, only while Inductor compiles or the compiled graph runs.
    - ``NotImplementedError: Could not run 'aten::empty.memory_format' with arguments from the 'CUDA'
      backend`` (Inductor's constant folding runs ``aten.full`` for real on the graph's device): CUDA-key
      kernels for ``empty``/``empty_strided`` that allocate on the CPU.
    - SDPA decomposed to its math form (block.py): on a CPU build ``_fused_sdp_choice_stub`` has no CUDA
      entry, so ``scaled_dot_product_attention`` always picks math. An ``AutogradCUDA`` kernel makes the
      choice as CUDA's ``sdp_utils`` does on sm_90 (cuDNN first, as ``check_prefer_cudnn_attention`` orders
      it on sm 9.0 with the wheels' cuDNN, then flash, memory-efficient, math; the enable flags respected):
      it agrees with all 3,780 cases an H200 was asked (benchmarks/results/2026-11-25-h200-sdpa-choice.json,
      tests/unit/test_gpu_preview_sdpa.py). It then writes the composite as attention.cpp does: a boolean
      mask becomes ``where(mask, 0, -inf)`` (-65504 for cuDNN), memory-efficient attention's mask is
      padded and expanded, flash's head dim padded to 8. (First cut: no cuDNN, ``where(~mask, -inf, 0)``:
      HF Llama's four attention-input kernels and GPT-2's mask kernel had other names.)
    - HF models (``FakeTensorDeviceMismatchError``, ``Torch not compiled with CUDA enabled``): the traced
      graph moves tensors with ``.to(device(type='cpu'))`` and builds constants with ``torch.tensor(...,
      device=...)``; every device in the graph is pointed at ``cuda:0`` and ``torch.cuda._lazy_init`` is
      answered. reduce-overhead: ``_cuda_cudaCachingAllocator_is_enabled`` answers True, as on a GPU, so
      Inductor plans for CUDA graphs as it would there (they are not replayed here).
    - Kernel compilation: with ``TRITON_INTERPRET=1`` set while the output code loads, ``async_compile``
      loads each kernel without compiling it (no ptxas, no cubin, nothing to load on a device).
    Result under the fixtures' own torch 2.11 (the device machine's CPUs, its GPU hidden;
    benchmarks/results/2026-11-25-h200-preview-names.md): 28 of 28 inference kernels with the GPU's names
    and categories, on the three samples and HF GPT-2 and Llama. Under torch 2.13 (here, CI): on the samples
    mlp 1/1, block 4/4 kernels with the H200 fixtures' exact names (and the same
    extern calls: 2 ``addmm``, 6 ``mm``, ``_scaled_dot_product_efficient_attention``); softmax_ln's one kernel
    fuses the same FX nodes (``exp_default``, ``prepare_softmax_online_default``, ``sub_tensor``, ...) but is
    named ``triton_red_fused__softmax_add_mul_native_layer_norm_prepare_softmax_online_0`` where torch 2.11
    wrote ``..._add_exp_mul_native_layer_norm_prepare_softmax_online_sub_0``: torch 2.13 no longer lists
    the online-softmax replacement's ``aten.sub``/``aten.exp`` among the kernel's original ATen ops (its
    "Original ATen" comment differs the same way), a torch-version difference, not the preview's. Likewise
    HF GPT-2 8/9 (2.13 makes the embedding + LayerNorm kernel a persistent reduction, ``triton_per_``) and
    Llama 1/13 (2.13 fuses the rotary embedding and the RMSNorms otherwise): the same preview code gives the
    GPU's names under 2.11, so these are torch's changes, and a torch 2.13 GPU would write what 2.13 previews.
(c) AOTInductor (``aoti_compile_and_package``) would need the same fake device and writes a C++ wrapper
    instead of the Python output code the report reads; compiling each kernel for sm_90 with the Triton
    wheel's ptxas works (tests/unit/test_handwritten_compile.py) but is not needed for names and costs
    seconds a kernel on a small CPU. Not used.

Not previewed (refused before anything runs, ``check_spec``): ``--train`` (AOTAutograd's joint graph runs
the autograd engine on the fake CUDA tensors: ``RuntimeError: Cannot access accelerator device when none is
available``), ``--dynamic`` (symbolic inputs are not converted), and anything Inductor decides by timing on
the GPU (max-autotune's template choice, coordinate-descent tuning).
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..exchange.shared import GPUS
from .model_file import first_line

HOPPER: dict[str, Any] = dict(
    major=9, minor=0, multi_processor_count=132, regs_per_multiprocessor=65536,
    max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32,
    shared_memory_per_block=49152, shared_memory_per_block_optin=232448,
    shared_memory_per_multiprocessor=233472, clock_rate=1_980_000, is_integrated=False,
    is_multi_gpu_board=False, gcnArchName="NVIDIA H100", uuid="preview", pci_bus_id=0, pci_device_id=0,
    pci_domain_id=0,
)  # fmt: skip

# Seconds one compiled call may spend under the Triton interpreter before the preview gives up checking it
# (a looped reduction over 2048 x 4096 takes minutes there); the environment variable overrides it.
INTERPRETER_BUDGET_S = float(os.environ.get("INDUCTOR_LENS_INTERPRETER_BUDGET_S", "60"))

GUARD_SOURCE = """#include <c10/core/impl/FakeGuardImpl.h>
C10_REGISTER_GUARD_IMPL(CUDA, c10::impl::FakeGuardImpl<c10::DeviceType::CUDA>);
"""


def describe(gpu: str) -> str:
    """What the report says this capture is."""
    return f"{GPUS[gpu]['name']} (sm_90), previewed on the CPU"


@dataclass
class PreviewLog:
    """What the preview did, per graph: how many Triton kernels ran under the interpreter, or why not."""

    gpu: str
    interpreted_calls: int = 0
    not_checked: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.not_checked:
            return "not checked under the Triton interpreter: " + "; ".join(dict.fromkeys(self.not_checked))
        return "Triton kernels run under the Triton interpreter on the CPU, extern calls as ATen CPU ops"


# --- the device, as Inductor sees it while it compiles ---------------------------------------------------


def _guard_library(torch: Any) -> Path:
    """The CUDA device-guard library (FakeGuardImpl), built once per torch version into the user's cache."""
    from torch.utils.cpp_extension import include_paths, library_paths

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "inductor-lens" / "gpu-preview"
    tag = torch.__version__.replace("+", "-")
    library = cache / f"fake_cuda_guard-{tag}.so"
    if library.exists():
        return library
    cache.mkdir(parents=True, exist_ok=True)
    source = cache / "fake_cuda_guard.cpp"
    source.write_text(GUARD_SOURCE, encoding="utf-8")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    building = library.with_suffix(f".{os.getpid()}.tmp")
    command = ["c++", cpp_standard_flag(), "-O1", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
               *(f"-I{p}" for p in include_paths()), str(source),
               *(f"-L{p}" for p in library_paths()), "-lc10", "-o", str(building)]  # fmt: skip
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(build_failure(done.returncode, done.stderr))
    building.replace(library)
    return library


def cpp_standard_flag() -> str:
    """The C++ standard torch's own C++ builder passes (torch 2.13 and 2.14: ``-std=c++20``, which 2.14's c10
    headers need: ``std::strong_ordering`` in ``c10/util/intrusive_ptr.h``); ``-std=c++17`` for a torch
    without that helper (it is private)."""
    try:
        from torch._inductor.cpp_builder import _get_cpp_std_cflag

        return "-" + str(_get_cpp_std_cflag()[0])
    except (ImportError, AttributeError, IndexError):
        return "-std=c++17"


def build_failure(code: int, stderr: str) -> str:
    """One line for a failed build of the device guard: the compiler's first ``error:`` line, else its last."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = next((line for line in lines if "error:" in line), lines[-1] if lines else "no output")
    return f"building the stand-in CUDA device guard failed (c++ exit {code}): {first[:300]}"


_INSTALLED: list[Any] = []  # the torch.library registrations, kept alive for the process


def install(torch: Any) -> None:
    """Process-wide, once: the CUDA device guard, CPU-allocating CUDA factories, and SDPA's CUDA choice."""
    if _INSTALLED:
        return
    torch.ops.load_library(str(_guard_library(torch)))
    lib = torch.library.Library("aten", "IMPL")

    def empty(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
              memory_format: Any = None) -> Any:  # fmt: skip
        return torch.empty(size, dtype=dtype, layout=layout, device="cpu", memory_format=memory_format)

    def empty_strided(size: Any, stride: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                      pin_memory: Any = None) -> Any:  # fmt: skip
        return torch.empty_strided(size, stride, dtype=dtype, layout=layout, device="cpu")

    lib.impl("empty.memory_format", empty, "CUDA")
    lib.impl("empty_strided", empty_strided, "CUDA")
    lib.impl("scaled_dot_product_attention", lambda *a, **k: _sdpa(torch, *a, **k), "AutogradCUDA")
    # The extern attention kernels the CUDA choice leads to, for the interpreted run on the CPU.
    lib.impl("_scaled_dot_product_efficient_attention", lambda *a, **k: _efficient_on_cpu(torch, *a, **k), "CPU")
    lib.impl("_scaled_dot_product_flash_attention", lambda *a, **k: _flash_on_cpu(torch, *a, **k), "CPU")
    lib.impl("_scaled_dot_product_cudnn_attention", lambda *a, **k: _cudnn_on_cpu(torch, *a, **k), "CPU")
    _INSTALLED.append(lib)


FLASH, EFFICIENT, MATH, CUDNN = 1, 2, 0, 3  # torch's SDPBackend values
DEFAULT_SDP_ORDER = [FLASH, EFFICIENT, MATH, CUDNN, 4]


def sdp_order(torch: Any, major: int, minor: int) -> list[int]:
    """The backends CUDA's ``sdp_utils.priority_order`` tries, in order: the user's order if they set one, else
    cuDNN first on sm 9.0 / 10.0 (``check_prefer_cudnn_attention``: the cuDNN of torch 2.11/2.13's CUDA wheels
    qualifies; ``TORCH_CUDNN_SDPA_DEPRIORITIZED`` keeps the default)."""
    order = list(torch._C._get_sdp_priority_order())
    deprioritized = os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "0") not in ("", "0")
    if order == DEFAULT_SDP_ORDER and (major, minor) in ((9, 0), (10, 0)) and not deprioritized:
        return [CUDNN, FLASH, EFFICIENT, MATH]
    return order


def sdp_choice(torch: Any, q: Any, k: Any, v: Any, mask: Any, enable_gqa: bool, dropout_p: float = 0.0,
               is_causal: bool = False, major: int = 9, minor: int = 0) -> int:  # fmt: skip
    """The backend CUDA's ``select_sdp_backend`` picks on the GPU for these inputs (the common dense cases)."""
    flags = torch.backends.cuda
    dense = q.dim() == k.dim() == v.dim() == 4 and not (q.is_nested or k.is_nested or v.is_nested)
    head = q.size(-1)
    same_heads = dense and q.size(1) == k.size(1) == v.size(1)
    gqa = dense and enable_gqa and k.size(1) == v.size(1) and q.size(1) % k.size(1) == 0  # grouped query heads
    half = q.dtype in (torch.float16, torch.bfloat16) and q.dtype == k.dtype == v.dtype
    deterministic = torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
    for backend in sdp_order(torch, major, minor):
        if backend == CUDNN and flags.cudnn_sdp_enabled() and dense and half and (same_heads or gqa) \
                and head == k.size(-1) and head <= 256 and v.size(-1) <= 256 and head % 8 == 0 \
                and v.size(-1) % 8 == 0 and k.size(-2) != 1 and not (q.size(-2) == 1 and dropout_p) \
                and not deterministic:  # fmt: skip
            return CUDNN
        if backend == FLASH and flags.flash_sdp_enabled() and dense and mask is None and half and head <= 256 \
                and head == k.size(-1) == v.size(-1) and (same_heads or gqa) \
                and not (is_causal and q.size(-2) != k.size(-2)):  # fmt: skip
            return FLASH
        if backend == EFFICIENT and flags.mem_efficient_sdp_enabled() and same_heads \
                and (half or q.dtype == torch.float32) and head == k.size(-1) and head % 8 == 0 \
                and v.size(-1) % 8 == 0:  # fmt: skip
            return EFFICIENT
        if backend == MATH and flags.math_sdp_enabled():
            return MATH
    return MATH


def _sdpa(torch: Any, q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
          is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:  # fmt: skip
    """aten::scaled_dot_product_attention for CUDA tensors, as attention.cpp's composite writes it (torch 2.11, whose
    graphs in tests/fixtures/{gpt2_small_ro,llama_small_bf16} show ``where(mask, 0.0, -inf)``):
    the backend's choice, the boolean mask turned additive (cuDNN's with -65504 for -inf), memory-efficient
    attention's mask padded and expanded, flash's head dim padded to 8."""
    aten = torch.ops.aten
    choice = sdp_choice(torch, q, k, v, attn_mask, enable_gqa, dropout_p, is_causal)
    lse = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    attn_mask = _additive_mask(torch, attn_mask, q.dtype, -65504.0 if choice == CUDNN else -math.inf)
    if choice == CUDNN:
        return aten._scaled_dot_product_cudnn_attention(q, k, v, attn_mask, lse, dropout_p, is_causal, False,
                                                        scale=scale)[0]  # fmt: skip
    if choice == EFFICIENT:
        if attn_mask is not None:
            attn_mask = _preprocess_mask(torch, attn_mask, q, k)
        return aten._scaled_dot_product_efficient_attention(q, k, v, attn_mask, lse, dropout_p, is_causal,
                                                            scale=scale)[0]  # fmt: skip
    if choice == FLASH:
        width = q.size(-1)
        pad = (8 - width % 8) % 8
        softmax_scale = scale if scale is not None else 1.0 / math.sqrt(width)
        if pad:
            q, k, v = (torch.nn.functional.pad(t, (0, pad)) for t in (q, k, v))
        out = aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, False, scale=softmax_scale)[0]
        return out[..., :width] if pad else out
    return aten.scaled_dot_product_attention.default.decompose(q, k, v, attn_mask, dropout_p, is_causal,
                                                               scale=scale, enable_gqa=enable_gqa)  # fmt: skip


def _additive_mask(torch: Any, mask: Any, dtype: Any, masked: float) -> Any:
    """attention.cpp's ``convert_boolean_attn_mask`` (``masked``: -inf; cuDNN's variant: -65504): a boolean mask
    as ``where(mask, 0, masked)``; any other mask as it is."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask, torch.scalar_tensor(0.0, dtype=dtype, device=mask.device), masked)


def _preprocess_mask(torch: Any, mask: Any, q: Any, k: Any) -> Any:
    """attention.cpp's ``preprocess_mask``: a mask whose strides are not multiples of 8 is padded (and sliced
    back), then expanded to (batch, heads, queries, keys)."""
    aligned = all(mask.stride(i) % 8 == 0 for i in range(mask.dim() - 1)) and mask.stride(-1) == 1
    if not aligned:
        size = mask.size(-1)
        mask = torch.nn.functional.pad(mask, (0, 8 - size % 8))[..., :size]
    return mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))


def _efficient_on_cpu(torch: Any, q: Any, k: Any, v: Any, bias: Any, compute_lse: bool, dropout_p: float = 0.0,
                      is_causal: bool = False, scale: float | None = None) -> Any:  # fmt: skip
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, bias, dropout_p, is_causal, scale=scale)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.int64)
    return out, lse, zero, zero


def _flash_on_cpu(torch: Any, q: Any, k: Any, v: Any, dropout_p: float = 0.0, is_causal: bool = False,
                  return_debug_mask: bool = False, scale: float | None = None) -> Any:  # fmt: skip
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, None, dropout_p, is_causal, scale=scale)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.int64)
    empty = torch.empty(0)
    return out, lse, None, None, q.size(-2), k.size(-2), zero, zero, empty


def _cudnn_on_cpu(torch: Any, q: Any, k: Any, v: Any, bias: Any, compute_lse: bool, dropout_p: float = 0.0,
                  is_causal: bool = False, return_debug_mask: bool = False, scale: float | None = None) -> Any:  # fmt: skip
    from torch._meta_registrations import alloc_with_matching_layout

    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, bias, dropout_p, is_causal, scale=scale)
    laid_out = alloc_with_matching_layout(q, tuple(out.shape))  # the layout cuDNN's meta function promises
    laid_out.copy_(out)
    lse = torch.empty((q.size(0), q.size(1), q.size(2), 1), dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.int64)
    empty = torch.empty(0)
    return laid_out, lse, empty, empty, q.size(2), k.size(2), zero, zero, empty


def _preview_driver(gpu_props: Any) -> Any:
    """A Triton CUDA driver for code generation only: its target is sm_90, it launches nothing."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver, ty_to_cpp

    class PreviewDriver(CudaDriver):  # a CudaDriver, so set_driver_to_gpu() keeps it
        def __init__(self) -> None:  # no CudaUtils: it would load libcuda
            self.get_device_capability = lambda device=None: (gpu_props.major, gpu_props.minor)
            self.get_current_stream = lambda index=None: 0
            self.get_current_device = lambda: 0
            self.set_current_device = lambda device: None

        @staticmethod
        def is_active() -> bool:
            return False

        def get_current_target(self) -> Any:
            return GPUTarget("cuda", gpu_props.major * 10 + gpu_props.minor, 32)

        def map_python_to_cpp_type(self, ty: str) -> str:
            return str(ty_to_cpp(ty))

        def get_benchmarker(self) -> Any:
            raise RuntimeError("a --preview-gpu capture has no GPU to time kernels on")

    return PreviewDriver()


@contextlib.contextmanager
def pretend_gpu(torch: Any, gpu: str) -> Iterator[None]:
    """While inside: torch.cuda, Dynamo's CUDA interface and Triton's driver answer as ``gpu`` would,
    CUDA buffers are CPU tensors and Triton kernels load for the interpreter."""
    from unittest import mock

    import torch._C._dynamo.guards as guards
    import torch.utils._triton as torch_triton
    from torch._dynamo.device_interface import CudaInterface
    from torch._inductor.runtime import triton_helpers
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.runtime.driver import driver

    props = SimpleNamespace(**HOPPER, **GPUS[gpu])
    cuda = torch.cuda
    answers: dict[str, Any] = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "synchronize": lambda device=None: None,
        "get_device_properties": lambda device=None: props,
        "get_device_capability": lambda device=None: (props.major, props.minor),
        "get_device_name": lambda device=None: props.name,
        "is_bf16_supported": lambda including_emulation=True: True,
        "get_rng_state": lambda device="cuda": torch.zeros(16, dtype=torch.uint8),
        "set_rng_state": lambda new_state, device="cuda": None,
        "_exchange_device": lambda device: 0,
        "_maybe_exchange_device": lambda device: 0,
        "_DeviceGuard": lambda index: contextlib.nullcontext(),
        "_lazy_init": lambda: None,  # a real tensor made "on CUDA" while tracing is allocated on the CPU
    }
    interface: dict[str, Any] = {
        "get_device_properties": answers["get_device_properties"], "current_device": lambda: 0,
        "set_device": lambda device: None, "device_count": lambda: 1, "synchronize": lambda device=None: None,
        "exchange_device": lambda device: 0, "maybe_exchange_device": lambda device: 0,
        "is_bf16_supported": lambda including_emulation=False: True, "get_raw_stream": lambda index: 0,
        "memory_allocated": lambda device=None: 0,
    }  # fmt: skip
    patches: list[Any] = [mock.patch.object(cuda, name, value) for name, value in answers.items()]
    patches += [mock.patch.object(CudaInterface, name, staticmethod(value)) for name, value in interface.items()]
    patches += [
        # A CPU-only build: FakeTensorMode must keep its CPU-only behaviour although is_available() says True.
        mock.patch.object(FakeTensorMode, "avoid_device_init", property(lambda self: True)),
        mock.patch.object(torch._C, "_cuda_getCurrentRawStream", lambda index: 0, create=True),
        # reduce-overhead: Inductor keeps CUDA graphs only with the caching allocator on, as a GPU's is
        mock.patch.object(torch._C, "_cuda_cudaCachingAllocator_is_enabled", lambda: True, create=True),
        mock.patch.object(guards, "_empty_strided_cuda", _empty_strided_cpu(torch)),
        mock.patch.object(triton_helpers, "libdevice", INTERPRETER_LIBDEVICE),
        mock.patch.object(torch._inductor.config, "compile_threads", 1),  # workers would not be patched
        mock.patch.dict(os.environ, {"TRITON_INTERPRET": "1"}),
    ]
    caches = (torch_triton.has_triton, torch_triton.triton_backend, torch_triton.triton_hash_with_backend)
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        for cached in caches:
            cached.cache_clear()
        driver.set_active(_preview_driver(props))
        stack.callback(lambda: [cached.cache_clear() for cached in caches])
        yield


def _empty_strided_cpu(torch: Any) -> Any:
    def allocate(size: Any, stride: Any, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        return torch.empty_strided(size, stride, dtype=dtype, device="cpu")

    return allocate


# --- libdevice under the interpreter ----------------------------------------------------------------------


class _InterpreterLibdevice:
    """``libdevice.*`` for kernels run by Triton's interpreter, which has no extern calls
    (``create_extern_elementwise``: "not supported in interpreter mode"): the same functions in NumPy."""

    def __getattr__(self, name: str) -> Any:
        import numpy as np

        special = {
            "erf": np.vectorize(math.erf, otypes=[np.float64]),
            "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
            "lgamma": np.vectorize(math.lgamma, otypes=[np.float64]),
            "rsqrt": lambda x: 1 / np.sqrt(x),
            "nearbyint": np.rint,
            "rint": np.rint,
            "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
            "pow": np.power,
            "fabs": np.abs,
            "fmax": np.fmax,
            "fmin": np.fmin,
            "isfinited": np.isfinite,
            "finitef": np.isfinite,
            "isinfd": np.isinf,
            "isnand": np.isnan,
            "div_rn": np.divide,
            "sqrt_rn": np.sqrt,
        }
        fn = special.get(name) or getattr(np, name, None)
        if fn is None or name.startswith("_"):
            raise NotImplementedError(f"libdevice.{name} has no NumPy stand-in for the Triton interpreter")
        return lambda *args, **kwargs: _apply(fn, args)


def _apply(fn: Any, args: tuple[Any, ...]) -> Any:
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    tensors = [a for a in args if isinstance(a, tl.core.tensor)]
    first = tensors[0]
    data = fn(*(a.handle.data if isinstance(a, tl.core.tensor) else a for a in args))
    data = np.asarray(data)
    if data.dtype == np.bool_:
        element: Any = tl.int1
    else:
        element = first.dtype
        data = data.astype(first.handle.data.dtype)
    shape = list(data.shape)
    kind = tl.block_type(element, shape) if shape else element
    return tl.core.tensor(TensorHandle(data, element), kind)


INTERPRETER_LIBDEVICE = _InterpreterLibdevice()


# --- the backend torch.compile calls -------------------------------------------------------------------


class PreviewBackend:
    """A torch.compile backend: Inductor compiles each graph for the GPU; the result runs interpreted on the CPU."""

    def __init__(self, torch: Any, gpu: str, options: Mapping[str, Any]) -> None:
        install(torch)
        self.torch, self.gpu, self.options = torch, gpu, dict(options)
        self.log = PreviewLog(gpu=gpu)

    def __call__(self, gm: Any, example_inputs: list[Any]) -> Any:
        torch = self.torch
        from torch._guards import TracingContext, tracing
        from torch._inductor.compile_fx import compile_fx
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode = FakeTensorMode()
        cuda = torch.device("cuda", 0)
        fakes = [self._fake(mode, value, cuda) for value in example_inputs]
        _devices_to(torch, gm, cuda)
        with pretend_gpu(torch, self.gpu), tracing(TracingContext(mode)), mode:
            compiled: Any = compile_fx(gm, fakes, config_patches=self.options)
        _devices_to(torch, gm, torch.device("cpu"))  # the eager fallback runs the graph as traced

        gave_up: list[str] = []

        def run(*args: Any) -> Any:
            if self.options.get("triton.cudagraphs"):
                gave_up.append("CUDA graphs (reduce-overhead) cannot be replayed without a GPU")
            if gave_up:  # once a graph could not be checked, its later calls run eagerly at once
                self.log.not_checked.append(gave_up[0])
                return gm(*args)
            try:
                with pretend_gpu(torch, self.gpu), _time_limit(INTERPRETER_BUDGET_S):
                    out = compiled(*args)
                self.log.interpreted_calls += 1
                return out
            except _OverBudget:
                gave_up.append(f"a compiled call needed more than {INTERPRETER_BUDGET_S:g} s under the interpreter")
            except Exception as exc:  # an op the interpreter or the CPU stand-ins lack: eager, and say so
                gave_up.append(f"{type(exc).__name__}: {first_line(exc)[:200]}")
            self.log.not_checked.append(gave_up[0])
            return gm(*args)

        return run

    @staticmethod
    def _fake(mode: Any, value: Any, device: Any) -> Any:
        import torch

        if not isinstance(value, torch.Tensor):
            if isinstance(value, torch.SymInt):
                raise NotImplementedError("--preview-gpu needs static shapes")
            return value
        meta = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device="meta")
        return mode.fake_tensor_converter.from_meta_and_device(mode, meta, device)


class _OverBudget(BaseException):  # not an Exception: the interpreter re-raises those as InterpreterError
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise _OverBudget in the main thread after ``seconds`` (SIGALRM; no limit elsewhere)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _OverBudget

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _devices_to(torch: Any, gm: Any, device: Any) -> None:
    """Point the graph's devices (factory calls' ``device=``, ``.to(device)`` as HF models write it) at ``device``:
    the model was traced on the CPU."""
    from torch.fx.node import map_aggregate

    def moved(value: Any) -> Any:
        return device if isinstance(value, torch.device) and value.type in ("cpu", "cuda") else value

    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        node.args = map_aggregate(node.args, moved)
        kwargs = map_aggregate(node.kwargs, moved)
        if isinstance(kwargs.get("device"), str) and kwargs["device"].split(":")[0] in ("cpu", "cuda"):
            kwargs = {**kwargs, "device": device}
        if node.op == "call_method" and node.target == "to":  # x.to("cpu")
            node.args = tuple(device if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda") else a
                              for a in node.args)  # fmt: skip
        node.kwargs = kwargs
    gm.recompile()


def main() -> None:  # pragma: no cover - a manual probe: python -m inductor_lens.worker.gpu_preview MODEL.py
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("model", sys.argv[1])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    backend = PreviewBackend(torch, "H200", {})
    with torch.no_grad():
        model, inputs = module.get_model(), module.get_inputs()
        out = torch.compile(model, backend=backend)(*inputs)
        print("max |compiled - eager|:", (out - model(*inputs)).abs().max().item(), backend.log.summary())


if __name__ == "__main__":
    main()
