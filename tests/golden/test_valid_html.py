"""Every page of real reports is valid where browsers are forgiving: ids unique on a page, and every
in-page link (``href="#x"``) lands on an element of that page.

The reports: the golden cases (tests/golden/test_golden.py) and real models captured on an H100 (Llama,
GPT-2, a ResNet-18 training step), with their drawings where Graphviz is installed (several drawings share
a page, and every part of a large graph's drawing has a page of its own).
"""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

import pytest

from inductor_lens.analysis import analyze, analyze_comparison
from inductor_lens.compare import ConfigRun, build_comparison
from inductor_lens.parse import parse_debug_folder
from inductor_lens.pipeline import build_run
from inductor_lens.report import dot_layout, render_comparison, render_report

from ..conftest import FIXED_TIME
from .test_golden import CASES

REAL_MODELS = {
    "llama": "llama_small_bf16",
    "gpt2-reduce-overhead": "gpt2_small_ro",
    "resnet18-train": "resnet18_train",
    "resnet50-train": "resnet50_train",
    "graph-break-recompile": "cpu-torch2.13-graphbreak-recompile",
}
REPORTS = {**CASES, **REAL_MODELS}


class _Anchors(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: Counter[str] = Counter()
        self.local_links: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids[values["id"] or ""] += 1
        href = values.get("href") or ""
        if href.startswith("#") and len(href) > 1:
            self.local_links.append(href[1:])


def _pages(unpacked, case: str) -> dict[str, _Anchors]:
    root = unpacked(REPORTS[case])
    run = build_run(root, root / "capture", strict=True, now=lambda: FIXED_TIME)
    return {
        path: _Anchors(text)
        for path, text in render_report(run, analyze(run), draw=dot_layout.dot_binary() is not None).items()
        if path.endswith(".html")
    }


def _problems(pages: dict[str, _Anchors]) -> list[str]:
    found = []
    for path, page in pages.items():
        found += [f"{path}: id {name!r} {count} times" for name, count in page.ids.items() if count > 1]
        found += [
            f"{path}: href=#{target} has no target" for target in page.local_links if target not in page.ids
        ]
    return found


@pytest.mark.parametrize("case", sorted(REPORTS))
def test_ids_are_unique_and_in_page_links_land(unpacked, case: str) -> None:
    assert _problems(_pages(unpacked, case)) == []


def test_comparison_pages_are_valid(unpacked) -> None:
    runs = [
        parse_debug_folder(unpacked(case), strict=True, now=lambda: FIXED_TIME)
        for case in ("mlp_default", "mlp_bf16_max_autotune_nocg")
    ]
    entries = [ConfigRun(f"config-{i}", run.settings.mode if run.settings else "unknown", {}, run, f"../{i}")
               for i, run in enumerate(runs)]  # fmt: skip
    comparison = build_comparison(
        entries, kind="diff", title="mlp", model_path="mlp.py", created=FIXED_TIME.isoformat()
    )
    pages = {
        path: _Anchors(text) for path, text in render_comparison(comparison, analyze_comparison(comparison)).items() if path.endswith(".html")
    }
    assert _problems(pages) == []
