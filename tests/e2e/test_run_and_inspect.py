"""Real workflows on CPU: ``inductor-lens run`` around an unchanged training script, and the in-process
API (``inspect``, ``inspecting``) a notebook uses."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import torch

import inductor_lens
from inductor_lens.errors import ModelRunError, UsageError

from ..conftest import assert_one_line_error, run_cli_process

TRAIN = """
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
compiled = torch.compile(model)
step = torch.compile(optimizer.step, mode="max-autotune-no-cudagraphs")  # its own mode: kept
for length in (16, 32):
    for _ in range(args.steps):
        loss = compiled(torch.randn(length, 64)).pow(2).mean()
        loss.backward()
        step()
        optimizer.zero_grad()
    print(f"length {length}: loss {loss.item():.4f}")
"""


def test_run_captures_a_training_loop(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    out = tmp_path / "report"
    result = run_cli_process("run", "--out", out, "--warmup", "2", "--steps", "3", "--", "python", "train.py",
                             "--steps", "4", cwd=tmp_path)  # fmt: skip
    assert result.code == 0, result.stderr
    assert "length 32: loss" in result.stderr  # the script's own output is shown as it runs
    run = json.loads((out / "lens.json").read_text())["run"]
    capture = run["capture"]
    assert capture["status"] == "ok" and capture["command"] == f"python {tmp_path / 'train.py'} --steps 4"
    calls = {c["target"]: c for c in capture["compile_calls"]}
    assert calls["Sequential"]["where"] == "train.py:12" and calls["Sequential"]["applied"] == "inductor-lens run: mode default"
    assert calls["SGD.step"]["script_mode"] == "max-autotune-no-cudagraphs"
    assert calls["SGD.step"]["applied"].startswith("the script's own: mode max-autotune-no-cudagraphs")
    kinds = sorted(g["kind"] for g in run["graphs"])
    # forward and backward at each length (the second a recompile), and the optimizer step's graph
    assert kinds.count("forward") >= 2 and kinds.count("backward") >= 2 and "inference" in kinds
    assert any(f["recompile_reasons"] for f in run["frames"]), "the second length recompiles"
    assert capture["profiled"] == "3 calls of Sequential (each a step, up to its next call) after 2 warm-up calls"
    step_timing = run["bench"]["step"]
    assert step_timing["steps"] == 3 and step_timing["attributed_us"] > 0
    index = (out / "index.html").read_text()
    assert "torch.compile calls" in index and "train.py:12" in index


def test_run_reports_a_failing_script_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import torch\ntorch.compile(lambda x: x)(torch.ones(1))\nraise ValueError('boom')\n")
    result = run_cli_process("run", "--out", tmp_path / "r", "--", "python", "bad.py", cwd=tmp_path)
    # the script's own traceback is its output, shown as Python would (without the runner's frames);
    # the tool's error is one line, the last
    assert 'File "' + str(tmp_path / "bad.py") + '", line 3, in <module>' in result.stderr
    assert "inductor_lens" not in result.stderr.split("Traceback", 1)[1].split("ValueError: boom", 1)[0]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [result.stderr.strip().splitlines()[-1]]
    assert "the script raised ValueError: boom" in errors[0]
    assert result.code == ModelRunError.exit_code
    assert (tmp_path / "r" / "index.html").is_file()  # what was captured is kept, report included
    missing = run_cli_process("run", "--", "python", "nowhere.py", cwd=tmp_path)
    assert_one_line_error(missing, "nowhere.py: no such script")
    assert missing.code == UsageError.exit_code


def test_inspect_in_process(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    result = inductor_lens.inspect(model, torch.randn(16, 32), out=tmp_path / "inspect", train=True)
    assert result.error is None and result.index.is_file()
    run = result.run
    assert sorted(g.kind for g in run.graphs) == ["backward", "forward"]
    accuracy = run.capture.accuracy if run.capture else None
    assert accuracy is not None and accuracy.within_tolerance and accuracy.reference == "float64"
    assert "gradients" in accuracy.compared and accuracy.checked == 1 + 4  # the output, 2 weights, 2 biases
    assert run.bench is not None and run.bench.step is not None and run.bench.step.steps == 20


def test_inspecting_a_block(tmp_path: Path) -> None:
    with inductor_lens.inspecting(tmp_path / "block", title="softmax") as seen:
        softmax = torch.compile(lambda x: torch.softmax(x * 2, -1))
        softmax(torch.randn(8, 128))
        softmax(torch.randn(8, 256))  # a second shape: a recompile
    assert seen.result is not None and seen.result.run.title == "softmax"
    run = seen.result.run
    assert [f.compile_id for f in run.frames] == ["0/0", "0/1"] and len(run.graphs) == 2
    assert run.frames[1].recompile_reasons
