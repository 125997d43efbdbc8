"""The report in a real browser: Debian's Chromium, headless, driven by Playwright.

Every page must load from disk without a console error or a failed request; sorting, filtering and
the links from the drawing must work. `make test` installs Chromium; elsewhere the test is skipped
unless INDUCTOR_LENS_REQUIRE_BROWSER=1 (set by `make test` and CI), which turns a missing browser
into a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from inductor_lens.api import diff_reports, report_folder

from ..conftest import require_graphviz

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
WINDOW = 1400  # px: the width every page must fit without scrolling sideways


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    required = os.environ.get("INDUCTOR_LENS_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            pytest.fail("playwright is not installed")
        pytest.skip("playwright is not installed")
    if not Path(CHROMIUM).is_file():
        if required:
            pytest.fail(f"Chromium not found at {CHROMIUM}")
        pytest.skip("Chromium is not installed")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def block_report(unpacked, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser") / "block"
    report_folder(unpacked("block_default"), out, strict=True)
    return out


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": WINDOW, "height": 900})
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("requestfailed", lambda request: problems.append(f"failed request {request.url}"))
    page.goto(url)
    page.wait_for_load_state("load")
    return page, problems


def test_every_page_loads_without_console_errors(browser, block_report: Path) -> None:
    pages = sorted(block_report.rglob("*.html"))
    # index, compile, hand-written, source, log, 2 graphs, 8 kernels, each graph's 5 text pages (FX graphs
    # before and after the post-grad passes, the IR before and after fusion, output_code.py) and its provenance
    # page, and each compile's 9 IR stages from the trace (0/0: forward, with the joint graph; 0/1: inference)
    assert len(pages) == 45
    for html in pages:
        page, problems = _open(browser, html.as_uri())
        assert page.title().endswith("· inductor-lens"), html
        assert problems == [], f"{html.relative_to(block_report)}: {problems}"
        page.close()


def test_kernel_table_sorts_and_filters(browser, block_report: Path) -> None:
    page, problems = _open(browser, (block_report / "index.html").as_uri())
    rows = page.locator("#kernel-table tbody tr")
    assert rows.count() == 18
    page.click("#kernel-table th:has-text('Bytes')")
    page.click("#kernel-table th:has-text('Bytes')")  # second click: descending
    first = rows.nth(0).locator("td").nth(1).inner_text()
    assert first.startswith("triton_poi_fused") and "gelu" in first  # the 33.6 MB kernels lead
    page.fill("input[data-filter-table='kernel-table']", "layer_norm_0")
    assert page.locator("#kernel-table tbody tr:visible").count() == 2
    assert problems == []
    page.close()


def test_drawing_links_to_kernel_pages(browser, block_report: Path) -> None:
    require_graphviz()
    page, problems = _open(browser, (block_report / "graphs" / "model__1_inference_3.1.html").as_uri())
    link = page.locator(".drawing svg a[*|href$='triton_poi_fused_addmm_gelu_view_2.html']").first
    link.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/kernels/model__1_inference_3.1/triton_poi_fused_addmm_gelu_view_2.html")
    assert page.locator("h1").inner_text().startswith("triton_poi_fused_addmm_gelu_view_2")
    assert problems == []
    page.close()


def test_launch_link_opens_the_code_at_its_line(browser, block_report: Path) -> None:
    graph_page = block_report / "graphs" / "model__1_inference_3.1.html"
    page, problems = _open(browser, graph_page.as_uri())
    page.click("#launch-5 td:first-child a")
    page.wait_for_load_state("load")
    assert page.url.endswith("/graphs/model__1_inference_3.1/output_code.html#code-" + page.url.rsplit("-", 1)[-1])
    assert page.locator(".line-target").count() == 1
    assert "triton_per_fused_add_addmm_native_layer_norm_view_1.run(" in page.locator(".line-target").inner_text()
    assert problems == []
    page.close()


def test_compile_timeline_draws_each_span_and_a_hover_names_it(browser, block_report: Path) -> None:
    page, problems = _open(browser, (block_report / "compile.html").as_uri())
    assert page.locator(".tl-chart").count() == 3 and page.locator(".tl-box").count() == 126
    page.locator(".tl-box", has_text="entire_frame_compile").first.hover()
    tip = page.locator(".tl-tip")
    assert tip.is_visible() and tip.inner_text().startswith("entire_frame_compile: 4.44 s\n[0/0] · at +0.001 s")
    page.locator(".tl-box.tl-narrow").first.hover()  # 3 px wide, drawn over its neighbours: still hoverable
    assert tip.inner_text().startswith("insert_deferred_runtime_asserts: 3.8 ms\n[0/0]")
    page.locator(".tl-chart [data-tl-zoom='in']").first.click()  # the chart widens inside its frame
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW
    assert problems == []
    page.close()


def test_handwritten_page_and_kernel_side_by_side(browser, block_report: Path) -> None:
    page, problems = _open(browser, (block_report / "handwritten.html").as_uri())
    rows = page.locator("#handwritten-table tbody tr")
    assert rows.count() == 18  # 8 Triton kernels and 10 extern matmul/attention calls, both graphs
    composed = rows.filter(has_text="triton_per_fused_add_native_layer_norm_view_1")
    # the addmm before it added its bias: the kernel's add is a plain residual (the two vectors are LayerNorm's)
    assert "residual → layernorm" in composed.inner_text() and "bias_residual" not in composed.inner_text()
    composed.locator("td").nth(1).locator("a").click()
    assert page.url.endswith("#model__0_forward_1.0:5:triton_per_fused_add_native_layer_norm_view_1")
    page.goto(
        (
            block_report / "kernels" / "model__1_inference_3.1" / "triton_poi_fused_addmm_gelu_view_2.html"
        ).as_uri()
    )
    pair = page.locator("#handwritten .source-pair").first
    assert pair.locator("h4").nth(0).inner_text() == "Inductor's kernel"
    assert "bias_gelu" in pair.locator("h4").nth(1).inner_text()
    # the two kernels of the bias forms (flat, and 2-D tiles for aligned rows) and the helpers they call
    shown = pair.locator(".pane").nth(1).inner_text()
    for function in ("_bias_act_kernel", "_bias_act_tiles_kernel", "_activate", "_gaussian_cdf_pdf"):
        assert f"def {function}(" in shown
    assert shown.count("@triton.jit") == 5  # and _add_residual
    assert problems == []
    page.close()


def test_large_report_pages_load(browser, large_report: Path) -> None:
    """The 24-layer transformer's pages (several MB, hundreds of launches drawn) load cleanly."""
    graphs = sorted((large_report / "graphs").glob("*.html"))
    for html in [
        large_report / "index.html",
        large_report / "compile.html",
        large_report / "source.html",
        *graphs,
    ]:
        page, problems = _open(browser, html.as_uri())
        assert problems == [], f"{html.name}: {problems}"
        page.close()


