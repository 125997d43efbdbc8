"""The compilation page's views of tlparse's: the stack trie coloured by outcome, failures and restarts, Dynamo's
graph counts and cache size, and the cache lookups, on real captures read from the debug folder and from the
TORCH_TRACE log alone.

cpu-torch2.13-compile-failure (torch 2.13, CPU): a graph break with its restart (``0/0`` restarted as ``0/0_1``),
an FX graph cache hit (``1/0``), an Inductor failure (``2/0``), both caches bypassed (``3/0``), a frame with no
graph (``4/0``) and a Dynamo failure at a user line (``5/0``). cpu-torch2.13-graphbreak-recompile: graph breaks,
recompiles and a restart that is not a graph break (``1/1_1``). block_default (torch 2.11, H200): the counts and
the lookups' keys and components.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.compat import TRACE_FILE
from inductor_lens.parse.frames import fold_restarts
from inductor_lens.parse.trace import FrameTrace
from inductor_lens.records import CompileRun
from inductor_lens.report import render_report
from inductor_lens.report.compile_view import compile_page
from inductor_lens.report.outcome_view import StackNode

FAILURE = "cpu-torch2.13-compile-failure"
GRAPHBREAK = "cpu-torch2.13-graphbreak-recompile"
MODELS = "/tmp/lens-fixtures/models/"
# The lines of torch's module call and of torch.compile's wrapper between a call and the compiled forward.
MODULE_CALL = (
    "torch/_dynamo/eval_frame.py:511",
    "torch/nn/modules/module.py:1778",
    "torch/nn/modules/module.py:1789",
    "torch/_dynamo/eval_frame.py:1166",
)


def _traces_alone(capture: Path, target: Path) -> Path:
    target.mkdir()
    for path in capture.rglob("*"):
        if path.is_file() and TRACE_FILE.match(path.name):
            shutil.copy2(path, target / path.name)
    return target


@pytest.fixture(params=["debug folder", "trace alone"])
def read(
    request: pytest.FixtureRequest, unpacked: Callable[[str], Path], tmp_path: Path
) -> Callable[[str], CompileRun]:
    """read(case): the capture parsed from its debug folder, or from its TORCH_TRACE logs alone."""

    def get(case: str) -> CompileRun:
        root = unpacked(case)
        if request.param == "trace alone":
            alone = tmp_path / case
            root = alone if alone.is_dir() else _traces_alone(root, alone)
        return parse_debug_folder(root)

    return get


def _shape(nodes: tuple[StackNode, ...] | list[StackNode]) -> list[tuple[object, ...]]:
    """The trie as (lines, compiles with their outcomes, children), lines named as the page names them."""
    return [
        (
            tuple(item.label.removeprefix(MODELS) for item in node.lines),
            tuple((c.compile_id, c.outcome) for c in node.compiles),
            _shape(node.children),
        )
        for node in nodes
    ]


def test_the_stack_trie_merges_the_stacks_and_colours_each_compile_by_its_outcome(read) -> None:
    run = read(FAILURE)
    page = compile_page(run, analyze(run))
    assert _shape(page.trie) == [
        (("compile_failure.py:85",), (), [
            (("compile_failure.py:71", *MODULE_CALL), (), [
                (("compile_failure.py:43",), (("0/0_1", "graph-breaks"),), []),
                (("torch/nn/modules/module.py:1778", "compile_failure.py:45"), (("1/0", "compiled"),), []),
            ]),
            (("compile_failure.py:49",), (("2/0", "failed"),), []),
            (("compile_failure.py:53",), (("3/0", "compiled"),), []),
            (("compile_failure.py:57",), (("4/0", "no-graph"),), []),
            (("compile_failure.py:61",), (("5/0", "failed"),), []),
        ]),
    ]  # fmt: skip
    assert not page.unstacked
    # The first run of lines is the script's <module>, its last the compiled function: inductor-lens's own
    # frames (runpy, its model process) above it are left out, torch's are kept and told apart.
    first = page.trie[0].lines[0].line
    assert (first.function, first.code) == ("<module>", "main()")
    assert [(library, len(lines)) for library, lines in page.trie[0].children[0].segments] == [
        (False, 1),
        (True, 4),
    ]

    run = read(GRAPHBREAK)

    page = compile_page(run, analyze(run))
    assert _shape(page.trie) == [
        (MODULE_CALL, (), [
            (("graphbreak_recompile.py:15",), (("0/0_1", "graph-breaks"), ("0/1_1", "graph-breaks")), []),
            (("torch/nn/modules/module.py:1778", "graphbreak_recompile.py:17"),
             (("1/0", "compiled"), ("1/1_1", "restarted")), []),
        ]),
    ]  # fmt: skip


def test_failures_and_restarts_list_each_attempt_with_its_reason_and_line(read) -> None:
    run = read(FAILURE)
    page = compile_page(run, analyze(run))
    rows = [
        (
            r.compile_id,
            r.anchor,
            r.kind,
            r.headline,
            r.where.label.removeprefix(MODELS) if r.where else None,
            r.restarted_as,
        )
        for r in page.failures
    ]
    assert rows == [
        ("0/0", "frame-0-0_1", "restart", "Call to `torch._dynamo.graph_break()`", "compile_failure.py:45", "0/0_1"),
        ("2/0", "frame-2-0", "InductorError", "RuntimeError: RefuseSin: this pass refuses graphs that compute aten.sin",
         None, ""),
        ("5/0", "frame-5-0", "Unsupported", "Call to `torch._dynamo.graph_break()`", "compile_failure.py:63", ""),
    ]  # fmt: skip
    restart, inductor, _ = page.failures
    assert restart.where is not None and restart.where.code == "torch._dynamo.graph_break()"
    assert restart.more and "User-inserted graph break" in restart.reason and not inductor.more
    frames = {f.compile_id: f for f in read(FAILURE).frames}
    assert (frames["0/0_1"].restarted, frames["2/0"].fail_type, frames["5/0"].fail_type) == (
        ("0/0",),
        "InductorError",
        "Unsupported",
    )

    run = read(GRAPHBREAK)

    page = compile_page(run, analyze(run))
    item = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert [(r.compile_id, r.kind, r.headline, r.where.line if r.where else None, r.restarted_as) for r in page.failures] == [
        ("0/0", "restart", item, 17, "0/0_1"),
        ("0/1", "restart", item, 17, "0/1_1"),
        ("1/1", "restart", "<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>", None, "1/1_1"),
    ]  # fmt: skip


def test_the_failure_page_shows_the_trie_the_table_and_each_outcome(unpacked) -> None:
    run = parse_debug_folder(unpacked(FAILURE))
    # Two graph folders have no output code: the FX graph cache hit's (Inductor writes no debug output for it; read
    # from the trace, tests/unit/test_cache_hits.py) and the compile Inductor failed, the one warned about.
    assert [d.where.rsplit("/", 1)[-1] for d in run.stats.diagnostics] == ["model__2_inference_2.2"]
    html = render_report(run, analyze(run), draw=False)["compile.html"]
    assert html.count('<a class="badge outcome-failed" href="#frame-2-0"') == 1
    assert '<a class="badge outcome-no-graph" href="#frame-4-0"' in html
    assert html.count('<tr class="failed">') == 2 and html.count('<tr class="restart">') == 1
    assert (
        "<code>InductorError</code>: <span" in html and "after 1 restart (attempt <code>[0/0]</code>" in html
    )
    for label in (
        "failed",
        "produced no graph",
        "compiled, with graph breaks",
        "compiled after a restart",
        "compiled",
    ):
        assert f"</span> {label}</span>" in html  # the legend
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids)) and set(re.findall(r'href="#([^"]+)"', html)) <= set(ids)


def test_dynamo_graph_counts_and_cache_size_come_from_compilation_metrics(read) -> None:
    run = read("block_default")
    counts = [
        (
            f.compile_id,
            f.graph_op_count,
            f.graph_node_count,
            f.graph_input_count,
            f.cache_size,
            f.accumulated_cache_size,
        )
        for f in run.frames
    ]
    assert counts == [("0/0", 17, 31, 13, 0, 0), ("0/1", 17, 31, 13, 1, 1)]
    assert all(not f.non_compliant_ops and not f.compliant_custom_ops for f in run.frames)
    html = render_report(run, analyze(run), draw=False)["compile.html"]
    assert html.count("17 ops · 31 nodes · 13 inputs") == 2
    assert "1 compiled entry before this compile" in html and "a recompile" in html

    frames = {f.compile_id: f for f in read(FAILURE).frames}
    assert [(f.graph_op_count, f.graph_node_count, f.graph_input_count) for f in frames.values()] == [
        (2, 6, 3), (2, 6, 3), (None, None, None), (2, 4, 1), (None, None, None), (None, None, None)
    ]  # fmt: skip


def test_each_compile_lists_its_cache_lookups_with_key_result_and_reason(read) -> None:
    run = read(FAILURE)
    lookups = [
        (f.compile_id, c.cache, c.result, c.key, c.bypass_reason, c.detail, c.components_total)
        for f in run.frames
        for c in f.cache_lookups
    ]
    fx_key = "ftmyhe6smypjuj53ggzrtdxzfp3z2kt3rtfijq4tc2sypclkq37g"
    bypass = "Unsupported post grad custom pass"
    assert lookups == [
        ("0/0_1", "AOTAutograd", "miss", "aivnv3dkhhsyn72lqpal7m4lhjjczfbbytvzuwi4kbi5ywqwa7ex", "", "full_miss", 0),
        ("0/0_1", "FX graph", "miss", fx_key, "", "full_miss", 637),
        ("1/0", "AOTAutograd", "miss", "aitpqkpbvupmf6d4o2bbkpjiaylsjaa77hfql7jr7hjinpmufleb", "", "full_miss", 0),
        ("1/0", "FX graph", "hit", fx_key, "", "hit", 637),
        ("2/0", "AOTAutograd", "miss", "ajspfj3bokqproh5tlioaweljruuzka64z4f5nkgwspktcq54w5g", "", "full_miss", 0),
        ("3/0", "AOTAutograd", "bypass", None, bypass, "", 0),
        ("3/0", "FX graph", "bypass", None, bypass, "", 0),
    ]  # fmt: skip
    miss, hit = (c for f in run.frames for c in f.cache_lookups if c.cache == "FX graph" and c.key)
    # The miss took the compile that the hit saved.
    assert miss.seconds == hit.seconds == 10.775583353
    assert len(miss.components) == 100 and miss.components[0].startswith(
        "[cmg5e66vhyhklstnlokw7ahv6fhn6ua3zizn655so2ppkgh3sso] gm: <lambda>()"
    )
    # The key still names the graph it looked up (the profiles' graph calls are named by it).
    page = compile_page(run, analyze(run))
    (first,) = [v for v in page.frames if v.frame.compile_id == "0/0_1"]
    assert [(item.lookup.cache, item.graph.fx_cache_key if item.graph else None) for item in first.cache_lookups] == [
        ("AOTAutograd", None), ("FX graph", fx_key)
    ]  # fmt: skip
    assert CompileRun.from_json(run.to_json()).frames == run.frames  # lens.json keeps them all
    # A restarted attempt's lookup stays with the compile it restarted into, and says which attempt made it.
    restarted = {f.compile_id: f for f in read(GRAPHBREAK).frames}["1/1_1"]
    assert [(c.cache, c.compile_id) for c in restarted.cache_lookups] == [
        ("AOTAutograd", "1/1"), ("AOTAutograd", "1/1_1"), ("FX graph", "1/1_1")
    ]  # fmt: skip


def test_a_lookups_components_are_capped_and_the_page_says_so(unpacked) -> None:
    run = parse_debug_folder(unpacked("block_default"), strict=True)
    aot, fx = run.frames[0].cache_lookups
    assert (aot.cache, aot.result, aot.key, aot.components_total, len(aot.components), aot.components_cut) == (
        "AOTAutograd", "miss", "an5qc2uqwgd6534s3pl3kllw3fll56d67i2gao6o3uh5ztap6sj2", 549, 100, 3
    )  # fmt: skip
    assert (fx.key, fx.seconds, fx.components_total, fx.components_cut) == (
        "faiblgx6hzn7sakwkhzfqbh3g6qjjz4qnh4pwv3sbar6a7xcq5e7", 2.219041944, 550, 2
    )  # fmt: skip
    assert max(len(c) for c in fx.components) == 1000
    html = render_report(run, analyze(run), draw=False)["compile.html"]
    assert "what the key hashes: the first 100 of 550; 2 of them cut at 1,000 characters" in html
    assert '<code class="cache-key">faiblgx6hzn7sakwkhzfqbh3g6qjjz4qnh4pwv3sbar6a7xcq5e7</code>' in html
    assert "the compile took 2.22 s" in html
    # torch_version and autograd_config are pickled bytes printed as text: named, never dumped into the page
    assert "[z4hnxccf5csppuirjdf355yl36bqh4gn5glcmyc2epnrbpj2vlh] autograd_config: <1,098 characters of binary data " \
        "(a pickled value), not shown>" in aot.components
    assert not any(c < " " and c not in "\t\n" for c in html)


def test_every_stub_attempt_of_a_frame_folds_into_its_last() -> None:
    """Two restarts in a row (``0/0`` and ``0/0_1`` without metrics, ``0/0_2`` compiled): one compile, which
    lists both attempts; another frame's attempts stay apart."""
    traces = {cid: FrameTrace(cid) for cid in ("0/0", "0/0_1", "0/0_2", "1/0")}
    traces["0/0_2"].metrics = {"co_name": "forward"}
    traces["1/0"].metrics = {"co_name": "other"}
    assert [(t.compile_id, t.restarted) for t in fold_restarts(traces)] == [
        ("0/0_2", ["0/0", "0/0_1"]),
        ("1/0", []),
    ]
