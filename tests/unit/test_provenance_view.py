"""The provenance page: three linked panes (pre-grad graph, post-grad graph, output code) on real captures.

The links are checked exactly, both ways, against what the captures hold: the C++ MLP trained on CPU (torch
2.13: a forward with provenance maps from the debug folder, a backward whose maps are empty), the fp32 MLP and
the transformer block on an H200 (torch 2.11, Triton kernels), HF Llama's pre-grad graph with a node FX
prints as ``a @ b``; the same page from the TORCH_TRACE log alone, from lens.json, and with no trace at all.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.compat import TRACE_FILE
from inductor_lens.records import CompileRun, GraphRecord
from inductor_lens.report import render_report
from inductor_lens.report.provenance_view import ProvenancePage, provenance_page, provenance_url


def _graph(run: CompileRun, kind: str) -> GraphRecord:
    (graph,) = [g for g in run.graphs if g.kind == kind]
    return graph


def _node(page: ProvenancePage, pane: str, name: str) -> dict:
    (node,) = [n for n in page.data[pane] if n["n"] == name]
    return node


def _post_links(page: ProvenancePage, name: str) -> tuple[int, list[tuple[str, int]], list[tuple[str, list]]]:
    """A post-grad node's line, its pre-grad nodes (name, line) and its launches (label, line ranges)."""
    node = _node(page, "post", name)
    pre = [(page.data["pre"][i]["n"], page.data["pre"][i]["l"]) for i in node["pre"]]
    code = [(page.data["code"][i]["n"], page.data["code"][i]["r"]) for i in node["code"]]
    return node["l"], pre, code


def _code_entry(page: ProvenancePage, name: str, kind: str) -> tuple[list, list[str]]:
    (entry,) = [c for c in page.data["code"] if c["n"] == name and (c["k"] == "kernel") == (kind == "kernel")]
    return entry["r"], [page.data["post"][i]["n"] for i in entry["post"]]


def _lines(page: ProvenancePage, pane: str, first: int, last: int) -> list[str]:
    text = {"post": page.graph.fx_graph("transformed"), "code": None}.get(pane)
    code = text.code if text is not None else page.graph.output_code
    return code.splitlines()[first - 1 : last]


def _traces_alone(capture: Path, target: Path) -> Path:
    target.mkdir()
    for path in capture.rglob("*"):
        if path.is_file() and TRACE_FILE.match(path.name):
            shutil.copy2(path, target / path.name)
    return target


def _without_urls(page: ProvenancePage) -> dict:
    return {
        pane: [{k: v for k, v in item.items() if k != "url"} for item in items]
        for pane, items in page.data.items()
    }


def test_cpu_mlp_forward_links_each_node_to_its_counterparts_and_lines(
    unpacked: Callable[[str], Path],
) -> None:
    run = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True)
    page = provenance_page(run, _graph(run, "forward"), analyze(run))
    pre, post, code = page.panes
    assert (pre.title, pre.lines, pre.mapped_lines) == ("Pre-grad graph", 16, 3)
    assert pre.url == "../../compile/frame-0-0/02-before_pre_grad_graph.html" and not page.pre_is_stand_in
    assert (post.lines, post.mapped_lines, code.lines, code.mapped_lines) == (9, 5, 124, 36)
    assert page.mapping_source == "debug folder" and page.missing == ()
    # Linear-ReLU-Linear: each pre-grad call became a permute and an addmm (the Linears) or a relu
    assert [
        (n["n"], n["t"], n["l"], [page.data["post"][i]["n"] for i in n["post"]]) for n in page.data["pre"]
    ] == [
        ("linear", "torch._C._nn.linear", 10, ["permute", "addmm"]),
        ("relu", "torch.nn.functional.relu", 11, ["relu"]),
        ("linear_1", "torch._C._nn.linear", 12, ["permute_1", "addmm_1"]),
    ]
    assert _post_links(page, "addmm") == (5, [("linear", 10)], [("aten.addmm", [[83, 85]])])
    assert _post_links(page, "relu") == (6, [("relu", 11)], [("cpp_fused_relu_0", [[91, 92], [33, 60]])])
    assert _post_links(page, "permute") == (4, [("linear", 10)], [])  # a view: no launch of its own
    assert _lines(page, "code", 83, 85)[1:] == [
        "        # [Provenance debug handles] extern_kernels.addmm:1",
        "        extern_kernels.addmm(primals_2, primals_3, reinterpret_tensor(primals_1, (64, 128), (1, 64), 0), alpha=1, beta=1, out=buf0)",
    ]
    assert _lines(page, "code", 33, 33)[0].startswith("cpp_fused_relu_0 = async_compile.cpp_pybinding(")
    assert _lines(page, "code", 60, 60) == ["''')"]
    # the kernel's definition leads back to the node it computes, and to its launch line
    assert _code_entry(page, "cpp_fused_relu_0", "kernel") == ([[33, 60], [92, 92]], ["relu"])
    assert _lines(page, "post", 6, 6)[0].strip().startswith("relu: ")


