"""The collectives of the profiled steps, wherever they ran (bench/collectives.py): DDP's all-reduce runs in its
hooks, outside every compiled graph, so only the profiler's trace has it. On a CPU, gloo's own work ranges (the
events below are those of a real two-rank ``compile samples/ddp_mlp.py --nproc 2 --train`` under gloo, torch
2.13: one ``gloo:all_reduce`` per step); on a GPU, NCCL's kernels, named as NCCL 2.19 and later names them."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inductor_lens.bench.collectives import collectives_per_step, dtype_bytes, message_bytes
from inductor_lens.records.ranks import RankedRun, RankSummary
from inductor_lens.report.ranks_view import collective_text, ranks_page


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


# --- bytes ------------------------------------------------------------------------------------------------------
# tests/fixtures/cpu-torch2.13-ddp-split.tar.gz (PROVENANCE.md): rank 0 of a real two-rank DDP job on gloo (torch
# 2.13), two profiled steps, its collectives' events as the profiler wrote them: once as the project profiles
# (no shapes), once with record_shapes=True. DDP's four 1 MB buckets: four all_reduce calls a step.


def _profile(unpacked: Callable[[str], Path], shapes: bool) -> list[dict[str, Any]]:
    path = unpacked("cpu-torch2.13-ddp-split") / f"profile-shapes{int(shapes)}.json"
    events: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    return events


def test_gloos_bytes_are_its_ranges_recorded_shapes(unpacked: Callable[[str], Path]) -> None:
    events = _profile(unpacked, shapes=True)
    ranges = [e for e in events if e["name"] == "gloo:all_reduce"]
    assert len(ranges) == 8 and {e["args"]["Input type"][0] for e in ranges} == {"float"}
    expected = sum(math.prod(e["args"]["Input Dims"][0]) * 4 for e in ranges) / 2  # float32: 4 bytes
    (found,) = collectives_per_step(events, 2, "cpu")
    assert (found.op, found.backend, found.calls_per_step) == ("all_reduce", "gloo", 4.0)
    assert found.bytes_per_step == expected == (262656 * 4 + 262144 * 2 + 512 * 2) * 4 / 2
    assert found.bytes_per_s is None  # gloo's range is its thread's whole work, waits included: no bandwidth
    assert "Input Dims x Input type" in found.bytes_method
    assert collective_text(found) == f"all_reduce (gloo) x4: {found.us_per_step:.1f} µs, 3.2 MB"


def test_without_recorded_shapes_gloo_has_no_bytes_and_says_why(unpacked: Callable[[str], Path]) -> None:
    (found,) = collectives_per_step(_profile(unpacked, shapes=False), 2, "cpu")
    assert (found.calls_per_step, found.bytes_per_step) == (4.0, None)
    assert "record_shapes=True" in found.bytes_method
    assert collective_text(found).endswith("µs, — bytes")


def _nccl(dur: float, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "dur": dur, "args": args,
            "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"}  # fmt: skip


def test_nccls_bytes_are_the_record_param_comms_metadata_on_its_kernels() -> None:
    """No committed trace holds an NCCL kernel (the GPU runs kept their pages, not their profiles): the args below
    are the keys torch's profiler lists for a collective's kernel (torch/autograd/profiler_util.py,
    _EVENT_METADATA_KEYS: "Collective name", "dtype" as c10 names it, "In msg nelems", ...)."""
    meta = {"Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 4_194_304,
            "Out msg nelems": 4_194_304, "In split size": "[]", "Out split size": "[]", "Group size": 2,
            "Process Group Name": "0", "Process Group Ranks": "[0, 1]"}  # fmt: skip
    (found,) = collectives_per_step([_nccl(400.0, **meta), _nccl(200.0, **meta)], 2, "cuda")
    assert (found.op, found.calls_per_step, found.us_per_step) == ("all_reduce", 1.0, 300.0)
    assert found.bytes_per_step == 4_194_304 * 2  # bfloat16: 2 bytes
    assert found.bytes_per_s == pytest.approx(4_194_304 * 2 / 300e-6)
    assert collective_text(found) == "all_reduce (NCCL) x1: 300.0 µs, 8.4 MB, 28.0 GB/s"
    # a coalesced collective's kernel carries no metadata: the op's bytes are not known
    (partial,) = collectives_per_step([_nccl(400.0, **meta), _nccl(200.0)], 2, "cuda")
    assert partial.bytes_per_step is None and partial.bytes_per_s is None
    assert partial.bytes_method.startswith("no bytes: 1 of 2 calls")
    # the op is the one torch's metadata names: one NCCL kernel can run several ops
    generic = {**_nccl(50.0, **{**meta, "Collective name": "_allgather_base", "In msg nelems": 1024}),
               "name": "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"}  # fmt: skip
    (gather,) = collectives_per_step([generic], 1, "cuda")
    assert (gather.op, gather.bytes_per_step) == ("all_gather", 2048)


def test_dtype_sizes_by_every_name_a_trace_gives() -> None:
    names = {"Float": 4, "BFloat16": 2, "Half": 2, "Long": 8, "Double": 8, "Byte": 1, "Float8_e4m3fn": 1,
             "float": 4, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8, "signed char": 1, "bfloat16": 2}  # fmt: skip
    assert {name: dtype_bytes(name) for name in names} == names
    assert dtype_bytes("Undefined") is None
    assert message_bytes({"Input Dims": [[3, 4], []], "Input type": ["c10::Half", "Scalar"]}) == 24
    assert message_bytes({"Input Dims": [[3]], "Input type": ["QInt8x"]}) is None


def test_the_landing_page_gives_each_ranks_collectives_with_their_bytes_and_how_they_were_counted(
    unpacked: Callable[[str], Path],
) -> None:
    sized = collectives_per_step(_profile(unpacked, shapes=True), 2, "cpu")
    unsized = collectives_per_step(_profile(unpacked, shapes=False), 2, "cpu")
    older = tuple(replace(c, bytes_method="") for c in unsized)  # a report of run schema 17
    summaries = [RankSummary(rank, f"rank{rank}", step_collectives=found)
                 for rank, found in enumerate((sized, unsized, older))]  # fmt: skip
    page = ranks_page(RankedRun(title="t", created="c", tool_version="v", source_dir="s"), summaries)
    column = page.time_labels.index("Collectives per step")
    cells = [line.cells[column] for line in page.lines]
    assert cells == [collective_text(c) for found in (sized, unsized, older) for c in found]
    assert cells[0].endswith("µs, 3.2 MB") and cells[1].endswith("µs, — bytes")
    (row,) = [r for r in page.times if r.label == "Collectives per step"]  # the ranks' one group: rank 0's
    assert sized[0].bytes_method in row.title
    old_page = ranks_page(page.ranked, [summaries[2]])
    (row,) = [r for r in old_page.times if r.label == "Collectives per step"]
    assert "Bytes: not read by the version that wrote this report" in row.title


def test_a_cpu_ranks_bytes_come_from_the_one_step_it_profiled_with_shapes(unpacked: Callable[[str], Path]) -> None:
    """tests/fixtures/cpu-torch2.13-ddp-collective-sizes.tar.gz (PROVENANCE.md): rank 0 of a real two-rank
    ``compile samples/ddp_mlp.py --nproc 2 --train`` on gloo: its 20 timed steps (no shapes) and the one more step
    it profiled with record_shapes=True, their gloo ranges and step marks. The bytes are that step's, summed here
    from its ranges' own Input Dims x 4 (float32); calls and time are the timed steps'."""
    from inductor_lens.bench.profiled_step import profiled_step

    folder = unpacked("cpu-torch2.13-ddp-collective-sizes")
    sized = json.loads((folder / "profile_collective_sizes.json").read_text(encoding="utf-8"))["traceEvents"]
    timed = json.loads((folder / "profile_trace.json").read_text(encoding="utf-8"))["traceEvents"]
    sized_steps = [e for e in sized if str(e["name"]).startswith("inductor_lens_step_")]
    ranges = [e for e in sized if e["name"] == "gloo:all_reduce"]
    assert len(sized_steps) == 1 and len(ranges) == 1 and ranges[0]["args"]["Input type"] == ["float"]
    expected = sum(math.prod(e["args"]["Input Dims"][0]) * 4 for e in ranges) / len(sized_steps)
    assert expected == (64 * 256 + 256 + 256 * 64 + 64) * 4  # DDP's one bucket: every gradient
    timed_ranges = [e for e in timed if e["name"] == "gloo:all_reduce"]
    assert all("Input Dims" not in e.get("args", {}) for e in timed_ranges)  # the timed steps: no shapes
    step = profiled_step(folder / "profile_trace.json", "cpu")
    assert step is not None and step.steps == 20
    (found,) = step.collectives
    assert (found.op, found.backend, found.calls_per_step) == ("all_reduce", "gloo", 1.0)
    assert found.us_per_step == pytest.approx(sum(e["dur"] for e in timed_ranges) / 20)
    assert found.bytes_per_step == expected
    assert "one more step profiled after the timed ones" in found.bytes_method
    # the timed trace alone: no bytes, and the method says why
    (alone,) = collectives_per_step(timed, 20, "cpu")
    assert alone.bytes_per_step is None and "record_shapes=True" in alone.bytes_method


# Rank 0's NCCL kernels of 20 profiled steps on four H200s (tests/fixtures/PROVENANCE.md): DDP's gradient all-reduce
# (GPT-2) and FSDP2's all-gathers and reduce-scatters (Llama), as torch 2.11's profiler wrote them.
REAL_NCCL = {"h200x4-nccl-events-gpt2-ddp.json.gz": 20, "h200x4-nccl-events-llama-fsdp2.json.gz": 20}


@pytest.mark.parametrize("fixture", sorted(REAL_NCCL))
def test_nccls_calls_and_bytes_per_step_on_a_real_trace(fixture: str) -> None:
    import gzip

    path = Path(__file__).resolve().parents[1] / "fixtures" / fixture
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = REAL_NCCL[fixture]
    sizes = {"Float": 4, "BFloat16": 2, "Half": 2}
    expected: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") == "kernel" and str(event["name"]).startswith("nccl"):
            args = event["args"]
            entry = expected.setdefault(str(args["Collective name"]), [0, 0, 0.0])
            entry[0] += 1
            entry[1] += int(args["In msg nelems"]) * sizes[str(args["dtype"])]
            entry[2] += float(event["dur"])
    found = collectives_per_step(events, steps, "cuda")
    assert len(found) == len(expected) > 0
    by_count = sorted((c.calls_per_step, c.bytes_per_step, c.us_per_step) for c in found)
    wanted = sorted((n / steps, b / steps, us / steps) for n, b, us in expected.values())
    # Flat lists: pytest 9.2 refuses approx over nested tuples.
    assert [x for row in by_count for x in row] == pytest.approx([x for row in wanted for x in row])
    assert all(c.backend == "NCCL" for c in found)
