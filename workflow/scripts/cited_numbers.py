"""Check that the numbers README.md, docs/ and the notebooks' Markdown cite are in the reports they name.

    python workflow/scripts/cited_numbers.py    # list every cited number not in its reports

The rule a page follows: a number belongs to the report ids named in its scope, and must appear,
as rounded on the page, in one of those reports' CSVs (any numeric cell: `ours`, `paper`, a mean,
an sd, a time). A scope is a Markdown table row (the ids of its first cell, or of the row above
when that cell is empty, as in the README's results), else the paragraph or list item holding the
number, else the nearest earlier paragraph of the same section that names an id. A number with no
id in scope is unbacked. Checked: every number with a decimal point, and every number of a table
cell that holds only numbers. Not checked: code spans, link targets, versions ("WordNet 3.1") and
a line that carries `<!-- not cited -->`.

A notebook's Markdown cells are read as one page whose numbers belong to the reports that notebook
writes, and to any report id in their scope (report_index.REPORTS), so its "What this shows" cannot drift from its tables.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from orderlib.paths import repo_root

PAGES = ("README.md", "docs/*.md")
NOTEBOOK_PAGES = ("notebooks/[0-9][0-9]_*.ipynb",)  # their Markdown cells
NOT_CITED = "<!-- not cited -->"  # at the end of a line: its numbers are not results
NOT_CITED_BLOCK = "<!-- not cited:"  # a line of its own, with the reason: the block below it quotes no result
_NUMBER = re.compile(r"(?<![\w.@/-])([−-]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.]*\d)(?![\w])")
_DECIMAL_OR_CELL = re.compile(r"[^\d\s.,±−+\-–/→×%()*~≈<>≤≥|:]")  # a cell holding only numbers has none of these
_NOT_A_RESULT = re.compile(  # versions and the papers' own section numbers
    r"\b(?:WordNet|SNLI|Python|torch|torchvision|CUDA|GloVe|version|v|ICLR|NIPS|AAAI|SICK|numpy|pip|npm"
    r"|Sections?|Sec\.|§|Eq\.|Equation)[\s-]*\(?\d+(?:\.\d+)+[+\w.]*",
    re.I,
)
_CODE = re.compile(r"`[^`]*`")
_LIST_ITEM = re.compile(r"([-*+]|\d+\.)\s")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")


@dataclass(frozen=True)
class Cite:
    page: str
    line: int
    text: str  # the number as the page prints it
    ids: tuple[str, ...]  # the report ids in its scope


def _ids_in(text: str, ids: list[str]) -> list[str]:
    found = []
    for rid in ids:  # longest first: oe_table1_wordnet_clean before oe_table1_wordnet
        if re.search(rf"(?<![\w]){re.escape(rid)}(?![\w])", text) and not any(rid in f for f in found):
            found.append(rid)
    return found


def _numbers(text: str, whole_cell: bool) -> list[str]:
    """The numbers in `text` that are checked: decimals, or every number where `whole_cell`."""
    text = _LINK_TARGET.sub("]", _CODE.sub(" ", _NOT_A_RESULT.sub(" ", text)))
    out = []
    for m in _NUMBER.finditer(text):
        if m.group(3) or whole_cell:
            out.append(m.group(0) + ("%" if text[m.end() : m.end() + 1] == "%" else ""))
    return out


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def extract(page: str, text: str, ids: list[str]) -> list[Cite]:
    """The numbers `text` (a Markdown page) cites, each with the report ids in its scope."""
    ids = sorted(ids, key=len, reverse=True)
    cites: list[Cite] = []
    section_ids: list[str] = []  # ids named so far in this section
    block_ids: list[str] = []  # ids of the paragraph or list item being read
    row_ids: list[str] = []  # ids of the last table row that named one
    in_code = exempt = False
    for no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if stripped.startswith("#"):
            section_ids, block_ids, row_ids = [], [], []
            continue
        if not stripped:
            block_ids, row_ids, exempt = [], [], False
            continue
        if stripped.startswith(NOT_CITED_BLOCK):  # the block below it quotes no result
            exempt = True
            continue
        named = _ids_in(line, ids)
        if exempt or NOT_CITED in line:
            section_ids += [i for i in named if i not in section_ids]
            continue
        if stripped.startswith("|"):
            cells = _cells(stripped)
            if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                continue
            first = _ids_in(cells[0], ids)
            if first or cells[0]:
                row_ids = first or named
            scope = row_ids or named or block_ids or section_ids
            for cell in cells:
                whole = bool(scope) and not _DECIMAL_OR_CELL.search(_CODE.sub("", cell).replace("**", ""))
                for n in _numbers(cell, whole):
                    cites.append(Cite(page, no, n, tuple(scope)))
            section_ids += [i for i in named if i not in section_ids]
            continue
        if _LIST_ITEM.match(stripped):  # a new list item is a new scope
            block_ids = []
        block_ids += [i for i in named if i not in block_ids]
        section_ids += [i for i in named if i not in section_ids]
        for n in _numbers(line, False):  # the section's ids for now: _paragraph_scopes puts the block's first
            cites.append(Cite(page, no, n, tuple(section_ids)))
    return _paragraph_scopes(text, cites, ids)


def _paragraph_scopes(text: str, cites: list[Cite], ids: list[str]) -> list[Cite]:
    """Scope each prose number to the ids its whole paragraph or list item names (a paragraph names
    its report after the number as often as before it); one that names none keeps its section's."""
    blocks, current = [], []
    for i, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("|", "#", "```")) or _LIST_ITEM.match(stripped):
            blocks.append(current)
            current = []
        if stripped and not stripped.startswith(("|", "#", "```")):
            current.append((i, line))
    blocks.append(current)
    para_ids: dict[int, list[str]] = {}
    for block in blocks:
        named = []
        for _, line in block:
            named += [x for x in _ids_in(line, ids) if x not in named]
        para_ids.update((i, named) for i, _ in block)
    return [Cite(c.page, c.line, c.text, tuple(para_ids[c.line])) if para_ids.get(c.line) else c for c in cites]


