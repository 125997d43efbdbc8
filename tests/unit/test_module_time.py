"""Unit tier: time per nn.Module path and per source line (issue 31, point 2) on four real H100 captures.

tests/fixtures/h100-*.tar.gz (PROVENANCE.md) carry capture/module_stacks.json: each FX node of the graph Inductor
received -> its module stack and stack trace. The launches are tied to modules through the provenance maps
(forward, inference) or the stack traces (ResNet-50's backward); times are the launches' per-step times.
For GPT-2 and Llama (no CUDA graphs) each folded module's share is recomputed here from the raw files alone:
the profile trace's per-launch device time (tests/raw_profile.py, call() order), Inductor's provenance json
(kernel -> post-grad -> pre-grad nodes; a library call's own op node, by name) and module_stacks.json (node ->
innermost module).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench.modules import launch_lines, line_times, module_times, top_modules
from inductor_lens.capture import find_capture_dir
from inductor_lens.errors import ParseError
from inductor_lens.parse.module_stacks import (
    attach_module_stacks,
    fold_module_path,
    mixed_parents,
    normalize_module_path,
)
from inductor_lens.pipeline import build_run, render
from inductor_lens.records import CompileRun
from inductor_lens.records.answers import NO_MODULE_STACKS, OUTSIDE, ModuleTime
from inductor_lens.report.source_view import source_page

from ..conftest import FIXED_TIME
from ..raw_profile import profiled_steps

pytestmark = pytest.mark.unit

GPT2 = "h100-gpt2-fp32-default"
LLAMA = "h100-llama-bf16-max-autotune-nocg"
VIT = "h100-vit-s16-reduce-overhead"
RESNET = "h100-resnet50-train"


@pytest.fixture(scope="module")
def runs(unpacked: Callable[[str], Path]) -> Callable[[str], CompileRun]:
    cache: dict[str, CompileRun] = {}

    def get(name: str) -> CompileRun:
        if name not in cache:
            folder = unpacked(name)
            cache[name] = build_run(folder, find_capture_dir(folder), now=lambda: FIXED_TIME)
        return cache[name]

    return get


def by_path(modules: tuple[ModuleTime, ...]) -> dict[str, ModuleTime]:
    return {m.path: m for m in modules}


def launch_share_sum(run: CompileRun) -> float:
    return sum(launch.timing.share for g in run.graphs for launch in g.launches if launch.timing is not None)


def launch_us_sum(run: CompileRun) -> float:
    return sum(launch.timing.median_us for g in run.graphs for launch in g.launches if launch.timing is not None)


# --- path spellings ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ("L['self'].transformer.h.0.mlp", "transformer.h.0.mlp"),  # 2.11 (the H100 fixtures), 2.13
        ("L['s'].layers.0.fc", "layers.0.fc"),  # a function given the model as `s`
        ("L['self'].layers[0]._modules['mlp']", "layers.0.mlp"),
        ("getattr(L['self'].layers, '0').mlp", "layers.0.mlp"),
        ("getattr(getattr(L['self'].blocks, '0'), '1').fc", "blocks.0.1.fc"),
        ("G['model'].h.3", "h.3"),
        ("self.layers.0", "layers.0"),
        ("L['self'].d['a-b']", "d.a-b"),
        ("L['self']", ""),
    ],
)
def test_dynamo_spellings_normalize_to_the_models_names(raw: str, path: str) -> None:
    assert normalize_module_path(raw) == path


def test_numeric_children_of_different_classes_are_not_instances() -> None:
    # ResNet's downsample is nn.Sequential(Conv2d, BatchNorm2d): 0 and 1 are two modules, the blocks are instances
    classes = {
        "layer3.0": "Bottleneck", "layer3.1": "Bottleneck", "layer3.0.downsample": "Sequential",
        "layer3.0.downsample.0": "Conv2d", "layer3.0.downsample.1": "BatchNorm2d", "layer3.1.conv1": "Conv2d",
    }  # fmt: skip
    mixed = mixed_parents(classes)
    assert mixed == {"layer3.*.downsample"}
    assert fold_module_path("layer3.0.downsample.1", mixed) == "layer3.*.downsample.1"
    assert fold_module_path("layer3.*.downsample.0", mixed) == "layer3.*.downsample.0"  # already folded above
    assert fold_module_path("layer3.1.conv1", mixed) == "layer3.*.conv1"
    assert fold_module_path("layers.12.mlp") == "layers.*.mlp"


# --- folded paths on the real models --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (GPT2, {"transformer.h.*": ("GPT2Block", 4), "transformer.h.*.mlp": ("GPT2MLP", 4),
                "transformer.h.*.mlp.c_fc": ("Conv1D", 4), "transformer.h.*.attn": ("GPT2Attention", 4),
                "lm_head": ("Linear", 1)}),
        (LLAMA, {"model.layers.*": ("LlamaDecoderLayer", 4), "model.layers.*.mlp.down_proj": ("Linear", 4),
                 "model.layers.*.self_attn": ("LlamaAttention", 4), "lm_head": ("Linear", 1)}),
        (VIT, {"blocks.*": ("Block", 12), "blocks.*.attn": ("Attention", 12), "blocks.*.attn.qkv": ("Linear", 12),
               "blocks.*.mlp.fc1": ("Linear", 12), "patch_embed.proj": ("Conv2d", 1)}),
        (RESNET, {"layer1.*": ("Bottleneck", 3), "layer2.*": ("Bottleneck", 4), "layer3.*": ("Bottleneck", 6),
                  "layer4.*": ("Bottleneck", 3), "layer3.*.conv2": ("Conv2d", 6), "layer3.*.downsample.0": ("Conv2d", 1),
                  "layer3.*.downsample.1": ("BatchNorm2d", 1), "conv1": ("Conv2d", 1), "fc": ("Linear", 1)}),
    ],
)  # fmt: skip
def test_repeated_layers_fold_with_their_instances(
    runs: Callable[[str], CompileRun], name: str, expected: dict[str, tuple[str, int]]
) -> None:
    modules = by_path(module_times(runs(name)))
    for path, (class_name, instances) in expected.items():
        assert (modules[path].class_name, modules[path].instances) == (class_name, instances), path
        assert modules[path].per_step_us > 0, path
        if instances > 1:
            low, high = modules[path].instance_min_us, modules[path].instance_max_us
            assert low is not None and high is not None and 0 < low <= high, path
    assert list(modules) == sorted(modules, key=lambda p: -modules[p].per_step_us)  # ranked by time


@pytest.mark.parametrize("name", [GPT2, LLAMA, VIT, RESNET])
def test_one_depth_and_the_rest_add_up_to_the_launches(runs: Callable[[str], CompileRun], name: str) -> None:
    """Each launch's time is in exactly one top-level module (split where it spans several) or outside any."""
    run = runs(name)
    modules = module_times(run)
    top = [m for m in modules if m.depth == 0]  # "(outside any module)" is at depth 0
    assert sum(m.share for m in top) == pytest.approx(launch_share_sum(run), abs=1e-9)
    assert sum(m.per_step_us for m in top) == pytest.approx(launch_us_sum(run), rel=1e-9)
    for module in modules:  # a module holds at least what its children hold (inclusive time)
        children = [m for m in modules if m.path.startswith(module.path + ".") and m.depth == module.depth + 1]
        assert sum(c.per_step_us for c in children) <= module.per_step_us * (1 + 1e-9), module.path


