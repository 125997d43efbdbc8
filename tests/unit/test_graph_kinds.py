"""Each graph of a bare TORCH_TRACE log gets its own kind (parse/trace_graphs.py ``traced_graph_kind``).

On a real DDP capture (tests/fixtures/cpu-torch2.13-ddp-split.tar.gz, PROVENANCE.md): Dynamo's DDP optimizer splits
the one compiled frame (compile id 4/0) into three submodules, one per 1 MB bucket. Each is traced by AOTAutograd
and its forward compiled at once; the three backwards are compiled when the first backward runs, after all three
forwards. The log says so: three (aot_joint_graph, aot_forward_graph, aot_backward_graph, output code) groups, then
three output codes with no AOTAutograd graph before them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inductor_lens.parse.diagnostics import Diagnostics
from inductor_lens.parse.trace import read_traces
from inductor_lens.ranked_light import light_summary

FIXTURE = "cpu-torch2.13-ddp-split"
KINDS = ["forward", "forward", "forward", "backward", "backward", "backward"]


def _log(unpacked: Callable[[str], Path]) -> Path:
    (log,) = (unpacked(FIXTURE) / "trace").glob("dedicated_log_torch_trace_rank_0_*.log")
    return log


def test_ddp_submodules_of_one_compile_id_are_three_forwards_then_three_backwards(
    unpacked: Callable[[str], Path],
) -> None:
    log = _log(unpacked)
    summary = read_traces([log], log.parent, Diagnostics(), keep_graphs=True)
    assert [(g.compile_id, g.kind) for g in summary.traced_graphs] == [("4/0", kind) for kind in KINDS]
    # the graphs say the same by their inputs: a backward takes the forward outputs' gradients
    signatures = [next(line for line in g.files["fx_graph_transformed.py"].splitlines() if "def forward(self" in line)
                  for g in summary.traced_graphs]  # fmt: skip
    assert ["tangents_1" in line for line in signatures] == [kind == "backward" for kind in KINDS]


def test_the_light_pass_keys_each_submodule_by_kind_and_place(unpacked: Callable[[str], Path]) -> None:
    summary = light_summary(0, "rank0", [str(_log(unpacked))])
    assert [(g.key, g.nth) for g in summary.graphs] == [
        ("4/0 forward", 0), ("4/0 forward", 1), ("4/0 forward", 2),
        ("4/0 backward", 0), ("4/0 backward", 1), ("4/0 backward", 2)]  # fmt: skip


def test_without_aotautograds_graphs_the_inputs_tell(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """Graphs served from AOTAutograd's cache come with no AOTAutograd graph logged: the kind is read from the
    graph's inputs. The same log with the AOTAutograd records left out."""
    text = _log(unpacked).read_text(encoding="utf-8")
    kept, skip = [], False
    for line in text.splitlines(keepends=True):
        if not line.startswith("\t"):
            skip = any(f'{{"{name}": ' in line for name in ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph"))
        if not skip:
            kept.append(line)
    log = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    log.write_text("".join(kept), encoding="utf-8")
    summary = read_traces([log], tmp_path, Diagnostics(), keep_graphs=True)
    assert [g.kind for g in summary.traced_graphs] == KINDS
