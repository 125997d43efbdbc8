"""Records, ranks (summaries): what is compared across ranks, reduced from one rank's CompileRun
(``summarize``) or from the light pass over its logs (ranked_light.py, through ``summary_of`` and
``rank_graph``): its compile ids, graphs (their normalised code, launches and collectives), guards, cache outcomes,
graph breaks and times.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from .frames import CacheLookup, DynamoFrame, GraphBreak
from .graph import GraphRecord
from .rank_normalise import code_hash, normalized_guards
from .ranks import Collective, RankGraph, RankSummary
from .run import CompileRun

# The collective ops of torch.distributed as they appear in FX graphs and output code: the functional
# collectives (``_c10d_functional.all_reduce``), the legacy in-place ops (``c10d.allreduce_``).
_COLLECTIVE = re.compile(r"(?:^|\.)(?:_c10d_functional|c10d_functional|c10d)\.(?P<op>\w+)")
_NOT_COLLECTIVES = {"wait_tensor", "wait"}
_FX_NODE = re.compile(r'^\s*\w+: "(?P<type>[^"]*)" = torch\.ops\.(?P<target>[\w.]+)\(', re.MULTILINE)


def summarize(
    rank: int, folder: str, run: CompileRun, *, status: str = "ok", error: str | None = None
) -> RankSummary:
    """The comparable facts of one rank's run."""
    bench = run.bench
    end_to_end = bench.end_to_end if bench is not None else None
    step = bench.step if bench is not None else None
    kernel_us = {kernel.name: kernel.timing.in_context_us for _, kernel in run.all_kernels() if kernel.timing}
    graphs = numbered(
        rank_graph(graph_key(g), g.id, g.output_code, [launch.label for launch in g.launches], _fx_text(g))
        for g in run.graphs
    )
    summary = summary_of(rank, folder, run.frames, graphs, run.graph_breaks, status=status, error=error)
    return replace(
        summary,
        cold_compile_s=run.capture.cold_compile_s if run.capture else None,
        step_ms=end_to_end.compiled.median_ms if end_to_end is not None else None,
        step_device_us=step.total_us if step is not None else None,
        step_collectives=step.collectives if step is not None else (),
        kernel_us=kernel_us,
    )


def summary_of(
    rank: int,
    folder: str,
    frames: Sequence[DynamoFrame],
    graphs: Sequence[RankGraph],
    breaks: Sequence[GraphBreak],
    *,
    status: str = "ok",
    error: str | None = None,
) -> RankSummary:
    """The comparable facts of a rank from its frames, graphs and graph breaks (a full run's or the light pass's)."""
    return RankSummary(
        rank=rank,
        folder=folder,
        status=status,
        error=error,
        compile_ids=tuple(f.compile_id for f in frames),
        recompile_reasons={f.compile_id: f.recompile_reasons for f in frames if f.recompile_reasons},
        graphs=tuple(graphs),
        guards={f.compile_id: normalized_guards(f.guards) for f in frames if f.guards},
        guard_counts={f.compile_id: f.guard_count for f in frames},
        cache={f.compile_id: state for f in frames if (state := cache_state(f.cache_lookups, f.cache))},
        graph_breaks=tuple(_break_label(b.location.label if b.location else "", b.reason) for b in breaks),
        compile_times={f.compile_id: f.compile_time_s for f in frames},
    )


def cache_state(lookups: Sequence[CacheLookup], metrics_state: str | None) -> str | None:
    """A compile's cache outcome: its lookups in order (``AOTAutograd miss, FX graph miss``), else the counts."""
    if lookups:
        return ", ".join(f"{lookup.cache} {lookup.result}" for lookup in lookups)
    return metrics_state


def rank_graph(
    key: str,
    graph_id: str,
    output_code: str,
    kernels: Sequence[str],
    fx_text: str | None,
    digest: str | None = None,
) -> RankGraph:
    """A graph as compared across ranks, from its output code (``digest``: its code_hash, where known), its
    launches and its FX graph's text."""
    found = [(_collective_op(t["target"]), t["type"]) for t in _FX_NODE.finditer(fx_text or "")]
    if fx_text is None:
        found = [(_collective_op(k), "") for k in kernels]
    return RankGraph(
        key=key,
        graph_id=graph_id,
        code_hash=digest if digest is not None else code_hash(output_code),
        kernels=tuple(kernels),
        collectives=tuple(Collective(op, key, _plain_type(tensor)) for op, tensor in found if op),
    )


def numbered(graphs: Iterable[RankGraph]) -> tuple[RankGraph, ...]:
    """Each graph's place among the graphs of its key (``nth``), in the order given."""
    seen: dict[str, int] = {}
    out = []
    for graph in graphs:
        nth = seen.get(graph.key, 0)
        seen[graph.key] = nth + 1
        out.append(RankGraph(graph.key, graph.graph_id, graph.code_hash, graph.kernels, graph.collectives, nth))
    return tuple(out)


def graph_key(graph: GraphRecord) -> str:
    return f"{graph.compile_id} {graph.kind}" if graph.compile_id else graph.id


def collectives_of(graph: GraphRecord) -> tuple[Collective, ...]:
    """The collective ops of a graph, in order: from the FX graph Inductor received, else from the launches."""
    return rank_graph(graph_key(graph), graph.id, "", [lt.aten_op or lt.target for lt in graph.launches],
                      _fx_text(graph)).collectives  # fmt: skip


def _fx_text(graph: GraphRecord) -> str | None:
    fx = graph.fx_graph("readable") or graph.fx_graph("transformed")
    return fx.code if fx is not None else None


def _plain_type(text: str) -> str:
    """``f32[32]`` of an FX type that may carry strides and a device (``f32[32][1]cuda:0``)."""
    match = re.match(r"^[a-z]\w*\[[^\]]*\]", text)
    return match.group(0) if match else text


def _collective_op(target: str) -> str | None:
    match = _COLLECTIVE.search(target)
    if match is None:
        return None
    op = match["op"].rstrip("_")
    return None if op in _NOT_COLLECTIVES else op


def _break_label(location: str, reason: str) -> str:
    return f"{location}: {reason}" if location else reason
