"""Graphs Inductor served from its FX graph cache within one capture (a real CPU capture, torch 2.13).

``cpu-torch2.13-compile-failure``: the resume frame ``1/0`` of a graph break has the same graph as ``0/0_1``, so
Inductor's FX graph cache served it; its debug folder ``model__1_inference_1.1`` has no ``output_code.py``. The
report reads its output code, kernels, launches and provenance from the TORCH_TRACE log, says it was a cache hit,
and does not warn about it (only the folder of the compile that failed, ``2/0``, is warned about).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.compat import TRACE_FILE
from inductor_lens.records import CompileRun
from inductor_lens.report import render_report

from ..raw_trace import output_codes

FAILURE = "cpu-torch2.13-compile-failure"
HIT = "model__1_inference_1.1"


def _trace(root: Path) -> Path:
    (log,) = [p for p in root.rglob("*") if TRACE_FILE.match(p.name)]
    return log


def _by_folder(run: CompileRun) -> dict[str, tuple[str | None, bool, list[str], int]]:
    return {g.id: (g.compile_id, g.cache_hit, [k.name for k in g.kernels], len(g.launches)) for g in run.graphs}


def test_a_cache_hit_graph_gets_its_kernels_from_the_trace(unpacked: Callable[[str], Path]) -> None:
    root = unpacked(FAILURE)
    run = parse_debug_folder(root)
    assert _by_folder(run) == {
        "model__0_inference_0.0": ("0/0_1", False, ["cpp_fused_relu_0"], 2),
        HIT: ("1/0", True, ["cpp_fused_relu_0"], 2),
        "model__2_inference_2.2": ("2/0", False, [], 0),  # the compile Inductor failed: nothing to read
        "model__3_inference_3.3": ("3/0", False, ["cpp_fused_add_mul_0"], 1),
    }
    # every graph the trace logged output code for has exactly its kernels, and the trace's own answer
    codes = {c.compile_id: c for c in output_codes(_trace(root))}
    assert {c: (o.kernels, o.fx_cache) for c, o in codes.items()} == {
        "0/0_1": (["cpp_fused_relu_0"], "miss"),
        "1/0": (["cpp_fused_relu_0"], "hit"),
        "3/0": (["cpp_fused_add_mul_0"], "bypass"),
    }
    hit = next(g for g in run.graphs if g.id == HIT)
    assert hit.output_code == codes["1/0"].code
    assert hit.files == ("fx_graph_runnable.py", "fx_graph_transformed.py", "output_code.py")
    assert hit.provenance is not None and hit.provenance.source == "TORCH_TRACE log"
    assert hit.kernels[0].aten_ops == ("aten.relu",) and hit.kernels[0].source_lines
    assert [d.where.rsplit("/", 1)[-1] for d in run.stats.diagnostics] == ["model__2_inference_2.2"]
    assert CompileRun.from_json(run.to_json()).graphs[1].cache_hit is True


def test_without_the_process_log_folders_are_matched_by_order(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    """A capture made in the caller's process had no log: the folders' ``.<k>`` order and the trace's agree."""
    root = tmp_path / "nolog"
    shutil.copytree(unpacked(FAILURE), root)
    (log,) = root.rglob("capture.log")
    log.unlink()
    # 3 output codes for 4 folders (one compile failed): the order cannot be trusted, nothing is guessed
    assert _by_folder(parse_debug_folder(root))[HIT][1:] == (False, [], 0)
    failed = next(p for p in root.rglob("model__2_inference_2.2") if p.is_dir())
    shutil.rmtree(failed)
    assert _by_folder(parse_debug_folder(root))[HIT] == ("1/0", True, ["cpp_fused_relu_0"], 2)


def test_a_bare_trace_says_which_graphs_were_cache_hits(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    (tmp_path / "alone").mkdir()
    shutil.copy2(_trace(unpacked(FAILURE)), tmp_path / "alone")
    run = parse_debug_folder(tmp_path / "alone")
    assert [(g.compile_id, g.cache_hit, len(g.kernels)) for g in run.graphs] == [
        ("0/0_1", False, 1), ("1/0", True, 1), ("3/0", False, 1)
    ]  # fmt: skip


def test_the_pages_label_cache_hits(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked(FAILURE))
    pages = render_report(run, analyze(run), draw=False)
    label = '<span class="badge cache-hit" title="served from Inductor\'s FX graph cache'
    assert pages["compile.html"].count(label) == 1 and pages["index.html"].count(label) == 1
    assert pages[f"graphs/{HIT}.html"].count(label) == 1 and "<tr><th>Cache hit</th>" in pages[f"graphs/{HIT}.html"]
    assert label not in pages["graphs/model__0_inference_0.0.html"]


@pytest.mark.parametrize("cache_hit", [True, False])
def test_an_older_lens_json_reads_as_no_cache_hit(unpacked: Callable[[str], Path], cache_hit: bool) -> None:
    text = parse_debug_folder(unpacked(FAILURE)).to_json()
    if not cache_hit:
        text = text.replace('"cache_hit":true', "").replace('"cache_hit":false', "").replace(",,", ",").replace(",}", "}")
    assert [g.cache_hit for g in CompileRun.from_json(text).graphs] == [False, cache_hit, False, False]
