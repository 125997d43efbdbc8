"""Stage 4 of the pipeline (bench), read back: the run's own settings, which every change the diagnosis suggests
differs from: a mode is always the run's mode with one thing changed (CUDA graphs or autotuning), never one that
drops its CUDA graphs.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..records import CompileRun
from ..records.codec import JsonValue
from ..records.trials import SettingChange

# The four modes as (CUDA graphs, autotuning): a suggested mode is the run's with one of the two changed.
_MODES = {
    (False, False): "default",
    (True, False): "reduce-overhead",
    (False, True): "max-autotune-no-cudagraphs",
    (True, True): "max-autotune",
}


def inductor_options(run: CompileRun) -> Mapping[str, JsonValue]:
    """The Inductor options in force: the mode's and the ones passed (the passed ones win)."""
    settings = run.settings
    return {**(settings.mode_options if settings else {}), **(settings.options if settings else {})}


def is_on(options: Mapping[str, JsonValue], *names: str) -> bool:
    return any(bool(options.get(name)) for name in names)


def uses_cudagraphs(run: CompileRun) -> bool:
    """The run's mode or options have CUDA graphs (used, or tried and skipped)."""
    e2e = run.bench.end_to_end if run.bench is not None else None
    return (e2e is not None and e2e.cudagraphs is not None) or is_on(inductor_options(run), "triton.cudagraphs")


def autotunes(run: CompileRun) -> bool:
    return is_on(inductor_options(run), "max_autotune", "max_autotune_gemm")


def suggested_mode(run: CompileRun, *, cudagraphs: bool | None = None, autotune: bool | None = None) -> str:
    """The run's mode with one thing changed, the rest kept (CUDA graphs are never dropped by this)."""
    graphs = uses_cudagraphs(run) if cudagraphs is None else cudagraphs
    tuned = autotunes(run) if autotune is None else autotune
    return _MODES[(graphs, tuned)]


def mode_change(mode: str) -> str:
    return f'torch.compile(model, mode="{mode}"), this run\'s other options unchanged'


def tuning_change(run: CompileRun) -> tuple[str, SettingChange] | None:
    """The next tuning this run has not used, in words and as a setting: block-size search, then autotuning;
    None when both were on."""
    if not is_on(inductor_options(run), "coordinate_descent_tuning"):
        return ('add options={"coordinate_descent_tuning": True} to this run\'s torch.compile call: it searches each '
                "kernel's block sizes around the heuristic's",
                SettingChange("coordinate_descent_tuning", options={"coordinate_descent_tuning": True}))  # fmt: skip
    if not autotunes(run):
        mode = suggested_mode(run, autotune=True)
        return (mode_change(mode) + ": benchmarks each kernel's configurations",
                SettingChange(f"autotuning (mode {mode})", mode=mode))  # fmt: skip
    return None
