"""Stage 1 of the pipeline (capture), in the script process: run an unchanged script under the capture.

``python -m inductor_lens.worker script SPEC RESULT`` runs the user's script (``runpy``, as ``python
script.py ARGS`` or ``python -m module ARGS`` would, in the user's folder) with the capture's
environment (TORCH_COMPILE_DEBUG, TORCH_TRACE, fresh caches, set by the parent), and two things added:

- ``torch.compile`` is wrapped: a call that sets no mode and no options of its own gets ``run --mode``
  and ``--option``, one that sets no ``dynamic`` gets ``run --dynamic``; every call is recorded (what,
  where, with what) and gets the capture's own options (``comment_origin``) unless it set them;
- the run's float32 matmul precision, cuDNN TF32 and Dynamo config are set before the script runs (the
  script's own settings, made later, win), and ``run --autocast`` is entered around each call of a
  compiled function or module (``Autocast``): the script's eager code between those calls runs as it is;
- a window of steps is profiled: the first compiled function (or module) the script calls delimits
  the steps; after ``warmup`` of its calls, ``steps`` of them are profiled, each step a range from
  one call to the next (so a training step's backward and optimizer, between two forwards, belong to
  its step), and on a GPU the next step's Triton launches are recorded and replayed alone.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import runpy
import sys
import traceback
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from ..exchange.files import (
    GRAPH_FREE_TRACE_FILE,
    PROFILE_TRACE_FILE,
    STEP_MARKS,
    BenchData,
    CaptureResult,
    ProfileData,
    ReportedSettings,
    ResultWriter,
)
from ..options import ScriptSpec
from ..records.codec import as_json_value
from ..records.outcome import CompileCall
from .capture import CAPTURE_OPTIONS, device_info, environment, run_settings
from .inductor_cache import write_autotune_key
from .measure import use_threads
from .model_file import first_line
from .module_stacks import module_stacks


class ScriptRun(ResultWriter):
    def __init__(self, spec: ScriptSpec, result_path: Path) -> None:
        super().__init__(result_path, CaptureResult(command=spec.command))
        self.spec = spec


def main(argv: list[str]) -> int:
    """``argv``: the spec file and the result file."""
    spec = ScriptSpec.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    run = ScriptRun(spec, Path(argv[1]))
    window: Window | None = None
    # the run's settings hold until the window's last measurements are taken, after the script
    with contextlib.ExitStack() as settings:
        try:
            run.phase("import torch")
            import torch

            use_threads(spec.threads)
            run.result.environment = environment(torch)
            applied = settings.enter_context(run_settings(torch, spec))
            mode_options = dict(torch._inductor.list_mode_options(spec.mode, spec.dynamic))
            run.result.settings = ReportedSettings(mode_options=mode_options, capture_options=dict(CAPTURE_OPTIONS),
                                                   **applied)  # fmt: skip
            window = Window(torch, spec, run) if spec.bench else None
            wrap_compile(torch, spec, run, window, Autocast(torch, spec.autocast) if spec.autocast else None)
            run.phase("run script")
            with module_stacks(torch, run.result_path.resolve().parent):
                code = run_script(spec)
            if window is not None:
                window.finish()
            _record_device(torch, run)
            if code != 0:
                run.result.error, run.result.error_kind = f"the script exited with code {code}", "ModelRunError"
                return 1
            run.result.status = "ok"
            run.phase("done")
            return 0
        except BaseException as exc:  # the script raised: its traceback is in the log, the result says what
            print_script_traceback(exc)
            if window is not None:
                window.finish()
            run.result.error = f"the script raised {type(exc).__name__}: {first_line(exc)}"
            run.result.error_kind = "CompileError" if _from_compiler(exc) else "ModelRunError"
            return 1
        finally:
            write_autotune_key()
            run.write()


def print_script_traceback(exc: BaseException) -> None:
    """The traceback Python would have printed for the script: without this runner's and runpy's frames."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__)):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb if tb is not None else exc.__traceback__)


