"""The compiler-stages page in Chromium: a click on a line in one pane marks the lines tied to it in the other two.

On mlp_default's GELU kernel (H200 capture), compiled here for sm_90 with the Triton wheel's ptxas, as
tests/unit/test_kernel_stages.py compiles it: the Python source, PTX and SASS panes side by side within a
1,400 px window; a Python line marks its PTX and SASS lines, a PTX line marks its Python line, and
``#line=N`` in the address selects line N on load. The PTX and SASS line numbers come from the page's own
line map (#st-data): they change with Triton's code generation, the kernel's Python lines do not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inductor_lens.api import render
from inductor_lens.parse import parse_debug_folder
from inductor_lens.report.stages_view import stages_url
from inductor_lens.stages import attach_stages, tools

from ..unit.test_kernel_stages import POINTWISE, _one_kernel_run
from .test_browser import WINDOW, _open, browser  # noqa: F401 (fixtures)
from .test_provenance import _in_view, _marked

PANES = ("py", "ptx", "sass")
STORE = 37  # the kernel's tl.store line in the capture's source
ERF = 33  # its libdevice.erf line: inlined, in several PTX ranges


@pytest.fixture(scope="module")
def stages_page(unpacked: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stages page of the one kernel, in a report of a run cut down to it (one compile, no drawings)."""
    if tools.tool_path("ptxas") is None:
        pytest.skip("this Triton ships no ptxas")
    run, graph, kernel = _one_kernel_run(parse_debug_folder(unpacked(POINTWISE[0])), POINTWISE[1])
    run = attach_stages(run, None, compile_missing=True)
    stages = run.stages_of(graph.id, kernel.name)
    assert stages is not None and not stages.error, stages
    out = tmp_path_factory.mktemp("browser") / "stages"
    render(run, out, draw=False)
    return out / stages_url(graph, kernel.name)


def _line_map(page) -> dict[int, dict[str, Any]]:
    """Python line -> its entry in the page's line map ({l, ptx: [[first, last]], sass: [[first, last]]})."""
    entries = page.evaluate("JSON.parse(document.getElementById('st-data').textContent).lines")
    return {entry["l"]: entry for entry in entries}


def _numbers(ranges: list[list[int]]) -> list[int]:
    return [n for first, last in ranges for n in range(first, last + 1)]


def _assert_selected(page, entry: dict[str, Any], pane: str, number: int) -> None:
    """``entry``'s Python line is selected by line ``number`` of ``pane``: that line is .pv-sel, every other line
    tied to the Python line is .pv-hit, nothing else is marked, and the status line counts them."""
    __tracebackhide__ = True
    for key, ranges in zip(PANES, ([[entry["l"], entry["l"]]], entry["ptx"], entry["sass"]), strict=True):
        selected = [number] if key == pane else []
        assert _marked(page, key, "pv-sel") == selected, key
        assert _marked(page, key) == [n for n in _numbers(ranges) if n not in selected], key
    ptx, sass = _numbers(entry["ptx"]), _numbers(entry["sass"])
    assert page.inner_text("#st-status") == (
        f"Python line {entry['l']}: {len(ptx)} PTX lines in {len(entry['ptx'])} ranges, "
        f"{len(sass)} SASS lines in {len(entry['sass'])} ranges."
    )
    assert page.evaluate("location.hash") == f"#line={entry['l']}"


def _texts(page, pane: str, numbers: list[int]) -> list[str]:
    return [page.inner_text(f"#{pane}-{n}") for n in numbers]


def test_a_click_marks_the_lines_tied_to_it_in_the_other_panes(browser, stages_page: Path) -> None:  # noqa: F811
    page, problems = _open(browser, stages_page.as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW
    boxes = [page.locator(f"[data-scroll='{pane}']").bounding_box() for pane in PANES]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and boxes[2]["x"] + boxes[2]["width"] <= WINDOW
    lines = _line_map(page)
    assert page.inner_text(f"#py-{STORE}").strip() == "tl.store(out_ptr0 + (x0), tmp8, None)"
    assert page.inner_text(f"#py-{ERF}").strip() == "tmp5 = libdevice.erf(tmp4)"
    assert {STORE, ERF} <= set(lines)
    # every linked line is marked so on load, and only those
    assert _marked(page, "py", "pv-m") == sorted(lines)
    for pane in ("ptx", "sass"):
        assert _marked(page, pane, "pv-m") == sorted({n for e in lines.values() for n in _numbers(e[pane])})
    assert page.inner_text("#st-status") == "Click a line in any pane."

    # the store's Python line: its PTX lines hold the global store, its SASS lines the STG
    page.click(f"#py-{STORE}")
    store = lines[STORE]
    _assert_selected(page, store, "py", STORE)
    assert any("st.global" in text for text in _texts(page, "ptx", _numbers(store["ptx"])))
    assert any("STG" in text for text in _texts(page, "sass", _numbers(store["sass"])))
    assert _in_view(page, f"ptx-{store['ptx'][0][0]}") and _in_view(page, f"sass-{store['sass'][0][0]}")

    # a PTX line of the inlined erf, in its last range: back to the erf's Python line, and the store unmarked
    erf = lines[ERF]
    assert len(erf["ptx"]) > 1
    clicked = erf["ptx"][-1][0]
    assert all(clicked not in _numbers(e["ptx"]) for line, e in lines.items() if line != ERF)
    page.click(f"#ptx-{clicked}")
    _assert_selected(page, erf, "ptx", clicked)
    assert _in_view(page, f"py-{ERF}") and _in_view(page, f"sass-{erf['sass'][0][0]}")

    # a line tied to no Python line clears the selection and says so
    assert 1 not in _marked(page, "ptx", "pv-m")
    page.click("#ptx-1")
    assert all(_marked(page, pane, how) == [] for pane in PANES for how in ("pv-sel", "pv-hit"))
    assert page.inner_text("#st-status") == "Line 1 of the PTX carries no Python line."
    assert problems == []
    page.close()


def test_the_address_selects_a_line_on_load(browser, stages_page: Path) -> None:  # noqa: F811
    page, problems = _open(browser, f"{stages_page.as_uri()}#line={STORE}")
    store = _line_map(page)[STORE]
    _assert_selected(page, store, "py", STORE)
    assert _in_view(page, f"py-{STORE}")
    assert _in_view(page, f"ptx-{store['ptx'][0][0]}") and _in_view(page, f"sass-{store['sass'][0][0]}")
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW
    assert problems == []
    page.close()
