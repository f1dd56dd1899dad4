"""Every relative link in README.md and docs/*.md names a file or folder of the repository, so
it resolves in a clone: the README used to link the contract at ``../shared/...``, outside the
repository, which a clone does not have (issue 42). Links in code blocks are code, not links."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and [text](target "title"); images alike.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def relative_links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of each relative link outside code blocks and code spans."""
    found: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        prose = re.sub(r"`[^`]*`", "``", line)  # a code span's brackets are not a link
        for target in LINK.findall(prose):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue  # https:, mailto:, an anchor in the same page
            found.append((number, target))
    return found


def test_the_pages_have_relative_links_to_check() -> None:
    assert (ROOT / "docs" / "contract.md").is_file()
    assert any(target == "docs/contract.md" for _, target in relative_links(ROOT / "README.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    broken = []
    for number, target in relative_links(page):
        path = unquote(target.split("#", 1)[0])
        resolved = (page.parent / path).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(f"{page.relative_to(ROOT)}:{number}: {target}")
    assert broken == []
