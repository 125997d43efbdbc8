"""Records, the run's capture: what happened in the child process that ran the model (CaptureOutcome), how its
outputs and gradients agreed with eager (Accuracy, TensorCheck), and the torch.compile calls a script made
(CompileCall). Part of the run document (records/run.py holds its schema history).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .codec import JsonValue
from .graph import SourceLine
from .numerics import NumericDivergence

CaptureStatus = Literal["ok", "failed", "timeout"]


@dataclass(frozen=True)
class TensorCheck:
    """One output or gradient, compiled against eager, both judged against a float64 run where there is one.

    The rule is that of ``torch._dynamo.utils.same`` with a float64 reference: the compiled tensor
    passes when it is within ``tolerance`` of eager, or when its RMSE against float64 is at most
    ``multiplier`` times eager's RMSE against float64, plus ``tolerance / 10``.
    """

    name: str  # "logits", "[0]", "grad of self.fc1.weight"; "call 2: ..." with several calls
    kind: Literal["output", "gradient"]
    tensor: str  # "float32[4, 256, 2048]"
    within: bool
    tolerance: float
    max_abs_error: float | None = None  # max |compiled - eager|
    compiled_rmse: float | None = None  # against float64
    eager_rmse: float | None = None  # against float64
    multiplier: float | None = None
    note: str = ""  # how it passed or failed: "close to eager", "as close to float64 as eager", ...

    @property
    def limit(self) -> float | None:
        """The largest compiled RMSE that passes."""
        if self.eager_rmse is None or self.multiplier is None:
            return None
        return self.multiplier * self.eager_rmse + self.tolerance / 10


@dataclass(frozen=True)
class Accuracy:
    """Agreement of the compiled model with eager on the same inputs."""

    compared: str
    tensors: int
    max_abs_error: float
    max_rel_error: float  # max |compiled - eager| / max |eager|
    within_tolerance: bool
    rtol: float
    atol: float
    grad_max_abs_error: float | None = None
    grad_max_rel_error: float | None = None
    # How the verdict was reached: against a float64 run, or (without one) eager with per-dtype tolerances.
    method: str = ""
    reference: Literal["float64", "eager", ""] = ""
    # The tensors checked, the worst first (worker/accuracy.py keeps the 40 worst); ``checked`` counts all.
    checks: tuple[TensorCheck, ...] = ()
    checked: int = 0
    failed: int = 0
    # Outputs of another structure, count or shape than eager's: findings, not errors of the tool.
    findings: tuple[str, ...] = ()
    # Output leaves that could not be compared, each with its type and why ("past_key_values: Foo, holds no
    # tensor"); a cache's tensors are judged like any output's (issue 30).
    skipped: tuple[str, ...] = ()

    @property
    def worst(self) -> TensorCheck | None:
        return self.checks[0] if self.checks else None


@dataclass(frozen=True)
class CompileCall:
    """One ``torch.compile`` call an unchanged script made (``inductor-lens run``), and what it compiled with."""

    target: str  # what was compiled: "GPT2LMHeadModel", "train_step", ...
    where: str  # the script's line that called torch.compile: "train.py:42"
    backend: str  # "inductor", or another backend (then nothing is captured from it)
    # The script's own mode and options, as it passed them (None: it passed none).
    script_mode: str | None = None
    script_options: Mapping[str, JsonValue] | None = None
    # What the compile ran with in the end: the script's own settings win over ``run --mode/--option``.
    applied: str = ""


@dataclass(frozen=True)
class CaptureOutcome:
    """What happened in the child process that ran the model."""

    model_path: str
    model_name: str
    status: CaptureStatus
    phase: str
    error: str | None = None
    error_kind: str | None = None
    exit_code: int | None = None
    wall_s: float | None = None
    cold_compile_s: float | None = None
    eager_first_call_s: float | None = None
    second_call_s: float | None = None
    # Each call of the model (get_inputs() can ask for several): how long the first compiled pass took.
    calls: int = 1
    call_seconds: tuple[float, ...] = ()
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    parameters: int | None = None
    # Where get_model() built the model and each of its modules, from lines of the model file (the model
    # itself first): for a model of torch's own modules (nn.Sequential), the only lines of it that are the
    # user's (issue 30). Empty in reports from before, and for a model that is not an nn.Module.
    model_built: tuple[SourceLine, ...] = ()
    accuracy: Accuracy | None = None
    # compile --find-divergence: the first kernel whose output went wrong, and the options that fix it.
    divergence: NumericDivergence | None = None
    log_file: str | None = None
    # A script run unchanged (``inductor-lens run``): its command line, its torch.compile calls, and which
    # steps were profiled ("10 calls of train_step after 3 warm-up calls").
    command: str = ""
    compile_calls: tuple[CompileCall, ...] = ()
    profiled: str = ""
