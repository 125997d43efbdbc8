"""On a CUDA device: `inductor-lens compile` yields Triton kernels. Skipped where torch sees no GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT, SAMPLES, run_cli_process


@pytest.mark.parametrize(("sample", "category"), [("mlp", "pointwise"), ("softmax_ln", "reduction")])
def test_sample_compiles_to_triton_on_cuda(tmp_path: Path, sample: str, category: str) -> None:
    result = run_cli_process(
        "compile", SAMPLES / f"{sample}.py", "--device", "cuda", "--out", tmp_path / "r", "--strict"
    )
    assert result.code == 0, result.stderr
    run = json.loads((tmp_path / "r" / "lens.json").read_text())["run"]
    assert run["environment"]["device_type"] == "cuda"
    kernels = [k for g in run["graphs"] for k in g["kernels"]]
    assert kernels and all(k["backend"] == "triton" for k in kernels)
    assert any(k["category"] == category for k in kernels)
    assert all(k["bytes_accessed"] for k in kernels)
    assert run["capture"]["accuracy"]["within_tolerance"] is True
    # comment_origin: Inductor marked which kernel lines come from which op
    assert all(k["origins"] for k in kernels)
    # timings: ceilings measured, the profiled step tied to launches, every Triton kernel replayed alone
    bench = run["bench"]
    assert bench["device"] == "cuda" and bench["ceilings"]["copy_gb_per_s"] > 0
    assert bench["step"]["attributed_us"] >= 0.9 * bench["step"]["total_us"]
    assert all(k["timing"]["isolated"]["samples"] > 0 and k["timing"]["launches"] >= 1 for k in kernels)
    # hand-written equivalents: every match checked on the GPU in full size, and timed
    runs = [r for m in run["handwritten"] for r in m["runs"]]
    assert runs and all(
        r["ok"] is True and not r["interpreter"] and r["checked_shape"] == r["shape"] for r in runs
    )
    assert all(r["timing"]["median_ms"] > 0 and r["eager"]["median_ms"] > 0 for r in runs)
    # the autotuned kernels say which launch configuration ran (softmax's are fixed: none recorded)
    assert any(r["configs"] for r in runs) and all(
        c["origin"] in ("tuned", "reused", "cache") for r in runs for c in r["configs"]
    )
    if sample == "softmax_ln":  # (an nn.Sequential like mlp.py has no forward() of the user's own)
        assert any(
            s["filename"].endswith("softmax_ln.py")
            for k in kernels
            for o in k["origins"]
            for s in o["source"]
        )


def test_train_on_cuda_has_backward_triton_kernels(tmp_path: Path) -> None:
    result = run_cli_process(
        "compile", SAMPLES / "mlp.py", "--device", "cuda", "--train", "--out", tmp_path / "r"
    )
    assert result.code == 0, result.stderr
    run = json.loads((tmp_path / "r" / "lens.json").read_text())["run"]
    backward = [g for g in run["graphs"] if g["kind"] == "backward"]
    assert backward and any(k["backend"] == "triton" for g in backward for k in g["kernels"])
    # the profiled step is forward + backward: backward kernels (autograd's thread) get their time too
    assert all(k["timing"]["in_context_us"] > 0 for g in backward for k in g["kernels"])


def test_handwritten_check_and_bench_on_cuda() -> None:
    result = run_cli_process(
        "handwritten", "check", "matmul_bias_gelu", "--shape", "129x257x31", "--dtype", "bf16"
    )
    assert result.code == 0 and result.stdout.startswith(
        "ok: matmul_bias_gelu 129x257x31 bfloat16 on cuda"
    ), result
    result = run_cli_process("handwritten", "bench", "softmax", "--shape", "4096x4096", "--dtype", "bf16")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("softmax 4096x4096 bfloat16: 67.1 MB moved")
    assert [line.split()[0] for line in lines[1:4]] == ["hand-written", "torch", "torch.compile"]
    assert "% of the measured ceiling" in lines[1] and lines[-1].startswith("  ceilings: copy")


# One task of the check process, in a fresh process: prints the origins of its launch configurations.
_ONE_TASK = (
    "import json; from inductor_lens.exchange.files import HandwrittenTask; "
    "from inductor_lens.worker.handwritten.job import run_task; "
    "e = run_task(HandwrittenTask('matmul_bias', {'M': 1000, 'N': 768, 'K': 256}, 'bfloat16'), 'cuda'); "
    "print(json.dumps({'ok': e.ok, 'origins': [c.origin for c in e.configs], 'configs': [c.config for c in e.configs]}))"
)


def test_handwritten_autotune_cache_on_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tuned in the first process and stored; the second reads the winner and benchmarks nothing."""
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("INDUCTOR_LENS_TUNING_TABLE", "0")  # searched, whatever the shipped table holds
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _ONE_TASK], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=600, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["ok"] for r in runs] == [True, True]
    assert runs[0]["origins"] == ["tuned"] and runs[1]["origins"] == ["cache"]
    assert runs[0]["configs"] == runs[1]["configs"]
    (entry,) = (tmp_path / "handwritten-autotune").iterdir()
    stored = json.loads(entry.read_text())
    assert stored["kernel"] == "matmul_kernel" and stored["shape_class"]["M"] == 1024 and stored["time_ms"] > 0
    info = run_cli_process("cache", "info", "--json")
    (cache,) = [c for c in json.loads(info.stdout) if c["name"] == "handwritten"]
    assert cache["files"] == 1 and list(cache["parts"]) == ["matmul_kernel"]


