"""End to end on CPU: the hand-written equivalents of a real HF model's kernels, verified against what
Inductor's kernels compute (handwritten/verify.py) in the check process of a real compile.

Qwen3 (transformers 5, random weights from a small config): its SwiGLU, which torch 2.13's C++ kernels
record as its pieces (``x / (1 + exp(-x))``), is one silu_mul that computes what Inductor's kernel does."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from ..conftest import run_cli_process

QWEN3 = '''
"""A tiny HF Qwen3 (random weights): 2 layers, width 64, SwiGLU MLP of width 96, batch 1, 16 tokens."""

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def get_model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, use_cache=False,
                         attn_implementation="sdpa")
    return Qwen3ForCausalLM(config).eval()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, 128, (1, 16)),)
'''


def test_qwen3_swiglu_is_one_verified_silu_mul(tmp_path: Path) -> None:
    model = tmp_path / "qwen3_tiny.py"
    model.write_text(textwrap.dedent(QWEN3))
    result = run_cli_process(
        "compile", model, "--device", "cpu", "--no-bench", "--strict", "--out", tmp_path / "report", cwd=tmp_path
    )
    assert result.code == 0, result.stderr
    run = json.loads((tmp_path / "report" / "lens.json").read_text())["run"]
    matches = run["handwritten"]
    swiglu = [m for m in matches if m["concepts"] == ["mul", "silu"]]
    assert len(swiglu) == 1, [(m["target"], m["concepts"]) for m in matches]
    (m,) = swiglu
    assert (m["kind"], m["equivalents"], m["verified"]) == ("exact", ["silu_mul"], True), m
    assert m["verify_error"] < 1e-12 and m["verify_note"] == "computes what Inductor's kernel computes"
    assert [r["ok"] for r in m["runs"]] == [True]
    # no generated kernel is matched as anything that computes something else
    assert not [x["target"] for x in matches if x["verified"] is False]
    page = (tmp_path / "report" / "handwritten.html").read_text()
    assert "Computes what Inductor&#39;s kernel computes" in page or "Computes what Inductor's kernel computes" in page
