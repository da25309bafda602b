"""Strip notebook outputs for the repo, keeping those of cells marked `# NBVAL_CHECK_OUTPUT`.

nbval (lax mode) compares exactly those kept outputs when CI re-executes the notebooks.
Usage: `python workflow/scripts/strip_notebooks.py notebooks/*.ipynb` (`make strip`). nbstripout
keeps outputs by cell metadata only (`keep_output`), not by this marker in the code, and execution
counts for every cell or none, so it cannot do this.
"""

from __future__ import annotations

import sys

import nbformat

MARK = "NBVAL_CHECK_OUTPUT"
VOLATILE_METADATA = ("papermill", "execution", "widgets")


def strip(nb) -> None:
    for key in VOLATILE_METADATA:
        nb.metadata.pop(key, None)
    for cell in nb.cells:
        for key in VOLATILE_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type != "code":
            continue
        if MARK not in cell.source:  # nbval needs a checked cell's outputs and execution count
            cell.execution_count = None
            cell.outputs = []


def main(paths: list[str]) -> int:
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        strip(nb)
        nbformat.write(nb, p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