def test_gpt2_adds_up_to_the_raw_step(runs: Callable[[str], CompileRun], unpacked: Callable[[str], Path]) -> None:
    """Every GPT-2 launch is under a module: the top-level modules hold the profiled step's device time."""
    run = runs(GPT2)
    modules = by_path(module_times(run))
    assert OUTSIDE not in modules
    raw_total = statistics.median(step.total_us for step in profiled_steps(unpacked(GPT2) / "profile_trace.json"))
    assert modules["transformer"].per_step_us + modules["lm_head"].per_step_us == pytest.approx(raw_total, rel=0.01)


def raw_module_shares(root: Path) -> dict[str, float]:
    """Each folded module's share of the step, from the raw files only (one inference graph, no CUDA graphs)."""
    (mappings,) = root.glob("torch_compile_debug/*/torchinductor/*/inductor_provenance_tracking_node_mappings.json")
    provenance = json.loads(mappings.read_text(encoding="utf-8"))
    recorded = json.loads((root / "module_stacks.json").read_text(encoding="utf-8"))
    (graph,) = recorded["graphs"]
    innermost = {
        node: re.sub(r"^L\['self'\]\.", "", recorded["stacks"][stack][-1][0])
        for node, (stack, _) in graph["nodes"].items() if recorded["stacks"][stack]
    }  # fmt: skip
    handles = sorted(provenance["cppCodeToPost"], key=lambda handle: int(handle.rsplit(":", 1)[1]))
    steps = profiled_steps(root / "profile_trace.json")
    total = statistics.median(step.total_us for step in steps)
    shares: dict[str, float] = {}
    for position, handle in enumerate(handles):
        launch_us = statistics.median(step.launches[position][1] for step in steps)
        post = provenance["cppCodeToPost"][handle]
        if handle.startswith(("extern_kernels.", "torch.ops.")):  # a library call runs its op's node (mm, mm_3)
            op = handle.rsplit(":", 1)[0].removesuffix(".default").rsplit(".", 1)[-1]
            post = [node for node in post if re.fullmatch(rf"{re.escape(op)}(_\d+)?", node)] or post
        pre = {p for node in post for p in provenance["postToPre"].get(node, [])}
        paths = {innermost[node] for node in pre if node in innermost}
        for path in paths:
            parts = path.split(".")
            for depth in range(len(parts)):
                folded = re.sub(r"(?<=\.)\d+(?=\.|$)", "*", ".".join(parts[: depth + 1]))
                shares[folded] = shares.get(folded, 0.0) + launch_us / len(paths) / total
    return shares


