"""Reproducer, step 1 (from records): what a standalone script needs to run one generated kernel alone.

From a graph's records only (its output code, FX graph, launches, provenance), ``plan_repro`` works out the
kernel's source exactly as Inductor handed it to its compiler (definition.py), its arguments at its first
launch (arguments.py) and the eager reference of the ATen ops it fuses (reference.py), and puts them together
as a ``ReproPlan`` (its parts in parts.py). ``script.py`` turns the plan into the script.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..records import GraphRecord, KernelRecord
from .arguments import call_layouts, launch_argument
from .definition import declared_dtypes, kernel_definition, kernel_params
from .parts import Reference, ReproError, ScalarArg, TensorArg
from .reference import reference_of


@dataclass(frozen=True)
class ReproPlan:
    graph_id: str
    kernel: str
    backend: str  # "triton" or "cpp"
    source: str  # as Inductor passed it to its compiler
    device: str  # "cuda", "cpu", ... (Triton's device_str)
    cpp_arg_types: tuple[str, ...] = ()
    launch_position: int | None = None
    launch_code: str = ""
    args: tuple[TensorArg | ScalarArg, ...] = ()
    reference: Reference = field(default_factory=Reference)
    hints: Mapping[str, int | float] = field(default_factory=dict)
    # Configurations the report recorded for it (the autotuner's pick, its isolated time).
    recorded_config: str = ""
    isolated_us: float | None = None

    @property
    def tensor_args(self) -> tuple[TensorArg, ...]:
        return tuple(a for a in self.args if isinstance(a, TensorArg))


def plan_repro(graph: GraphRecord, kernel: KernelRecord) -> ReproPlan:
    source, device, arg_types = kernel_definition(graph.output_code, kernel.name)
    launch = next((la for la in graph.launches if la.target == kernel.name), None)
    if launch is None:
        raise ReproError(
            f"{kernel.name} is defined in {graph.id} but never launched: no arguments to run it with"
        )
    hints = graph.hints
    params = kernel_params(kernel.backend, source)
    fixed_grid = "'grid_type'" not in source or "'grid_type': 'FixedGrid'" in source
    if kernel.backend == "triton" and len(launch.args) == len(params) + 3 and fixed_grid:
        # a template's launch ends with its grid (Inductor's FixedGrid reads them as _grid_0.._grid_2)
        params += ("_grid_0", "_grid_1", "_grid_2")
    if len(params) != len(launch.args):
        raise ReproError(
            f"{kernel.name}: {len(params)} parameters but launch #{launch.position} passes {len(launch.args)} arguments"
        )
    layouts = call_layouts(graph.output_code, hints)
    declared = declared_dtypes(kernel.backend, source, arg_types, params)
    args = tuple(launch_argument(graph, kernel, param, written, layouts, hints, source, declared.get(param))
                 for param, written in zip(params, launch.args, strict=True))  # fmt: skip
    timing = kernel.timing
    return ReproPlan(
        graph_id=graph.id,
        kernel=kernel.name,
        backend=kernel.backend,
        source=source,
        device=device,
        cpp_arg_types=arg_types,
        launch_position=launch.position,
        launch_code=launch.code,
        args=args,
        reference=reference_of(graph, kernel, launch, args),
        hints=dict(hints),
        recorded_config=(timing.config or "") if timing else "",
        isolated_us=timing.isolated.median_ms * 1e3 if timing and timing.isolated else None,
    )

