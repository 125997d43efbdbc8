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
      ``pretend_gpu()`` (gpu_preview_device.py) answers each, only while Inductor compiles or the compiled graph runs.
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

The modules: this one, the backend torch.compile calls (``PreviewBackend``) and what it reports
(``PreviewLog``); ``gpu_preview_device.py``, the GPU as Inductor sees it (the device guard, ``pretend_gpu``,
libdevice under the interpreter); ``gpu_preview_sdpa.py``, attention as CUDA would choose and write it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch

from ..exchange.shared import GPUS
from .compat import compile_fx_module, fake_from_meta, fake_tensor_mode, tracing_with
from .failure import first_line
from .gpu_preview_device import install, pretend_gpu

# Seconds one compiled call may spend under the Triton interpreter before the preview gives up checking it
# (a looped reduction over 2048 x 4096 takes minutes there); the environment variable overrides it.
INTERPRETER_BUDGET_S = float(os.environ.get("INDUCTOR_LENS_INTERPRETER_BUDGET_S", "60"))


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


# --- the backend torch.compile calls -------------------------------------------------------------------


class PreviewBackend:
    """A torch.compile backend: Inductor compiles each graph for the GPU; the result runs interpreted on the CPU."""

    def __init__(self, gpu: str, options: Mapping[str, Any]) -> None:
        install()
        self.gpu, self.options = gpu, dict(options)
        self.log = PreviewLog(gpu=gpu)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        mode = fake_tensor_mode()()
        cuda = torch.device("cuda", 0)
        fakes = [self._fake(mode, value, cuda) for value in example_inputs]
        _devices_to(gm, cuda)
        with pretend_gpu(self.gpu), tracing_with(mode), mode:
            compiled: Any = compile_fx_module().compile_fx(gm, fakes, config_patches=self.options)
        _devices_to(gm, torch.device("cpu"))  # the eager fallback runs the graph as traced

        gave_up: list[str] = []

        def run(*args: Any) -> Any:
            if self.options.get("triton.cudagraphs"):
                gave_up.append("CUDA graphs (reduce-overhead) cannot be replayed without a GPU")
            if gave_up:  # once a graph could not be checked, its later calls run eagerly at once
                self.log.not_checked.append(gave_up[0])
                return gm(*args)
            try:
                with pretend_gpu(self.gpu), _time_limit(INTERPRETER_BUDGET_S):
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
    def _fake(mode: Any, value: object, device: torch.device) -> object:
        if not isinstance(value, torch.Tensor):
            if isinstance(value, torch.SymInt):
                raise NotImplementedError("--preview-gpu needs static shapes")
            return value
        meta = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device="meta")
        return fake_from_meta(mode, meta, device)


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

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _OverBudget

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _devices_to(gm: torch.fx.GraphModule, device: torch.device) -> None:
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

    spec = importlib.util.spec_from_file_location("model", sys.argv[1])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    backend = PreviewBackend("H200", {})
    with torch.no_grad():
        model, inputs = module.get_model(), module.get_inputs()
        out = torch.compile(model, backend=backend)(*inputs)
        print("max |compiled - eager|:", (out - model(*inputs)).abs().max().item(), backend.log.summary())


if __name__ == "__main__":
    main()