@pytest.mark.parametrize("name", [GPT2, LLAMA])
def test_module_shares_match_the_raw_files(
    runs: Callable[[str], CompileRun], unpacked: Callable[[str], Path], name: str
) -> None:
    raw = raw_module_shares(unpacked(name))
    modules = by_path(module_times(runs(name)))
    assert set(raw) == set(modules) - {OUTSIDE}
    for path, share in raw.items():
        assert modules[path].share == pytest.approx(share, abs=0.005), path


def test_top_modules_name_the_informative_level(runs: Callable[[str], CompileRun]) -> None:
    gpt2 = top_modules(module_times(runs(GPT2)))
    # "transformer" and "transformer.h" are all layers: the folded block says more
    assert {m.path for m in gpt2[:2]} == {"lm_head", "transformer.h.*"}
    assert not {"transformer", "transformer.h"} & {m.path for m in gpt2}
    assert len(gpt2) == 5
    resnet = [m.path for m in top_modules(module_times(runs(RESNET)), n=4)]
    assert sorted(resnet) == ["layer1.*", "layer2.*", "layer3.*", "layer4.*"]


def test_a_library_call_is_its_op_not_its_inputs(runs: Callable[[str], CompileRun]) -> None:
    """Llama's cuDNN attention: its provenance handle also names the rotary embedding and mask nodes that make its
    inputs; the call is the attention of its layer, on the line calling scaled_dot_product_attention."""
    run = runs(LLAMA)
    (graph,) = run.graphs
    attention = [launch for launch in graph.launches if launch.aten_op and "cudnn_attention" in launch.aten_op]
    assert len(attention) == 4
    assert sorted(launch.modules for launch in attention) == [(f"model.layers.{i}.self_attn",) for i in range(4)]
    for launch in attention:
        assert [(line.filename.rsplit("/", 1)[-1], line.line) for line in launch_lines(graph, launch)] == [
            ("sdpa_attention.py", 158)
        ]


# --- the backward: stack traces -------------------------------------------------------------------------------


def test_resnet_backward_is_tied_by_stack_traces(runs: Callable[[str], CompileRun]) -> None:
    run = runs(RESNET)
    backward = next(g for g in run.graphs if g.kind == "backward")
    assert backward.provenance is not None and not backward.provenance.post_to_pre  # nothing but stack traces
    assert all(launch.modules for launch in backward.launches)
    stages = re.compile(r"^layer(\d)\.")
    for launch in backward.launches:
        # repeated blocks cannot be told apart: the folded path (the first block's downsample is alone in its fold)
        assert all(
            "*" in m or ".0.downsample." in m or m in ("fc", "avgpool", "conv1", "bn1", "relu", "maxpool")
            for m in launch.modules
        ), launch.modules
        # the 0 shared by every ReLU backward keeps layer4's trace, which is no other stage's: a launch spans at most
        # one stage and the first conv of the next (the residual)
        found = sorted({int(match[1]) for m in launch.modules if (match := stages.match(m))})
        assert found == list(range(found[0], found[0] + len(found)))[:2] if found else True, launch.modules
    conv2 = by_path(module_times(run))["layer3.*.conv2"]
    assert "stack traces" in conv2.method and "module stacks" in conv2.method


