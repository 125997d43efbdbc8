"""On a CUDA device: the shipped tuning table serves the shapes it was made from, and the tuned matmul_bias
computes what torch does (the float32 path that copies a transposed weight included). Skipped without a GPU.
Each runs in a fresh process: the test session runs Triton's interpreter (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

torch = pytest.importorskip("torch")

_TABLE_SHAPE = """
import json, sys
from inductor_lens.worker.handwritten import tuning_record
from inductor_lens.worker.handwritten.check import check
with tuning_record.recording() as used:
    r = check("matmul_bias", {"M": 4096, "N": 2304, "K": 768}, sys.argv[1], "cuda")
print(json.dumps({"ok": r.ok, "line": r.line(), "origins": [c.origin for c in used]}))
"""
_TRANSPOSED = (
    "import json, sys, torch; from inductor_lens.worker.handwritten.kernels import load; "
    "matmul = load('matmul', interpret=False)['matmul_bias'].run; rows = int(sys.argv[1]); "
    "g = torch.Generator(device='cuda').manual_seed(0); a = torch.randn(rows, 384, device='cuda', generator=g); "
    "w = torch.randn(1152, 384, device='cuda', generator=g) * 384**-0.5; b = torch.randn(1152, device='cuda', generator=g); "
    "e = torch.addmm(b.double(), a.double(), w.double().t()); got = matmul(a, w.t(), b); "
    "print(json.dumps({'error': float((got.double() - e).abs().max() / e.abs().max())}))"
)


def _run(script: str, argument: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["INDUCTOR_LENS_CACHE_DIR"] = str(tmp_path)  # nothing cached: the table or a search
    done = subprocess.run([sys.executable, "-c", script, argument], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(not _sm90(), reason="the shipped table is sm_90's (H100, H200)")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_table_shape_launches_the_tables_configuration_and_is_right(dtype: str, tmp_path: Path) -> None:
    result = _run(_TABLE_SHAPE, dtype, tmp_path)
    assert result["ok"], result["line"]
    assert result["origins"] == ["table"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
@pytest.mark.parametrize("rows", ["64", "1000"])
def test_float32_products_of_a_transposed_weight_are_right_either_side_of_the_copy(rows: str, tmp_path: Path) -> None:
    assert _run(_TRANSPOSED, rows, tmp_path)["error"] < 1e-5
