"""Stage 4 of the pipeline (bench), read back: the numbers the diagnosis's rules apply (``diagnosis.py``), in one
place: the report's list of the rules prints them, and a time at stake under the step's noise is no advice.
"""

from __future__ import annotations

from ..records import EndToEnd

OVERHEAD_SHARE = 0.1  # share of the compiled step spent in Python around kernels / outside graphs
CLOSE_CALL = 0.02  # autotune winner within 2% of the runner-up
FREEZING_SHARE = 0.1  # CPU inference: library matmul time, share of the time in kernels, that earns freezing
PRECISION_SHARE = 0.2  # float32 matmul time, share of the device time per step, that earns a precision finding
AUTOTUNE_UNDER = 0.5  # library matmuls under half their roofline: measurably under the roof
NOT_FOR_SPEED = "nothing to change for speed"  # how a finding's change starts where it is not about speed
NOISE_SHARE = 0.02  # a time at stake under 2% of the step (or half its p10-p90 spread) is noise


def noise_us(e2e: EndToEnd) -> float:
    """The smallest time at stake worth a change: ``NOISE_SHARE`` of the compiled step, or half its spread."""
    compiled = e2e.compiled
    return max(NOISE_SHARE * compiled.median_ms, (compiled.p90_ms - compiled.p10_ms) / 2) * 1e3
