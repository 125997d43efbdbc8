"""Stage 1 of the pipeline (capture), in the model process: the model's runs, eager, float64, compiled, timed.

``execute`` loads the model file and builds the model (``model_file.py``); ``capture_model`` then puts it and its
calls on the device and runs them: eagerly, in float64 for the accuracy verdict, compiled (the cold compile, with
each compile's kernel information and module stacks kept), compiled again, compared (``accuracy.py``), timed
(``benchmark.py``) and, with ``--find-divergence``, searched for the first kernel that goes wrong
(``divergence.py``). ``run_settings`` holds the spec's float32 matmul precision, cuDNN TF32 and Dynamo config for
all of it; ``forward`` enters its autocast around each call. The in-process API runs ``capture_model`` on a
model the caller holds.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ..exchange.files import PROFILE_TRACE_FILE, BenchData, ReportedSettings
from ..options import CompileSpec, ScriptSpec
from ..records.codec import as_json_value
from . import accuracy
from .capture_run import CAPTURE_OPTIONS, Run
from .compat import dynamo_config, list_mode_options
from .environment import device_info
from .failure import Failure, first_line
from .kernel_information import kernel_information
from .measure import use_threads
from .model_file import (
    Call,
    call_contract,
    calls_from,
    describe_calls,
    load_model_file,
    module_construction,
    module_sites,
    move,
    place,
    resolve_device,
)
from .module_stacks import module_stacks
from .ranked import init_process_group


def execute(run: Run) -> None:
    spec = run.spec
    use_threads(spec.threads)
    # one rank of several (compile --nproc): the process group is up before the model file is loaded
    init_process_group(spec.device)
    run.phase("load model file")
    module = load_model_file(spec.model_path)

    run.phase("build model")
    torch.manual_seed(0)
    with module_construction(spec.model_path) as sites:
        model = call_contract(module, "get_model", spec.model_path)
    run.result.model_built = module_sites(model, spec.model_path, sites)
    calls = calls_from(call_contract(module, "get_inputs", spec.model_path))
    if not callable(model):
        raise Failure(
            "ModelFileError",
            f"get_model() must return an nn.Module or a callable, got {type(model).__name__}",
        )
    capture_model(run, model, calls)


def capture_model(run: Run, model: Callable[..., Any], calls: list[Call]) -> None:
    """Everything after the model is built: on the device, eager, float64, compiled, compared, timed.

    The model process runs it on a model file's model; ``inductor_lens.inspect`` runs it in the
    notebook's own process, on the model it is given.
    """
    with run_settings(run.spec) as applied:
        _capture_model(run, model, calls, applied)


def _capture_model(run: Run, model: Callable[..., Any], calls: list[Call], applied: dict[str, Any]) -> None:
    spec, result = run.spec, run.result
    device = resolve_device(spec.device)
    dtype = getattr(torch, spec.dtype) if spec.dtype else None
    autocast = getattr(torch, spec.autocast) if spec.autocast else None
    model, calls = place(model, calls, device, dtype)
    result.environment = replace(result.environment, **device_info(device))
    result.calls = len(calls)
    result.inputs = describe_calls(calls)
    if isinstance(model, torch.nn.Module):
        result.parameters = sum(p.numel() for p in model.parameters())

    mode_options = list_mode_options(spec.mode, spec.dynamic)
    # comment_origin makes Inductor mark, inside each kernel, the lines generated for each op.
    capture_options = {k: v for k, v in CAPTURE_OPTIONS.items() if k not in spec.options}
    options = {**mode_options, **capture_options, **spec.options}
    result.settings = ReportedSettings(
        device=str(device), dtype=spec.dtype, mode_options=mode_options, capture_options=capture_options, **applied
    )

    run.phase("eager run")
    eager, seconds = run_all(model, calls, spec.train, device, "eager", autocast)
    result.eager_first_call_s = seconds[0]
    result.settings.backward = eager.backward
    result.outputs = [f"{name}: {accuracy.describe_leaf(value)}" for name, value in eager.outputs[0]]

    reference, why_not = None, "--accuracy eager" if spec.accuracy == "eager" else ""
    if spec.accuracy == "fp64":
        run.phase("float64 reference run")
        reference, why_not = float64_run(model, calls, spec.train, device)

    run.phase("compile")
    preview = None
    if spec.preview_gpu:  # Inductor generates the GPU's code; it runs here under Triton's interpreter
        from .gpu_preview import PreviewBackend, describe

        preview = PreviewBackend(spec.preview_gpu, options)
        result.environment = replace(result.environment, preview_of=describe(spec.preview_gpu))
        compiled = torch.compile(model, backend=preview, fullgraph=spec.fullgraph, dynamic=spec.dynamic)
    else:
        compiled = torch.compile(model, options=options or None, fullgraph=spec.fullgraph, dynamic=spec.dynamic)
    with kernel_information(run.result_path.parent), module_stacks(run.result_path.parent):
        outputs, seconds = run_all(compiled, calls, spec.train, device, "compile", autocast)
        result.cold_compile_s = seconds[0]
        result.call_seconds = seconds

        run.phase("second call")
        _, seconds = run_all(compiled, calls, spec.train, device, "compile", autocast)
        result.second_call_s = seconds[0]

    if spec.save_inputs_mb:
        run.phase("save kernel inputs")
        from .saved_inputs import save_inputs

        save_inputs(lambda: run_all(compiled, calls, spec.train, device, "compile", autocast),
                    run.result_path.parent, spec.save_inputs_mb)  # fmt: skip

    if preview is not None:
        result.environment = replace(result.environment, preview_check=preview.log.summary())
    if spec.accuracy != "off" and not (preview is not None and preview.log.not_checked):
        run.phase("compare")
        result.accuracy = accuracy.judge(eager, outputs, reference, train=spec.train, why_no_reference=why_not)

    if spec.bench:
        run.phase("benchmark")
        result.bench = benchmark(model, compiled, calls, spec.train, device, dtype, run.result_path.parent,
                                 spec.bench_scope, autocast)  # fmt: skip

    if spec.find_divergence:
        run.phase("find divergence")
        from .divergence import search

        def one_step(fn: Callable[..., Any]) -> None:
            for call in calls:
                step(fn, call, spec.train, device, "compile", autocast)

        result.divergence = search(model, one_step, options, device=device.type, fullgraph=spec.fullgraph,
                                   dynamic=spec.dynamic, budget_s=spec.divergence_budget_s)  # fmt: skip


@contextlib.contextmanager
def run_settings(spec: CompileSpec | ScriptSpec) -> Iterator[dict[str, Any]]:
    """The spec's float32 matmul precision, cuDNN TF32 and Dynamo config, set for the block and restored after
    it (``inductor_lens.inspect`` captures in the caller's process). Yields what the spec set as torch then has
    it, ReportedSettings' fields; autocast is not entered here but around each call (``autocasting``)."""
    precision, cudnn_tf32 = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        if spec.matmul_precision is not None:
            torch.set_float32_matmul_precision(spec.matmul_precision)
        if spec.cudnn_allow_tf32 is not None:
            torch.backends.cudnn.allow_tf32 = spec.cudnn_allow_tf32
        config = dynamo_config()
        with config.patch(dict(spec.dynamo_options)):
            yield {
                "matmul_precision": torch.get_float32_matmul_precision() if spec.matmul_precision else None,
                "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32 if spec.cudnn_allow_tf32 is not None else None,
                "autocast": spec.autocast,
                "dynamo_options": {k: as_json_value(getattr(config, k)) for k in spec.dynamo_options},
            }
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


def autocasting(device_type: str, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to ``dtype`` on the device, or nothing where ``dtype`` is None."""
    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def forward(
    fn: Callable[..., Any], call: Call, train: bool, device: torch.device, autocast: torch.dtype | None
) -> Any:
    """One call of ``fn``: under no_grad unless training, under autocast where the run asks for it (the
    backward, outside it, runs in the dtypes the forward chose, as torch.autocast's documentation advises)."""
    with contextlib.nullcontext() if train else torch.no_grad(), autocasting(device.type, autocast):
        return call(fn)


def run_all(
    fn: Callable[..., Any], calls: list[Call], train: bool, device: torch.device, phase: str,
    autocast: torch.dtype | None = None,
) -> tuple[accuracy.Results, list[float]]:
    """Every call once (and with --train, a backward: ``backward_step``): what each gave, and how long it took.
    ``autocast``: the dtype of the autocast around each forward, or None."""
    results = accuracy.Results(outputs=[], gradients=[])
    seconds = []
    for call in calls:
        outputs, gradients, took, backward = step(fn, call, train, device, phase, autocast)
        results.outputs.append(outputs)
        results.gradients.append(gradients)
        results.backward = results.backward or backward
        seconds.append(took)
    return results, seconds


def float64_run(
    model: Callable[..., Any], calls: list[Call], train: bool, device: torch.device
) -> tuple[accuracy.Results | None, str]:
    """The same model and calls in float64 (the accuracy verdict's reference), or why there is none."""
    why_not = accuracy.why_no_float64_copy(model)
    if why_not:
        return None, why_not
    try:
        model64 = accuracy.float64_copy(model)
        calls64 = [Call(move(c.args, device, torch.float64), move(c.kwargs, device, torch.float64))
                   for c in calls]  # fmt: skip
        results, _ = run_all(model64, calls64, train, device, "float64")
    except Failure as failure:
        return None, f"the float64 run failed: {failure.message}"
    except Exception as exc:
        return None, f"the float64 run failed: {type(exc).__name__}: {first_line(exc)}"
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return results, ""


def step(
    fn: Callable[..., Any], call: Call, train: bool, device: torch.device, phase: str,
    autocast: torch.dtype | None = None,
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]], float, str]:
    """One call (and with --train a backward, ``backward_step``); returns its output leaves, the
    parameters' gradients (by name), the seconds it took and what was backpropagated ("" without --train)."""
    named = list(fn.named_parameters()) if train and hasattr(fn, "named_parameters") else []
    params = [(name, p) for name, p in named if p.requires_grad]
    for _, p in params:
        p.grad = None
    torch.manual_seed(0)
    synchronize(device)
    start = time.perf_counter()
    backward = ""
    try:
        outputs = forward(fn, call, train, device, autocast)
        if train:
            backward = backward_step(outputs)
        synchronize(device)
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


def backward_step(outputs: Any) -> str:
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
    functools.reduce(operator.add, (t.float().sum() for t in floats)).backward()
    return f"the sum of {len(floats)} output{'s' if len(floats) != 1 else ''}"


def _loss(outputs: Any) -> Any:
    if isinstance(outputs, Mapping):
        return outputs.get("loss")
    return None if isinstance(outputs, (list, tuple)) else getattr(outputs, "loss", None)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def benchmark(model: Callable[..., Any], compiled: Callable[..., Any], calls: list[Call], train: bool,
              device: torch.device, dtype: torch.dtype | None, folder: Path, scope: str = "full",
              autocast: torch.dtype | None = None) -> BenchData:  # fmt: skip
    """Time the compiled model, a step being every call once (see measure.py); a failure here is reported, not
    fatal. The eager and the compiled steps alike run under ``autocast`` (a dtype, or None)."""
    try:
        from .benchmark import measure

        # CUDA-graph trees: each timed step is a new iteration
        mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        parameters = [p for p in getattr(model, "parameters", list)() if p.requires_grad] if train else []

        def one_step(fn: Callable[..., Any]) -> None:
            for call in calls:
                # a training loop's zero_grad(set_to_none=True): gradients accumulated over timed steps into .grad
                # tensors a CUDA graph allocated are overwritten by its next replay (reduce-overhead fails so)
                for parameter in parameters:
                    parameter.grad = None
                if mark_step is not None and fn is compiled:
                    mark_step()
                outputs = forward(fn, call, train, device, autocast)
                if train:
                    backward_step(outputs)

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
