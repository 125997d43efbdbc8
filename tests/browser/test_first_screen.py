"""The four answers on the first screen (issue 31): a 1,400 x 900 window, no scrolling, on each real H100 capture.

Opened in headless Chromium: the speed-up, the bound verdict, the top three operation groups and the first
suggestion must all be visible inside the first screen, and the page must not scroll sideways.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inductor_lens.api import report_folder

from ..conftest import H100_ANSWER_CAPTURES as FIXTURES
from .test_browser import WINDOW, browser  # noqa: F401 - the shared Chromium fixture

FIRST_SCREEN = {"width": WINDOW, "height": 900}


@pytest.fixture(scope="module")
def first_pages(unpacked, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("first-screen")
    return {name: report_folder(unpacked(name), out / name, draw=False).index for name in FIXTURES}


def _inside_first_screen(page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["height"] > 0 and box["y"] >= 0 and box["y"] + box["height"] <= FIRST_SCREEN["height"]


@pytest.mark.parametrize("name", FIXTURES)
def test_the_four_answers_fit_the_first_screen(browser, first_pages: dict[str, Path], name: str) -> None:  # noqa: F811
    page = browser.new_page(viewport=FIRST_SCREEN)
    page.goto(first_pages[name].as_uri())
    speed = page.locator(".answer.speed .answer-a").inner_text()
    assert "than eager" in speed, speed
    bound = page.locator(".answer.bound .answer-a").inner_text()
    assert bound in ("GPU-bound", "host-bound", "mixed"), bound
    for selector in (
        ".answer.speed .answer-a",
        ".answer.bound .answer-a",
        ".answer.where tbody tr:nth-child(3)",
        ".answer.try li:first-child",
    ):
        assert _inside_first_screen(page, selector), f"{name}: {selector} is below the first screen"
    assert page.locator(".answer.where tbody tr").count() >= 3
    first_try = page.locator(".answer.try li:first-child").inner_text()
    assert first_try.strip(), "no first suggestion"
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WINDOW, f"{name}: the page scrolls sideways ({width} px)"
    page.close()