def run_script(spec: ScriptSpec) -> int:
    """Run it as Python would; returns its exit code (0 when it returns or exits without one)."""
    os.chdir(spec.cwd)
    try:
        if spec.argv[0] == "-m":
            sys.argv = [spec.argv[1], *spec.argv[2:]]
            sys.path.insert(0, str(spec.cwd))
            runpy.run_module(spec.argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(spec.argv)
            sys.path.insert(0, str(Path(spec.argv[0]).resolve().parent))
            runpy.run_path(spec.argv[0], run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code
        if code is None or code == 0:
            return 0
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            return 1
        return code
    return 0


def wrap_compile(
    torch: Any, spec: ScriptSpec, run: ScriptRun, window: Window | None, autocast: Autocast | None = None
) -> None:
    """Put ``torch.compile`` through the capture: the run's mode and options where the script sets none, its
    ``dynamic`` where the call sets none, its autocast around each call of what is compiled."""
    original = torch.compile

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(mode=...) as a decorator
            return lambda fn: compile(fn, **kwargs)
        backend = kwargs.get("backend", "inductor")
        call = CompileCall(
            target=_target_name(model),
            where=_caller(sys._getframe(1)),
            backend=backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__),
            script_mode=kwargs.get("mode"),
            script_options={str(k): as_json_value(v) for k, v in dict(kwargs["options"]).items()}
            if kwargs.get("options") is not None
            else None,
        )
        if backend != "inductor":
            run.result.compile_calls.append(replace(call, applied=f"left as it is: backend {call.backend} is not Inductor"))
            compiled = original(model, **kwargs)
            return autocast.wrap(compiled) if autocast is not None else compiled
        mode, options = kwargs.pop("mode", None), dict(kwargs.pop("options", None) or {})
        if mode is None and not options:
            mode, options, applied = spec.mode, dict(spec.options), _describe("inductor-lens run", spec.mode, spec.options)
        else:
            applied = _describe("the script's own", mode or "default", options)
        if spec.dynamic is not None and "dynamic" not in kwargs:
            kwargs["dynamic"] = spec.dynamic
            applied += f"; dynamic={spec.dynamic} from inductor-lens run"
        settings = {**torch._inductor.list_mode_options(mode or "default", kwargs.get("dynamic")), **options}
        settings.update({k: v for k, v in CAPTURE_OPTIONS.items() if k not in settings})
        run.result.compile_calls.append(replace(call, applied=applied))
        run.write()
        compiled = original(model, options=settings, **kwargs)
        if autocast is not None:
            compiled = autocast.wrap(compiled)
        return window.watch(compiled) if window is not None else compiled

    torch.compile = compile


def _describe(whose: str, mode: str, options: Any) -> str:
    extra = ", ".join(f"{k}={v}" for k, v in dict(options).items())
    return f"{whose}: mode {mode}" + (f", options {extra}" if extra else "")


def _target_name(model: Any) -> str:
    target = getattr(model, "__self__", None) if getattr(model, "__name__", "") == "_call_impl" else None
    named = target if target is not None else model
    return getattr(named, "__qualname__", None) or type(named).__name__


def _caller(frame: FrameType | None) -> str:
    """The script's line that called torch.compile (torch's own frames, such as nn.Module.compile, skipped)."""
    while frame is not None and ("/torch/" in frame.f_code.co_filename or "inductor_lens" in frame.f_code.co_filename):
        frame = frame.f_back
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}" if frame is not None else "?"


def _from_compiler(exc: BaseException) -> bool:
    """Whether an exception came out of Dynamo, AOTAutograd or Inductor (exit code 5 rather than 4)."""
    names = {cls.__module__ for cls in type(exc).__mro__}
    return any(n.startswith(("torch._dynamo", "torch._inductor", "torch._functorch")) for n in names)


def _record_device(torch: Any, run: ScriptRun) -> None:
    device = torch.device("cuda") if torch.cuda.is_available() and torch.cuda.is_initialized() else torch.device("cpu")
    run.result.environment = replace(run.result.environment, **device_info(torch, device))
    run.result.settings.device = str(device)


