"""The HTML report: every page and link exists, names are escaped, drawings degrade without Graphviz."""

from __future__ import annotations

import posixpath
import re
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.handwritten.attach import attach_handwritten
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun, SourceLine
from inductor_lens.report import dot_layout, drawing, render_report, write_report
from inductor_lens.report.env import short_name

from ..conftest import CPU_CASE, FIXED_TIME, GPU_CASES, require_graphviz


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.scripts_with_src = 0
        self.stylesheets = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag == "a" and values.get("href"):
            self.hrefs.append(values["href"] or "")
        if tag == "script" and values.get("src"):
            self.scripts_with_src += 1
        if tag == "link" and values.get("rel") == "stylesheet":
            self.stylesheets += 1


def _parse_pages(files: dict[str, str]) -> dict[str, _Links]:
    pages = {}
    for path, text in files.items():
        if path.endswith(".html"):
            parser = _Links()
            parser.feed(text)
            pages[path] = parser
    return pages


def _run(unpacked, case: str) -> CompileRun:
    return parse_debug_folder(unpacked(case), strict=True, now=lambda: FIXED_TIME)


DYNAMIC_CASES = (
    "cpu-torch2.13-dynamic-recompile",
    "cpu-torch2.13-slice-dynamic",
    "cpu-torch2.13-mlp-train-dynamic",
)


@pytest.mark.parametrize("case", [*GPU_CASES, CPU_CASE, *DYNAMIC_CASES])
def test_every_link_resolves_and_pages_are_self_contained(unpacked, case: str) -> None:
    run = _run(unpacked, case)
    files = render_report(run, analyze(run), draw=False)
    pages = _parse_pages(files)
    for graph in run.graphs:
        assert f"graphs/{graph.id}.html" in files
        for kernel in graph.kernels:
            assert f"kernels/{graph.id}/{kernel.name}.html" in files
    for path, page in pages.items():
        assert page.scripts_with_src == 0 and page.stylesheets == 0, f"{path} loads an external resource"
        # markup escaped twice shows its tags as text (a code pane's line anchors once did)
        assert "&lt;span id=" not in files[path], f"{path} prints escaped markup"
        for href in page.hrefs:
            if href.startswith(("http://", "https://", "mailto:")):
                pytest.fail(f"{path} links out of the report: {href}")
            target, _, anchor = href.partition("#")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target)) if target else path
            assert resolved in files, f"{path}: broken link {href}"
            # "#kernel=NAME" is a selection the provenance page's script reads, not an element id
            if anchor and "=" not in anchor and resolved in pages:
                assert anchor in pages[resolved].ids, f"{path}: no #{anchor} in {resolved}"


