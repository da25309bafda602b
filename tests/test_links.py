"""Every relative Markdown link in the project's documentation resolves to a file in the repository.

Checked: README.md, docs/*.md, benchmarks/README.md, reports/README.md and reports/tables/*.md.
A link is `[text](path)` or `[text](path#anchor)` (images too); http(s) and mailto links, and links
to an anchor of the same page, are left alone. Only the file part is checked, not the anchor. Links
inside code spans and fenced code blocks are not links and are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "reports" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "reports" / "tables").glob("*.md"))
)
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(?:<([^>\n]+)>|([^)\s]+))(?:\s+[\"'][^)]*[\"'])?\s*\)")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)  # http:, https:, mailto:, ...


def relative_links(text: str) -> list[str]:
    """Targets of the relative links in Markdown text, code blocks and code spans left out."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    targets = [angled or bare for angled, bare in LINK.findall(text)]
    return [t for t in targets if not EXTERNAL.match(t) and not t.startswith("#")]


def test_link_pattern():
    text = (
        "[a](docs/x.md) [b](y.md#sec) ![c](fig.png) [d](https://e.org/f) [g](mailto:h@i)\n"
        '[j](#local) `[k](in/code.md)` [l](<with space.md>) [m](n.md "title")\n'
        "```\n[o](in/fence.md)\n```\n"
    )
    assert relative_links(text) == ["docs/x.md", "y.md#sec", "fig.png", "with space.md", "n.md"]


def test_the_pages_exist():
    assert (ROOT / "README.md") in PAGES and any(p.parent.name == "docs" for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    broken, outside = [], []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path = unquote(target.split("#", 1)[0].split("?", 1)[0])
        resolved = (page.parent / path).resolve()
        if not resolved.is_relative_to(ROOT):
            outside.append(target)
        elif not resolved.exists():
            broken.append(target)
    assert not outside, f"{page.relative_to(ROOT)} links outside the repository: {outside}"
    assert not broken, f"{page.relative_to(ROOT)} has broken links: {broken}"
