"""No dead link in any report: the report of every capture in tests/fixtures, rendered as ``inductor-lens
report`` writes it (drawings included where Graphviz is installed), and every ``href`` and ``src`` of every
page followed: the file exists inside the report folder, and a ``#fragment`` names an ``id`` (or ``name``)
on the target page. A provenance page's ``#kernel=NAME`` (``pre=``, ``post=``, ``launch=``), read by its
script, must name an entry of the page's own data. Links to the web are not allowed (reports are
self-contained, read offline).

Pages are read from disk as the browser would, so a link built by hand past a text's page split
(``output_code.html#code-35453`` where line 35,453 is on ``output_code-2.html``) fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from inductor_lens.pipeline import report_folder
from inductor_lens.ranked import is_ranked, report_ranks
from inductor_lens.report import dot_layout

from ..conftest import FIXTURES

pytestmark = pytest.mark.unit

# Archives in tests/fixtures that hold no capture to report, and why.
NOT_CAPTURES = {
    "lens-schema5": "lens.json files of an older schema, read by the loading tests",
    "cpu-torch2.13-ddp-collective-sizes": "a CPU rank's profile traces trimmed to its collectives, read by test_collectives",
}
# Archives holding several captures side by side: the folders to report.
SEVERAL = {"cpu-torch2.13-two-ranks": ("compile-nproc", "torchrun-shared")}
CAPTURES = sorted(
    name for path in FIXTURES.glob("*.tar.gz") if (name := path.name.removesuffix(".tar.gz")) not in NOT_CAPTURES
)
# A provenance page selects what its fragment names (templates/static/provenance.js).
_SELECTION = re.compile(r"^(pre|post|launch|kernel)=(.+)$")
_PROVENANCE_DATA = re.compile(r'<script type="application/json" id="pv-data">(.*?)</script>', re.S)


class _Page(HTMLParser):
    """The anchors a page offers and the links it holds (``<a xlink:href>`` of inline SVG drawings too)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.anchors: set[str] = set()
        self.links: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name"):
                self.anchors.add(value)
            elif name in ("href", "src", "xlink:href"):
                self.links.append(value)

    handle_startendtag = handle_starttag


def _selectable(text: str, kind: str, value: str) -> bool:
    """Whether a provenance page's data holds what ``#kind=value`` asks its script to select."""
    match = _PROVENANCE_DATA.search(text)
    if match is None:
        return False
    data = json.loads(match.group(1))
    if kind in ("pre", "post"):
        return any(node["n"] == value for node in data[kind])
    is_kernel = kind == "kernel"
    return any(
        (entry["k"] == "kernel") == is_kernel and (entry["n"] if is_kernel else str(entry["p"])) == value
        for entry in data["code"]
    )


def dead_links(report: Path) -> tuple[int, list[str]]:
    """(links followed, one line per link that leads nowhere) over every page under ``report``."""
    root = report.resolve()

    @cache
    def text(path: Path) -> str:
        return path.read_text(encoding="utf-8")

    @cache
    def page(path: Path) -> _Page:
        return _Page(text(path))

    followed = 0
    dead = []
    for path in sorted(root.rglob("*.html")):
        where = path.relative_to(root)
        for link in page(path).links:
            followed += 1
            parts = urlsplit(link)
            if parts.scheme == "data":
                continue
            if parts.scheme or parts.netloc:
                dead.append(f"{where}: {link} leaves the report (pages are self-contained)")
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target != root and root not in target.parents:
                dead.append(f"{where}: {link} points outside the report folder")
                continue
            if not target.is_file():
                dead.append(f"{where}: {link}: no such file")
                continue
            fragment = unquote(parts.fragment)
            if not fragment or target.suffix != ".html":
                continue
            if target.name == "provenance.html" and (selection := _SELECTION.match(fragment)):
                if not _selectable(text(target), selection[1], selection[2]):
                    dead.append(f"{where}: {link}: the provenance page has no {selection[1]} {selection[2]!r}")
            elif fragment not in page(target).anchors:
                dead.append(f"{where}: {link}: no id {fragment!r} on {target.relative_to(root)}")
    return followed, dead


def _render(source: Path, out: Path) -> Path:
    draw = dot_layout.dot_binary() is not None
    if is_ranked(source):
        report_ranks(source, out, draw=draw)
    else:
        report_folder(source, out, draw=draw)
    return out


@pytest.fixture(scope="module")
def rendered(unpacked: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """rendered(name) -> the report folder (or the folder of its several reports) of a fixture, once."""
    reports: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in reports:
            root = unpacked(name)
            out = tmp_path_factory.mktemp(f"links-{name}")
            for folder in SEVERAL.get(name, ("",)):
                _render(root / folder, out / (folder or "report"))
            reports[name] = out
        return reports[name]

    return get


@pytest.mark.parametrize("name", CAPTURES)
def test_every_link_of_the_report_lands(rendered: Callable[[str], Path], name: str) -> None:
    followed, dead = dead_links(rendered(name))
    assert followed > 100, "the report holds hardly any links: nothing was checked"
    assert dead == [], f"{len(dead)} dead link(s) of {followed}:\n" + "\n".join(dead[:40])


def test_kernel_pages_link_launch_lines_past_the_page_split(rendered: Callable[[str], Path]) -> None:
    """ResNet-50's backward output_code.py is longer than one text page (views.TEXT_PAGE_LINES): its kernels'
    launch sites, past line 20,000, are on ``output_code-2.html``, and each kernel page links them there."""
    report = rendered("h100-resnet50-train") / "report"
    backward = next((report / "kernels").glob("*backward*"))
    lines = {
        int(line)
        for path in backward.glob("*.html")
        for line in re.findall(r'href="[^"#]*/output_code-2\.html#code-(\d+)"', path.read_text(encoding="utf-8"))
    }
    assert len(lines) > 100 and min(lines) > 20_000
    second = _Page((report / "graphs" / backward.name / "output_code-2.html").read_text(encoding="utf-8"))
    assert {f"code-{line}" for line in lines} <= second.anchors


def test_the_checker_finds_dead_links(tmp_path: Path) -> None:
    """A missing page, a missing anchor, a provenance selection of nothing and a link to the web are found."""
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "provenance.html").write_text(
        '<script type="application/json" id="pv-data">'
        '{"pre": [], "post": [{"n": "addmm"}], "code": [{"k": "triton", "n": "triton_poi_0", "p": 3}, '
        '{"k": "kernel", "n": "triton_poi_0", "p": 0}]}'
        "</script>",
        encoding="utf-8",
    )
    (tmp_path / "index.html").write_text(
        '<h2 id="top">x</h2><a href="#top">ok</a><a href="graphs/provenance.html#post=addmm">ok</a>'
        '<a href="graphs/provenance.html#kernel=triton_poi_0">ok</a><a href="graphs/provenance.html#launch=3">launch'
        '</a><a href="#nowhere">1</a><a href="missing.html">2</a><a href="graphs/provenance.html#kernel=gone">3</a>'
        '<a href="https://example.com/">4</a><a href="../outside.html">5</a>',
        encoding="utf-8",
    )
    (tmp_path.parent / "outside.html").write_text("", encoding="utf-8")
    followed, dead = dead_links(tmp_path)
    assert followed == 9
    assert [line.split(": ", 1)[1].split(":")[0].split(" ")[0] for line in dead] == [
        "#nowhere", "missing.html", "graphs/provenance.html#kernel=gone", "https", "../outside.html",
    ]  # fmt: skip
