"""Stage 1 of the pipeline (capture), in the model process: run the model eagerly, compiled, compare, time.

``python -m inductor_lens.worker capture SPEC RESULT`` loads the user's model file (the contract is in
``model_file.py``), makes each call it asks for eagerly, then once more in float64 for the accuracy
verdict (``accuracy.py``), then under ``torch.compile`` (the first call is the cold compile; the parent
set up TORCH_COMPILE_DEBUG, TORCH_TRACE and private caches in the environment), then compiled again,
and unless told not to, times the compiled model (``measure.py``). The spec's float32 matmul precision,
cuDNN TF32 and Dynamo config are set for all of it (``run_settings``); its autocast is entered around every
eager and compiled call and timed step, not around the float64 run, which measures what autocast costs.
Progress goes to stderr as ``PHASE_MARKER`` lines; the outcome, success or not, goes to RESULT (a
``files.CaptureResult``), rewritten after every phase.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..exchange.files import (
    KERNEL_INFORMATION_FILE,
    PROFILE_TRACE_FILE,
    BenchData,
    CaptureResult,
    CompileKernelInformation,
    KernelInformation,
    ReportedSettings,
    ResultWriter,
    write_json_file,
)
from ..options import CompileSpec, ScriptSpec
from ..records.codec import JsonValue, as_json_value
from ..records.run import Environment
from . import accuracy
from .inductor_cache import write_autotune_key
from .measure import use_threads
from .model_file import (
    Call,
    Failure,
    call_contract,
    calls_from,
    describe_calls,
    first_line,
    load_model_file,
    module_construction,
    module_sites,
    move,
    place,
    resolve_device,
)
from .module_stacks import module_stacks
from .ranked import end_process_group, init_process_group

# Inductor options inductor-lens adds to every capture (a user's --option of the same name wins).
CAPTURE_OPTIONS: dict[str, JsonValue] = {"comment_origin": True}


class Run(ResultWriter):
    def __init__(self, spec: CompileSpec, result_path: Path) -> None:
        super().__init__(result_path, CaptureResult())
        self.spec = spec


def main(argv: list[str]) -> int:
    """``argv``: the spec file and the result file."""
    spec = CompileSpec.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    if spec.preview_gpu:  # before Triton is imported: its jit functions are then the interpreter's
        os.environ["TRITON_INTERPRET"] = "1"
    run = Run(spec, Path(argv[1]))
    try:
        return guarded(run, lambda torch: execute(run, torch), catch_all=True)
    finally:
        end_process_group()


def guarded(run: Run, body: Callable[[Any], None], *, catch_all: bool) -> int:
    """Run ``body(torch)``; whatever happens, the result file says how it ended. ``catch_all``: in the
    model process nothing escapes; in the caller's process Ctrl-C and SystemExit still do."""
    try:
        run.phase("import torch")
        import torch

        run.result.environment = environment(torch)
        body(torch)
        run.result.status = "ok"
        run.phase("done")
        return 0
    except Failure as failure:
        run.result.error, run.result.error_kind = failure.message, failure.kind
        print(f"[inductor-lens] error ({failure.kind}): {failure.message}", file=sys.stderr, flush=True)
        return 1
    except Exception as exc:  # anything unforeseen still leaves a result behind
        run.result.error, run.result.error_kind = f"{type(exc).__name__}: {first_line(exc)}", "CompileError"
        traceback.print_exc()
        return 1
    except BaseException as exc:
        if not catch_all:
            raise
        run.result.error, run.result.error_kind = f"{type(exc).__name__}: {first_line(exc)}", "CompileError"
        traceback.print_exc()
        return 1
    finally:
        if catch_all:  # the model process (not the caller's, in the in-process API): its own Inductor cache
            write_autotune_key()
        run.write()


def execute(run: Run, torch: Any) -> None:
    spec = run.spec
    use_threads(spec.threads)
    # one rank of several (compile --nproc): the process group is up before the model file is loaded
    init_process_group(torch, spec.device)
    run.phase("load model file")
    module = load_model_file(spec.model_path)

    run.phase("build model")
    torch.manual_seed(0)
    with module_construction(torch, spec.model_path) as sites:
        model = call_contract(module, "get_model", spec.model_path)
    run.result.model_built = module_sites(torch, model, spec.model_path, sites)
    calls = calls_from(torch, call_contract(module, "get_inputs", spec.model_path))
    if not callable(model):
        raise Failure(
            "ModelFileError",
            f"get_model() must return an nn.Module or a callable, got {type(model).__name__}",
        )
    capture_model(run, torch, model, calls)


def capture_model(run: Run, torch: Any, model: Any, calls: list[Call]) -> None:
    """Everything after the model is built: on the device, eager, float64, compiled, compared, timed.

    The model process runs it on a model file's model; ``inductor_lens.inspect`` runs it in the
    notebook's own process, on the model it is given.
    """
    with run_settings(torch, run.spec) as applied:
        _capture_model(run, torch, model, calls, applied)


