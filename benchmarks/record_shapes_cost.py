"""Cost of ``record_shapes=True`` on the profiled steps of a several-rank CPU job (gloo), stage 4 (bench).

The profiled steps of ``compile --nproc`` (worker/measure.py:profile_steps) and of ``run -- torchrun``
(worker/script_hooks.py) are profiled without shapes; gloo's ranges then carry no tensor sizes, and the landing
page's collectives have no bytes. This script measures what recording shapes costs on those steps: 2 processes,
gloo, a compiled DDP MLP trained as ``compile --train`` does (forward, backward, SGD step), then per round the two
variants alternately (the order swapping each round), each profiling 20 steps as profile_steps does:

- the profiled step as the report shows it: the mean of the step marks' durations in the exported trace;
- the wall time of the profile phase: profiling the steps and exporting the Chrome trace.

Run from the repository root:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/record_shapes_cost.py --rounds 5

Prints rank 0's numbers per round, then per variant the median over the rounds (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from inductor_lens.exchange.files import STEP_MARKS
from inductor_lens.worker.measure import PROFILED_STEPS


class MLP(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.nn.functional.gelu(layer(x))
        return x


def profile_phase(step: object, record_shapes: bool, trace: str) -> tuple[float, float, int]:
    """(mean profiled step in ms from the trace's step marks, wall time of profiling + export in s, gloo ops)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes) as prof:
        for index in range(PROFILED_STEPS):
            with record_function(f"{STEP_MARKS[0]}{index}"):
                step()  # type: ignore[operator]
    prof.export_chrome_trace(trace)
    wall = time.perf_counter() - started
    events = json.loads(Path(trace).read_text(encoding="utf-8"))["traceEvents"]
    marks = [e["dur"] for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(STEP_MARKS[0])]
    gloo = sum(1 for e in events if str(e.get("name", "")).startswith("gloo:"))
    return statistics.mean(marks) / 1000, wall, gloo


def worker(rank: int, args: argparse.Namespace, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = DistributedDataParallel(MLP(args.width, args.depth))
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch = torch.randn(args.batch, args.width, generator=torch.Generator().manual_seed(rank))

    def step() -> None:
        optimizer.zero_grad()
        compiled(batch).sum().backward()
        optimizer.step()

    for _ in range(5):
        step()
    results: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        for round_index in range(args.rounds):
            order = (False, True) if round_index % 2 == 0 else (True, False)
            for shapes in order:
                dist.barrier()
                results[shapes].append(profile_phase(step, shapes, f"{folder}/trace-{rank}.json"))
                if rank == 0:
                    step_ms, wall, gloo = results[shapes][-1]
                    print(f"round {round_index} record_shapes={shapes}: step {step_ms:.3f} ms, "
                          f"profile phase {wall:.3f} s, {gloo} gloo ranges", flush=True)  # fmt: skip
    if rank == 0:
        for shapes in (False, True):
            steps = [r[0] for r in results[shapes]]
            walls = [r[1] for r in results[shapes]]
            print(f"record_shapes={shapes}: profiled step {statistics.median(steps):.3f} ms "
                  f"({min(steps):.3f}-{max(steps):.3f}), profile phase {statistics.median(walls):.3f} s "
                  f"({min(walls):.3f}-{max(walls):.3f}) over {args.rounds} rounds")  # fmt: skip
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, MLP {args.depth}x{args.width}, batch {args.batch}")
    mp.spawn(worker, args=(args, 29500 + os.getpid() % 1000), nprocs=2)


if __name__ == "__main__":
    main()
