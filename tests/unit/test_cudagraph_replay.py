"""CUDA-graph modes: kernels replayed from a graph tied to the launches that recorded them (bench/graph_replay.py)."""

from __future__ import annotations

import pytest

from inductor_lens.bench import attach_measurements
from inductor_lens.bench.graph_replay import tie_replay
from inductor_lens.parse import parse_debug_folder

RO_CASE = "gpt2_small_ro"  # HF GPT-2 under reduce-overhead on an H100: one cudaGraphLaunch per step


def test_reduce_overhead_replay_is_tied_to_launches(unpacked) -> None:
    """Before: 13 of 252 us of device time per step tied to launches (Triton names found by uniqueness)."""
    root = unpacked(RO_CASE)
    run = attach_measurements(parse_debug_folder(root, strict=True), root)
    step = run.bench.step
    assert step.steps == 20
    assert step.total_us == pytest.approx(251.9585)
    assert step.replayed_us == pytest.approx(250.261)  # all but the input copy into the graph's static buffer
    assert step.attributed_us == pytest.approx(step.replayed_us)
    assert step.attributed_us / step.total_us > 0.99
    assert step.approximate_us == 0.0  # every run between two Triton kernels held one extern launch
    assert list(step.unattributed) == [next(n for n in step.unattributed if "multi_tensor_apply_kernel" in n)]
    assert "aligning each replay's kernel sequence" in step.method and "(by order)" in step.method
    (graph,) = run.graphs
    assert all(launch.timing is not None for launch in graph.launches)  # 24 launches, 9 Triton, 15 extern
    by_position = {launch.position: launch for launch in graph.launches}
    assert by_position[6].aten_op and "efficient" in by_position[6].target  # SDPA: the fmha kernel
    assert by_position[6].timing.median_us == pytest.approx(32.82, abs=0.01)
    assert by_position[11].timing.calls == 2.0  # split-K mm: the gemm and its reduction
    assert by_position[24].timing.median_us == pytest.approx(30.2245)  # the lm_head mm, last in the replay
    assert sum(launch.timing.share for launch in graph.launches) == pytest.approx(0.993, abs=0.005)


def test_replay_tie_uses_known_kernels_exactly(unpacked) -> None:
    """With each launch's own kernels known (the graph-free profile), a replay that lost a kernel still
    ties every other kernel to its launch, and nothing is approximate."""
    root = unpacked(RO_CASE)
    (graph,) = parse_debug_folder(root, strict=True).graphs
    names: list[str] = []
    known: dict[tuple[str, int], list[str]] = {}
    for launch in graph.launches:
        issued = [launch.target] if launch.kind == "triton" else [f"gemm_{launch.position}"]
        if launch.position in (11, 22):
            issued = [f"gemm_{launch.position}", "splitk_reduce"]
        known[(graph.id, launch.position)] = issued
        names.extend(issued)
    tie = tie_replay(names, graph, known)
    assert tie.approximate == frozenset() and all(owner is not None for owner in tie.owners)
    assert tie.owners[names.index("gemm_11") + 1] == (graph.id, 11)
    dropped = names[:5] + names[6:]  # a kernel the replay does not have
    tie = tie_replay(dropped, graph, known)
    assert sum(owner is None for owner in tie.owners) == 0
    assert tie.owners[-1] == (graph.id, 24)
    # without the known kernels: two extern launches in one run of two kernels, one each, in order
    tie = tie_replay(names, graph)
    sdpa, mm = names.index("gemm_6"), names.index("gemm_7")
    assert (tie.owners[sdpa], tie.owners[mm]) == ((graph.id, 6), (graph.id, 7)) and not tie.approximate


def test_graph_free_profile_ties_replays_exactly(unpacked) -> None:
    """The block under reduce-overhead on an H100, with the graph-free profile the model process now takes."""
    root = unpacked("h100-block-ro-graphfree")
    run = attach_measurements(parse_debug_folder(root, strict=True), root)
    step = run.bench.step
    assert step.replayed_us == pytest.approx(step.attributed_us)
    assert step.attributed_us / step.total_us > 0.95  # the rest: the input copy into the graph's static buffers
    assert step.approximate_us == 0.0 and "(exactly, from the same code profiled without CUDA graphs)" in step.method
    assert all(launch.timing is not None for graph in run.graphs for launch in graph.launches)
    triton = [kernel for graph in run.graphs for kernel in graph.kernels]
    assert triton and all(kernel.timing and kernel.timing.isolated for kernel in triton)
    assert all("get_args()" in kernel.timing.isolated.method for kernel in triton)
    use = run.bench.cudagraphs
    assert (use.graphs_recorded, use.rerecords, use.skips) == (1, 0, 0)
    assert use.without_graphs.median_ms > use.with_graphs.median_ms  # 0.527 against 0.402 ms
    assert use.graph_free_calls >= 1 and use.errors == ()
    assert use.tie.startswith("every replayed kernel matched")


def test_a_damaged_graph_free_profile_falls_back_to_order(fixture_copy) -> None:
    root = fixture_copy("h100-block-ro-graphfree")
    (root / "profile_graph_free.json").write_text('{"traceEvents": [1, 2')
    run = attach_measurements(parse_debug_folder(root, strict=True), root)
    step = run.bench.step
    assert step.attributed_us == pytest.approx(379.4635) and step.method.endswith("(by order)")
    assert run.bench.cudagraphs.tie.startswith("replayed kernels aligned to the launches by order")
