"""On an sm_90 GPU (H100, H200): the hand-written matmul's persistent TMA form computes what torch does with every
configuration of its list, and the shipped table sends ViT-S/16's bf16 qkv to it. Skipped elsewhere. Each runs in
a fresh process: the test session runs Triton's interpreter (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

torch = pytest.importorskip("torch")

# Every configuration on bf16 with nn.Linear's transposed weight; one on a row-major b and one in fp16. 1000 rows
# and columns leave partial edge tiles and K=392 a partial K block, which the descriptors zero-fill.
_EVERY_CONFIG = """
import json, torch
import torch.nn.functional as F
from inductor_lens.worker.handwritten.kernels import matmul as mm
M, N, K = 1000, 1000, 392
errors = {}
for dtype, k_contiguous, configs in ((torch.bfloat16, True, mm.TMA_CONFIGS), (torch.bfloat16, False, mm.TMA_CONFIGS[:1]),
                                     (torch.float16, True, mm.TMA_CONFIGS[:1])):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g).to(dtype)
    if k_contiguous:
        b = (torch.randn(N, K, device="cuda", generator=g) * K**-0.5).to(dtype).t()
    else:
        b = (torch.randn(K, N, device="cuda", generator=g) * K**-0.5).to(dtype)
    bias = torch.randn(N, device="cuda", generator=g).to(dtype)
    expected = F.gelu(torch.addmm(bias.float(), a.float(), b.float()))
    for config in configs:
        kw = config.kwargs
        c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
        mm.matmul_with(config, a, b, bias, "gelu", out=c)
        name = f"{dtype} k_contiguous={k_contiguous} {kw} warps={config.num_warps} stages={config.num_stages}"
        errors[name] = float((c.float() - expected).abs().max() / expected.abs().max())
print(json.dumps(errors))
"""
_VIT_QKV = """
import json
from inductor_lens.worker.handwritten import tuning_record
from inductor_lens.worker.handwritten.check import check
with tuning_record.recording() as used:
    r = check("matmul_bias", {"M": 12608, "N": 1152, "K": 384}, "bfloat16", "cuda")
print(json.dumps({"ok": r.ok, "line": r.line(), "used": [[c.origin, c.config] for c in used]}))
"""


def _run(script: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["INDUCTOR_LENS_CACHE_DIR"] = str(tmp_path)  # nothing cached: the table or a search
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(not _sm90(), reason="the persistent TMA form runs on sm_90 (H100, H200)")
def test_every_persistent_configuration_computes_what_torch_does(tmp_path: Path) -> None:
    errors = _run(_EVERY_CONFIG, tmp_path)
    assert len(errors) >= 14
    wrong = {name: error for name, error in errors.items() if not error < 2e-2}  # NaN: a tile never stored
    assert not wrong


@pytest.mark.skipif(not _sm90(), reason="the shipped table is sm_90's (H100, H200)")
def test_the_table_sends_vits_bf16_qkv_to_the_persistent_form(tmp_path: Path) -> None:
    result = _run(_VIT_QKV, tmp_path)
    assert result["ok"], result["line"]
    assert [origin for origin, _ in result["used"]] == ["table"]
    assert "TMA_PERSISTENT=True" in result["used"][0][1]
