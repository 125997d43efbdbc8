"""The provenance page in Chromium: a click in one pane marks and scrolls to its counterparts in the other two.

On the transformer block's inference graph (H200, torch 2.11): the first Linear's addmm, the fused GELU kernel's
launch, the arrow keys, and three panes side by side within a 1,400 px window.
"""

from __future__ import annotations

from pathlib import Path

from .test_browser import WINDOW, _open, block_report, browser  # noqa: F401 (fixtures)

GRAPH = "model__1_inference_3.1"


def _marked(page, pane: str, how: str = "pv-hit") -> list[int]:
    return page.evaluate(
        "([pane, how]) => Array.from(document.querySelectorAll(`[data-scroll='${pane}'] .${how}`))"
        ".map(e => parseInt(e.id.split('-')[1], 10))",
        [pane, how],
    )


def _in_view(page, line_id: str) -> bool:
    return page.evaluate(
        """id => { const line = document.getElementById(id), box = line.closest('[data-scroll]');
        const a = line.getBoundingClientRect(), b = box.getBoundingClientRect();
        return a.top >= b.top && a.bottom <= b.bottom; }""",
        line_id,
    )


def test_clicking_a_node_marks_its_counterparts_in_the_other_panes(browser, block_report: Path) -> None:  # noqa: F811
    page, problems = _open(browser, (block_report / "graphs" / GRAPH / "provenance.html").as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW
    boxes = [page.locator(f"[data-scroll='{pane}']").bounding_box() for pane in ("pre", "post", "code")]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and boxes[2]["x"] + boxes[2]["width"] <= WINDOW
    # each pane scrolls sideways on its own: the output code's lines are longer than its pane
    assert page.evaluate(
        "(() => { const b = document.querySelector(\"[data-scroll='code']\"); return b.scrollWidth > b.clientWidth; })()"
    )

    # post-grad addmm (line 15): from the first Linear (pre-grad line 19), run by extern_kernels.addmm (lines 503-505)
    page.click("#post-15")
    assert _marked(page, "post", "pv-sel") == [15]
    assert _marked(page, "pre") == [19] and _marked(page, "code") == [503, 504, 505]
    assert page.locator("#pre-19").inner_text().strip().startswith("linear: ")
    assert "extern_kernels.addmm(" in page.locator("#code-505").inner_text()
    assert _in_view(page, "pre-19") and _in_view(page, "code-503")
    status = page.inner_text("#pv-status")
    assert status.startswith(
        "addmm · aten.addmm.default (post-grad) → 1 pre-grad node (linear) · aten.addmm (library call, lines 503-505)"
    )

    # the fused GELU kernel's launch in call(): its 7 post-grad nodes, the 2 pre-grad calls they came from
    page.locator("[data-scroll='code']").evaluate("box => { box.scrollTop = box.scrollHeight; }")
    page.click("#code-538")
    assert _marked(page, "code", "pv-sel") == [535, 536, 537, 538]  # its comments, stream and launch
    assert (
        _marked(page, "code")[:2] == [281, 282] and _marked(page, "code")[-1] == 367
    )  # the kernel's definition
    assert _marked(page, "post") == [50, 51, 52, 53, 54, 55, 56]
    assert [page.locator(f"#pre-{n}").inner_text().split(":")[0].strip() for n in _marked(page, "pre")] == [
        "linear_2",
        "gelu",
    ]
    assert page.inner_text("#pv-status").startswith(
        "triton_poi_fused_addmm_gelu_view_2 (launch #7, lines 535-538; kernel lines 281-367) ← 7 post-grad nodes"
    )

    # keyboard: the first linked line of the pre-grad pane (the first LayerNorm), then the next one
    page.focus("[data-scroll='pre']")
    page.keyboard.press("ArrowDown")
    assert _marked(page, "pre", "pv-sel") == [18] and len(_marked(page, "post")) == 9
    page.keyboard.press("ArrowDown")
    assert _marked(page, "pre", "pv-sel") == [19] and 15 in _marked(page, "post")
    # a line with no counterpart says so, and unmapped lines look it
    page.click("#pre-1")
    assert page.inner_text("#pv-status") == "Line 1 of the pre-grad pane has no counterpart."
    assert page.evaluate("getComputedStyle(document.getElementById('pre-2')).opacity") == "0.5"
    assert problems == []
    page.close()
