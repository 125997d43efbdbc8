"""End to end on CPU: graphs Inductor serves from its FX graph cache within one capture, and the in-process API
used again and again in one process (a notebook cell run again).

``samples/repeated_layers.py`` breaks its graph after each of four identical layers: with ``--train``, 8 graphs of
which 4 are cache hits whose debug folders are empty. Each graph's kernels must be those of the trace's
``inductor_output_code`` record of its compile (counted here from the raw payloads), with ``--strict`` exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

import inductor_lens
from inductor_lens.records import CompileRun

from ..conftest import SAMPLES, run_cli_process
from ..raw_trace import output_codes

KIND_ORDER = {"forward": 0, "inference": 0, "backward": 1}


def test_repeated_graphs_served_from_the_cache_keep_their_kernels(tmp_path: Path) -> None:
    report = tmp_path / "report"
    result = run_cli_process(
        "compile", SAMPLES / "repeated_layers.py", "--train", "--device", "cpu", "--strict", "--no-bench",
        "--no-handwritten", "--out", report, cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    run = json.loads((report / "lens.json").read_text())["run"]
    assert run["stats"]["diagnostics"] == []
    (log,) = (report / "capture" / "trace").glob("*.log")
    raw: dict[str, list[tuple[list[str], bool]]] = {}
    for code in output_codes(log):  # per compile id, in the order logged: forward, then backward
        raw.setdefault(code.compile_id, []).append((code.kernels, code.fx_cache == "hit"))
    lens: dict[str, list[tuple[list[str], bool]]] = {}
    for graph in sorted(run["graphs"], key=lambda g: KIND_ORDER[g["kind"]]):
        lens.setdefault(graph["compile_id"], []).append(([k["name"] for k in graph["kernels"]], graph["cache_hit"]))
    assert lens == raw
    # every graph launches what its output code calls, cache hit or not
    assert all(g["kernels"] and g["launches"] and g["output_code"] for g in run["graphs"])
    empty = [p.name for p in (report / "capture").rglob("model__*") if p.is_dir() and not any(p.iterdir())]
    hits = sorted(g["folder"].rsplit("/", 1)[-1] for g in run["graphs"] if g["cache_hit"])
    assert hits == sorted(empty) and len(hits) == sum(hit for codes in raw.values() for _, hit in codes)
    if torch.__version__.startswith("2.13."):
        assert (len(run["graphs"]), len(hits), sum(len(g["kernels"]) for g in run["graphs"])) == (8, 4, 12)
    index = (report / "index.html").read_text()
    assert index.count(">cache hit</span>") == len(hits)


def _stacks(run: CompileRun) -> list[list[tuple[str, int]]]:
    return [[(line.filename, line.line) for line in frame.stack] for frame in run.frames]


def test_the_in_process_api_gives_the_same_report_every_time(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    runs = []
    for n in range(2):  # a notebook cell run twice
        result = inductor_lens.inspect(
            model, torch.randn(16, 32), out=tmp_path / f"inspect{n}", bench=False, handwritten=False, accuracy="off"
        )
        assert result.error is None
        runs.append(result.run)
        assert result.run.stats.diagnostics == ()
        assert "not understood" not in result.index.read_text()
    first, second = (_stacks(r) for r in runs)
    assert first == second and first and all(line and not name.isdigit() for stack in first for name, line in stack)
    assert [[k.name for g in r.graphs for k in g.kernels] for r in runs] == [["cpp_fused_relu_0"]] * 2

    # two functions with one graph: the second is served from the caches (AOTAutograd's and the FX graph
    # cache), which leave it no debug folder: it is read from the trace
    with inductor_lens.inspecting(tmp_path / "twice", title="twice") as seen:
        first_fn = torch.compile(lambda x: torch.tanh(x) * 2)
        second_fn = torch.compile(lambda x: torch.tanh(x) * 2)
        first_fn(torch.randn(8, 32))
        second_fn(torch.randn(8, 32))
    assert seen.result is not None
    run = seen.result.run
    assert [(g.compile_id, g.cache_hit, len(g.kernels)) for g in run.graphs] == [("0/0", False, 1), ("1/0", True, 1)]
    assert run.stats.diagnostics == ()
