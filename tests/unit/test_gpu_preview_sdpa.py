"""The CPU preview's choice of attention backend (``worker/gpu_preview_sdpa.py::sdp_choice``) against what CUDA's SDPA
chose on an H200: every row of benchmarks/results/2026-11-25-h200-sdpa-choice.json (torch 2.11.0+cu130, cuDNN
9.19, written by benchmarks/sdpa_choice_probe.py: dtypes, grouped heads, lengths, head dims, masks, causal,
enable_gqa, requires_grad, dropout). A preview that picked another backend would name other kernels."""

from __future__ import annotations

import json

import torch

from inductor_lens.worker.gpu_preview_sdpa import CUDNN, EFFICIENT, FLASH, MATH, sdp_choice

from ..conftest import ROOT

PROBE = ROOT / "benchmarks" / "results" / "2026-11-25-h200-sdpa-choice.json"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _meta(shape: tuple[int, ...], dtype: torch.dtype, grad: bool) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta").requires_grad_(grad)


def test_every_probed_case_gets_the_backend_the_h200_chose() -> None:
    probe = json.loads(PROBE.read_text())
    assert probe["facts"]["priority_order_after"] == [CUDNN, FLASH, EFFICIENT, MATH, 4]
    rows = probe["rows"]
    assert len(rows) == 3780 and all(row["choice"] in (MATH, FLASH, EFFICIENT, CUDNN) for row in rows)
    wrong = []
    for row in rows:
        dtype = DTYPES[row["dtype"]]
        q = _meta((2, row["hq"], row["lq"], row["d"]), dtype, row["grad"])
        k = _meta((2, row["hk"], row["lk"], row["d"]), dtype, row["grad"])
        v = _meta((2, row["hk"], row["lk"], row["dv"]), dtype, row["grad"])
        mask = None
        if row["mask"] != "none":
            mask = torch.empty((2, 1, row["lq"], row["lk"]), dtype=torch.bool if row["mask"] == "bool" else dtype,
                               device="meta")  # fmt: skip
        ours = sdp_choice(q, k, v, mask, row["gqa"], row["dropout"], row["causal"])
        if ours != row["choice"]:
            wrong.append((row, ours))
    assert not wrong, f"{len(wrong)} of {len(rows)} differ, e.g. {wrong[:3]}"
    # the grid reaches every backend
    assert {row["choice"] for row in rows} == {MATH, FLASH, EFFICIENT, CUDNN}
