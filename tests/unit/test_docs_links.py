"""Documentation: every relative link of README.md and docs/ resolves.

A link ``[text](path)`` or picture ``![alt](path)`` names a file or folder of the repository, relative to the page
it is on; a ``#fragment`` into a Markdown page names one of its headings, as GitHub makes their anchors. Links to
the web are not followed; links inside code (fenced blocks and inline code) are not links.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose_lines(text: str, *, inline_code: bool = False) -> list[tuple[int, str]]:
    """The page's lines outside fenced code, numbered from 1; inline code removed unless ``inline_code``."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line if inline_code else INLINE_CODE.sub("", line)))
    return lines


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation removed, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8"), inline_code=True):
        if match := HEADING.match(line):
            found.add(anchor(match[1]))
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, file:
                continue
            path_text, _, fragment = target.partition("#")
            where = f"{page.relative_to(ROOT)}:{number}: {target}"
            resolved = (page.parent / unquote(path_text)).resolve() if path_text else page
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif not resolved.is_relative_to(ROOT):
                broken.append(f"{where} (outside the repository)")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                broken.append(f"{where} (no heading #{fragment} there)")
    return broken


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    broken = [line for page in pages() for line in broken_links(page)]
    assert not broken, "broken links (fix the path or the heading):\n" + "\n".join(broken)


def test_the_readme_stays_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move detail into docs/ and link it"


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# Top `code`: here\n\n## Second part\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#top-code-here) [ok](a.md#second-part) ![pic](a.md) [web](https://example.com)\n"
        "`[not a link](nowhere.md)`\n```\n[in code](nowhere.md)\n```\n"
        "[gone](missing.md) [bad](a.md#third)\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "b.md:6: missing.md (no such file)",
        "b.md:6: a.md#third (no heading #third there)",
    ]
