"""Report stage: which launch produced each buffer another launch reads.

call() reuses storage (``buf1 = buf0  # reuse``) and views it (``reinterpret_tensor``), so a read is
matched to the last launch before it that wrote the same storage. Reads with no earlier writer are
graph inputs: model inputs, parameters, or (backward) saved tensors and incoming gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import GraphRecord


@dataclass(frozen=True)
class Read:
    """One buffer a launch reads, and where its value came from."""

    name: str
    producer: int | None  # position of the launch that wrote it; None for a graph input
    kind: str | None  # its tensor type, where known


def storage(graph: GraphRecord, name: str) -> str:
    seen = set()
    while name in graph.aliases and name not in seen:
        seen.add(name)
        name = graph.aliases[name]
    return name


def reads_by_launch(graph: GraphRecord) -> dict[int, list[Read]]:
    writer: dict[str, int] = {}
    result: dict[int, list[Read]] = {}
    for launch in graph.launches:
        result[launch.position] = [
            Read(name, writer.get(storage(graph, name)), graph.buffers.get(name))
            for name in dict.fromkeys(launch.reads)
        ]
        for name in launch.writes:
            writer[storage(graph, name)] = launch.position
    return result


def output_producers(graph: GraphRecord) -> list[Read]:
    writer: dict[str, int] = {}
    for launch in graph.launches:
        for name in launch.writes:
            writer[storage(graph, name)] = launch.position
    return [
        Read(name, writer.get(storage(graph, name)), graph.buffers.get(name))
        for name in dict.fromkeys(graph.outputs)
    ]
