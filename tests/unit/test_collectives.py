"""The collectives of the profiled steps, wherever they ran (bench/collectives.py): DDP's all-reduce runs in its
hooks, outside every compiled graph, so only the profiler's trace has it. On a CPU, gloo's own work ranges (the
events below are those of a real two-rank ``compile samples/ddp_mlp.py --nproc 2 --train`` under gloo, torch
2.13: one ``gloo:all_reduce`` per step); on a GPU, NCCL's kernels, named as NCCL 2.19 and later names them."""

from __future__ import annotations

import pytest

from inductor_lens.bench.collectives import collectives_per_step


def _event(name: str, cat: str, dur: float) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "ts": 0.0, "dur": dur}


def test_gloos_work_ranges_per_step() -> None:
    events = [_event("gloo:all_reduce", "user_annotation", 2000.0 + i) for i in range(20)]
    events += [_event("c10d::allreduce_", "cpu_op", 34.0)] * 20  # the call that enqueued it: not the work
    events += [_event("ProfilerStep#0", "user_annotation", 9000.0)]
    (found,) = collectives_per_step(events, 20, "cpu")
    assert (found.op, found.backend, found.calls_per_step) == ("all_reduce", "gloo", 1.0)
    assert found.us_per_step == pytest.approx(sum(2000.0 + i for i in range(20)) / 20)
    assert "gloo's own work ranges" in found.method and "20 profiled steps" in found.method


def test_nccls_kernels_per_step_by_op_the_most_time_first() -> None:
    events = [_event("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", 50.0)] * 4
    events += [_event("ncclKernel_ReduceScatter_RING_LL_Sum_bf16", "kernel", 120.0)] * 2
    events += [_event("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", 10.0)] * 2
    events += [_event("triton_poi_fused_add_0", "kernel", 999.0), _event("nccl:all_reduce", "user_annotation", 5.0)]
    found = collectives_per_step(events, 2, "cuda")
    assert [(c.op, c.backend, c.calls_per_step, c.us_per_step) for c in found] == [
        ("reduce_scatter", "NCCL", 1.0, 120.0), ("all_reduce", "NCCL", 2.0, 100.0), ("all_gather", "NCCL", 1.0, 10.0)]  # fmt: skip
    assert collectives_per_step(events, 0, "cuda") == ()
    assert collectives_per_step([_event("triton_poi_fused_add_0", "kernel", 9.0)], 2, "cuda") == ()
