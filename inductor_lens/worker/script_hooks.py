"""Stage 1 of the pipeline (capture), in the script process: what the capture puts around an unchanged script.

``wrap_compile`` puts ``torch.compile`` through the capture (the run's mode, options and ``dynamic`` where the
script sets none; each call recorded); ``Autocast`` enters ``run --autocast`` around each call of what is
compiled; ``Window`` profiles the steps the first compiled callable delimits, then on a GPU replays the next
step's launches alone and measures the device's ceilings. ``script.py`` imports this module once torch is.
"""

from __future__ import annotations

import atexit
import functools
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from ..exchange.files import (
    COLLECTIVE_SIZES_TRACE_FILE,
    GRAPH_FREE_TRACE_FILE,
    PROFILE_TRACE_FILE,
    STEP_MARKS,
    BenchData,
    ProfileData,
)
from ..options import ScriptSpec
from ..records.codec import as_json_value
from ..records.outcome import CompileCall
from .capture_run import CAPTURE_OPTIONS, ScriptRun
from .compat import list_mode_options, optimized_module, tree_leaves
from .environment import device_info
from .failure import first_line


def wrap_compile(
    spec: ScriptSpec, run: ScriptRun, window: Window | None, autocast: Autocast | None = None
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
        settings = {**list_mode_options(mode or "default", kwargs.get("dynamic")), **options}
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


def record_device(run: ScriptRun) -> None:
    device = torch.device("cuda") if torch.cuda.is_available() and torch.cuda.is_initialized() else torch.device("cpu")
    run.result.environment = replace(run.result.environment, **device_info(device))
    run.result.settings.device = str(device)


class Autocast:
    """``run --autocast``: torch.autocast to its dtype around each call of a compiled function (wrapped) or
    compiled module (through OptimizedModule.__call__), on the device of the tensors of its first call."""

    def __init__(self, dtype: str) -> None:
        self.dtype: torch.dtype = getattr(torch, dtype)
        self.devices: dict[int, str] = {}  # each compiled callable's device type, found at its first call
        compiled_module = optimized_module()
        original = compiled_module.__call__
        autocast = self

        def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            with autocast.around(id(module), args, kwargs, module):
                return original(module, *args, **kwargs)

        compiled_module.__call__ = call  # type: ignore[method-assign]

    def wrap(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        if isinstance(compiled, torch.nn.Module):
            return compiled  # OptimizedModule.__call__ enters it

        @functools.wraps(compiled)
        def autocast_call(*args: Any, **kwargs: Any) -> Any:
            with self.around(id(autocast_call), args, kwargs):
                return compiled(*args, **kwargs)

        return autocast_call

    def around(self, identity: int, args: Any, kwargs: Any, module: torch.nn.Module | None = None) -> torch.autocast:
        device = self.devices.get(identity)
        if device is None:
            device = self.devices[identity] = self._device_type(args, kwargs, module)
        return torch.autocast(device, dtype=self.dtype)

    def _device_type(self, args: Any, kwargs: Any, module: torch.nn.Module | None) -> str:
        """The first tensor argument's device, else the module's first parameter's, else cuda where there is one."""
        leaves = tree_leaves((args, kwargs))
        tensor = next((x for x in leaves if isinstance(x, torch.Tensor)), None)
        if tensor is None and module is not None:
            tensor = next(iter(module.parameters()), None)
        if tensor is not None:
            return str(tensor.device.type)
        return "cuda" if torch.cuda.is_available() else "cpu"


class Window:
    """The profiled steps: calls of the first compiled callable the script calls delimit them."""

    def __init__(self, spec: ScriptSpec, run: ScriptRun) -> None:
        self.spec = spec
        self.run = run
        self.anchor: int | None = None
        self.anchor_name = ""
        self.calls = 0
        self.profiler: Any = None
        self.step_range: Any = None  # the record_function range of the step being profiled
        self.recording: Any = None  # the launch recorder's context manager (GPU), and what it keeps
        self.sizing: Any = None  # the profiler of the one step with shapes, for the collectives' bytes (CPU ranks)
        self.launches: dict[int, Any] = {}
        self.done = False
        self._patch_modules()
        atexit.register(self.finish)

    def watch(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """A compiled module is watched through OptimizedModule.__call__; a compiled function is wrapped."""
        if isinstance(compiled, torch.nn.Module):
            return compiled
        name = getattr(compiled, "__qualname__", "compiled function")

        @functools.wraps(compiled)
        def watched(*args: Any, **kwargs: Any) -> Any:
            self.called(id(watched), name)
            return compiled(*args, **kwargs)

        return watched

    def _patch_modules(self) -> None:
        compiled_module = optimized_module()
        original = compiled_module.__call__
        window = self

        def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            window.called(id(module), type(getattr(module, "_orig_mod", module)).__name__)
            return original(module, *args, **kwargs)

        compiled_module.__call__ = call  # type: ignore[method-assign]

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
            self._start_sizing()
        elif self.calls == last + 2:
            self.finish()

    def _device(self) -> torch.device:
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        return torch.device("cuda" if cuda else "cpu")

    def _start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self.run.phase(f"profiling {self.spec.steps} steps of {self.anchor_name}")
        device = self._device()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
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
            torch.cuda.synchronize(device)
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

    def _start_sizing(self) -> None:
        """On a CPU job of several ranks, profile the next step with shapes: its gloo ranges' sizes give the
        collectives' bytes (COLLECTIVE_SIZES_TRACE_FILE), the timed steps staying without shapes."""
        from torch.profiler import ProfilerActivity, profile, record_function

        from .measure import sizes_collectives

        if not sizes_collectives(self._device()):
            return
        self.sizing = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        self.sizing.start()
        self.step_range = record_function(f"{STEP_MARKS[0]}0")
        self.step_range.__enter__()

    def _stop_sizing(self) -> None:
        """Stop the step with shapes; keep its trace only where the script's next call closed the step."""
        if self.step_range is not None:
            self.step_range.__exit__(None, None, None)
            self.step_range = None
        self.sizing.stop()
        if self.calls >= self.spec.warmup + self.spec.steps + 2:
            self.sizing.export_chrome_trace(str(self.run.result_path.parent / COLLECTIVE_SIZES_TRACE_FILE))
        self.sizing = None

    def finish(self) -> None:
        """Close the window: stop what runs, replay the recorded launches, measure the ceilings (GPU)."""
        if self.done:
            return
        self.done = True
        try:
            if self.profiler is not None:
                self._stop_profiler()
            if self.sizing is not None:
                self._stop_sizing()
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
        torch.cuda.synchronize(device)
        bench.isolated = replay_launches(list(self.launches.values()))
        # the matmul ceiling in the floating dtype the script's kernels pass most
        dtypes = Counter(a.dtype for _, args, _ in self.launches.values() for a in args or ()
                         if isinstance(a, torch.Tensor) and a.is_floating_point())  # fmt: skip
        dtype = dtypes.most_common(1)[0][0] if dtypes else torch.float32
        bench.ceilings = ceilings(device, dtype)