def test_compare_on_cuda(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = run_cli_process(
        "compare", SAMPLES / "mlp.py", "--device", "cuda", "--dtype", "bf16", "--mode", "default",
        "--mode", "max-autotune-no-cudagraphs", "--no-handwritten", "--rounds", "2", "--out", out,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    comparison = json.loads((out / "lens.json").read_text())["comparison"]
    default_run = json.loads((out / "configs" / "default" / "lens.json").read_text())["run"]
    default_launches = [launch for graph in default_run["graphs"] for launch in graph["launches"]]
    default, autotune = comparison["configs"]
    for config in (default, autotune):
        assert config["status"] == "ok" and config["warm_compile_s"] < config["cold_compile_s"]
        assert config["latency"]["median_ms"] > 0 and len(config["rounds"]) == 2
        assert all(r["compiled"]["median_ms"] > 0 and r["error"] is None for r in config["rounds"])
        assert config["peak_bytes"] > 0 and config["device"].startswith("NVIDIA")
    # max-autotune turns the bf16 matmuls into Triton templates, picked by the autotuner
    assert default["kernels"].get("extern") == 2 and autotune["kernels"].get("triton template") == 2
    assert len(autotune["autotune"]) == 2
    (diff,) = comparison["diffs"]
    kinds = [c["kind"] for c in diff["changes"]]
    # both matmuls changed (extern -> template); how GELU is fused (epilogue, prologue, or its own kernel) is the
    # autotuner's pick, and decides whether the changes come as one regrouped group or several
    assert kinds and set(kinds) <= {"changed", "regrouped"}, kinds
    externs = {launch["position"] for launch in default_launches if launch["kind"] == "extern"}
    assert externs and externs <= {p for c in diff["changes"] for p in c["before"]["launches"]}
    assert all(c["before"]["time_us"] and c["after"]["time_us"] for c in diff["changes"])


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graph_modes_are_timed(tmp_path: Path, mode: str) -> None:
    """Under CUDA graphs every replayed kernel is tied to its launch and every Triton kernel timed alone."""
    result = run_cli_process(
        "compile", SAMPLES / "block.py", "--device", "cuda", "--mode", mode, "--no-handwritten", "--out", tmp_path / "r"
    )
    assert result.code == 0, result.stderr
    run = json.loads((tmp_path / "r" / "lens.json").read_text())["run"]
    bench = run["bench"]
    step, use = bench["step"], bench["cudagraphs"]
    assert step["replayed_us"] and step["attributed_us"] >= 0.95 * step["total_us"]
    assert "(exactly, from the same code profiled without CUDA graphs)" in step["method"]
    assert use["graphs_recorded"] >= 1 and use["without_graphs"]["median_ms"] > 0 and not use["errors"]
    assert all(launch["timing"] for g in run["graphs"] for launch in g["launches"])
    kernels = [k for g in run["graphs"] for k in g["kernels"]]
    assert kernels and all(k["timing"]["isolated"]["samples"] > 0 for k in kernels)