def test_timed_report_draws_the_step_and_the_roofline(browser, unpacked, tmp_path: Path) -> None:
    out = tmp_path / "timed"
    report_folder(unpacked("h200-block-autotune-timed"), out, strict=True)
    page, problems = _open(browser, (out / "index.html").as_uri())
    segments = page.locator(".timebar a")
    assert segments.count() == 9 + 1  # one per launch, and the GPU's idle time
    assert segments.first.bounding_box()["width"] > 0
    widths = [segments.nth(i).bounding_box()["width"] for i in range(segments.count())]
    bar = page.locator(".timebar").bounding_box()["width"]
    assert sum(widths) == pytest.approx(bar, rel=0.02)  # the segments fill the step
    assert "aten.mm" in (segments.nth(7).get_attribute("title") or "")
    assert page.locator("svg.chart").count() == 2
    # roofline: 4 matmuls and the attention (FLOPs counted); bandwidth: those 5 and 4 Triton kernels
    assert page.locator("svg.chart circle").count() == 5 + 5 + 4
    rows = page.locator("#kernel-table tbody tr")
    first = rows.nth(0).locator("td").nth(1).inner_text()
    assert first == "aten.mm"  # slowest first
    segments.nth(7).click()  # a library call's segment opens its operation's page
    page.wait_for_load_state("load")
    assert "/ops/library-" in page.url and "cuBLAS" in page.locator("h1").inner_text()
    assert problems == []
    page.close()


