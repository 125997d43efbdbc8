"""Stage 1 of the pipeline (capture), in the model process: run the model eagerly, compiled, compare, time.

``python -m inductor_lens.worker capture SPEC RESULT`` loads the user's model file, runs it eagerly,
then under ``torch.compile`` (the first call is the cold compile; the parent set up TORCH_COMPILE_DEBUG,
TORCH_TRACE and private caches in the environment), compares the two, and unless told not to, times
the compiled model (``measure.py``). Progress goes to stderr as ``PHASE_MARKER`` lines; the outcome,
success or not, goes to RESULT (a ``files.CaptureResult``), rewritten after every phase.
"""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..options import CompileSpec
from ..records.codec import JsonValue
from ..records.run import Accuracy, Environment
from .files import (
    PHASE_MARKER,
    PROFILE_TRACE_FILE,
    BenchData,
    CaptureResult,
    ReportedSettings,
    write_json_file,
)

# Tolerances for "compiled agrees with eager" (rtol, atol) by dtype: looser than torch.testing's
# defaults because fused kernels legitimately reorder floating-point reductions.
TOLERANCES = {
    "torch.float64": (1e-7, 1e-7),
    "torch.float32": (1e-4, 1e-5),
    "torch.float16": (1e-2, 1e-3),
    "torch.bfloat16": (2e-2, 1e-2),
}


# Inductor options inductor-lens adds to every capture (a user's --option of the same name wins).
CAPTURE_OPTIONS: dict[str, JsonValue] = {"comment_origin": True}