def _capture_model(run: Run, torch: Any, model: Any, calls: list[Call], applied: dict[str, Any]) -> None:
    spec, result = run.spec, run.result
    device = resolve_device(torch, spec.device)
    dtype = getattr(torch, spec.dtype) if spec.dtype else None
    autocast = getattr(torch, spec.autocast) if spec.autocast else None
    model, calls = place(torch, model, calls, device, dtype)
    result.environment = replace(result.environment, **device_info(torch, device))
    result.calls = len(calls)
    result.inputs = describe_calls(torch, calls)
    if isinstance(model, torch.nn.Module):
        result.parameters = sum(p.numel() for p in model.parameters())

    mode_options = dict(torch._inductor.list_mode_options(spec.mode, spec.dynamic))
    # comment_origin makes Inductor mark, inside each kernel, the lines generated for each op.
    capture_options = {k: v for k, v in CAPTURE_OPTIONS.items() if k not in spec.options}
    options = {**mode_options, **capture_options, **spec.options}
    result.settings = ReportedSettings(
        device=str(device), dtype=spec.dtype, mode_options=mode_options, capture_options=capture_options, **applied
    )

    run.phase("eager run")
    eager, seconds = run_all(torch, model, calls, spec.train, device, "eager", autocast)
    result.eager_first_call_s = seconds[0]
    result.settings.backward = eager.backward
    result.outputs = [f"{name}: {accuracy.describe_leaf(value)}" for name, value in eager.outputs[0]]

    reference, why_not = None, "--accuracy eager" if spec.accuracy == "eager" else ""
    if spec.accuracy == "fp64":
        run.phase("float64 reference run")
        reference, why_not = float64_run(torch, model, calls, spec.train, device)

    run.phase("compile")
    preview = None
    if spec.preview_gpu:  # Inductor generates the GPU's code; it runs here under Triton's interpreter
        from .gpu_preview import PreviewBackend, describe

        preview = PreviewBackend(torch, spec.preview_gpu, options)
        result.environment = replace(result.environment, preview_of=describe(spec.preview_gpu))
        compiled = torch.compile(model, backend=preview, fullgraph=spec.fullgraph, dynamic=spec.dynamic)
    else:
        compiled = torch.compile(model, options=options or None, fullgraph=spec.fullgraph, dynamic=spec.dynamic)
    with kernel_information(torch, run.result_path.parent), module_stacks(torch, run.result_path.parent):
        outputs, seconds = run_all(torch, compiled, calls, spec.train, device, "compile", autocast)
        result.cold_compile_s = seconds[0]
        result.call_seconds = seconds

        run.phase("second call")
        _, seconds = run_all(torch, compiled, calls, spec.train, device, "compile", autocast)
        result.second_call_s = seconds[0]

    if spec.save_inputs_mb:
        run.phase("save kernel inputs")
        from .saved_inputs import save_inputs

        save_inputs(lambda: run_all(torch, compiled, calls, spec.train, device, "compile", autocast),
                    run.result_path.parent, spec.save_inputs_mb)  # fmt: skip

    if preview is not None:
        result.environment = replace(result.environment, preview_check=preview.log.summary())
    if spec.accuracy != "off" and not (preview is not None and preview.log.not_checked):
        run.phase("compare")
        result.accuracy = accuracy.judge(eager, outputs, reference, train=spec.train, why_no_reference=why_not)

    if spec.bench:
        run.phase("benchmark")
        result.bench = benchmark(torch, model, compiled, calls, spec.train, device, dtype, run.result_path.parent,
                                 spec.bench_scope, autocast)  # fmt: skip

    if spec.find_divergence:
        run.phase("find divergence")
        from .divergence import search

        def one_step(fn: Any) -> None:
            for call in calls:
                step(torch, fn, call, spec.train, device, "compile", autocast)

        result.divergence = search(torch, model, one_step, options, device=device.type, fullgraph=spec.fullgraph,
                                   dynamic=spec.dynamic, budget_s=spec.divergence_budget_s)  # fmt: skip