def test_cpu_mlp_backward_has_no_pre_grad_links_but_ties_launches_by_their_source_nodes(
    unpacked: Callable[[str], Path],
) -> None:
    """torch 2.13 logs the backward's provenance maps empty ({"version": 2.0}); the launches' source-node
    comments still name the post-grad nodes the library calls compute."""
    run = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True)
    page = provenance_page(run, _graph(run, "backward"), analyze(run))
    assert page.panes[0].mapped_lines == 0 and all(not n["post"] for n in page.data["pre"])
    assert page.mapping_source == ""  # logged, but empty
    launches = [
        (c["n"], c["h"], [page.data["post"][i]["n"] for i in c["post"]])
        for c in page.data["code"]
        if c["k"] != "kernel"
    ]
    assert launches == [
        ("aten.mm", "extern_kernels.mm:1", ["permute_2", "mm"]),
        ("aten.mm", "extern_kernels.mm:2", ["permute_3", "mm_1"]),
        ("cpp_fused_sum_threshold_backward_0", "cpp_fused_sum_threshold_backward_0:3", []),
        ("aten.mm", "extern_kernels.mm:4", ["le", "full_default", "where", "permute_6", "mm_2"]),
        ("cpp_fused_sum_1", "cpp_fused_sum_1:5", []),
    ]
    assert _post_links(page, "mm_2")[2] == [("aten.mm", [[170, 172]])]


def test_gpu_mlp_links_the_fused_gelu_to_its_triton_kernel(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked("mlp_default"), strict=True)
    page = provenance_page(run, _graph(run, "forward"), analyze(run))
    gelu = ("triton_poi_fused_gelu_0", [[148, 151], [37, 115]])
    for node in ("mul", "mul_1", "erf", "add", "mul_2"):
        assert _post_links(page, node)[1:] == ([("input_2", 11)], [gelu])
    assert _code_entry(page, "triton_poi_fused_gelu_0", "launch") == (
        gelu[1],
        ["mul_2", "mul", "add", "erf", "mul_1"],
    )
    assert _lines(page, "code", 148, 151) == [
        "            # Topologically Sorted Source Nodes: [input_2], Original ATen: [aten.gelu]",
        "            # [Provenance debug handles] triton_poi_fused_gelu_0:2",
        "            stream0 = get_raw_stream(0)",
        "            triton_poi_fused_gelu_0.run(buf0, buf1, 1048576, stream=stream0)",
    ]
    assert _lines(page, "code", 37, 37) == [
        "# kernel path: /root/out/capture/mlp_default/cache_inductor/k3/ck3ofeqd4tx7l4o3ylh2wbc7trsqki766ljdb3va3k2g45bokvno.py"
    ]
    assert _lines(page, "code", 115, 115) == ["''', device_str='cuda')"]
    inference = provenance_page(run, _graph(run, "inference"), analyze(run))
    # no_grad: the first Linear became an mm and a bias add, fused into the GELU's kernel
    assert [inference.data["post"][i]["n"] for i in _node(inference, "pre", "input_1")["post"]] == [
        "permute", "mm_default", "add_tensor"
    ]  # fmt: skip
    assert _post_links(inference, "add_tensor")[2] == [
        ("triton_poi_fused_addmm_gelu_0", [[154, 157], [37, 121]])
    ]
    assert _post_links(inference, "mm_default")[2] == [("aten.mm", [[148, 150]])]