def test_comparison_pages_and_links(browser, block_report: Path, unpacked, tmp_path: Path) -> None:
    timed = tmp_path / "timed"
    report_folder(unpacked("h200-block-autotune-timed"), timed, strict=True)
    comparison = diff_reports(block_report, timed, tmp_path / "diff")
    pages = sorted((tmp_path / "diff").rglob("*.html"))
    assert [p.relative_to(tmp_path / "diff").as_posix() for p in pages] == ["diffs/1.html", "index.html"]
    for html in pages:
        page, problems = _open(browser, html.as_uri())
        assert problems == [], f"{html}: {problems}"
        page.close()
    page, problems = _open(browser, comparison.index.as_uri())
    assert page.locator("#compare-table thead th").count() == 3  # the row labels, and one column per report
    page.click("a:has-text('side-by-side sources')")
    page.wait_for_load_state("load")
    assert page.url.endswith("/diffs/1.html")
    changed = page.locator("section.change").filter(has=page.locator(".badge.change-changed")).first
    assert changed.locator("table.sbs tr.replace, table.sbs tr.insert").count() > 0
    changed.locator("h3 a").last.click()  # the kernel in the second report
    page.wait_for_load_state("load")
    assert "/timed/" in page.url and page.locator("h1").count() == 1
    assert problems == []
    page.close()


# A kernel of the Llama capture, named after the 20 ops fused into it (178 characters), launched twice.
LONG_NAME = (
    "triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bmm_cat_clone_cos_"
    "expand_le_mul_neg_scalar_tensor_sin_slice_transpose_unsqueeze_view_where_4"
)


