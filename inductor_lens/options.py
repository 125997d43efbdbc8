"""What to compile and how: the CompileSpec (and ScriptSpec) handed from the CLI to the capture stage.

The modes and what each sets, the devices, dtypes and accuracy checks a spec may name. Inductor and Dynamo
options given as ``KEY=VALUE`` are parsed and checked against torch's own config in config_options.py.

Besides the mode and the options, a run has the settings of the whole model process: the float32 matmul
precision, cuDNN's TF32, an autocast dtype and Dynamo's config (``check_run_settings`` checks them), applied to the
eager and the compiled model alike (``worker/capture.py``, ``worker/script.py``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config_options import check_dynamo_options
from .errors import UsageError
from .exchange.shared import check_spec, gpu_key

# The modes of torch 2.11-2.13, known without importing torch; ``available_modes()`` asks torch itself.
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# What each mode sets: torch._inductor.list_mode_options() of torch 2.13 (2.11 has the same four modes, without
# lite). Kept here so that reading a debug folder never imports torch (seconds).
MODE_OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "lite": {
        "fallback_by_default": True, "selective_decompose": True, "reorder_for_peak_memory": False,
        "reorder_for_compute_comm_overlap": False, "triton.reorder_for_reducing_graph_partitions": False,
        "use_pre_grad_passes": False, "use_joint_graph_passes": False, "use_post_grad_passes": False,
        "use_dce": False, "allow_buffer_reuse": False,
    },
    "reduce-overhead": {"triton.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True, "coordinate_descent_tuning": True},
    "max-autotune": {"max_autotune": True, "triton.cudagraphs": True, "coordinate_descent_tuning": True},
}  # fmt: skip
DEVICES = ("auto", "cpu", "cuda")
# How the compiled outputs are judged: against a float64 run (worker/accuracy.py), against eager alone, or not.
ACCURACY_CHECKS = ("fp64", "eager", "off")
BENCH_SCOPES = ("full", "end_to_end")
# Canonical torch dtype names, and the short spellings people type.
DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float64": "float64",
    "fp64": "float64",
    "double": "float64",
}
DEFAULT_TIMEOUT_S = 900.0
# torch.set_float32_matmul_precision's values: "high" runs float32 matmuls in TF32 (or bf16x3), "medium" in bf16.
MATMUL_PRECISIONS = ("highest", "high", "medium")
# The dtypes torch.autocast lowers matmuls and convolutions to.
AUTOCAST_DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class CompileSpec:
    """One ``inductor-lens compile`` request; serialisable so the child process can read it."""

    model_path: Path
    mode: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)
    train: bool = False
    device: str = "auto"
    dtype: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    bench: bool = True
    # "full": ceilings, end to end, profiled steps, isolated kernels; "end_to_end": the latencies only
    # (what the second, warm-cache process of a comparison measures).
    bench_scope: str = "full"
    # Check (and on a GPU time) hand-written Triton equivalents of the kernels, after the capture.
    handwritten: bool = True
    accuracy: str = "fp64"
    # --find-divergence: the first kernel whose output goes wrong (worker/divergence.py), and how long the
    # re-runs with options that change numerics may take.
    find_divergence: bool = False
    divergence_budget_s: float = 300.0
    # --save-inputs[=MB]: save each kernel's launch arguments (up to this many MB) for `inductor-lens repro`.
    save_inputs_mb: float | None = None
    # --preview-gpu: generate the Triton code of this GPU on a CPU-only machine (worker/gpu_preview.py).
    preview_gpu: str | None = None
    # --threads: torch.set_num_threads in the model process before it compiles (None: torch's default).
    threads: int | None = None
    # The model process's settings, for the eager and the compiled model alike (None and {}: as torch has them):
    # torch.set_float32_matmul_precision, torch.backends.cudnn.allow_tf32, torch.autocast's dtype around each
    # call and timed step (not the float64 reference), torch._dynamo.config.
    matmul_precision: str | None = None
    cudnn_allow_tf32: bool | None = None
    autocast: str | None = None
    dynamo_options: Mapping[str, Any] = field(default_factory=dict)
    # --handwritten-budget: seconds the hand-written stage may take in all (None: the device's default,
    # handwritten/runner.py; 0 or less: no limit); checks not started by then are reported as skipped.
    handwritten_budget_s: float | None = None

    def __post_init__(self) -> None:
        check_mode(self.mode)
        check_run_settings(self.matmul_precision, self.cudnn_allow_tf32, self.autocast, self.dynamo_options)
        if self.preview_gpu is not None:
            try:
                gpu_key(self.preview_gpu)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            why_not = check_spec(self.mode, self.train, self.dynamic, self.options)
            if why_not:
                raise UsageError(why_not)
        if self.accuracy not in ACCURACY_CHECKS:
            raise UsageError(f"unknown accuracy check {self.accuracy!r}; choose one of {', '.join(ACCURACY_CHECKS)}")
        if self.device not in DEVICES:
            raise UsageError(f"unknown device {self.device!r}; choose one of {', '.join(DEVICES)}")
        if self.dtype is not None and self.dtype not in DTYPES.values():
            raise UsageError(f"unknown dtype {self.dtype!r}; choose one of {', '.join(sorted(set(DTYPES)))}")
        if self.bench_scope not in BENCH_SCOPES:
            raise UsageError(
                f"unknown bench scope {self.bench_scope!r}; choose one of {', '.join(BENCH_SCOPES)}"
            )
        if self.timeout_s <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        check_threads(self.threads)

    @property
    def model_name(self) -> str:
        return self.model_path.stem

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["model_path"] = str(self.model_path)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> CompileSpec:
        data = json.loads(text)
        data["model_path"] = Path(data["model_path"])
        return cls(**data)


@dataclass(frozen=True)
class ScriptSpec:
    """One ``inductor-lens run -- python SCRIPT ARGS`` request (or ``-- -m MODULE ARGS``): an unchanged
    script, with ``mode`` and ``options`` applied to each torch.compile call that sets none of its own."""

    argv: tuple[str, ...]  # the script (or "-m", the module) and its arguments
    cwd: Path
    model_path: Path  # the script's file (a module's, where it was found): names the report
    mode: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)
    # Profiled: ``steps`` calls of the first compiled function (or module) the script calls, after
    # ``warmup`` calls of it (the first ones compile and recompile).
    warmup: int = 3
    steps: int = 10
    timeout_s: float = DEFAULT_TIMEOUT_S
    bench: bool = True
    handwritten: bool = True
    # --threads: torch.set_num_threads in the script's process before the script runs (None: torch's default).
    threads: int | None = None
    # torch.compile(dynamic=...) for each call that sets none of its own (None: torch decides).
    dynamic: bool | None = None
    # Set before the script runs, as CompileSpec's; autocast is entered around each call of a compiled function
    # or module (the script's eager code outside them runs as it is).
    matmul_precision: str | None = None
    cudnn_allow_tf32: bool | None = None
    autocast: str | None = None
    dynamo_options: Mapping[str, Any] = field(default_factory=dict)
    handwritten_budget_s: float | None = None  # as CompileSpec's

    def __post_init__(self) -> None:
        check_mode(self.mode)
        check_threads(self.threads)
        check_run_settings(self.matmul_precision, self.cudnn_allow_tf32, self.autocast, self.dynamo_options)
        if not self.argv:
            raise UsageError("run needs a script: inductor-lens run -- python script.py [ARGS]")
        if self.warmup < 0 or self.steps < 1:
            raise UsageError("--warmup must be 0 or more and --steps 1 or more")
        if self.timeout_s <= 0:
            raise UsageError("--timeout must be a positive number of seconds")

    @property
    def model_name(self) -> str:
        return self.argv[1].rsplit(".", 1)[-1] if self.argv[0] == "-m" else self.model_path.stem

    @property
    def command(self) -> str:
        return " ".join(["python", *self.argv])

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data.update(cwd=str(self.cwd), model_path=str(self.model_path), kind="script")
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> ScriptSpec:
        data = json.loads(text)
        data.pop("kind", None)
        data.update(argv=tuple(data["argv"]), cwd=Path(data["cwd"]), model_path=Path(data["model_path"]))
        return cls(**data)


_PYTHON = re.compile(r"^python[\d.]*$")


def script_spec(command: Sequence[str], cwd: Path, **settings: Any) -> ScriptSpec:
    """The spec of ``run -- [python] SCRIPT ARGS`` or ``run -- [python] -m MODULE ARGS``, run in ``cwd``.

    The script runs in the tool's own Python (the one whose torch it must wrap), whatever interpreter
    the command names.
    """
    argv = list(command)
    if argv and _PYTHON.match(Path(argv[0]).name):
        argv = argv[1:]
    if not argv:
        raise UsageError("run needs a script: inductor-lens run [OPTIONS] -- python script.py [ARGS]")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise UsageError("run -- python -m needs a module name")
        found = _find_module(argv[1], cwd)
        origin = found.origin if found is not None and found.origin else None
        model_path = Path(origin) if origin else cwd / (argv[1].replace(".", "/") + ".py")
    elif argv[0].startswith("-"):
        raise UsageError(f"run -- python {argv[0]}: only a script or -m MODULE can be run")
    else:
        model_path = (cwd / argv[0]).resolve()
        if not model_path.is_file():
            raise UsageError(f"{argv[0]}: no such script")
        argv[0] = str(model_path)
    return ScriptSpec(argv=tuple(argv), cwd=cwd.resolve(), model_path=model_path, **settings)


def _find_module(name: str, cwd: Path) -> Any:
    sys.path.insert(0, str(cwd))
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path.remove(str(cwd))


def available_modes() -> tuple[str, ...]:
    """torch.compile's modes as the installed torch lists them (``torch._inductor.list_mode_options``)."""
    try:
        from torch._inductor import list_mode_options
    except ImportError:
        return MODES
    return tuple(list_mode_options())


