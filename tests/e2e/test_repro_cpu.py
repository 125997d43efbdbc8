"""``compile --save-inputs`` then ``repro``: a kernel's real launch arguments saved in the model process, copied
beside its reproducer, which runs on them in a fresh process and checks out.

samples/mlp.py with --train on CPU launches three C++ kernels: the forward GELU (8.4 MB of arguments), the
backward's GELU-backward-and-sum (9.4 MB) and its bias-gradient sum (4.2 MB). A cap of 13 MB (decimal, as the
report counts memory) keeps the two smallest and skips the largest, and says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from inductor_lens.exchange.files import SAVED_INPUTS_INDEX, SavedInputs, read_json_file

from ..conftest import SAMPLES, run_cli_process


def test_saved_inputs_reproducer(tmp_path: Path) -> None:
    report = tmp_path / "mlp"
    result = run_cli_process("compile", SAMPLES / "mlp.py", "--device", "cpu", "--train", "--save-inputs", "13",
                             "--no-bench", "--no-handwritten", "--accuracy", "off", "--out", report)  # fmt: skip
    assert result.code == 0, result.stderr
    index = read_json_file(report / "capture" / SAVED_INPUTS_INDEX, SavedInputs)
    assert index is not None and index.error is None
    assert index.cap_bytes == 13 * 10**6
    saved = {e.kernel: e for e in index.launches}
    assert sorted(saved) == ["cpp_fused_gelu_0", "cpp_fused_gelu_gelu_backward_sum_0", "cpp_fused_sum_1"]
    assert saved["cpp_fused_gelu_0"].file and saved["cpp_fused_gelu_0"].arguments == 2
    assert saved["cpp_fused_sum_1"].file
    assert saved["cpp_fused_gelu_gelu_backward_sum_0"].skipped.startswith("over the size cap (9.4 MB")

    out = tmp_path / "repro"
    result = run_cli_process("repro", report, "cpp_fused_gelu_0", "--out", out)
    assert result.code == 0, result.stderr
    assert "saved inputs of the real launch" in result.stderr
    assert (out / "inputs.pt").is_file()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, str(out / "repro.py")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("repro cpp_fused_gelu_0: check passed (1 output against eager float64"), (
        done.stdout
    )
    assert "| saved inputs of the real launch; C++ (cpp_pybinding)" in done.stdout

    # the skipped kernel's reproducer falls back to random inputs and says why
    result = run_cli_process(
        "repro", report, "cpp_fused_gelu_gelu_backward_sum_0", "--out", tmp_path / "skipped"
    )
    assert result.code == 0, result.stderr
    assert "random inputs of the recorded layout" in result.stderr
    assert "over the size cap" in result.stderr
    assert not (tmp_path / "skipped" / "inputs.pt").exists()
