"""Parse stage: Inductor's kernel information (torch 2.14+), the library calls' tensors as Inductor recorded them.

The model process keeps each compile's ``create_kernel_information_json()`` in capture/kernel_information.json
(``worker/capture.py``). Each entry is keyed ``"<kernel>:<debug handle>"``, the handle call() prints in its
``# [Provenance debug handles]`` comment before the launch (``Launch.handle``), and an extern kernel's entry
holds its input_shapes, input_dtypes, output_shape and output_dtype. They become ``Launch.tensors``, which the
costs read before the types worked out from call()'s code. Without the file (older torch) nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..exchange.files import (
    KERNEL_INFORMATION_FILE,
    CompileKernelInformation,
    KernelInformation,
    read_json_file,
)
from ..records import CompileRun, GraphRecord, LaunchTensors
from ..records.codec import JsonValue
from .call_flow import tensor_type
from .diagnostics import unreadable_capture_file


def attach_kernel_information(run: CompileRun, capture_dir: Path, *, strict: bool = False) -> CompileRun:
    """The run with each extern launch's tensors from capture/kernel_information.json, where the capture kept one.
    A file that cannot be read leaves the launches as they were, with a warning (``strict``: ParseError)."""
    path = capture_dir / KERNEL_INFORMATION_FILE
    try:
        information = read_json_file(path, KernelInformation)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        return unreadable_capture_file(
            run, path, exc, "kernel information not read, library calls' shapes read from the code", strict
        )
    if information is None:
        return run
    graphs = tuple(_graph_with(graph, information.compiles) for graph in run.graphs)
    return replace(run, graphs=graphs)


def _graph_with(graph: GraphRecord, compiles: Sequence[CompileKernelInformation]) -> GraphRecord:
    handles = {launch.handle for launch in graph.launches if launch.handle is not None}
    # Debug handles restart with each compile: the graph's compile holds every handle its call() prints
    # (a lazily compiled backward's entries have no compile id).
    candidates = [
        c.kernels for c in compiles
        if None in (graph.compile_id, c.compile_id) or c.compile_id == graph.compile_id
        if handles <= c.kernels.keys()
    ]  # fmt: skip
    if not handles or len(candidates) != 1:
        return graph
    kernels = candidates[0]
    launches = tuple(
        replace(launch, tensors=tensors)
        if launch.kind == "extern" and launch.handle is not None
        and (tensors := launch_tensors(kernels.get(launch.handle))) is not None
        else launch
        for launch in graph.launches
    )  # fmt: skip
    return replace(graph, launches=launches)


def launch_tensors(entry: JsonValue) -> LaunchTensors | None:
    """One kernel's entry as the launch's tensors; None without shapes (a generated kernel's entry)."""
    if not isinstance(entry, Mapping):
        return None
    shapes, dtypes = entry.get("input_shapes"), entry.get("input_dtypes")
    if not isinstance(shapes, list) or not isinstance(dtypes, list) or len(shapes) != len(dtypes):
        return None
    inputs = tuple(
        tensor_type(dtype, tuple(shape)) for shape, dtype in zip(shapes, dtypes, strict=True)
        if isinstance(shape, list) and isinstance(dtype, str)
    )  # fmt: skip
    if len(inputs) != len(shapes):
        return None
    shape, dtype = entry.get("output_shape"), entry.get("output_dtype")
    output = tensor_type(dtype, tuple(shape)) if isinstance(shape, list) and isinstance(dtype, str) else None
    return LaunchTensors(inputs=inputs, output=output)
