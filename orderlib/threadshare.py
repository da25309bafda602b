"""A notebook's share of the cores while `make reproduce` runs notebooks side by side.

orderlib.tools.reproduce starts each notebook beside another on its share of the cores; with
--elastic it also names a file (ORDERLIB_THREADS_FILE) holding that share, and when the notebook
beside it finishes and nothing else can start, it writes the whole core count there. The training
loop (loop.fit) follows the file at every epoch. Without the variable (a notebook run by hand)
nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

ENV = "ORDERLIB_THREADS_FILE"


def follow_share() -> int | None:
    """Set torch's intra-op threads to the count in the file $ORDERLIB_THREADS_FILE names, where set
    and different from the current count; return the count set, else None."""
    path = os.environ.get(ENV)
    if not path:
        return None
    try:
        n = int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None
    if n < 1 or n == torch.get_num_threads():
        return None
    torch.set_num_threads(n)
    return n