@pytest.fixture(scope="module")
def llama_report(unpacked, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real model's report: HF Llama on an H100, timed, with kernel names of up to 178 characters."""
    out = tmp_path_factory.mktemp("browser") / "llama"
    report_folder(unpacked("llama_small_bf16"), out, strict=True)
    return out


def _header_right_edges(page, table: str) -> dict[str, float]:
    return page.evaluate(
        "selector => Object.fromEntries(Array.from(document.querySelector(selector).tHead.rows[0].cells)"
        ".map(cell => [cell.textContent.trim(), cell.getBoundingClientRect().right]))",
        table,
    )


def _fits_the_window(page, table: str) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW
    scroller = page.locator(table).evaluate("t => [t.parentElement.scrollWidth, t.parentElement.clientWidth]")
    assert scroller[0] <= scroller[1], f"{table} scrolls sideways in its container: {scroller}"


def test_kernel_table_fits_the_window_with_long_names_shortened(browser, llama_report: Path) -> None:
    page, problems = _open(browser, (llama_report / "index.html").as_uri())
    _fits_the_window(page, "#kernel-table")
    edges = _header_right_edges(page, "#kernel-table")
    assert list(edges)[:4] == ["Launch", "Kernel", "In context, per step", "Share"]  # the times right after the name
    for header in ("In context, per step", "Share", "Isolated, per launch", "GB/s", "% roofline", "Bytes", "ATen ops"):
        assert edges[header] <= WINDOW, header
    cell = page.locator(f'#kernel-table td[data-value="{LONG_NAME}"]')
    shown = cell.locator(".short-name")
    assert shown.get_attribute("title") == LONG_NAME
    assert shown.inner_text().startswith("triton_poi_fused_") and shown.inner_text().endswith("view_where_4")
    assert len(shown.inner_text()) < 45 and shown.bounding_box()["width"] < 400
    page.fill("input[data-filter-table='kernel-table']", "cudnn_attention__to_copy")  # a part the cell elides
    assert cell.is_visible()
    assert problems == []
    page.close()


def test_launch_table_fits_the_window(browser, llama_report: Path) -> None:
    page, problems = _open(browser, (llama_report / "graphs" / "model__0_inference_0.0.html").as_uri())
    _fits_the_window(page, "#launch-table")
    edges = _header_right_edges(page, "#launch-table")
    assert list(edges)[:3] == ["#", "Kernel or call", "Time per step"] and edges["Time per step"] <= WINDOW
    assert page.locator(f'#launch-table .short-name[title="{LONG_NAME}"]').count() == 2  # one row a launch
    assert problems == []
    page.close()


def test_kernel_page_shows_the_whole_name_within_the_window(browser, llama_report: Path) -> None:
    kernel = llama_report / "kernels" / "model__0_inference_0.0" / f"{LONG_NAME}.html"
    page, problems = _open(browser, kernel.as_uri())
    assert page.locator("h1 code").inner_text() == LONG_NAME
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW
    assert problems == []
    page.close()


@pytest.fixture(scope="module")
def resnet50_report(unpacked, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torchvision ResNet-50 --train on an H100: 2 graphs, 268 kernels, drawn in parts."""
    require_graphviz()
    out = tmp_path_factory.mktemp("browser") / "resnet50"
    report_folder(unpacked("resnet50_train"), out, strict=True)
    return out


def _drawings_fit(page) -> list[dict[str, float]]:
    """Every drawing of the page: the SVG's drawn width, its frame's inner width and its drawn height."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('[data-viewer] .drawing')).map(box => {
            const svg = box.querySelector('svg').getBoundingClientRect();
            return {width: svg.width, height: svg.height, room: box.clientWidth};
        })"""
    )


def test_drawings_are_visible_and_fitted_on_load(browser, resnet50_report: Path) -> None:
    backward = resnet50_report / "graphs" / "model__0_backward_3.1.html"
    parts = sorted((resnet50_report / "graphs" / "model__0_backward_3.1").glob("drawing-*.html"))
    assert any("drawing-kernels-" in p.name for p in parts) and any("drawing-fx-" in p.name for p in parts)
    for html in [backward, parts[0], parts[-1]]:
        page, problems = _open(browser, html.as_uri())
        drawings = _drawings_fit(page)
        assert drawings, html.name
        for drawing in drawings:
            # drawn (not an empty box) and no wider than its frame: fitted to the page width on load
            assert drawing["width"] > 100 and drawing["height"] > 50, (html.name, drawing)
            assert drawing["width"] <= drawing["room"] + 1, (html.name, drawing)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400, html.name
        # zooming in makes the drawing wider than its frame; Fit brings it back
        page.locator("[data-viewer] [data-zoom='in']").first.click()
        page.locator("[data-viewer] [data-zoom='in']").first.click()
        zoomed = _drawings_fit(page)[0]
        page.locator("[data-viewer] [data-zoom='fit']").first.click()
        fitted = _drawings_fit(page)[0]
        assert zoomed["width"] > fitted["width"] and fitted["width"] <= fitted["room"] + 1, html.name
        assert problems == [], f"{html.name}: {problems}"
        page.close()


def test_overview_links_down_to_the_parts(browser, resnet50_report: Path) -> None:
    page, problems = _open(browser, (resnet50_report / "graphs" / "model__0_backward_3.1.html").as_uri())
    page.locator(".drawing svg a[*|href$='drawing-kernels-2.html']").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/graphs/model__0_backward_3.1/drawing-kernels-2.html")
    assert page.locator("h1").inner_text().startswith("Part 2: launches #")
    assert problems == []
    page.close()