def test_index_lists_every_kernel_and_extern_call(unpacked) -> None:
    run = _run(unpacked, "block_default")
    index = render_report(run, analyze(run), draw=False)["index.html"]
    table = index.split('id="kernel-table"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + 2 * 9  # header + 9 launches in each of the two graphs
    for _graph, kernel in run.all_kernels():
        assert f'<td data-value="{kernel.name}">' in table  # the whole name, whatever the cell shows
    assert table.count('<td data-value="aten._scaled_dot_product_efficient_attention.default">') == 2
    assert "NVIDIA H200" in index and "torch 2.11.0+cu130" in index


def test_hostile_names_are_escaped(unpacked) -> None:
    run = _run(unpacked, "mlp_default")
    evil = '<img src=x onerror=alert(1)>"&'
    graph = replace(run.graphs[0], kernels=(replace(run.graphs[0].kernels[0], aten_ops=(evil,)),))
    hostile = replace(
        run,
        title=evil,
        source_dir=f"/tmp/{evil}",
        graphs=(graph, *run.graphs[1:]),
        log_text=f"W1121 {evil}\n",
    )
    files = render_report(hostile, analyze(hostile), draw=False)
    for path, text in files.items():
        if path.endswith(".html"):
            assert "<img src=x" not in text, path
    assert "&lt;img src=x onerror=alert(1)&gt;&#34;&amp;" in files["index.html"]


def _drawings(page: str) -> list[str]:
    return [part.split("</svg>", 1)[0] for part in page.split('<div class="drawing">')[1:]]


def test_fx_drawing_has_one_group_per_fused_kernel(unpacked) -> None:
    require_graphviz()
    run = _run(unpacked, "block_default")
    graph = run.graphs[1]
    kernel_view, fx_view = _drawings(render_report(run, analyze(run))["graphs/model__1_inference_3.1.html"])
    assert fx_view.startswith("<svg")
    # one cluster per launch: 4 Triton kernels and 5 extern calls, each with the FX nodes it computes
    assert fx_view.count("<title>cluster_") == len(graph.launches) == 9
    for kernel in graph.kernels:
        assert f'<a xlink:href="../kernels/model__1_inference_3.1/{kernel.name}.html"' in fx_view, kernel.name
    assert "self.qkv.weight" in fx_view and "parameter" in fx_view  # placeholders named by their role
    # the kernel-level view: one node per launch, with data edges between them
    for launch in graph.launches:
        assert f"<title>launch{launch.position}</title>" in kernel_view
    assert (
        "<title>launch4&#45;&gt;launch5</title>" in kernel_view
    )  # the proj matmul feeds the residual LayerNorm


def test_report_renders_without_graphviz(unpacked, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dot_layout, "dot_binary", lambda: None)
    run = _run(unpacked, "mlp_default")
    page = render_report(run, analyze(run))["graphs/model__0_forward_1.0.html"]
    assert "'dot' program is not installed" in page.replace("&#39;", "'")
    assert "<svg" not in page
    assert "digraph fx" in page  # the DOT source is still offered


def test_large_graphs_are_drawn_in_parts_with_a_page_each(unpacked, monkeypatch: pytest.MonkeyPatch) -> None:
    require_graphviz()
    monkeypatch.setattr(drawing, "KERNEL_PART_LAUNCHES", 3)
    monkeypatch.setattr(drawing, "FX_PART_NODES", 6)
    run = _run(unpacked, "block_default")
    graph = run.graphs[1]  # 9 launches: 3 parts of 3
    files = render_report(run, analyze(run))
    page = files[f"graphs/{graph.id}.html"]
    kernel_parts = sorted(p for p in files if p.startswith(f"graphs/{graph.id}/drawing-kernels-"))
    fx_parts = sorted(p for p in files if p.startswith(f"graphs/{graph.id}/drawing-fx-"))
    assert len(kernel_parts) == 3 and len(fx_parts) >= 2
    # the graph page: the overview drawing (a box per part, linking to its page) and a list of the parts
    overview = _drawings(page)[0]
    for number in (1, 2, 3):
        assert f'xlink:href="../graphs/{graph.id}/drawing-kernels-{number}.html"' in overview
        assert f'href="{graph.id}/drawing-kernels-{number}.html"' in page
    # every launch is drawn in exactly one part, whose links reach the kernel pages from its folder
    drawn = [files[p] for p in kernel_parts]
    for launch in graph.launches:
        assert sum(f"<title>launch{launch.position}</title>" in part for part in drawn) >= 1
    assert '"../../kernels/' in "".join(drawn) or "../../kernels/" in "".join(drawn)
    # a part reading what an earlier part wrote shows that launch as a stub linking to its part's page
    assert 'xlink:href="drawing-kernels-1.html"' in files[kernel_parts[1]]
    for part in kernel_parts + fx_parts:
        assert "<svg" in files[part] and "took over" not in files[part]


def test_split_in_parts_cuts_where_fewest_reads_cross() -> None:
    # three "layers" of 10 items: inside a layer each item reads the two before it (3 reads cross any cut
    # there); a layer's first item reads only the last item of the layer before (1 read crosses)
    producers = [[i - 1] if i % 10 == 0 else [i - 1, i - 2] if i % 10 > 1 else [i - 1] for i in range(1, 30)]
    producers.insert(0, [])
    assert drawing.split_in_parts(producers, 24) == [(0, 30)]  # within 1.5x of the target: one part
    # the target says 8, but the cuts go between the layers, within a third of it
    assert drawing.split_in_parts(producers, 8) == [(0, 10), (10, 20), (20, 30)]


def test_write_report_writes_every_file(unpacked, tmp_path: Path) -> None:
    run = _run(unpacked, CPU_CASE)
    files = render_report(run, analyze(run), draw=False)
    index = write_report(files, tmp_path / "out")
    assert index == tmp_path / "out" / "index.html"
    written = {
        p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()
    }
    assert written == set(files)
    assert CompileRun.from_json((tmp_path / "out" / "lens.json").read_text()) == run


def test_pages_explain_themselves(unpacked) -> None:
    run = _run(unpacked, "mlp_bf16_max_autotune_nocg")
    files = render_report(run, analyze(run), draw=False)
    assert "What this report shows" in files["index.html"]
    assert "How to read this page" in files["graphs/model__1_inference_3.1.html"]
    kernel_page = files["kernels/model__1_inference_3.1/triton_tem_fused_addmm_gelu_t_2.html"]
    assert "BLOCK_M=128" in kernel_page and "34,359,738,368" in kernel_page
    # bench_k.txt lines are matched to kernels by their module file; the template's is not among them
    assert "Inductor's own benchmark" not in kernel_page
    pointwise_page = files["kernels/model__1_inference_3.1/triton_poi_fused_gelu_1.html"]
    assert re.search(r"<b>0\.019 ms</b>, 1747\.63 GB/s, 19 registers", pointwise_page)


def test_handwritten_pages_show_the_kernels_recorded_with_the_run(unpacked) -> None:
    """Source, formula and summary come from the run's records, not from the installed package."""
    run = attach_handwritten(_run(unpacked, "block_default"), None, execute=False)
    assert {k.name for k in run.handwritten_kernels} == {n for m in run.handwritten for n in m.equivalents}
    layernorm = run.handwritten_kernel("layernorm")
    assert layernorm is not None and layernorm.dims == ("rows", "cols")
    assert layernorm.source.startswith("@triton.jit") and "def _norm_forward_kernel(" in layernorm.source
    recorded = replace(layernorm, formula="recorded_formula(x)", summary="recorded summary",
                       source="@triton.jit\ndef recorded_layernorm_kernel(x_ptr):\n    pass\n")  # fmt: skip
    kernels = tuple(recorded if k.name == "layernorm" else k for k in run.handwritten_kernels)
    run = CompileRun.from_json(replace(run, handwritten_kernels=kernels).to_json())
    files = render_report(run, analyze(run), draw=False)
    page = files["handwritten.html"]
    assert "recorded_layernorm_kernel" in page and "_norm_forward_kernel" not in page
    assert "<code>recorded_formula(x)</code>" in page and "(recorded summary)" in page
    assert "not recorded" not in page
    kernel_page = files["kernels/model__1_inference_3.1/triton_per_fused_native_layer_norm_0.html"]
    assert "recorded_layernorm_kernel" in kernel_page and "_norm_forward_kernel" not in kernel_page


def test_handwritten_source_is_read_without_torch_or_triton() -> None:
    code = (
        "import sys; from inductor_lens.handwritten.source import kernel_record; "
        "k = kernel_record('matmul_bias'); assert 'def matmul_kernel(' in k.source, k; "
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- tables that fit the window, and explanations that fit the graph --------------------------------


def test_long_names_are_shortened_in_the_middle_with_the_whole_name_kept() -> None:
    name = "cpp_fused__unsafe_view_add_clone_native_layer_norm_backward_permute_select_backward_sum_view_5"
    shown = str(short_name(name))
    elided = re.sub(r'<span class="elided">[^<]*</span>', "…", shown)  # CSS draws the …
    visible = re.sub(r"<[^>]+>", "", elided)
    assert visible == "cpp_fused__unsafe_…sum_view_5"  # the kind prefix and the index stay
    assert f'title="{name}"' in shown and re.sub(r"<[^>]+>", "", shown) == name  # hidden, not dropped
    assert str(short_name("triton_poi_fused_addmm_gelu_view_2")) == "triton_poi_fused_addmm_gelu_view_2"
    assert "title" not in short_name(name, titled=False)
    evil = "<img src=x onerror=alert(1)>_" * 3
    assert "<img" not in short_name(evil)


def test_missing_source_lines_are_explained_by_the_graph_they_are_missing_from(unpacked) -> None:
    inference_run = _run(unpacked, "mlp_default")
    inference = render_report(inference_run, analyze(inference_run), draw=False)
    page = inference["kernels/model__1_inference_3.1/triton_poi_fused_addmm_gelu_0.html"]
    assert "torch recorded no stack trace for any op of this inference graph" in page
    assert "gradients" not in page
    backward_run = _run(unpacked, "cpu-torch2.13-mlp-train-dynamic")
    backward = render_report(backward_run, analyze(backward_run), draw=False)
    assert "such as the gradients of a" in backward["kernels/model__0_backward_2.1/cpp_fused_sum_1.html"]
    run = _run(unpacked, "mlp_default")  # the graph names a line for one op, not for this kernel's
    graph = run.graphs[1]
    fx = graph.fx_graphs[0]
    noted = replace(fx.nodes[0], source=SourceLine("/m/mlp.py", 3, "forward", "return self.net(x)"))
    graph = replace(graph, fx_graphs=(replace(fx, nodes=(noted, *fx.nodes[1:])), *graph.fx_graphs[1:]))
    noted_run = replace(run, graphs=(run.graphs[0], graph))
    page = render_report(noted_run, analyze(noted_run), draw=False)[
        "kernels/model__1_inference_3.1/triton_poi_fused_addmm_gelu_0.html"
    ]
    assert "no <code># File:</code> notes for these ops" in page and "gradients" not in page


def test_model_code_in_a_library_is_read_where_it_exists(fixture_copy, tmp_path: Path) -> None:
    """An HF model's code lives under site-packages; the report reads it there, not "not on this machine"."""
    root = fixture_copy("llama_small_bf16")
    venv = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".log", ".txt", ".json"}:
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            old = "/opt/torch/.venv/lib/python3.12/site-packages"
            if old in text:
                path.write_text(text.replace(old, str(venv)), encoding="utf-8", errors="surrogateescape")
    model = venv / "transformers" / "models" / "llama" / "modeling_llama.py"
    model.parent.mkdir(parents=True)
    model.write_text("".join(f"# line {n} of the Llama model\n" for n in range(1, 201)))
    run = parse_debug_folder(root, strict=True)
    assert [s.path for s in run.sources] == [str(model)]  # the other library files referenced are not here
    page = render_report(run, analyze(run), draw=False)["source.html"]
    section = page.split(f">{model}</h2>", 1)[1].split("<h2", 1)[0]
    assert "not on this machine" not in section and "# line 200 of the Llama model" in section


def test_a_re_render_lays_out_and_highlights_nothing(unpacked, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require_graphviz()
    from inductor_lens.report import highlight

    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path / "cache"))
    run = _run(unpacked, "block_default")
    first = render_report(run, analyze(run))
    assert {p.suffix for p in (tmp_path / "cache" / "render").iterdir()} == {".svg", ".html"}
    work: list[object] = []
    monkeypatch.setattr(dot_layout, "_run_dot", lambda *args: work.append(args))
    monkeypatch.setattr(highlight, "_pygments", lambda *args: work.append(args))
    second = render_report(run, analyze(run))
    assert work == []
    assert second.keys() == first.keys()
    page = "graphs/model__1_inference_3.1.html"
    assert _drawings(second[page]) == _drawings(first[page]) and "Layout from the cache." in second[page]
    kernel = "kernels/model__1_inference_3.1/triton_poi_fused_addmm_gelu_view_2.html"
    assert second[kernel] == first[kernel]


