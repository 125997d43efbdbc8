"""One rank of several times a model step with the same count of calls on every rank (worker/measure.py
``gpu_step_time``): with a collective in the step, do_bench's per-rank budget would leave one rank waiting.

Two processes on the one GPU of the test machine, a gloo group (NCCL refuses two ranks on one device), a step
that all-reduces a CUDA tensor: both ranks must return, with the same number of samples.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from typing import Any


def _rank(rank: int, port: int, results: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist

    from inductor_lens.worker.measure import gpu_step_time

    dist.init_process_group("gloo", rank=rank, world_size=2)
    tensor = torch.ones(1 << 20, device="cuda")
    # rank 1's step is 8 times longer: do_bench would give the ranks different repetition counts
    work = torch.ones(1 << (22 if rank else 19), device="cuda")

    def step() -> None:
        work.mul_(1.0)
        dist.all_reduce(tensor)

    timing = gpu_step_time(step)
    results.put((rank, timing.samples, timing.method))
    dist.destroy_process_group()


def test_every_rank_makes_the_same_count_of_calls() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=_rank, args=(rank, port, results)) for rank in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]
    got = sorted(results.get(timeout=5) for _ in range(2))
    assert [samples for _, samples, _ in got] == [100, 100]
    assert "the same count on every rank" in got[0][2]
