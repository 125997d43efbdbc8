"""Stage 4 of the pipeline (bench), hand-written side: does a match compute what Inductor's kernel computes.

A match is made from the ATen ops a kernel fused (``match.py``); the check (``check.py``) runs each hand-written
kernel against its own torch reference. Neither says that the hand-written kernels, chained as the match
chains them, compute what Inductor's kernel does. Here:

1. in the tool's process (records only), ``verify_task`` takes the kernel's own post-grad FX nodes as the
   reproducer does (``repro/plan.reference_of``) and the shapes and dtypes of its first launch;
2. in the check process, ``run_verify`` (``worker/handwritten/verify.py``) makes inputs of those shapes (values as the reproducer makes them),
   evaluates the FX nodes in float64, runs the equivalents' torch references in float64 on the same inputs,
   in the match's order (each step's first input is the step before's output), and compares the last
   step's first output with the kernel's outputs of its size (the nodes tied to what it writes, and the nodes
   of the kernel none of its others reads). The kernel's inputs are paired with the
   equivalents' by size (a 2-D one transposed too); the best pairing counts. Beyond the dtype's tolerance
   (the catalog's, as the check's) the match is rejected; where no pairing exists it is not verified.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from ..exchange.files import HandwrittenTask, VerifyInput, VerifyTask
from ..parse.symbolic import tensor_dims
from ..records import GraphRecord, HandwrittenMatch, KernelRecord
from ..repro.parts import TORCH_DTYPES, ReferenceOutput, ReproError
from ..repro.plan import plan_repro
from .catalog import get
from .match import op_name, shape_for

# Inputs of the kernel, in elements, beyond which a match is not verified (float64 on the CPU).
VERIFY_ELEMENTS = 1 << 24
# Ops whose result holds its input's values in another order (a reshape of it keeps the order: not needed).
REORDERING = frozenset({"permute", "transpose", "t"})


def verify_task(graph: GraphRecord, kernel: KernelRecord, match: HandwrittenMatch) -> VerifyTask | str:
    """What the check process needs to verify the match, or why it cannot be verified."""
    steps = []
    for name in match.equivalents:
        shape = shape_for(get(name), dict(match.shape))
        if shape is None:
            return f"{name} has no shape in this match"
        steps.append(HandwrittenTask(name, shape, match.dtype))
    try:
        plan = plan_repro(graph, _first_launch_nodes(graph, kernel))
    except ReproError as exc:
        return f"no reference of the kernel: {exc}"
    reference = plan.reference
    if reference.missing:
        return f"no reference of the kernel: {reference.missing}"
    values = {a.param: a.values for a in plan.tensor_args}
    inputs = []
    for item in reference.inputs:
        if item.param is None:
            inputs.append(VerifyInput(item.node, value=item.value))
            continue
        parsed = tensor_dims(item.type, graph.hints)
        dtype = TORCH_DTYPES.get(parsed[0]) if parsed else None
        if parsed is None or dtype is None:
            return f"the FX input {item.node} has a type no input can be made of ({item.type})"
        inputs.append(VerifyInput(item.node, dtype, list(parsed[1]), values.get(item.param, "randn")))
    elements = sum(math.prod(i.size) for i in inputs if i.dtype)
    if elements > VERIFY_ELEMENTS:
        return f"its inputs hold {elements:,} elements, more than the {VERIFY_ELEMENTS:,} verified in float64"
    outputs = _outputs(graph, reference.code, reference.outputs)
    return VerifyTask(verify_key(match), steps, reference.code, inputs, outputs, _views(graph, reference.code))


def verify_key(match: HandwrittenMatch) -> str:
    """A verification's key: the match and its equivalents (a result read back from an earlier run stands only
    for the equivalents it verified)."""
    return f"{match.key}:{'+'.join(match.equivalents)}"


def _views(graph: GraphRecord, code: str) -> list[str]:
    """The kernel's nodes that reorder a tensor (a permute, a transpose), which its loads do on the fly."""
    defined = {m[0] for line in code.splitlines() if (m := re.match(r"\w+", line))}
    fx = graph.fx_graph("transformed")
    return [n.name for n in (fx.nodes if fx else ()) if n.name in defined and op_name(n.target) in REORDERING]


def _outputs(graph: GraphRecord, code: str, tied: tuple[ReferenceOutput, ...]) -> list[str]:
    """The nodes a match's result is compared with: those tied to what the kernel writes, and the nodes of the
    kernel no other of its nodes reads (what it makes, where its writes could not all be tied to nodes)."""
    defined = [m[0] for line in code.splitlines() if (m := re.match(r"\w+", line))]
    fx = graph.fx_graph("transformed")
    read = {i for n in (fx.nodes if fx else ()) if n.name in set(defined) for i in n.inputs}
    return list(dict.fromkeys([o.node for o in tied] + [n for n in defined if n not in read]))


def _first_launch_nodes(graph: GraphRecord, kernel: KernelRecord) -> KernelRecord:
    """The kernel with the post-grad nodes of its first launch only, where provenance tells them apart: a kernel
    launched once per layer lists every layer's nodes, whose inputs one launch does not hold."""
    launch = next((x for x in graph.launches if x.target == kernel.name), None)
    if graph.provenance is None or launch is None or not launch.handle:
        return kernel
    nodes = graph.provenance.kernel_to_post.get(launch.handle, ())
    return replace(kernel, post_grad_nodes=tuple(nodes)) if nodes else kernel
