"""The comparison stage, comparability: what two runs differ in besides the mode and the options.

Checked before any verdict: a gap between an fp32 and a bf16 run, a training and an inference run, a
static and a dynamic one, two devices or two torch versions says little about modes. The settings of the
model process (autocast, the float32 matmul precision, cuDNN's TF32, Dynamo's config) are facts too: a
configuration that changes one of them (``--try``, ``--config NAME:autocast=bf16``) changes the numerics or
the graphs, and the page says so. ``run_facts``
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
FACTS = ("device", "dtype", "autocast", "matmul precision", "cudnn tf32", "train", "dynamic", "dynamo config", "inputs",
         "device name", "torch", "triton", "model")  # fmt: skip
LABELS = {"device": "device", "dtype": "dtype", "autocast": "autocast", "matmul precision": "float32 matmul precision",
          "cudnn tf32": "cuDNN TF32", "train": "training or inference", "dynamic": "dynamic shapes",
          "dynamo config": "Dynamo config", "inputs": "input shapes", "device name": "device model",
          "torch": "torch version", "triton": "Triton version", "model": "model file"}  # fmt: skip
EFFECTS = {
    "device": "another device: every time differs for that reason alone",
    "dtype": "another dtype changes the work itself (bytes moved, matmul units and their rates)",
    "autocast": ("autocast runs matmuls and convolutions in a 16-bit dtype: other kernels and their rates, and "
                 "other numerics (a larger error against float64)"),
    "matmul precision": ("torch.set_float32_matmul_precision: 'high' or 'medium' runs float32 matmuls on the "
                         "TF32 or bf16 tensor cores, several times faster than 'highest', with fewer mantissa "
                         "bits: other numerics"),
    "cudnn tf32": ("cuDNN's TF32 runs float32 convolutions on the tensor cores: faster, with fewer mantissa bits: "
                   "other numerics"),
    "dynamo config": "another Dynamo config traces other graphs (graph breaks, captured scalars, guards)",
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
    recorded = settings if ran else None  # the settings the model process ran with
    if recorded is not None:
        facts["autocast"] = recorded.autocast or "off"
    ceilings = run.bench.ceilings if run.bench else None
    # as the run set it, else as the model process found it when it measured the ceilings
    precision = (settings.matmul_precision if settings else None) or (ceilings.float32_matmul_precision if ceilings else None)
    if facts.get("dtype") == "float32" and precision:
        facts["matmul precision"] = precision
    cudnn_tf32 = settings.cudnn_allow_tf32 if settings and settings.cudnn_allow_tf32 is not None else (
        ceilings.cudnn_tf32 if ceilings else None)  # fmt: skip
    if facts.get("device") != "cpu" and cudnn_tf32 is not None:
        facts["cudnn tf32"] = "on" if cudnn_tf32 else "off"
    backward = any(g.kind == "backward" for g in run.graphs)
    facts["train"] = "training" if backward or (settings is not None and ran and settings.train) else "inference"
    facts["dynamic"] = "dynamic" if any(g.symbols for g in run.graphs) else "static"
    if recorded is not None:
        facts["dynamo config"] = ", ".join(f"{k}={v}" for k, v in sorted(recorded.dynamo_options.items())) or "default"
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
