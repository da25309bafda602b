"""The fingerprint files that stand for the code of workflow/Snakefile's rules: one per rule, under
runs/fingerprints/<preset>/<rule>.json, holding orderlib.freshness's fingerprints of its source's
import closure (its notebook or script, and every orderlib file imports reach from it) and, while the
rule is stale, why and when it was last planned.

A rule takes its file as input, so the workflow reruns it when the file is newer than its outputs.
`refresh` rewrites a file only when its content changed (a comment or docstring changes nothing), and
keeps its date in step with the reports: newer than the rule's outputs when they are stale
(`stale`: what `report_index.py --stale` says), older when current, so that a fresh clone or a
reverted edit reruns exactly what the index calls stale. The Snakefile calls both when it is parsed
(`snakemake -n` then lists what would rerun, with the file as the reason).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from report_index import copy_changed, report_freshness

from orderlib import freshness
from orderlib.atomic import atomic_write_text


def stale(
    source: str, tables: Path, ids: list[str], read: freshness.Reader, executed: Path | None = None, shown=None
) -> list[str]:
    """Why the reports `ids` of `source` under `tables`, or its executed copy `executed`, would not be
    what the tree `read` reads produces now; [] when they would (or do not exist yet). `shown`: the
    folder of the reports the copy displays (report_index.shown_changed), where they count."""
    why = []
    for rid in ids:
        meta = Path(tables) / f"{rid}.meta.json"
        if meta.exists():
            why += [f"{rid}: {w}" for w in report_freshness(json.loads(meta.read_text()), source, read)]
    if executed is not None and Path(executed).exists() and read(source) is not None:
        ran, nb = json.loads(Path(executed).read_text()), json.loads(read(source))
        why += [f"{Path(executed).name}: {w}" for w in copy_changed(ran, nb, shown)]
    return why


def refresh(path: Path, source: str, read: freshness.Reader, outputs: list[Path], why: list[str]) -> bool:
    """Write the fingerprints of `source` to `path` where they changed, then date `path` after the
    oldest of `outputs` if `why` (the outputs are stale) and before it otherwise. Return whether the
    content changed.

    A stale rule's file also holds the time of this plan, so its content differs from any earlier
    plan's: snakemake skips an input that is newer than the outputs but has the checksum it recorded
    for their last job, and it records one for a job that was interrupted (its update() outputs
    restored), which the next plan would then take as done."""
    path = Path(path)
    record = {"source": source, "code": freshness.fingerprints(source, read)}
    if why:
        record |= {"stale": why, "planned": time.time()}
    text = json.dumps(record, indent=1) + "\n"
    changed = not path.exists() or path.read_text() != text
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    dates = [p.stat().st_mtime for p in map(Path, outputs) if p.exists()]
    if dates:  # no output yet: the rule runs whatever the date
        oldest, now = min(dates), path.stat().st_mtime
        if why and now <= oldest:
            os.utime(path, (max(time.time(), oldest + 1),) * 2)
        elif not why and now > oldest:
            os.utime(path, (oldest - 1,) * 2)
    return changed
