"""Parse stage: a bare TORCH_TRACE log's graphs (no debug folder), rebuilt from the payloads that stand for a
graph folder's files (``compat.TRACE_GRAPH_FILES``), each closed by its output code and given its kind.
"""

from __future__ import annotations

from . import compat
from .trace_records import TracedGraph, TraceRecord, TraceState


def keep_graph_file(record: TraceRecord, state: TraceState, file_name: str) -> None:
    """A payload that stands for a graph folder's file: held for the compile id until its output code,
    which closes the graph; its kind is ``traced_graph_kind``'s."""
    compile_id = record.compile_id
    if compile_id is None or record.payload is None:
        return
    files = state.pending_files.setdefault(compile_id, {})
    files[file_name] = compat.plain_fx_types(record.payload) if file_name.startswith("fx_graph_") else record.payload
    if file_name != "output_code.py":
        return
    del state.pending_files[compile_id]
    kind = traced_graph_kind(compile_id, files, state)
    where = f"{record.where}:{record.line}"
    state.summary.traced_graphs.append(TracedGraph(compile_id, kind, where, files))


def traced_graph_kind(compile_id: str, files: dict[str, str], state: TraceState) -> str:
    """The kind of the graph whose output code closes now, from the AOTAutograd graphs logged since the compile
    id's last output code. One compile id can make several graphs: DDP's optimizer splits a frame into one
    submodule per bucket, each traced by AOTAutograd (joint, forward and backward graphs logged) and its forward
    compiled at once, while each backward is compiled when it first runs, with no AOTAutograd graph logged
    before it. So: an inference graph logged since: inference; a forward graph: forward. With none (a backward,
    or graphs served from AOTAutograd's cache), the graph's own inputs tell: a backward takes the gradients of
    the forward's outputs (``tangents_1``), a forward its inputs as ``primals_1``; else a graph after a forward
    of this compile id is its backward; else unknown."""
    frame = state.summary.frames.get(compile_id)
    stages = frame.stages if frame else []
    since = stages[state.stages_closed.get(compile_id, 0):]
    state.stages_closed[compile_id] = len(stages)
    kinds = {compat.TRACE_AOT_GRAPH_KINDS[s.name] for s in since if s.name in compat.TRACE_AOT_GRAPH_KINDS}
    if "inference" in kinds:
        return "inference"
    if "forward" in kinds:
        return "forward"
    texts = (files.get("fx_graph_readable.py"), files.get("fx_graph_transformed.py"))
    signature = next((line for text in texts for line in (text or "").splitlines()
                      if line.strip().startswith("def forward(self")), "")  # fmt: skip
    if "tangents_" in signature:
        return "backward"
    if "primals_" in signature:
        return "forward"
    if any(g.compile_id == compile_id and g.kind == "forward" for g in state.summary.traced_graphs):
        return "backward"
    return "unknown"
