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

Row-aware: in a table row whose label (the `row`, `method` or first column) names a method of a
report in scope, a number under a `paper` or `ours` column, or under a metric of that report, must
be that method's value (for the metric its column, label or the table's first row names, where one
does), not any value of the report; "A ± B" must be one row's mean and sd.

A notebook's Markdown cells are read as one page whose numbers belong to the reports that notebook
writes, and to any report id in their scope (report_index.REPORTS), so its "What this shows" cannot drift from its tables.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, replace
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
    row: str = ""  # in a table: the row's label (plain text), where the row has one
    context: str = ""  # the label of the table row that named the scope (a metric it names carries on)
    column: str = ""  # the column's header (plain text)
    pair: str = ""  # "A|B" where the number is A of "A ± B"


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


_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
LABEL_HEADERS = ("row", "method", "model")  # a column of row labels; else an unnamed first column
ROW_COLUMNS = ("paper", "ours")  # the columns that hold the row's own values


def _plain(text: str) -> str:
    """A cell as words: links, code marks and bold dropped, lower case, "acc." spelled out."""
    text = _LINK.sub(r"\1", text).replace("`", "").replace("**", "").lower()
    return " ".join(text.replace("acc.", "accuracy").split())


def _label_column(header: list[str]) -> int | None:
    named = [i for i, h in enumerate(header) if h.startswith(LABEL_HEADERS)]
    return named[0] if named else (0 if header and not header[0] else None)


def _row_cites(page: str, no: int, cells: list[str], header: list[str], scope, context: str) -> list[Cite]:
    """A table row's numbers, each with its row label and column (`problems` holds them to the row)."""
    col = _label_column(header)
    row = _plain(cells[col]) if col is not None and col < len(cells) else ""
    out = []
    for i, cell in enumerate(cells):
        whole = bool(scope) and not _DECIMAL_OR_CELL.search(_CODE.sub("", cell).replace("**", ""))
        column = header[i] if i < len(header) else ""
        for part in re.split(r"\s/\s|→", cell):
            nums = _numbers(part, whole)
            pair = f"{nums[0]}|{nums[1]}" if "±" in part and len(nums) >= 2 else ""
            for j, n in enumerate(nums):
                out.append(Cite(page, no, n, tuple(scope), row if i != col else "", context, column, pair * (j == 0)))
    return out


def extract(page: str, text: str, ids: list[str]) -> list[Cite]:
    """The numbers `text` (a Markdown page) cites, each with the report ids in its scope."""
    ids = sorted(ids, key=len, reverse=True)
    cites: list[Cite] = []
    section_ids: list[str] = []  # ids named so far in this section
    block_ids: list[str] = []  # ids of the paragraph or list item being read
    row_ids: list[str] = []  # ids of the last table row that named one
    header: list[str] | None = None  # the current table's header, plain
    context = ""  # the label of the table row that named the current ids
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
            block_ids, row_ids, exempt, header = [], [], False, None
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
            if header is None:  # a table's first row names its columns
                header = [_plain(c) for c in cells]
            first = _ids_in(cells[0], ids)
            if first or cells[0]:
                row_ids = first or named
                col = _label_column(header)
                context = _plain(cells[col]) if col is not None and col < len(cells) else ""
            scope = row_ids or named or block_ids or section_ids
            cites += _row_cites(page, no, cells, header, scope, context)
            section_ids += [i for i in named if i not in section_ids]
            continue
        header = None
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
    return [replace(c, ids=tuple(para_ids[c.line])) if para_ids.get(c.line) else c for c in cites]


def _value(text: str) -> tuple[float, int]:
    sign = -1.0 if text[0] in "−-" else 1.0
    digits = text.lstrip("−-").rstrip("%").replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return sign * float(digits), decimals


def table_numbers(csv: Path) -> list[float]:
    """Every number in a report's CSV (numbers inside text cells too, e.g. "12.3 ± 0.4")."""
    import pandas as pd

    return table_numbers_of(pd.read_csv(csv, dtype=str, keep_default_na=False))


def table_numbers_of(df) -> list[float]:
    """Every number in a table's cells (numbers inside text cells too)."""
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
        replace(c, ids=tuple(dict.fromkeys(c.ids + own)))
        for c in extract(page, "\n\n".join(notebook_markdown(json.loads(path.read_text()))), ids)
    ]


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"[\w@]+", text))


def _score(label: str, method: str):
    """How well a row label names `method`: its words the label holds less those it lacks (then
    the words held); None where it holds fewer than it lacks."""
    words = _tokens(method)
    hit = len(words & _tokens(label))
    return (2 * hit - len(words), hit) if hit and 2 * hit >= len(words) else None


