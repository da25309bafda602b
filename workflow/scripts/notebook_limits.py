"""Is a notebook readable? The limits `make test` holds every notebook and executed copy to.

    python workflow/scripts/notebook_limits.py [NOTEBOOK ...]   # one line of measures per notebook, then problems

A notebook's code cells stay short (the library holds the logic); an executed copy keeps its outputs
short, saves no progress widgets, stays small, and its closing "What this shows" cell quotes only
numbers that its own outputs show (rounding aside, as cited_numbers.matches reads them).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from cited_numbers import _numbers, matches

MAX_CODE_LINES = 15  # per code cell
MAX_CELL_LINES = 40  # printed lines of one cell's outputs
MAX_LINES = 150  # printed lines of a notebook's outputs
MAX_BYTES = 600_000  # an executed copy
WIDGET = "application/vnd.jupyter.widget-view+json"
CLOSING = "## What this shows"
_NUMBER_IN_OUTPUT = re.compile(r"[−-]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _text(output: dict) -> str:
    """What an output prints: a stream's text, else its text/plain (a table's or a figure's repr)."""
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    if "image/png" in data or WIDGET in data:
        return ""
    return "".join(data.get("text/plain", ""))


def cell_lines(cell: dict) -> int:
    return sum(len(_text(o).splitlines()) for o in cell.get("outputs", []))


def measures(nb: dict, size: int) -> dict:
    """Printed lines, the largest cell's, bytes, figures, code cells over the limit, saved widgets."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    outputs = [o for c in code for o in c.get("outputs", [])]
    return {
        "lines": sum(cell_lines(c) for c in code),
        "largest cell": max((cell_lines(c) for c in code), default=0),
        "KB": round(size / 1000),
        "figures": sum("image/png" in o.get("data", {}) for o in outputs),
        "long code cells": sum(len("".join(c["source"]).strip().splitlines()) > MAX_CODE_LINES for c in code),
        "widgets": sum(WIDGET in o.get("data", {}) for o in outputs) + bool(nb.get("metadata", {}).get("widgets")),
    }


def closing_numbers(nb: dict) -> list[str]:
    """The numbers of the closing cell that no output of the notebook shows."""
    cells = [
        c for c in nb["cells"] if c["cell_type"] == "markdown" and "".join(c["source"]).lstrip().startswith(CLOSING)
    ]
    if not cells:
        return ["no closing cell"]
    shown = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            data = o.get("data", {})
            text = _text(o) + "".join(data.get("text/markdown", "")) + "".join(data.get("text/html", ""))
            shown += [float(m.replace(",", "").replace("−", "-")) for m in _NUMBER_IN_OUTPUT.findall(text)]
    quoted = _numbers("".join(cells[-1]["source"]), whole_cell=False)
    return [n for n in quoted if not matches(n, shown)]


def source_problems(path: Path) -> list[str]:
    """A notebook as committed: its code cells' length."""
    nb = json.loads(Path(path).read_text())
    out = []
    for i, c in enumerate(nb["cells"]):
        n = len("".join(c["source"]).strip().splitlines())
        if c["cell_type"] == "code" and n > MAX_CODE_LINES:
            out.append(f"{path}: cell {i} has {n} lines of code (at most {MAX_CODE_LINES})")
    return out


def executed_problems(path: Path) -> list[str]:
    """An executed copy: its outputs, size, widgets and closing cell."""
    path = Path(path)
    nb = json.loads(path.read_text())
    m = measures(nb, path.stat().st_size)
    out = source_problems(path)
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "code" and cell_lines(c) > MAX_CELL_LINES:
            out.append(f"{path}: cell {i} prints {cell_lines(c)} lines (at most {MAX_CELL_LINES})")
    if m["lines"] > MAX_LINES:
        out.append(f"{path}: prints {m['lines']} lines (at most {MAX_LINES})")
    if m["KB"] * 1000 > MAX_BYTES:
        out.append(f"{path}: {m['KB']} KB (at most {MAX_BYTES // 1000})")
    if m["widgets"]:
        out.append(f"{path}: {m['widgets']} saved progress widgets")
    out += [f"{path}: the closing cell quotes {n}, which no output shows" for n in closing_numbers(nb)]
    out += [
        f"{path}: cell {i} draws a figure that the copy does not show (run with MPLBACKEND unset)" for i in undrawn(nb)
    ]
    return out


def undrawn(nb: dict) -> list[int]:
    """Code cells that end by drawing a figure (`fig = ...`) or display one as text (`<Figure size ...>`:
    a kernel under MPLBACKEND=Agg), with no image among their outputs."""
    out = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "code" or any("image/png" in o.get("data", {}) for o in c.get("outputs", [])):
            continue
        lines = "".join(c["source"]).strip().splitlines()
        as_text = any(
            "".join(o.get("data", {}).get("text/plain", "")).startswith("<Figure size") for o in c.get("outputs", [])
        )
        if as_text or (lines and re.match(r"fig\s*=", lines[-1])):
            out.append(i)
    return out


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    problems = []
    for p in paths:
        m = measures(json.loads(p.read_text()), p.stat().st_size)
        print(f"{p.name}: " + ", ".join(f"{k} {v}" for k, v in m.items()))
        problems += executed_problems(p)
    print("\n".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
