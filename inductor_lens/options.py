"""What to compile and how: the CompileSpec (and ScriptSpec) handed from the CLI to the capture stage.

Inductor options given as ``KEY=VALUE`` are parsed here and checked against torch's own list
(``torch._inductor.list_options()``), with the closest valid names offered for a typo, and each value against
the type the option is declared with in torch's config (``cpp.simdlen: int | None``), not only its default's.
Dynamo's config (``--dynamo-option``, ``torch._dynamo.config``) is checked the same way.

Besides the mode and the options, a run has the settings of the whole model process: the float32 matmul
precision, cuDNN's TF32, an autocast dtype and Dynamo's config (``RunSettings`` checks them), applied to the
eager and the compiled model alike (``worker/capture.py``, ``worker/script.py``).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import json
import re
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError

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
            from .exchange.shared import check_spec, gpu_key

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


_INT = re.compile(r"[+-]?\d+")


def parse_value(text: str) -> bool | int | float | str:
    """``true``/``false`` -> bool, ``12`` -> int, ``1e-3`` -> float, anything else -> str."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.fullmatch(stripped):
        return int(stripped)
    try:
        return float(stripped)
    except ValueError:
        return text


@dataclass(frozen=True)
class TorchConfig:
    """One of torch's config modules whose names and values ``KEY=VALUE`` pairs are checked against."""

    what: str  # as errors name a setting of it: "Inductor option"
    flag: str  # the command-line flag that gives one
    module: str  # the config module (a torch ConfigModule)
    listing: str  # where its names are listed


INDUCTOR_CONFIG = TorchConfig("Inductor option", "--option", "torch._inductor.config", "torch._inductor.list_options()")
DYNAMO_CONFIG = TorchConfig("Dynamo option", "--dynamo-option", "torch._dynamo.config",
                            "torch._dynamo.config.get_config_copy()")  # fmt: skip


def parse_option(pair: str, config: TorchConfig = INDUCTOR_CONFIG) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"{config.flag} expects KEY=VALUE, got {pair!r}")
    return key, value


def config_defaults(config: TorchConfig) -> dict[str, Any]:
    """Every name of the config with its current value, from the installed torch, the names torch keeps as aliases
    of renamed settings too (Dynamo's ``cache_size_limit``, now ``recompile_limit``)."""
    module: Any = importlib.import_module(config.module)
    names = dict(module.get_config_copy())
    for name, entry in getattr(module, "_config", {}).items():  # private: each entry's alias, "module.name"
        target = str(getattr(entry, "alias", None) or "").removeprefix(config.module + ".")
        if target in names and name not in names:
            names[name] = names[target]
    return names


def config_types(config: TorchConfig, names: Iterable[str]) -> dict[str, Any]:
    """The type each named setting is declared with in torch's config (``int | None``, ``Literal[...]``,
    ``bool``), where torch records one."""
    module: Any = importlib.import_module(config.module)
    declared: dict[str, Any] = {}
    for name in names:
        try:
            declared[name] = module.get_type(name)  # ConfigModule's
        except (AttributeError, KeyError):
            continue
    return declared


def inductor_option_defaults() -> dict[str, Any]:
    """Every Inductor config name with its current value, from the installed torch."""
    return config_defaults(INDUCTOR_CONFIG)


def inductor_option_types(names: Iterable[str]) -> dict[str, Any]:
    """The type each named Inductor option is declared with in torch's config."""
    return config_types(INDUCTOR_CONFIG, names)


