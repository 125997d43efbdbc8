"""Parse stage: the TORCH_TRACE ``artifact`` kind, dispatched on the artifact's name through the registry, and
the readers of the named artifacts this version shows (declared in ``readers.py``): the provenance maps,
``dynamo_graph_break_reason``, ``recompile_reasons``, ``triton_kernel_info`` (per Triton kernel, the configs
Inductor tried or fixed, coordinate descent, autotune cache state and compile time) and the lookups in
AOTAutograd's cache and the FX graph cache (``aotautograd_cache_*``, ``fx_graph_cache_*``). The IR stages logged
as artifacts are read in ``trace_kinds.py``.
Records logged outside any compile (no compile id) are skipped, except ``triton_kernel_info`` from a
process that ran a graph's ``output_code.py`` (a sibling log in the same trace folder): it carries the
config each kernel's autotuner chose at run time (``best_config``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..records import CacheLookup
from ..records.wording import CACHE_COMPONENT_CHARS, CACHE_COMPONENTS_KEPT
from . import compat, registry
from .diagnostics import Diagnostics
from .trace_records import TraceRecord, TraceState, json_type


def read_artifact(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """The ``artifact`` kind: dispatched on the artifact's name."""
    name = record.body.get("name") if isinstance(record.body, dict) else None
    if not isinstance(name, str):
        record.skip(diagnostics, "has no name string")
        return
    parser = state.registry.find("trace artifact", name)
    if parser is None:
        diagnostics.warn(record.where, registry.not_known("trace artifact", name))
    elif parser.parse is not None:
        registry.run(parser, record.where, diagnostics, record, state, diagnostics)


def read_node_mappings(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    _graph_json(record, state, diagnostics, "inductor_provenance_tracking_node_mappings", "mappings")


def read_kernel_stack_traces(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    _graph_json(
        record, state, diagnostics, "inductor_provenance_tracking_kernel_stack_traces", "stack_traces"
    )


def _graph_json(
    record: TraceRecord, state: TraceState, diagnostics: Diagnostics, name: str, attribute: str
) -> None:
    """Provenance artifacts belong to the graph whose output code was logged just before them."""
    graph = state.last_graph
    if graph is None or graph.compile_id != record.compile_id or not record.payload:
        return
    data = record.json_payload(diagnostics, name)
    if data is not None:
        setattr(graph, attribute, data)


def read_cache_lookup(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """A lookup in AOTAutograd's cache or Inductor's FX graph cache (``compat.CACHE_LOOKUP_ARTIFACTS``), filed
    under its compile id. An FX graph cache key also names the graph just logged: profiles name graphs by it."""
    compile_id = record.compile_id
    name = record.body.get("name") if isinstance(record.body, dict) else None
    if compile_id is None or not record.payload or name not in compat.CACHE_LOOKUP_ARTIFACTS:
        return
    data = record.json_payload(diagnostics, str(name))
    if data is None:
        return
    for key, types in compat.CACHE_LOOKUP_FIELDS.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            diagnostics.warn(
                record.where,
                f"line {record.line}: artifact {name} {key} is a JSON {json_type(value)}; left out",
            )
            del data[key]
    cache, result = compat.CACHE_LOOKUP_ARTIFACTS[name]
    components = [_readable_component(str(c)) for c in data.get("components") or ()]
    kept = components[:CACHE_COMPONENTS_KEPT]
    nanoseconds = data.get("time_saved_ns" if result == "hit" else "time_taken_ns")
    lookup = CacheLookup(
        cache=cache,
        result=result,
        compile_id=compile_id,
        key=data.get("key"),
        detail=data.get("cache_status_detailed") or "",
        bypass_reason=data.get("cache_bypass_reason") or "",
        seconds=nanoseconds / 1e9 if nanoseconds is not None else None,
        components=tuple(c[:CACHE_COMPONENT_CHARS] for c in kept),
        components_total=len(components),
        components_cut=sum(len(c) > CACHE_COMPONENT_CHARS for c in kept),
    )
    state.summary.frame(compile_id).cache_lookups.append(lookup)
    graph = state.last_graph
    if cache == "FX graph" and lookup.key and graph is not None and graph.compile_id == compile_id:
        graph.cache_key = lookup.key
    traced = state.summary.traced_graphs
    if cache == "FX graph" and traced and traced[-1].compile_id == compile_id and traced[-1].fx_cache is None:
        traced[-1] = replace(traced[-1], fx_cache=result)


# Control characters (and U+FFFD, what torch's decoding left of other bytes) in a component: a pickle printed as text.
_BINARY = re.compile("[\x00-\x08\x0b-\x1f\x7f\ufffd]")


def _readable_component(text: str) -> str:
    """A key component as shown: ``[hash] autograd_config: <pickled bytes>`` keeps its name, not its bytes."""
    if not _BINARY.search(text):
        return text
    name = text.split(": ", 1)[0]
    return f"{name}: <{len(text):,} characters of binary data (a pickled value), not shown>"


def read_graph_break(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is not None and record.payload:
        state.summary.frame(compile_id).graph_breaks.append(record.payload)


def read_recompile_reasons(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is not None and record.payload:
        state.summary.frame(compile_id).recompile_reasons.extend(
            line.strip() for line in record.payload.splitlines() if line.strip()
        )


# triton_kernel_info fields holding configs: lists of [name, value] pairs (or, in older releases, text).
_CONFIG_FIELDS = ("best_config", "only_config", "coordesc_tuning_start_config")


def read_kernel_info(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """Per compile id; a record without one comes from another process that loaded a graph's module (a
    sibling log: ``python output_code.py``, a compile worker) and is filed under that module's folder."""
    compile_id = record.compile_id
    if not record.payload:
        return
    if compile_id is None:
        folder = _module_folder(record, state)
        if folder is None:
            return
        kernels = state.summary.module_kernel_info.setdefault(folder, {})
    else:
        kernels = state.summary.frame(compile_id).kernel_info
    info = record.json_payload(diagnostics, "triton_kernel_info")
    if info is None:
        return
    for kernel, entry in info.items():
        if not isinstance(entry, dict):
            diagnostics.warn(
                record.where,
                f"line {record.line}: triton_kernel_info of {kernel} is a JSON {json_type(entry)}; skipped",
            )
            continue
        entry = dict(entry)
        for key in (*_CONFIG_FIELDS, "autotune_cache_state"):
            value = entry.get(key)
            if key == "autotune_cache_state":
                wrong = value is not None and not isinstance(value, str)
            else:
                wrong = isinstance(value, list) and not all(
                    isinstance(pair, list) and len(pair) == 2 for pair in value
                )
            if wrong:
                diagnostics.warn(
                    record.where,
                    f"line {record.line}: triton_kernel_info {key} of {kernel} has another shape; left out",
                )
                del entry[key]
        if compile_id is None:
            entry["logged_in"] = record.where
        kernels[kernel] = entry


def _module_folder(record: TraceRecord, state: TraceState) -> tuple[str, str] | None:
    """(run folder, graph folder) of the ``output_code.py`` on the record's stack, if any."""
    stack = record.meta.get("stack")
    for frame in stack if isinstance(stack, list) else ():
        filename = frame.get("filename") if isinstance(frame, dict) else None
        path = state.strings.get(filename) if isinstance(filename, int) else filename
        if isinstance(path, str) and path.endswith("/output_code.py"):
            parts = path.split("/")
            return (parts[-4] if len(parts) >= 4 else "", parts[-2])
    return None
