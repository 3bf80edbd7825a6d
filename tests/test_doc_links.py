"""Every link between the project's pages points at a file that exists and, with an anchor, at
a heading that page has (as GitHub names it), so a moved section cannot leave a pointer behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading).strip().lower()
    return "".join(ch for ch in text if ch.isalnum() or ch in " -_").replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def local_links(page: Path) -> list[tuple[Path, str]]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        found.append(((page.parent / path).resolve() if path else page, anchor))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_pages_resolve(page: Path) -> None:
    for target, anchor in local_links(page):
        assert target.exists(), f"{page.name} links to missing {target}"
        if anchor and target.suffix == ".md":
            assert anchor in anchors(target), f"{page.name} links to {target.name}#{anchor}"


def test_the_keyword_scoring_table_is_where_the_reference_page_says() -> None:
    page = (ROOT / "docs" / "reference-behaviour.md").read_text(encoding="utf-8")
    section = page.split("## §3", 1)[1].split("\n## ", 1)[0]
    assert "| the term equals a name part | +12 | +10 |" in section
    assert "README" not in section
