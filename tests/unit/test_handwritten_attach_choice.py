"""Each hand-written check carries the launch configuration Inductor's autotuner chose for a kernel it stands in for
(``attach.inductor_choice``), where that kernel is a template that records one: the real H100 capture of HF Llama
bf16 under max-autotune-no-cudagraphs (torch 2.11), whose matmuls are Triton templates (``triton_tem_*``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inductor_lens.handwritten.attach import _tasks, inductor_choice
from inductor_lens.handwritten.match import match_run
from inductor_lens.parse import parse_debug_folder


def test_template_kernels_give_their_checks_inductors_choice(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked("h100-llama-bf16-max-autotune-nocg"), strict=True)
    matches = match_run(run)
    choices = {m.target: inductor_choice(run, m) for m in matches}
    templates = {target: choice for target, choice in choices.items() if target.startswith("triton_tem_")}
    assert templates and all(templates.values())
    first = next(iter(templates.values()))
    assert set(first) == {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"}
    graph_kernels = {k.name: k for _, k in run.all_kernels()}
    for target, choice in templates.items():
        config_args = graph_kernels[target].launch_config["config_args"]
        assert isinstance(config_args, dict) and choice["BLOCK_M"] == config_args["BLOCK_M"]
    assert not any(choice for target, choice in choices.items() if target.startswith("triton_poi_"))
    tasks, _ = _tasks(run, matches)
    by_key = {m.key: m for m in matches}
    for task in (t for t in tasks.values() if t.name == "matmul"):
        targets = {by_key[k.rsplit(":", 1)[0]].target for k in task.matches}
        # a template's check starts from its choice; cuBLAS's (extern_kernels.mm, the lm_head) has none to give
        assert bool(task.start_config) == any(t.startswith("triton_tem_") for t in targets), (task, targets)