def _named(text: str, names) -> str | None:
    """The name of `names` that `text` holds as a phrase first (the longest at one place)."""
    hits = {}
    for n in names:
        m = re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)
        if m:
            hits[n] = (-m.start(), len(n))
    return max(hits, key=hits.get) if hits else None


def row_values(c: Cite, table) -> tuple[list, list[float]] | None:
    """The rows of the scope's reports that `c`'s row names, and their numbers: the method the row
    label names best (a claim row is no method), narrowed to the metric its column, label or the
    table's naming row names; None where the label names no method."""
    import pandas as pd

    best, picked = None, []
    for rid in c.ids:
        df = table(rid)
        if df is None or "method" not in df:
            continue
        methods = df if "verdict" not in df else df[df["verdict"].isna()]
        for m in methods["method"].dropna().unique():
            score = _score(c.row, str(m).lower())
            if score and (best is None or score > best):
                best, picked = score, [(df, m)]
            elif score and score == best:
                picked.append((df, m))
    if not picked:
        return None
    frames = []
    for df, m in picked:
        rows = df[df["method"] == m]
        if "metric" in df:
            names = {str(x).lower() for x in rows["metric"].dropna().unique()}
            label, context = (
                t.replace(str(m).lower(), " ") for t in (c.row, c.context)
            )  # the method's own words aside
            k = _named(c.column, names) or _named(label, names) or _named(context, names)
            rows = rows[rows["metric"].str.lower() == k] if k else rows
        frames.append(rows)
    rows = pd.concat(frames)
    return frames, [v for r in frames for v in table_numbers_of(r)] if len(rows) else []


def _one_row_pair(pair: str, frames) -> bool:
    """Is "A ± B" one row's value and sd, or one (method, metric)'s mean and sd rows?"""
    mean, sd = pair.split("|")
    for rows in frames:
        for _, r in rows.iterrows():
            v = table_numbers_of(r.to_frame().T)
            if matches(mean, v) and matches(sd, v):
                return True
        if "statistic" in rows:
            for _, g in rows.groupby([k for k in ("method", "metric") if k in rows]):
                st = g.set_index("statistic")["ours"]
                if (
                    "mean" in st
                    and "sd" in st
                    and matches(mean, [float(st["mean"])])
                    and matches(sd, [float(st["sd"])])
                ):
                    return True
    return False


def problems(root: Path | None = None, pages: tuple[str, ...] = PAGES) -> list[str]:
    """One line per cited number that no report in its scope holds, or that has no report in scope."""
    from report_index import REPORTS

    root = Path(root or repo_root())
    import pandas as pd

    tables = root / "reports" / "tables"
    cache: dict[str, list[float]] = {}
    frames: dict[str, object] = {}

    def table(rid: str):
        if rid not in frames:
            csv = tables / f"{rid}.csv"
            frames[rid] = pd.read_csv(csv, dtype={"method": str, "metric": str}) if csv.exists() else None
        return frames[rid]

    out = []
    for pattern in pages:
        for path in sorted(root.glob(pattern)):
            page = str(path.relative_to(root))
            for c in page_cites(root, path, list(REPORTS)):
                if not c.ids:
                    out.append(f"{page}:{c.line}: {c.text} names no report")
                    continue
                own = row_values(c, table) if c.row else None
                if own and (c.column.startswith(ROW_COLUMNS) or _named(c.column, _metrics(c, table))):
                    if not matches(c.text, own[1]):
                        out.append(f"{page}:{c.line}: {c.text} is not the value of the row it sits in ({c.row})")
                    elif c.pair and not _one_row_pair(c.pair, own[0]):
                        out.append(
                            f"{page}:{c.line}: {c.pair.replace('|', ' ± ')} is not one row's value and sd ({c.row})"
                        )
                    continue
                for rid in c.ids:
                    if rid not in cache:
                        csv = tables / f"{rid}.csv"
                        cache[rid] = table_numbers(csv) if csv.exists() else []
                if not any(matches(c.text, cache[rid]) for rid in c.ids):
                    out.append(f"{page}:{c.line}: {c.text} is not in {', '.join(c.ids)}")
    return out


def _metrics(c: Cite, table) -> set[str]:
    out = set()
    for rid in c.ids:
        df = table(rid)
        if df is not None and "metric" in df:
            out |= {str(x).lower() for x in df["metric"].dropna().unique()}
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