@contextlib.contextmanager
def run_settings(torch: Any, spec: CompileSpec | ScriptSpec) -> Iterator[dict[str, Any]]:
    """The spec's float32 matmul precision, cuDNN TF32 and Dynamo config, set for the block and restored after
    it (``inductor_lens.inspect`` captures in the caller's process). Yields what the spec set as torch then has
    it, ReportedSettings' fields; autocast is not entered here but around each call (``autocasting``)."""
    precision, cudnn_tf32 = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        if spec.matmul_precision is not None:
            torch.set_float32_matmul_precision(spec.matmul_precision)
        if spec.cudnn_allow_tf32 is not None:
            torch.backends.cudnn.allow_tf32 = spec.cudnn_allow_tf32
        # imported here: nothing may have imported Dynamo yet
        dynamo_config: Any = importlib.import_module("torch._dynamo.config")
        with dynamo_config.patch(dict(spec.dynamo_options)):
            yield {
                "matmul_precision": torch.get_float32_matmul_precision() if spec.matmul_precision else None,
                "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32 if spec.cudnn_allow_tf32 is not None else None,
                "autocast": spec.autocast,
                "dynamo_options": {k: as_json_value(getattr(dynamo_config, k)) for k in spec.dynamo_options},
            }
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


def autocasting(torch: Any, device_type: str, dtype: Any) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to ``dtype`` on the device, or nothing where ``dtype`` is None."""
    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def forward(torch: Any, fn: Any, call: Call, train: bool, device: Any, autocast: Any) -> Any:
    """One call of ``fn``: under no_grad unless training, under autocast where the run asks for it (the
    backward, outside it, runs in the dtypes the forward chose, as torch.autocast's documentation advises)."""
    with contextlib.nullcontext() if train else torch.no_grad(), autocasting(torch, device.type, autocast):
        return call(fn)


@contextlib.contextmanager
def kernel_information(torch: Any, folder: Path) -> Iterator[None]:
    """Keep each Inductor compile's kernel information (a library call's input and output shapes and dtypes)
    in capture/kernel_information.json. Private API, first seen 2.14.1 (CPU): torch writes it only beside
    AOTInductor output, and the globals it reads are reset when each compile starts and restored when it
    ends, so it is read just before they are restored. A backward graph compiled lazily (at its first
    backward call) is compiled outside that reset: its entries stay in the globals and are read at the end.
    Older torch: nothing, no file (2.13 has the function, without the shapes: no _inductor_kernel_extern_info)."""
    # imported here: nothing may have imported it yet when the compile is the first use of Inductor
    debug: Any = importlib.import_module("torch._inductor.debug")
    reset = getattr(debug, "reset_provenance_globals", None)
    if reset is None or not hasattr(debug, "_inductor_kernel_extern_info"):
        yield
        return
    found = KernelInformation()
    earlier = set(debug.create_kernel_information_json())  # the in-process API: an earlier capture's

    @contextlib.contextmanager
    def keeping() -> Iterator[None]:
        with reset():
            try:
                yield
            finally:
                kernels = debug.create_kernel_information_json()
                if kernels:
                    # "0/0_1" for a restarted compile, as the trace and the parser name it
                    compile_id = torch._guards.CompileContext.current_trace_id()
                    found.compiles.append(CompileKernelInformation(str(compile_id) if compile_id else None, kernels))
                    write_json_file(folder / KERNEL_INFORMATION_FILE, found)

    debug.reset_provenance_globals = keeping
    try:
        yield
    finally:  # the in-process API: the next capture in this process patches torch afresh
        debug.reset_provenance_globals = reset
        lazy = {k: v for k, v in debug.create_kernel_information_json().items() if k not in earlier}
        if lazy:
            found.compiles.append(CompileKernelInformation(None, lazy))
            write_json_file(folder / KERNEL_INFORMATION_FILE, found)


def run_all(
    torch: Any, fn: Any, calls: list[Call], train: bool, device: Any, phase: str, autocast: Any = None
) -> tuple[accuracy.Results, list[float]]:
    """Every call once (and with --train, a backward: ``backward_step``): what each gave, and how long it took.
    ``autocast``: the dtype of the autocast around each forward, or None."""
    results = accuracy.Results(outputs=[], gradients=[])
    seconds = []
    for call in calls:
        outputs, gradients, took, backward = step(torch, fn, call, train, device, phase, autocast)
        results.outputs.append(outputs)
        results.gradients.append(gradients)
        results.backward = results.backward or backward
        seconds.append(took)
    return results, seconds


def float64_run(
    torch: Any, model: Any, calls: list[Call], train: bool, device: Any
) -> tuple[accuracy.Results | None, str]:
    """The same model and calls in float64 (the accuracy verdict's reference), or why there is none."""
    why_not = accuracy.why_no_float64_copy(model)
    if why_not:
        return None, why_not
    try:
        model64 = accuracy.float64_copy(model)
        calls64 = [Call(move(torch, c.args, device, torch.float64), move(torch, c.kwargs, device, torch.float64))
                   for c in calls]  # fmt: skip
        results, _ = run_all(torch, model64, calls64, train, device, "float64")
    except Failure as failure:
        return None, f"the float64 run failed: {failure.message}"
    except Exception as exc:
        return None, f"the float64 run failed: {type(exc).__name__}: {first_line(exc)}"
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return results, ""


def step(
    torch: Any, fn: Any, call: Call, train: bool, device: Any, phase: str, autocast: Any = None
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]], float, str]:
    """One call (and with --train a backward, ``backward_step``); returns its output leaves, the
    parameters' gradients (by name), the seconds it took and what was backpropagated ("" without --train)."""
    named = list(fn.named_parameters()) if train and hasattr(fn, "named_parameters") else []
    params = [(name, p) for name, p in named if p.requires_grad]
    for _, p in params:
        p.grad = None
    torch.manual_seed(0)
    synchronize(torch, device)
    start = time.perf_counter()
    backward = ""
    try:
        outputs = forward(torch, fn, call, train, device, autocast)
        if train:
            backward = backward_step(torch, outputs)
        synchronize(torch, device)
    except Failure:
        raise
    except Exception as exc:
        kind = "ModelRunError" if phase in ("eager", "float64") else "CompileError"
        where = {"eager": "eager forward", "float64": "the float64 run"}.get(phase, "torch.compile")
        raise Failure(kind, f"{where} raised {type(exc).__name__}: {first_line(exc)}") from exc
    seconds = time.perf_counter() - start
    leaves = [accuracy.kept_leaf(name, value) for name, value in accuracy.named_leaves(outputs)]
    gradients = [accuracy.kept_leaf(name, p.grad) for name, p in params]
    return leaves, gradients, seconds, backward