def test_gpu_block_links_attention_and_every_matmul(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked("block_default"), strict=True)
    page = provenance_page(run, _graph(run, "inference"), analyze(run))
    assert (page.panes[0].mapped_lines, page.panes[1].mapped_lines, page.missing) == (17, 53, ())
    assert [
        (name, _post_links(page, name)[:2])
        for name in ("addmm", "mm_default_2", "mm_default_1", "mm_default")
    ] == [
        ("addmm", (15, [("linear", 19)])),
        ("mm_default_2", (32, [("linear_1", 32)])),
        ("mm_default_1", (49, [("linear_2", 37)])),
        ("mm_default", (59, [("linear_3", 39)])),
    ]
    sdpa = "aten._scaled_dot_product_efficient_attention.default"
    ranges, posts = _code_entry(page, sdpa, "launch")
    assert ranges == [[508, 510]] and _lines(page, "code", 510, 510)[0].lstrip().startswith(
        "buf5 = torch.ops.aten."
    )
    assert posts == [
        "_scaled_dot_product_efficient_attention",
        "select",
        "permute_1",
        "view_2",
        "view_1",
        "select_1",
        "select_2",
    ]
    assert [page.data["pre"][i]["n"] for i in _node(page, "post", "select_1")["pre"]] == ["k"]


def test_a_node_fx_prints_as_an_operator_is_found_by_its_name(unpacked: Callable[[str], Path]) -> None:
    """Llama's rotary embedding: ``matmul: "f32[1, 32, 512]..." = inv_freq_expanded @ position_ids_expanded``."""
    run = parse_debug_folder(unpacked("llama_small_bf16"), strict=True)
    page = provenance_page(run, run.graphs[0], analyze(run))
    matmul = _node(page, "pre", "matmul")
    assert matmul["t"] == "inv_freq_expanded @ position_ids_expanded" and matmul["post"]
    assert page.missing == () and page.panes[0].mapped_lines == 156
    assert page.panes[2].too_large_to_highlight  # 658 KB of output code: shown plain, every line still linked


def test_the_trace_alone_and_lens_json_give_the_same_links(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    for name in ("cpu-torch2.13-mlp-train", "mlp_default"):
        whole = parse_debug_folder(unpacked(name), strict=True)
        bare = parse_debug_folder(_traces_alone(unpacked(name), tmp_path / name), strict=True)
        saved = CompileRun.from_json(whole.to_json())
        for kind in ("forward", "backward", "inference"):
            graphs = [g for g in whole.graphs if g.kind == kind]
            if not graphs:
                continue
            expected = _without_urls(provenance_page(whole, graphs[0], analyze(whole)))
            assert _without_urls(provenance_page(bare, _graph(bare, kind), analyze(bare))) == expected, (name, kind)
            assert provenance_page(saved, _graph(saved, kind), analyze(saved)).data == provenance_page(whole, graphs[0], analyze(whole)).data
        assert provenance_page(bare, _graph(bare, "forward"), analyze(bare)).mapping_source == "TORCH_TRACE log"


def test_without_a_trace_the_graph_before_the_post_grad_passes_stands_in(
    fixture_copy: Callable[[str], Path],
) -> None:
    capture = fixture_copy("cpu-torch2.13-mlp-train")
    for path in list(capture.rglob("*")):
        if path.is_file() and TRACE_FILE.match(path.name):
            path.unlink()
    run = parse_debug_folder(capture)
    page = provenance_page(run, _graph(run, "forward"), analyze(run))
    assert page.pre_is_stand_in and page.panes[0].title == "Before the post-grad passes"
    assert page.panes[0].url == "../../graphs/model__0_forward_1.0/fx_graph_readable.html"
    # the same names on both sides: each ATen op of fx_graph_readable.py is its post-grad node
    assert [(n["n"], n["l"], [page.data["post"][i]["n"] for i in n["post"]]) for n in page.data["pre"]] == [
        ("permute", 4, ["permute"]), ("addmm", 5, ["addmm"]), ("relu", 6, ["relu"]),
        ("permute_1", 7, ["permute_1"]), ("addmm_1", 8, ["addmm_1"]),
    ]  # fmt: skip


def test_the_page_is_rendered_linked_and_its_data_escaped(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked("cpu-torch2.13-mlp-train"), strict=True)
    files = render_report(run, analyze(run), draw=False)
    forward = _graph(run, "forward")
    html = files[provenance_url(forward)]
    assert provenance_url(forward) == "graphs/model__0_forward_1.0/provenance.html"
    assert 'href="model__0_forward_1.0/provenance.html"' in files["graphs/model__0_forward_1.0.html"]
    assert "How to read this page" in html and 'id="pv-status"' in html
    for pane in ("pre", "post", "code"):
        assert f'data-scroll="{pane}"' in html and f'<span id="{pane}-1">' in html
    block = re.search(r'<script type="application/json" id="pv-data">(.*?)</script>', html, re.S)
    assert block is not None and "<" not in block[1]  # |tojson escapes <, > and & inside the script block
    assert json.loads(block[1]) == provenance_page(run, forward, analyze(run)).data
    assert all(provenance_url(g) in files for g in run.graphs)
