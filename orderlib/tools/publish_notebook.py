"""Publish an executed notebook under reports/notebooks/ with no machine's paths in it: the
repository's absolute path in outputs becomes relative, and papermill's record of where the run
wrote its output names the published file.

    python -m orderlib.tools.publish_notebook runs/executed/01_oe_table1_wordnet.ipynb [--root .]
    python -m orderlib.tools.publish_notebook --text reports/notebooks/01_oe_table1_wordnet.ipynb

`--text` gives a published copy its notebook's current Markdown cells (a corrected sentence, a
number brought in line with its report) without a rerun: Markdown has no outputs, so the copy then
reads as a run of the notebook would. It refuses when the code cells or the order of the cells
differ, which only a rerun can bring in line.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from orderlib.reports import repo_root


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


def _kinds(nb: dict) -> list[str]:
    """The cell types in order, papermill's injected parameters aside."""
    return [c["cell_type"] for c in nb["cells"] if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]


def sync_text(executed: Path, source: Path) -> bool:
    """Give the executed copy `executed` the Markdown cells of its notebook `source`; return whether
    anything changed. Raises ValueError naming the file when their code or cell order differ."""
    from orderlib import freshness

    ran, nb = json.loads(Path(executed).read_text()), json.loads(Path(source).read_text())
    kinds = lambda n: [  # noqa: E731
        c["cell_type"] for c in n["cells"] if "injected-parameters" not in c.get("metadata", {}).get("tags", [])
    ]
    if freshness.notebook_code(ran) != freshness.notebook_code(nb) or kinds(ran) != kinds(nb):
        raise ValueError(f"{executed}: its code cells or cell order differ from {source}; rerun the notebook instead")
    text = iter(c["source"] for c in nb["cells"] if c["cell_type"] == "markdown")
    changed = False
    for cell in ran["cells"]:
        if cell["cell_type"] == "markdown":
            new = next(text)
            changed |= "".join(cell["source"]) != "".join(new)
            cell["source"] = new
    if changed:
        tmp = Path(executed).with_name(f".{Path(executed).name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(ran, indent=1, ensure_ascii=False) + "\n")
        os.replace(tmp, executed)
    return changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--root", type=Path, default=None, help="the checkout the notebooks ran in (default: this one)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: reports/notebooks/)")
    ap.add_argument("--text", action="store_true", help="give published copies their notebooks' Markdown")
    args = ap.parse_args()
    for nb in args.notebooks:
        if args.text:
            source = repo_root() / "notebooks" / Path(nb).name
            print(f"{nb}: {'text brought over' if sync_text(nb, source) else 'text already current'}")
        else:
            print(f"published {publish(nb, args.root, args.out)}")


if __name__ == "__main__":
    main()
