"""Let a running notebook take more torch threads: `python -m orderlib.tools.reproduce --elastic`
writes a thread count to the file named by ORDERLIB_THREADS_FILE, and the training loop applies it
at every epoch. Without that variable (a notebook run by hand) nothing changes.
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