class Autocast:
    """``run --autocast``: torch.autocast to its dtype around each call of a compiled function (wrapped) or
    compiled module (through OptimizedModule.__call__), on the device of the tensors of its first call."""

    def __init__(self, torch: Any, dtype: str) -> None:
        from torch._dynamo.eval_frame import OptimizedModule

        self.torch = torch
        self.dtype = getattr(torch, dtype)
        self.devices: dict[int, str] = {}  # each compiled callable's device type, found at its first call
        original = OptimizedModule.__call__
        autocast = self

        def call(module: Any, *args: Any, **kwargs: Any) -> Any:
            with autocast.around(id(module), args, kwargs, module):
                return original(module, *args, **kwargs)

        OptimizedModule.__call__ = call  # type: ignore[method-assign, assignment]

    def wrap(self, compiled: Any) -> Any:
        if isinstance(compiled, self.torch.nn.Module):
            return compiled  # OptimizedModule.__call__ enters it

        @functools.wraps(compiled)
        def autocast_call(*args: Any, **kwargs: Any) -> Any:
            with self.around(id(autocast_call), args, kwargs):
                return compiled(*args, **kwargs)

        return autocast_call

    def around(self, identity: int, args: Any, kwargs: Any, module: Any = None) -> Any:
        device = self.devices.get(identity)
        if device is None:
            device = self.devices[identity] = self._device_type(args, kwargs, module)
        return self.torch.autocast(device, dtype=self.dtype)

    def _device_type(self, args: Any, kwargs: Any, module: Any) -> str:
        """The first tensor argument's device, else the module's first parameter's, else cuda where there is one."""
        leaves = self.torch.utils._pytree.tree_leaves((args, kwargs))
        tensor = next((x for x in leaves if isinstance(x, self.torch.Tensor)), None)
        if tensor is None and module is not None:
            tensor = next(iter(module.parameters()), None)
        if tensor is not None:
            return str(tensor.device.type)
        return "cuda" if self.torch.cuda.is_available() else "cpu"