def test_a_report_of_unchanged_input_reads_its_lens_json_back(unpacked, tmp_path: Path) -> None:
    import shutil

    from inductor_lens.pipeline import report_folder

    capture = tmp_path / "capture"
    shutil.copytree(unpacked("block_default"), capture)
    out = tmp_path / "report"
    first = report_folder(capture, out, draw=False)
    again = report_folder(capture, out, draw=False)
    assert (first.reused, again.reused) == (False, True)
    assert again.run == first.run
    # any input file changed (here: its time), --strict, or a report folder of other input: parsed again
    log = next(capture.rglob("output_code.py"))
    log.touch()
    assert report_folder(capture, out, draw=False).reused is False
    assert report_folder(capture, out, draw=False, strict=True).reused is False
    other = tmp_path / "other"
    shutil.copytree(unpacked("mlp_default"), other)
    assert report_folder(other, out, draw=False).reused is False
    # a report re-rendered in place: its own pages do not count as input
    assert report_folder(out, draw=False).reused is False  # its input is now the report folder itself
    assert report_folder(out, draw=False).reused is True


def test_text_pages_say_why_a_text_is_plain_and_how_it_is_paged(unpacked, monkeypatch: pytest.MonkeyPatch) -> None:
    from inductor_lens.report import highlight, text_view, views

    run = _run(unpacked, "block_default")
    graph = run.graphs[1]
    files = render_report(run, analyze(run), draw=False)
    # the IR is plain text anyway, and this output_code.py is small enough to highlight: neither is called large
    for name in ("ir_post_fusion", "output_code"):
        assert "Shown without colours" not in files[f"graphs/{graph.id}/{name}.html"], name
    monkeypatch.setattr(highlight, "HIGHLIGHT_LIMIT", 1000)
    monkeypatch.setattr(views, "TEXT_PAGE_LINES", 250)
    pages = text_view.text_pages(graph)
    output_code = [page for url, page in pages.items() if "/output_code" in url]  # 589 lines
    assert [(page.first_line, page.last_line) for page in output_code] == [(1, 250), (251, 500), (501, 589)]
    assert all(page.too_large_to_highlight and page.page_lines == 250 for page in output_code)
    assert not any(page.too_large_to_highlight for url, page in pages.items() if "/ir_" in url)
