"""Which notebook `make reproduce LANES=2` starts next, and on how many threads.

A notebook that reads another's checkpoints starts after it (AFTER), Table 1 runs alone
(EXCLUSIVE), and among the ready notebooks the one with the longest chain of work behind it goes
first. Each keeps cores / LANES threads throughout, so a run repeats its tables.
"""

from __future__ import annotations

import re
from pathlib import Path

AFTER = {  # notebook -> the notebooks whose checkpoints it reads (it would train them itself, racing them)
    "04_oe_sec46_detail": ("03_oe_table2_retrieval",),
    "05_oe_fig4_regularities": ("03_oe_table2_retrieval",),
    "07_devise_zeroshot": ("06_devise_table1",),
    "09_sherlock_facts": ("03_oe_table2_retrieval", "08_utama_compositionality"),
}
EXCLUSIVE = {"01_oe_table1_wordnet"}  # parallel on its own (oe_wordnet.run_jobs): nothing beside it


def stem(name: str | Path) -> str:
    """'notebooks/03_oe_table2_retrieval.ipynb' -> '03_oe_table2_retrieval'."""
    return Path(name).stem


def critical_path(names: list[str], estimate: dict[str, float], after: dict | None = None) -> dict[str, float]:
    """Per notebook: its estimated time plus the longest chain of notebooks (among `names`) waiting on it."""
    after = AFTER if after is None else after
    out: dict[str, float] = {}

    def length(n: str) -> float:
        if n not in out:
            waiting = [m for m in names if n in after.get(m, ())]
            out[n] = estimate.get(n, 0.0) + max((length(m) for m in waiting), default=0.0)
        return out[n]

    for n in names:
        length(n)
    return out


def next_to_start(
    pending: list[str],
    running: set[str],
    lanes: int,
    priority: dict[str, float],
    after: dict | None = None,
    exclusive: set[str] | None = None,
) -> str | None:
    """The notebook to start now, or None (all lanes busy, nothing ready, or an exclusive notebook
    runs or waits for the lanes to empty). Ready: none of its AFTER notebooks pending or running.
    Ties in priority: the order of `pending`. Default `after`, `exclusive`: AFTER, EXCLUSIVE."""
    after, exclusive = AFTER if after is None else after, EXCLUSIVE if exclusive is None else exclusive
    if len(running) >= lanes or running & exclusive:
        return None
    ready = [n for n in pending if not set(after.get(n, ())) & (set(pending) | running)]
    if not ready:
        return None
    pick = max(ready, key=lambda n: (priority.get(n, 0.0), -pending.index(n)))
    return None if pick in exclusive and running else pick


def threads_for(name: str, lanes: int, cores: int, exclusive: set[str] | None = None) -> int | None:
    """Torch threads for a notebook: None (torch's default, every core) when exclusive or with one
    lane; else its share of the cores, whatever runs beside it, so that its results (which move with
    the thread count: reductions split differently) depend on LANES and the machine only."""
    if name in (EXCLUSIVE if exclusive is None else exclusive) or lanes <= 1:
        return None
    return max(1, cores // lanes)


def run_ids(notebook: Path) -> set[str]:
    """The run_paths ids a notebook's code names (its checkpoints and reports), f-string fields
    filled from its parameters cell's string defaults: what AFTER must cover."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    params = next((c.source for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), "")
    defaults = dict(re.findall(r'^(\w+)\s*=\s*"([^"]*)"', params, re.M))
    ids = set()
    for call in re.findall(r"run_paths\((.*?),\s*PRESET\)", "\n".join(code)):
        for literal in re.findall(r'"([^"]+)"', call):
            ids.add(re.sub(r"\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), literal))
    return ids
