"""The comparison stage, comparability: what two runs differ in besides the mode and the options.

Checked before any verdict: a gap between an fp32 and a bf16 run, a training and an inference run, a
static and a dynamic one, two devices or two torch versions says little about modes. ``run_facts``
reads the facts from a run's records (what the model process recorded where it ran the model, else what
the graphs show); ``differences`` lists the facts two runs do not share, the likeliest cause of a gap
first (the order of ``FACTS``). A fact one run does not record is not counted as a difference.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import PurePath

from ..parse.fx_graph import FX_DTYPES
from ..records import CompileRun, FactDifference, GraphRecord

# The likeliest cause of a gap first.
FACTS = ("device", "dtype", "matmul precision", "train", "dynamic", "inputs", "device name", "torch", "triton", "model")
LABELS = {"device": "device", "dtype": "dtype", "matmul precision": "float32 matmul precision", "train": "training or inference", "dynamic": "dynamic shapes",
          "inputs": "input shapes", "device name": "device model", "torch": "torch version",
          "triton": "Triton version", "model": "model file"}  # fmt: skip
EFFECTS = {
    "device": "another device: every time differs for that reason alone",
    "dtype": "another dtype changes the work itself (bytes moved, matmul units and their rates)",
    "matmul precision": ("torch.set_float32_matmul_precision: 'high' or 'medium' runs float32 matmuls on the "
                         "TF32 or bf16 tensor cores, several times faster than 'highest'"),
    "train": "a training step also runs the backward graph: more work per step, whatever the mode",
    "dynamic": "dynamic shapes compile other kernels (symbolic sizes) and other guards",
    "inputs": "other input shapes are other work per step",
    "device name": "another device model has other bandwidth and compute",
    "torch": "another torch version generates other code",
    "triton": "another Triton version compiles kernels differently",
    "model": "another model file: kernels are matched by FX node names, which differ where the models differ",
}
_TYPED = re.compile(r"^(?:\w+=)?([a-z]+\d*)(\[.*?\])")


def run_facts(run: CompileRun) -> dict[str, str]:
    """The facts of one run that make two runs comparable, as shown on the page (unknown ones left out)."""
    facts: dict[str, str] = {}
    env, settings, ran = run.environment, run.settings, run.capture is not None
    if env.device_type:
        facts["device"] = env.device_type
    dtype = (settings.dtype if settings and ran else None) or _graph_dtype(run.graphs)
    if dtype:
        facts["dtype"] = FX_DTYPES.get(dtype, dtype)
    ceilings = run.bench.ceilings if run.bench else None
    if facts.get("dtype") == "float32" and ceilings is not None and ceilings.float32_matmul_precision:
        facts["matmul precision"] = ceilings.float32_matmul_precision  # as the model process set it
    backward = any(g.kind == "backward" for g in run.graphs)
    facts["train"] = "training" if backward or (settings is not None and ran and settings.train) else "inference"
    facts["dynamic"] = "dynamic" if any(g.symbols for g in run.graphs) else "static"
    inputs = _input_shapes(run)
    if inputs:
        facts["inputs"] = inputs
    if env.device_name:
        facts["device name"] = env.device_name
    if env.torch_version:
        facts["torch"] = env.torch_version
    if env.triton_version:
        facts["triton"] = env.triton_version
    if run.capture is not None and run.capture.model_path:
        facts["model"] = PurePath(run.capture.model_path).name
    return facts


def differences(base: str, base_facts: Mapping[str, str], other: str, other_facts: Mapping[str, str]) -> list[FactDifference]:
    """The facts both runs record with different values, the likeliest cause of a gap first."""
    return [
        FactDifference(fact, other, base_facts[fact], other_facts[fact], EFFECTS[fact])
        for fact in FACTS
        if fact in base_facts and fact in other_facts and base_facts[fact] != other_facts[fact]
    ]


def headline(found: Sequence[FactDifference]) -> str:
    """The sentence at the top of the page: what differs, the first named as the likely cause."""
    if not found:
        return ""
    first = found[0]
    more = [f"{LABELS[d.fact]} ({d.base} vs {d.other})" for d in found[1:]]
    also = f" They also differ in {', '.join(more)}." if more else ""
    return (f"These runs differ in {LABELS[first.fact]} ({first.base} vs {first.other}): the likely cause of the gap, "
            f"not the mode or options; {first.effect}.{also}")  # fmt: skip


def compares(names: Sequence[str], facts: Mapping[str, Mapping[str, str]], found: Sequence[FactDifference]) -> str:
    """What a verdict over these configurations compares, in words."""
    if found:
        what = ", ".join(dict.fromkeys(LABELS[d.fact] for d in found))
        return (f"it compares whole runs, not the mode and options alone: they also differ in {what}, "
                "so the gap cannot be credited to the mode or options")  # fmt: skip
    shared = facts.get(names[0], {}) if names else {}
    kept = [f"{LABELS[f]} {shared[f]}" if f not in ("train", "dynamic") else shared[f]
            for f in ("device", "dtype", "matmul precision", "train", "dynamic", "torch") if f in shared]  # fmt: skip
    return "it compares the mode and options alone" + (f": all runs share {', '.join(kept)}" if kept else "")


def _graph_dtype(graphs: Sequence[GraphRecord]) -> str | None:
    """The floating dtype most of the first graph's inputs and parameters have."""
    for graph in graphs:
        counted: Counter[str] = Counter()
        for name in _placeholders(graph, ("input", "parameter", "buffer", None)):
            match = _TYPED.match(graph.buffers.get(name, ""))
            if match and match.group(1) in FX_DTYPES:
                counted[FX_DTYPES[match.group(1)]] += 1
        if counted:
            return counted.most_common(1)[0][0]
    return None


def _input_shapes(run: CompileRun) -> str:
    """The shapes the model was called with (dtypes and devices left out: those are facts of their own)."""
    if run.capture is not None and run.capture.inputs:
        return "; ".join(re.sub(r"\b[a-z]+\d*(\[)", r"\1", i).replace(" on cpu", "").split(" on ")[0]
                         for i in run.capture.inputs)  # fmt: skip
    for graph in run.graphs:
        shapes = []
        for name in _placeholders(graph, ("input",)):
            match = _TYPED.match(graph.buffers.get(name, ""))
            if match:
                shapes.append(match.group(2))
        if shapes:
            return "; ".join(shapes)
    return ""


def _placeholders(graph: GraphRecord, roles: tuple[str | None, ...]) -> list[str]:
    for fx in graph.fx_graphs:
        names = [n.name for n in fx.nodes if n.op == "placeholder" and n.role in roles]
        if names:
            return names
    return []
