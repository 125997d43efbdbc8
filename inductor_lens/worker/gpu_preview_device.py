"""Stage 1 of the pipeline (capture), in the model process: the GPU a preview compiles for, as Inductor sees it.

``install`` (once per process) registers a CUDA device guard (a 3-line library built with the C++ compiler,
cached per torch version), CUDA kernels for ``empty``/``empty_strided`` that allocate on the CPU, and SDPA's
CUDA choice (``gpu_preview_sdpa.py``). ``pretend_gpu`` makes torch.cuda, Dynamo's CUDA interface and Triton's
driver answer as the GPU would while Inductor compiles or the compiled graph runs, and gives kernels run by
Triton's interpreter a NumPy ``libdevice``. How and why: ``gpu_preview.py``'s docstring.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from ..exchange.shared import GPUS
from .compat import (
    CUDA_CACHING_ALLOCATOR_ENABLED,
    CUDA_RAW_STREAM,
    EMPTY_STRIDED_CUDA,
    TRITON_CHECKS,
    cpp_standard_flag,
    cuda_interface,
    cuda_private_answers,
    cxx11_abi,
    dynamo_guards,
    fake_tensor_mode,
    inductor_config,
    torch_triton,
    triton_helpers,
)
from .gpu_preview_sdpa import cudnn_on_cpu, efficient_on_cpu, flash_on_cpu, sdpa_for_cuda

HOPPER: dict[str, Any] = dict(
    major=9, minor=0, multi_processor_count=132, regs_per_multiprocessor=65536,
    max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32,
    shared_memory_per_block=49152, shared_memory_per_block_optin=232448,
    shared_memory_per_multiprocessor=233472, clock_rate=1_980_000, is_integrated=False,
    is_multi_gpu_board=False, gcnArchName="NVIDIA H100", uuid="preview", pci_bus_id=0, pci_device_id=0,
    pci_domain_id=0,
)  # fmt: skip

GUARD_SOURCE = """#include <c10/core/impl/FakeGuardImpl.h>
C10_REGISTER_GUARD_IMPL(CUDA, c10::impl::FakeGuardImpl<c10::DeviceType::CUDA>);
"""



def guard_library() -> Path:
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
    abi = cxx11_abi()
    building = library.with_suffix(f".{os.getpid()}.tmp")
    command = ["c++", cpp_standard_flag(), "-O1", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
               *(f"-I{p}" for p in include_paths()), str(source),
               *(f"-L{p}" for p in library_paths()), "-lc10", "-o", str(building)]  # fmt: skip
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(build_failure(done.returncode, done.stderr))
    building.replace(library)
    return library


def build_failure(code: int, stderr: str) -> str:
    """One line for a failed build of the device guard: the compiler's first ``error:`` line, else its last."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = next((line for line in lines if "error:" in line), lines[-1] if lines else "no output")
    return f"building the stand-in CUDA device guard failed (c++ exit {code}): {first[:300]}"


_INSTALLED: list[torch.library.Library] = []  # the torch.library registrations, kept alive for the process


def install() -> None:
    """Process-wide, once: the CUDA device guard, CPU-allocating CUDA factories, and SDPA's CUDA choice."""
    if _INSTALLED:
        return
    torch.ops.load_library(str(guard_library()))
    lib = torch.library.Library("aten", "IMPL")

    def empty(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
              memory_format: Any = None) -> Any:  # fmt: skip
        return torch.empty(size, dtype=dtype, layout=layout, device="cpu", memory_format=memory_format)

    def empty_strided(size: Any, stride: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                      pin_memory: Any = None) -> Any:  # fmt: skip
        return torch.empty_strided(size, stride, dtype=dtype, layout=layout, device="cpu")

    lib.impl("empty.memory_format", empty, "CUDA")
    lib.impl("empty_strided", empty_strided, "CUDA")
    lib.impl("scaled_dot_product_attention", sdpa_for_cuda, "AutogradCUDA")
    # The extern attention kernels the CUDA choice leads to, for the interpreted run on the CPU.
    lib.impl("_scaled_dot_product_efficient_attention", efficient_on_cpu, "CPU")
    lib.impl("_scaled_dot_product_flash_attention", flash_on_cpu, "CPU")
    lib.impl("_scaled_dot_product_cudnn_attention", cudnn_on_cpu, "CPU")
    _INSTALLED.append(lib)


def _preview_driver(gpu_props: SimpleNamespace) -> Any:
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
def pretend_gpu(gpu: str) -> Iterator[None]:
    """While inside: torch.cuda, Dynamo's CUDA interface and Triton's driver answer as ``gpu`` would,
    CUDA buffers are CPU tensors and Triton kernels load for the interpreter."""
    from unittest import mock

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
        **cuda_private_answers(),
    }
    interface: dict[str, Any] = {
        "get_device_properties": answers["get_device_properties"], "current_device": lambda: 0,
        "set_device": lambda device: None, "device_count": lambda: 1, "synchronize": lambda device=None: None,
        "exchange_device": lambda device: 0, "maybe_exchange_device": lambda device: 0,
        "is_bf16_supported": lambda including_emulation=False: True, "get_raw_stream": lambda index: 0,
        "memory_allocated": lambda device=None: 0,
    }  # fmt: skip
    patches: list[Any] = [mock.patch.object(cuda, name, value) for name, value in answers.items()]
    patches += [mock.patch.object(cuda_interface(), name, staticmethod(value)) for name, value in interface.items()]
    patches += [
        # A CPU-only build: FakeTensorMode must keep its CPU-only behaviour although is_available() says True.
        mock.patch.object(fake_tensor_mode(), "avoid_device_init", property(lambda self: True)),
        mock.patch.object(torch._C, CUDA_RAW_STREAM, lambda index: 0, create=True),
        # reduce-overhead: Inductor keeps CUDA graphs only with the caching allocator on, as a GPU's is
        mock.patch.object(torch._C, CUDA_CACHING_ALLOCATOR_ENABLED, lambda: True, create=True),
        mock.patch.object(dynamo_guards(), EMPTY_STRIDED_CUDA, _empty_strided_cpu),
        mock.patch.object(triton_helpers(), "libdevice", INTERPRETER_LIBDEVICE),
        mock.patch.object(inductor_config(), "compile_threads", 1),  # workers would not be patched
        mock.patch.dict(os.environ, {"TRITON_INTERPRET": "1"}),
    ]
    caches = [getattr(torch_triton(), name) for name in TRITON_CHECKS]
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        for cached in caches:
            cached.cache_clear()
        driver.set_active(_preview_driver(props))
        stack.callback(lambda: [cached.cache_clear() for cached in caches])
        yield


def _empty_strided_cpu(size: Any, stride: Any, dtype: torch.dtype, *args: Any, **kwargs: Any) -> torch.Tensor:
    return torch.empty_strided(size, stride, dtype=dtype, device="cpu")


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