def backward_step(torch: Any, outputs: Any) -> str:
    """--train's backward, and what it backpropagated: the outputs' ``loss`` where the model returned one (an
    HF model given ``labels``: a ModelOutput or dict key, or an attribute), else the sum of every floating
    output that carries a gradient."""
    loss = _loss(outputs)
    if isinstance(loss, torch.Tensor) and loss.is_floating_point() and loss.requires_grad:
        loss.float().sum().backward()
        return "outputs.loss"
    floats = [v for _, v in accuracy.named_leaves(outputs)
              if isinstance(v, torch.Tensor) and v.is_floating_point() and v.requires_grad]  # fmt: skip
    if not floats:
        raise Failure("ModelRunError", "--train: the model's outputs carry no gradient")
    sum(t.float().sum() for t in floats).backward()
    return f"the sum of {len(floats)} output{'s' if len(floats) != 1 else ''}"


def _loss(outputs: Any) -> Any:
    if isinstance(outputs, Mapping):
        return outputs.get("loss")
    return None if isinstance(outputs, (list, tuple)) else getattr(outputs, "loss", None)


def synchronize(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def benchmark(torch: Any, model: Any, compiled: Any, calls: list[Call], train: bool, device: Any, dtype: Any,
              folder: Path, scope: str = "full", autocast: Any = None) -> BenchData:  # fmt: skip
    """Time the compiled model, a step being every call once (see measure.py); a failure here is reported, not
    fatal. The eager and the compiled steps alike run under ``autocast`` (a dtype, or None)."""
    try:
        from .benchmark import measure

        # CUDA-graph trees: each timed step is a new iteration
        mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        parameters = [p for p in getattr(model, "parameters", list)() if p.requires_grad] if train else []

        def one_step(fn: Any) -> None:
            for call in calls:
                # a training loop's zero_grad(set_to_none=True): gradients accumulated over timed steps into .grad
                # tensors a CUDA graph allocated are overwritten by its next replay (reduce-overhead fails so)
                for parameter in parameters:
                    parameter.grad = None
                if mark_step is not None and fn is compiled:
                    mark_step()
                outputs = forward(torch, fn, call, train, device, autocast)
                if train:
                    backward_step(torch, outputs)

        # the dtype the matmuls run in: autocast's, else the model's
        matmul_dtype = autocast or dtype or next(
            (p.dtype for p in getattr(model, "parameters", list)() if p.is_floating_point()), torch.float32
        )
        return measure(
            one_step, model, compiled, device, matmul_dtype, str(folder / PROFILE_TRACE_FILE), scope
        )
    except Exception as exc:
        traceback.print_exc()
        return BenchData(device=device.type, error=f"{type(exc).__name__}: {first_line(exc)}")


def environment(torch: Any) -> Environment:
    try:
        import triton

        triton_version: str | None = triton.__version__
    except Exception:
        triton_version = None
    return Environment(
        torch_version=torch.__version__,
        triton_version=triton_version,
        python_version=platform.python_version(),
        cuda_version=torch.version.cuda,
        platform=platform.platform(terse=True),
        source="capture",
    )


def device_info(torch: Any, device: Any) -> dict[str, Any]:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "device_type": "cuda",
            "device_name": props.name,
            "device_capability": f"{props.major}.{props.minor}",
            "multiprocessor_count": props.multi_processor_count,
        }
    return {"device_type": "cpu", "device_name": cpu_name(), "multiprocessor_count": os.cpu_count()}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