def infer_mode(options: Mapping[str, Any], modes: Mapping[str, Mapping[str, Any]] | None = None) -> str | None:
    """The mode whose options a compile's non-default Inductor config holds, when no record names the mode:
    the mode setting the most options, all of them with its values (``triton.cudagraphs=True`` is
    reduce-overhead); ``default`` when none of the others fits. ``modes``: what each mode sets
    (``MODE_OPTIONS`` unless given)."""
    modes = MODE_OPTIONS if modes is None else modes
    fits = [
        (len(settings), name)
        for name, settings in modes.items()
        if settings and all(key in options and options[key] == value for key, value in settings.items())
    ]
    return max(fits)[1] if fits else "default"


def check_mode(mode: str) -> None:
    """Known modes pass without importing torch; any other is looked up in the installed torch."""
    if mode in MODES:
        return
    modes = available_modes()
    if mode not in modes:
        raise UsageError(f"unknown mode {mode!r}; this torch has {', '.join(modes)}")


def check_threads(threads: int | None) -> None:
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise UsageError(f"--threads {threads!r}: give a number of CPU threads, 1 or more")


def check_run_settings(
    matmul_precision: str | None, cudnn_allow_tf32: bool | None, autocast: str | None, dynamo_options: Mapping[str, Any]
) -> None:
    """The model process's settings beyond the mode and options: each a value torch takes."""
    if matmul_precision is not None and matmul_precision not in MATMUL_PRECISIONS:
        raise UsageError(
            f"unknown float32 matmul precision {matmul_precision!r}; choose one of {', '.join(MATMUL_PRECISIONS)}"
        )
    if cudnn_allow_tf32 is not None and not isinstance(cudnn_allow_tf32, bool):
        raise UsageError(f"cudnn_allow_tf32 takes true or false, got {cudnn_allow_tf32!r}")
    if autocast is not None and autocast not in AUTOCAST_DTYPES:
        raise UsageError(f"--autocast {autocast!r}: autocast lowers to {' or '.join(AUTOCAST_DTYPES)} (bf16, fp16)")
    if dynamo_options:
        check_dynamo_options(dynamo_options)


def normalize_autocast(name: str | None) -> str | None:
    """An autocast dtype as typed (``bf16``, ``torch.float16``) -> its canonical name; only float16 and bfloat16."""
    dtype = normalize_dtype(name)
    check_run_settings(None, None, dtype, {})
    return dtype


def normalize_dtype(name: str | None) -> str | None:
    if name is None:
        return None
    key = name.strip().lower().removeprefix("torch.")
    if key not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; choose one of {', '.join(sorted(set(DTYPES)))}")
    return DTYPES[key]

