"""Several ranks on a CPU (gloo): ``compile --nproc 2`` of a DDP model, and ``run -- torchrun`` of a script whose
ranks compile differently. Each launches two model processes under torch.distributed.run (about 25 s on 2 cores)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from ..conftest import run_cli_process

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

# Rank 1 takes another branch: the same frame, other code; both all-reduce the same tensor. The guard on the rank
# (G['rank'] == 1) is each rank's own value, not a divergence of its own.
SCRIPT = """
import torch, torch.distributed as dist
from torch import nn
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
def step(x):
    y = model(x)
    s = y.sum(0)
    dist.all_reduce(s)
    return (y * s).relu() if rank == 1 else y * s
compiled = torch.compile(step)
with torch.no_grad():
    for _ in range(3):
        compiled(torch.randn(8, 32))
dist.destroy_process_group()
"""


def test_compile_nproc_2_of_a_ddp_model(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    result = run_cli_process(
        "compile",
        SAMPLES / "ddp_mlp.py",
        "--nproc",
        "2",
        "--train",
        "--device",
        "cpu",
        "--no-handwritten",
        "--out",
        out,
    )
    assert result.code == 0, result.stderr
    assert "inductor-lens: the ranks compiled the same" in result.stderr
    assert result.stdout.strip() == f"report: {out / 'index.html'}"
    # the landing page first, from the light pass; then rank 0's full report alone, standing for rank 1
    assert f"] landing page written: {out / 'index.html'} (next: the full report of rank(s) 0)\n" in result.stderr
    assert "; full reports: rank(s) 0\n" in result.stderr
    ranks = json.loads((out / "ranks.json").read_text(encoding="utf-8"))["ranks"]
    assert [(r["rank"], r["folder"], r["status"]) for r in ranks["ranks"]] == [
        (0, "rank0", "ok"),
        (1, "rank1", "ok"),
    ]
    assert ranks["launch"].startswith("compile --nproc 2: python -m torch.distributed.run --standalone")
    for rank in (0, 1):
        capture = out / f"rank{rank}" / "capture"
        # torch names the log after the rank once the process group is up: it was, before the model file loaded
        assert [
            p.name.startswith(f"dedicated_log_torch_trace_rank_{rank}_")
            for p in (capture / "trace").iterdir()
        ] == [True]
    run = json.loads((out / "rank0" / "lens.json").read_text(encoding="utf-8"))["run"]
    assert [g["kind"] for g in run["graphs"]] == ["forward", "backward"]
    assert run["capture"]["status"] == "ok" and run["capture"]["accuracy"]["within_tolerance"]
    assert run["title"] == "ddp_mlp · rank 0"
    landing = (out / "index.html").read_text(encoding="utf-8")
    assert "All ranks compiled the same (2 ranks)" in landing
    assert "Compiled step" in landing and "Profiled step, in compiled code" in landing
    # DDP's gradient all-reduce runs in its hooks, outside the graphs: the profiled steps show it, once a step
    assert landing.count("all_reduce (gloo) x1: ") >= 2
    # its bytes, from the one step each rank profiled with shapes after the timed ones: DDP's one bucket, every
    # parameter's gradient in float32 (64x256 + 256 + 256x64 + 64 elements), on both ranks
    assert landing.count("all_reduce (gloo) x1: ") == landing.count(" µs, 132.4 KB") and "— bytes" not in landing
    assert "one more step profiled after the timed ones with the profiler" in landing
    assert all((out / f"rank{rank}" / "capture" / "profile_collective_sizes.json").is_file() for rank in (0, 1))
    assert [r["report"] for r in ranks["ranks"]] == [True, False]  # rank 0 stands for rank 1
    assert not (out / "rank1" / "lens.json").exists()
    # `report OUT --rank 1`: rank 1's report on demand, from its capture beside the landing page
    again = run_cli_process("report", out, "--rank", "1")
    assert again.code == 0, again.stderr
    assert "full reports: rank(s) 0, 1" in again.stderr and "the ranks compiled the same" in again.stderr
    run = json.loads((out / "rank1" / "lens.json").read_text(encoding="utf-8"))["run"]
    assert [g["kind"] for g in run["graphs"]] == ["forward", "backward"]
    assert run["capture"]["status"] == "ok" and run["capture"]["accuracy"]["within_tolerance"]
    assert 'href="rank1/index.html"' in (out / "index.html").read_text(encoding="utf-8")


def test_run_under_torchrun_where_one_rank_compiles_differently(tmp_path: Path) -> None:
    script = tmp_path / "branchy.py"
    script.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    out = tmp_path / "report"
    result = run_cli_process(
        "run", "--no-bench", "--no-handwritten", "--out", out, "--",
        "torchrun", "--standalone", "--nproc-per-node", "2", script, cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert "inductor-lens: the ranks diverged: graphs, kernels" in result.stderr
    landing = (out / "index.html").read_text(encoding="utf-8")
    assert "The ranks diverged: graphs, kernels differ." in landing
    assert (
        "<b>Rank-dependent code</b>: graph 0/0 inference was compiled to other code on rank 1 than on rank 0: "
        "cpp_fused_mul_relu_2 only on rank 1; cpp_fused_mul_2 only on rank 0; the compile reads the rank "
        "(EQUALS_MATCH: G[&#39;rank&#39;] == &lt;rank&gt;): code that branches on the rank"
    ) in landing
    for rank in (0, 1):
        run = json.loads((out / f"rank{rank}" / "lens.json").read_text(encoding="utf-8"))["run"]
        assert run["capture"]["command"] == f"python {script}"
        assert [c["target"] for c in run["capture"]["compile_calls"]] == ["step"]