# --- lines ------------------------------------------------------------------------------------------------------


def test_lines_hold_the_launches_time(runs: Callable[[str], CompileRun]) -> None:
    run = runs(GPT2)
    lines = line_times(run)
    assert sum(t.share for t in lines) == pytest.approx(launch_share_sum(run), abs=1e-9)  # every launch has a line
    assert [t.per_step_us for t in lines] == sorted((t.per_step_us for t in lines), reverse=True)
    head = lines[0]
    assert (head.filename.rsplit("/", 1)[-1], head.code) == (
        "modeling_gpt2.py", "logits = self.lm_head(hidden_states[:, slice_indices, :])"
    )
    assert head.per_step_us == pytest.approx(by_path(module_times(run))["lm_head"].per_step_us)
    # Conv1D's addmm line runs every projection of the 4 layers
    addmm = next(t for t in lines if t.filename.endswith("pytorch_utils.py") and t.line == 119)
    assert addmm.launches_per_step >= 4 * 4


def test_resnet_lines_are_the_ops_own_lines(runs: Callable[[str], CompileRun]) -> None:
    run = runs(RESNET)
    lines = {t.line: t for t in line_times(run) if t.filename.endswith("resnet.py")}
    # the Bottleneck's lines, not _forward_impl's `x = self.layer3(x)` that calls them all
    assert {146, 150, 154} <= set(lines) and not {273, 274, 275, 276} & set(lines)
    backward = next(g for g in run.graphs if g.kind == "backward")
    conv_backward = [launch for launch in backward.launches if launch.kind == "extern"]
    assert conv_backward and all(launch_lines(backward, launch) for launch in conv_backward)


# --- captures without module stacks, damaged files -------------------------------------------------------------


def test_without_module_stacks_lines_still_have_times(fixture_copy: Callable[[str], Path]) -> None:
    folder = fixture_copy(GPT2)
    (folder / "module_stacks.json").unlink()
    run = build_run(folder, find_capture_dir(folder), now=lambda: FIXED_TIME)
    assert module_times(run) == () and not any(launch.modules for g in run.graphs for launch in g.launches)
    assert line_times(run)
    page = source_page(run, analyze(run))
    assert page.times is not None and page.times.module_note == NO_MODULE_STACKS and page.times.lines


def test_a_damaged_file_is_a_warning(fixture_copy: Callable[[str], Path], runs: Callable[[str], CompileRun]) -> None:
    folder = fixture_copy(GPT2)
    (folder / "module_stacks.json").write_text('{"stacks": [], "traces": [], "graphs": [{"compile_id": "0/0", '
                                               '"nodes": {"x": [5, 0]}}]}', encoding="utf-8")  # fmt: skip
    bare = replace_modules(runs(GPT2))
    run = attach_module_stacks(bare, folder)
    assert not any(launch.modules for g in run.graphs for launch in g.launches)
    assert any("module stacks not read" in d.message for d in run.stats.diagnostics)
    with pytest.raises(ParseError, match="module stacks not read"):
        attach_module_stacks(bare, folder, strict=True)


def replace_modules(run: CompileRun) -> CompileRun:
    """The run as parsed before the module stacks were attached."""
    graphs = tuple(
        replace(g, module_classes={}, launches=tuple(replace(launch, modules=()) for launch in g.launches))
        for g in run.graphs
    )
    return replace(run, graphs=graphs)


# --- the Source page --------------------------------------------------------------------------------------------


def test_source_page_ranks_modules_and_lines(runs: Callable[[str], CompileRun], tmp_path: Path) -> None:
    run = runs(GPT2)
    page = source_page(run, analyze(run))
    assert page.times is not None
    assert [m.path for m in page.times.modules] == [m.path for m in module_times(run)]
    assert page.times.lines[0].url is not None and page.times.lines[0].url.startswith("#f")
    render(run, tmp_path, draw=False)
    html = (tmp_path / "source.html").read_text(encoding="utf-8")
    assert 'id="modules"' in html and 'id="lines"' in html
    assert "<code>transformer.h.*.mlp</code>" in html and "×4" in html
    anchor = page.times.lines[0].url.removeprefix("#")
    assert f'id="{anchor}"' in html  # the line's row in the code below


def test_lens_json_keeps_the_modules(runs: Callable[[str], CompileRun]) -> None:
    run = runs(VIT)
    again = CompileRun.from_json(run.to_json())
    assert module_times(again) == module_times(run)
