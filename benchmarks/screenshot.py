"""Screenshot a report page in headless Chromium (the images in README.md and benchmarks/results/).

python benchmarks/screenshot.py REPORT/index.html out.png [--full-page] [--width 1400] [--height 900]
    [--element CSS-SELECTOR]  (only that element, e.g. "#handwritten" on a kernel page)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--full-page", action="store_true")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--element", help="screenshot only the element this CSS selector finds")
    args = parser.parse_args()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        page.goto(args.page.resolve().as_uri())
        if args.element:  # a clip of the full page: sticky table headers stay where they belong
            box = page.evaluate(
                "s => { const r = document.querySelector(s).getBoundingClientRect();"
                " return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; }",
                args.element,
            )
            page.screenshot(path=str(args.png), full_page=True, clip=box)
        else:
            page.screenshot(path=str(args.png), full_page=args.full_page)
        browser.close()


if __name__ == "__main__":
    main()