class Window:
    """The profiled steps: calls of the first compiled callable the script calls delimit them."""

    def __init__(self, torch: Any, spec: ScriptSpec, run: ScriptRun) -> None:
        self.torch = torch
        self.spec = spec
        self.run = run
        self.anchor: int | None = None
        self.anchor_name = ""
        self.calls = 0
        self.profiler: Any = None
        self.step_range: Any = None  # the record_function range of the step being profiled
        self.recording: Any = None  # the launch recorder's context manager (GPU), and what it keeps
        self.launches: dict[int, Any] = {}
        self.done = False
        self._patch_modules()
        atexit.register(self.finish)

    def watch(self, compiled: Any) -> Any:
        """A compiled module is watched through OptimizedModule.__call__; a compiled function is wrapped."""
        if isinstance(compiled, self.torch.nn.Module):
            return compiled
        name = getattr(compiled, "__qualname__", "compiled function")

        @functools.wraps(compiled)
        def watched(*args: Any, **kwargs: Any) -> Any:
            self.called(id(watched), name)
            return compiled(*args, **kwargs)

        return watched

    def _patch_modules(self) -> None:
        from torch._dynamo.eval_frame import OptimizedModule

        original = OptimizedModule.__call__
        window = self

        def call(module: Any, *args: Any, **kwargs: Any) -> Any:
            window.called(id(module), type(getattr(module, "_orig_mod", module)).__name__)
            return original(module, *args, **kwargs)

        OptimizedModule.__call__ = call  # type: ignore[method-assign, assignment]

    def called(self, identity: int, name: str) -> None:
        if self.done:
            return
        if self.anchor is None:
            self.anchor, self.anchor_name = identity, name
        if identity != self.anchor:
            return
        self.calls += 1
        first = self.spec.warmup + 1
        last = self.spec.warmup + self.spec.steps
        if self.calls == first:
            self._start()
        elif first < self.calls <= last:
            self._next_step()
        elif self.calls == last + 1:
            self._stop_profiler()
            self._start_recording()
        elif self.calls == last + 2:
            self.finish()

    def _device(self) -> Any:
        cuda = self.torch.cuda.is_available() and self.torch.cuda.is_initialized()
        return self.torch.device("cuda" if cuda else "cpu")

    def _start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self.run.phase(f"profiling {self.spec.steps} steps of {self.anchor_name}")
        device = self._device()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        if device.type == "cuda":
            self.torch.cuda.synchronize(device)
        self.profiler = profile(activities=activities)
        self.profiler.start()
        self._next_step()

    def _next_step(self) -> None:
        """Close the step range that is open, and open the next one (the model process's step marks)."""
        from torch.profiler import record_function

        if self.step_range is not None:
            self.step_range.__exit__(None, None, None)
        self.step_range = record_function(f"{STEP_MARKS[0]}{self.calls - self.spec.warmup - 1}")
        self.step_range.__enter__()

    def _stop_profiler(self) -> None:
        if self.profiler is None:
            return
        device = self._device()
        if device.type == "cuda":
            self.torch.cuda.synchronize(device)
        profiled = min(self.spec.steps, self.calls - self.spec.warmup)
        if self.step_range is not None:
            self.step_range.__exit__(None, None, None)
            self.step_range = None
        self.profiler.stop()
        path = str(self.run.result_path.parent / PROFILE_TRACE_FILE)
        self.profiler.export_chrome_trace(path)
        self.profiler = None
        self.run.result.bench = BenchData(device=device.type, profile=ProfileData(profiled, path, device.type))
        self.run.result.profiled = (
            f"{profiled} calls of {self.anchor_name} (each a step, up to its next call) after "
            f"{self.spec.warmup} warm-up calls"
        )
        self.run.write()

    def _start_recording(self) -> None:
        device = self._device()
        if device.type != "cuda":
            return
        from .measure import recording_launches

        self.recording = recording_launches(device)
        self.launches = self.recording.__enter__()

    def finish(self) -> None:
        """Close the window: stop what runs, replay the recorded launches, measure the ceilings (GPU)."""
        if self.done:
            return
        self.done = True
        try:
            if self.profiler is not None:
                self._stop_profiler()
            if self.recording is not None:
                self.recording.__exit__(None, None, None)
                self.recording = None
                self._replay()
            if self.anchor is None or self.calls <= self.spec.warmup:
                self.run.result.profiled = (
                    f"nothing profiled: the script made {self.calls} call(s) of a compiled function, "
                    f"{self.spec.warmup} warm-up call(s) come first (lower --warmup)"
                )
        except Exception as exc:  # measuring must not turn a finished script into a failure
            traceback.print_exc()
            if self.run.result.bench is not None:
                self.run.result.bench.error = f"{type(exc).__name__}: {first_line(exc)}"
        self.run.write()

    def _replay(self) -> None:
        from .measure import ceilings, replay_launches

        bench = self.run.result.bench
        if bench is not None and bench.profile is not None and bench.device == "cuda":
            from .graph_free import graph_free, graphs_replayed

            if graphs_replayed(bench.profile.trace):  # CUDA graphs: no launch reached Python
                self.run.phase("profiling the compiled code without CUDA graphs")
                free_trace = str(Path(bench.profile.trace).with_name(GRAPH_FREE_TRACE_FILE))
                bench.cudagraph = graph_free(self._device(), free_trace)
        if bench is None or not self.launches:
            return
        device = self._device()
        self.run.phase("timing kernels alone")
        self.torch.cuda.synchronize(device)
        bench.isolated = replay_launches(list(self.launches.values()))
        # the matmul ceiling in the floating dtype the script's kernels pass most
        dtypes = Counter(a.dtype for _, args, _ in self.launches.values() for a in args or ()
                         if isinstance(a, self.torch.Tensor) and a.is_floating_point())  # fmt: skip
        dtype = dtypes.most_common(1)[0][0] if dtypes else self.torch.float32
        bench.ceilings = ceilings(device, dtype)