def _value(text: str) -> tuple[float, int]:
    sign = -1.0 if text[0] in "−-" else 1.0
    digits = text.lstrip("−-").rstrip("%").replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return sign * float(digits), decimals


def table_numbers(csv: Path) -> list[float]:
    """Every number in a report's CSV (numbers inside text cells too, e.g. "12.3 ± 0.4")."""
    import pandas as pd

    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    out = []
    for value in df.to_numpy().ravel():
        for m in _NUMBER.finditer(str(value).replace("e-", "E-")):
            out.append(_value(m.group(0))[0])
        try:
            out.append(float(value))
        except ValueError:
            pass
    return [x for x in out if math.isfinite(x)]


def matches(cited: str, values: list[float]) -> bool:
    """Does a value round, to the digits `cited` prints, to `cited` (sign included)? A percentage
    ("73%") matches a fraction (0.73) too."""
    x, decimals = _value(cited)
    half = 0.5 * 10**-decimals * (1 + 1e-9)  # either way at an exact half: 12.85 cites as 12.8 or 12.9
    scales = (1.0, 100.0) if cited.endswith("%") else (1.0,)
    return any(abs(v * k - x) <= half for v in values for k in scales)


def page_cites(root: Path, path: Path, ids: list[str]) -> list[Cite]:
    """The numbers a page cites; a notebook's belong to the reports it writes and any it names."""
    from report_index import REPORTS, notebook_markdown

    page = str(path.relative_to(root))
    if path.suffix != ".ipynb":
        return extract(page, path.read_text(), ids)
    own = tuple(rid for rid, info in REPORTS.items() if info[2] == page)
    # the Markdown cells as one page, cells apart as paragraphs (a problem's line counts its lines)
    return [
        Cite(c.page, c.line, c.text, tuple(dict.fromkeys(c.ids + own)))
        for c in extract(page, "\n\n".join(notebook_markdown(json.loads(path.read_text()))), ids)
    ]


def problems(root: Path | None = None, pages: tuple[str, ...] = PAGES) -> list[str]:
    """One line per cited number that no report in its scope holds, or that has no report in scope."""
    from report_index import REPORTS

    root = Path(root or repo_root())
    tables = root / "reports" / "tables"
    cache: dict[str, list[float]] = {}
    out = []
    for pattern in pages:
        for path in sorted(root.glob(pattern)):
            page = str(path.relative_to(root))
            for c in page_cites(root, path, list(REPORTS)):
                if not c.ids:
                    out.append(f"{page}:{c.line}: {c.text} names no report")
                    continue
                for rid in c.ids:
                    if rid not in cache:
                        csv = tables / f"{rid}.csv"
                        cache[rid] = table_numbers(csv) if csv.exists() else []
                if not any(matches(c.text, cache[rid]) for rid in c.ids):
                    out.append(f"{page}:{c.line}: {c.text} is not in {', '.join(c.ids)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    found = problems(pages=PAGES + NOTEBOOK_PAGES)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