def parse_inductor_options(
    pairs: Iterable[str], known: Mapping[str, Any] | None = None, declared: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` pairs and check each key and value against Inductor's own config.

    ``known`` maps option names to their defaults (from ``inductor_option_defaults()`` unless given);
    ``declared`` to their declared types (torch's config, unless ``known`` is given). A value is converted
    to the declared type (the default's type where none is declared); one that cannot be is an error.
    """
    return parse_config_pairs(INDUCTOR_CONFIG, pairs, known, declared)


def parse_dynamo_options(
    pairs: Iterable[str], known: Mapping[str, Any] | None = None, declared: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``--dynamo-option KEY=VALUE`` pairs, checked against ``torch._dynamo.config`` as Inductor options are
    against Inductor's (``parse_inductor_options``)."""
    return parse_config_pairs(DYNAMO_CONFIG, pairs, known, declared)


def parse_config_pairs(
    config: TorchConfig,
    pairs: Iterable[str],
    known: Mapping[str, Any] | None = None,
    declared: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    parsed = [parse_option(p, config) for p in pairs]
    if not parsed:
        return {}
    if known is None:
        known = config_defaults(config)
        if declared is None:
            declared = config_types(config, (key for key, _ in parsed if key in known))
    declared = declared or {}
    options: dict[str, Any] = {}
    for key, raw in parsed:
        _check_name(config, key, known)
        options[key] = _coerce(config, key, raw, declared.get(key, type(known[key])))
    return options


def check_inductor_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Inductor options given as a dict (the Python API): every name must be one of torch's, and every value
    of the option's declared type."""
    return check_config_values(INDUCTOR_CONFIG, options)


def check_dynamo_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Dynamo config values given as a dict (a spec, the Python API), checked as ``check_inductor_options``."""
    return check_config_values(DYNAMO_CONFIG, options)


def check_config_values(config: TorchConfig, options: Mapping[str, Any]) -> dict[str, Any]:
    known = config_defaults(config) if options else {}
    for key in options:
        _check_name(config, key, known)
    declared = config_types(config, options) if options else {}
    for key, value in options.items():
        accepted = _accepted(declared.get(key, type(known[key])))
        if accepted is not None and not _fits(value, *accepted):
            raise UsageError(f"{config.what} {key!r} takes {_describe(*accepted)}, got {value!r}")
    return dict(options)


def _check_name(config: TorchConfig, key: str, known: Mapping[str, Any]) -> None:
    if key not in known:
        close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
        hint = f"closest: {', '.join(close)}" if close else f"see {config.listing}"
        raise UsageError(f"unknown {config.what} {key!r}", hint=hint)


_SIMPLE = (bool, int, float, str)
_NOT = object()


def _accepted(declared: Any) -> tuple[list[Any], bool] | None:
    """What a declared type allows: its simple types and Literal value tuples, and whether None is one of
    them; None where a value given as text cannot be checked (no declared type, a callable, a list, a class)."""
    if declared is type(None) or not declared or isinstance(declared, str):
        return None
    union = typing.get_origin(declared) in (typing.Union, types.UnionType)
    allowed: list[Any] = []
    optional = False
    for member in typing.get_args(declared) if union else (declared,):
        if member is type(None):
            optional = True
        elif member in _SIMPLE:
            allowed.append(member)
        elif typing.get_origin(member) is typing.Literal:
            allowed.append(typing.get_args(member))
        else:
            return None
    return (allowed, optional) if allowed else None


def _describe(allowed: list[Any], optional: bool) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    words = [names.get(kind) or "one of " + ", ".join(repr(v) for v in kind) for kind in allowed]
    return " or ".join(words + (["none"] if optional else []))


def _fits(value: Any, allowed: list[Any], optional: bool) -> bool:
    if value is None:
        return optional
    if isinstance(value, bool):
        return bool in allowed
    for kind in allowed:
        if isinstance(kind, tuple):
            if value in kind:
                return True
        elif isinstance(value, (int, float) if kind is float else kind):
            return True
    return False


def _coerce(config: TorchConfig, key: str, raw: str, declared: Any) -> Any:
    value = parse_value(raw)
    accepted = _accepted(declared)
    if accepted is None:
        return value
    allowed, optional = accepted
    if optional and raw.strip().lower() == "none":
        return None
    if type(value) in allowed:
        return value
    for kind in allowed:
        converted = _convert(kind, raw, value)
        if converted is not _NOT:
            return converted
    raise UsageError(f"{config.what} {key!r} takes {_describe(allowed, optional)}, got {raw!r}")


def _convert(kind: Any, raw: str, value: Any) -> Any:
    """``value`` (``raw`` parsed) as ``kind``, or ``_NOT``."""
    if isinstance(kind, tuple):
        return next((v for v in kind if str(v) == raw.strip()), _NOT)
    if kind is bool:
        return bool(value) if value in (0, 1) and type(value) is int else _NOT
    if kind is float:
        return float(value) if type(value) is int else _NOT
    if kind is str:
        return raw
    return _NOT
