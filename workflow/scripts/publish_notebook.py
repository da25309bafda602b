"""Publish an executed notebook under reports/notebooks/ with no machine's paths in it: the
repository's absolute path in outputs becomes relative, and papermill's record of where the run
wrote its output names the published file. Progress bars, which show while a notebook runs, are
left out: widget views, their saved state, and tqdm's lines on stderr. Relative links in the
Markdown, written from notebooks/, are rewritten to resolve from reports/notebooks/.

    python workflow/scripts/publish_notebook.py runs/full/executed/01_oe_table1_wordnet.ipynb [--root .]
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from orderlib.reports import repo_root

WIDGET = "application/vnd.jupyter.widget-view+json"
_BAR = re.compile(r"\d+%\|.*\|")  # tqdm's text bar: " 40%|████      | 4/10 [...]"
_LINK = re.compile(r"(\]\()(\.\./[^)\s]*)(\))")  # a Markdown link up from notebooks/: "](../docs/x.md#a)"
SOURCE_DIR, COPY_DIR = "notebooks", "reports/notebooks"


def relink(markdown: str) -> str:
    """`markdown` of a notebook under notebooks/ with its relative links ("](../reports/tables/t.md)")
    rewritten to point at the same files from its executed copy under reports/notebooks/
    ("](../tables/t.md)"), so that the links work where each is read."""

    def move(m: re.Match) -> str:
        target = os.path.normpath(os.path.join(SOURCE_DIR, m.group(2)))
        return m.group(1) + os.path.relpath(target, COPY_DIR) + m.group(3)

    return _LINK.sub(move, markdown)


def relink_cells(nb: dict) -> dict:
    """`nb` with every Markdown cell relinked (in place; a cell's source becomes a list of lines)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            cell["source"] = relink("".join(cell.get("source", ""))).splitlines(keepends=True)
    return nb


def _is_progress(output: dict) -> bool:
    if WIDGET in output.get("data", {}):
        return True
    text = "".join(output.get("text", ""))
    return (
        output.get("name") == "stderr"
        and bool(text.strip())
        and all(_BAR.search(line) for line in re.split(r"[\r\n]+", text) if line.strip())
    )


def strip_progress(nb: dict) -> dict:
    """`nb` without its progress bars (in place): outputs that are widget views or stderr holding
    only tqdm lines, and the notebook's saved widget state."""
    for cell in nb.get("cells", []):
        if "outputs" in cell:
            cell["outputs"] = [o for o in cell["outputs"] if not _is_progress(o)]
    nb.get("metadata", {}).pop("widgets", None)
    return nb


def publish(src: Path, root: Path | None = None, out_dir: Path | None = None) -> Path:
    """Write `src` as <out_dir>/<name> (default reports/notebooks/) with `root`'s absolute path
    (default: this repository) made relative; return the written path."""
    root = Path(root or repo_root()).resolve()
    out_dir = Path(out_dir or root / "reports" / "notebooks")
    try:
        text = Path(src).read_text()
        nb = json.loads(text.replace(str(root) + "/", "").replace(str(root), "."))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{src}: not a readable notebook ({e})") from e
    strip_progress(nb)
    relink_cells(nb)
    dst = out_dir / Path(src).name
    pm = nb.get("metadata", {}).get("papermill")
    if isinstance(pm, dict):  # where it is published: relative to the checkout, or to here with out_dir
        pm["output_path"] = os.path.relpath(
            dst.resolve(), root if out_dir == root / "reports" / "notebooks" else Path.cwd()
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{dst.name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, dst)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--root", type=Path, default=None, help="the checkout the notebooks ran in (default: this one)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: reports/notebooks/)")
    args = ap.parse_args()
    for nb in args.notebooks:
        print(f"published {publish(nb, args.root, args.out)}")


if __name__ == "__main__":
    main()