class Failure(Exception):
    """Ends the run with an error kind the parent maps to an exit code (see errors.py)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Run:
    def __init__(self, spec: CompileSpec, result_path: Path) -> None:
        self.spec = spec
        self.result_path = result_path
        self.started = time.perf_counter()
        self.result = CaptureResult()

    def phase(self, name: str) -> None:
        self.result.phase = name
        print(f"{PHASE_MARKER}{name}", file=sys.stderr, flush=True)
        self.write()

    def write(self) -> None:
        self.result.wall_s = time.perf_counter() - self.started
        write_json_file(self.result_path, self.result)


def main(argv: list[str]) -> int:
    """``argv``: the spec file and the result file."""
    spec = CompileSpec.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    run = Run(spec, Path(argv[1]))
    try:
        execute(run)
        run.result.status = "ok"
        run.phase("done")
        return 0
    except Failure as failure:
        run.result.error, run.result.error_kind = failure.message, failure.kind
        print(f"[inductor-lens] error ({failure.kind}): {failure.message}", file=sys.stderr, flush=True)
        return 1
    except BaseException as exc:  # anything unforeseen still leaves a result behind
        run.result.error, run.result.error_kind = f"{type(exc).__name__}: {_first_line(exc)}", "CompileError"
        traceback.print_exc()
        return 1
    finally:
        run.write()


def execute(run: Run) -> None:
    spec, result = run.spec, run.result
    run.phase("import torch")
    import torch

    result.environment = environment(torch)
    module = load_model_file(run, spec.model_path)

    run.phase("build model")
    torch.manual_seed(0)
    model = call_contract(module, "get_model", spec.model_path)
    inputs = call_contract(module, "get_inputs", spec.model_path)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)):
        raise Failure(
            "ModelFileError", f"get_inputs() must return a tuple of tensors, got {type(inputs).__name__}"
        )
    if not callable(model):
        raise Failure(
            "ModelFileError",
            f"get_model() must return an nn.Module or a callable, got {type(model).__name__}",
        )

    device = resolve_device(torch, spec.device)
    dtype = getattr(torch, spec.dtype) if spec.dtype else None
    model, inputs = place(torch, model, tuple(inputs), device, dtype)
    result.environment = replace(result.environment, **device_info(torch, device))
    result.inputs = [describe(torch, x) for x in inputs]
    if isinstance(model, torch.nn.Module):
        result.parameters = sum(p.numel() for p in model.parameters())

    train = spec.train
    mode_options = dict(torch._inductor.list_mode_options(spec.mode, spec.dynamic))
    # comment_origin makes Inductor mark, inside each kernel, the lines generated for each op.
    capture_options = {k: v for k, v in CAPTURE_OPTIONS.items() if k not in spec.options}
    options = {**mode_options, **capture_options, **spec.options}
    result.settings = ReportedSettings(
        device=str(device), dtype=spec.dtype, mode_options=mode_options, capture_options=capture_options
    )

    run.phase("eager run")
    eager_outputs, eager_grads, eager_s = step(torch, model, inputs, train, device, "eager")
    result.eager_first_call_s = eager_s
    result.outputs = [describe(torch, t) for t in tensors_in(torch, eager_outputs)]

    run.phase("compile")
    compiled = torch.compile(model, options=options or None, fullgraph=spec.fullgraph, dynamic=spec.dynamic)
    outputs, grads, cold_s = step(torch, compiled, inputs, train, device, "compile")
    result.cold_compile_s = cold_s

    run.phase("second call")
    _, _, second_s = step(torch, compiled, inputs, train, device, "compile")
    result.second_call_s = second_s

    run.phase("compare")
    result.accuracy = accuracy(torch, outputs, eager_outputs, grads, eager_grads)

    if spec.bench:
        run.phase("benchmark")
        result.bench = benchmark(
            torch, model, compiled, inputs, train, device, dtype, run.result_path.parent, spec.bench_scope
        )


def benchmark(torch: Any, model: Any, compiled: Any, inputs: tuple[Any, ...], train: bool, device: Any, dtype: Any,
              folder: Path, scope: str = "full") -> BenchData:  # fmt: skip
    """Time the compiled model (see measure.py); a failure here is reported, not fatal."""
    try:
        from .measure import measure

        def one_step(fn: Any) -> None:
            if train:
                outputs = fn(*inputs)
                sum(t.float().sum() for t in tensors_in(torch, outputs) if t.requires_grad).backward()
            else:
                with torch.no_grad():
                    fn(*inputs)

        matmul_dtype = dtype or next(
            (p.dtype for p in getattr(model, "parameters", list)() if p.is_floating_point()), torch.float32
        )
        return measure(
            torch, one_step, model, compiled, device, matmul_dtype, str(folder / PROFILE_TRACE_FILE), scope
        )
    except Exception as exc:
        traceback.print_exc()
        return BenchData(device=device.type, error=f"{type(exc).__name__}: {_first_line(exc)}")


def load_model_file(run: Run, path: Path) -> Any:
    run.phase("load model file")
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"inductor_lens_model_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise Failure("ModelFileError", f"{path.name} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise Failure("ModelFileError", f"{path.name}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except Exception as exc:
        raise Failure(
            "ModelFileError", f"{path.name} raised {type(exc).__name__} while importing: {_first_line(exc)}"
        ) from exc
    return module


def call_contract(module: Any, name: str, path: Path) -> Any:
    function = getattr(module, name, None)
    if function is None:
        raise Failure(
            "ModelFileError",
            f"{path.name} defines no {name}() (a model file needs get_model and get_inputs)",
        )
    if not callable(function):
        raise Failure("ModelFileError", f"{path.name}: {name} is not a function")
    try:
        return function()
    except Exception as exc:
        raise Failure("ModelRunError", f"{name}() raised {type(exc).__name__}: {_first_line(exc)}") from exc


def resolve_device(torch: Any, requested: str) -> Any:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise Failure("UsageError", "--device cuda, but this torch sees no CUDA device")
    return torch.device(requested)


def place(
    torch: Any, model: Any, inputs: tuple[Any, ...], device: Any, dtype: Any
) -> tuple[Any, tuple[Any, ...]]:
    try:
        if isinstance(model, torch.nn.Module):
            model = model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)
        placed = []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                x = x.to(device)
                if dtype is not None and x.is_floating_point():
                    x = x.to(dtype)
            placed.append(x)
    except Exception as exc:
        raise Failure(
            "ModelRunError", f"moving the model to {device} failed: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    return model, tuple(placed)


def step(
    torch: Any, fn: Any, inputs: tuple[Any, ...], train: bool, device: Any, phase: str
) -> tuple[Any, list[Any], float]:
    """One call (and backward of the outputs' sum with --train); returns outputs, grads, seconds."""
    params = [p for p in fn.parameters() if p.requires_grad] if train and hasattr(fn, "parameters") else []
    for p in params:
        p.grad = None
    torch.manual_seed(0)
    synchronize(torch, device)
    start = time.perf_counter()
    try:
        if train:
            outputs = fn(*inputs)
            floats = [t for t in tensors_in(torch, outputs) if t.is_floating_point() and t.requires_grad]
            if not floats:
                raise Failure("ModelRunError", "--train: the model's outputs carry no gradient")
            sum(t.float().sum() for t in floats).backward()
        else:
            with torch.no_grad():
                outputs = fn(*inputs)
        synchronize(torch, device)
    except Failure:
        raise
    except Exception as exc:
        kind = "ModelRunError" if phase == "eager" else "CompileError"
        where = "eager forward" if phase == "eager" else "torch.compile"
        raise Failure(kind, f"{where} raised {type(exc).__name__}: {_first_line(exc)}") from exc
    seconds = time.perf_counter() - start
    grads = [p.grad.detach().clone() if p.grad is not None else None for p in params]
    detached = [t.detach().clone() for t in tensors_in(torch, outputs)]
    return detached, grads, seconds


def synchronize(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def tensors_in(torch: Any, value: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(torch, v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(torch, v)]
    if hasattr(value, "__dataclass_fields__"):
        return [t for name in value.__dataclass_fields__ for t in tensors_in(torch, getattr(value, name))]
    return []


def accuracy(
    torch: Any, outputs: list[Any], reference: list[Any], grads: list[Any], ref_grads: list[Any]
) -> Accuracy:
    max_abs, max_ref, ok = 0.0, 0.0, True
    rtol, atol = 0.0, 0.0
    for got, want in zip(outputs, reference, strict=False):  # a length mismatch is reported below
        if not want.is_floating_point() and not want.is_complex():
            ok = ok and bool(torch.equal(got, want))
            continue
        rtol_t, atol_t = TOLERANCES.get(str(want.dtype), (1e-4, 1e-5))
        rtol, atol = max(rtol, rtol_t), max(atol, atol_t)
        diff = (got.double() - want.double()).abs()
        max_abs = max(max_abs, _finite_max(diff))
        max_ref = max(max_ref, _finite_max(want.double().abs()))
        ok = ok and bool(
            torch.allclose(got.double(), want.double(), rtol=rtol_t, atol=atol_t, equal_nan=True)
        )
    result = Accuracy(
        compared="outputs and parameter gradients" if ref_grads else "outputs",
        tensors=len(reference),
        max_abs_error=max_abs,
        max_rel_error=max_abs / max_ref if max_ref > 0 else max_abs,
        within_tolerance=ok and len(outputs) == len(reference),
        rtol=rtol or 1e-4,
        atol=atol or 1e-5,
    )
    if ref_grads:
        g_abs, g_ref = 0.0, 0.0
        for got, want in zip(grads, ref_grads, strict=True):
            if got is None or want is None:
                continue
            g_abs = max(g_abs, _finite_max((got.double() - want.double()).abs()))
            g_ref = max(g_ref, _finite_max(want.double().abs()))
        result = replace(result, grad_max_abs_error=g_abs, grad_max_rel_error=g_abs / g_ref if g_ref > 0 else g_abs)
    return result


def _finite_max(tensor: Any) -> float:
    if tensor.numel() == 0:
        return 0.0
    value = float(tensor.max())
    return value if math.isfinite(value) else float("inf")


def describe(torch: Any, value: Any) -> str:
    if isinstance(value, torch.Tensor):
        short = str(value.dtype).removeprefix("torch.")
        return f"{short}[{', '.join(str(s) for s in value.shape)}] on {value.device}"
    return type(value).__name__


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


def _first_line(exc: BaseException) -> str:
    """The first informative line of an exception message (torch's can run to pages)."""
    for line in str(exc).splitlines():
        line = line.strip()
        if (
            line
            and not line.startswith("Set TORCHDYNAMO_VERBOSE")
            and not line.startswith("You can suppress")
        ):
            return line[:400]
    return type(exc).__name__

