"""Table 1's table rows on 4 KB pages against 2 MB transparent huge pages, in one run.

The compiled step of notebook 01 gathers rows of the concept tables and their Adam moments at random
(82k rows; 16-100 MB per row's tables): with 4 KB pages nearly every gathered row misses the TLB.
Notebook 01's workers start with glibc's huge-page advice for malloc (GLIBC_TUNABLES
glibc.malloc.hugetlb=1, orderlib.training.workers.huge_pages_for_children). Here each row trains
`--epochs` epochs at seed 0 on the paper setting (our split, the notebook's dev choices) twice at
once, in two one-thread processes on the same page size, as the notebook's two workers run side by
side; then on the other page size (which goes first alternates between rounds). Reports the median over rounds of
seconds per epoch (evaluation included), of the per-round ratio, the test accuracy each reaches
(the same computation: it must agree to the digit) and the huge pages the process held at the end
(AnonHugePages; some come without the advice, from the kernel's own scans). Writes reports/tables/bench_huge_pages.*.

    ORDERLIB_DATA=<data root> .venv/bin/python benchmarks/standing/huge_pages.py [--rounds 3] [--epochs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from orderlib.training.workers import HUGE_PAGES_ENV, HUGE_PAGES_TUNABLE

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/standing/concept_step.py when run as a child

ROWS = ["order-embeddings", "density order embeddings", "box embeddings", "word2gauss"]
EPOCH_SCALE = {"word2gauss": 8}  # its epochs take about a fifth of the others' time: train 8x as many
MODES = {"4 KB pages": None, "2 MB huge pages": HUGE_PAGES_TUNABLE}  # the tunable notebook 01's workers get


def child(method: str, epochs: int) -> None:
    """Train one row in this process on one thread; print its timing as one JSON line."""
    import torch

    torch.set_num_threads(1)
    from concept_step import SETTING, chosen_overrides

    from orderlib.experiments import oe_wordnet as exp

    cfg, _, _ = exp.load_setting("full", SETTING, 1)
    c = exp.model_config(method, cfg, 0, epochs=epochs, **chosen_overrides(method))
    r = exp.train_row(exp._DATA[SETTING], c, "cpu", None, False)
    huge_kb = next(
        (
            int(line.split()[1])
            for line in Path("/proc/self/smaps_rollup").read_text().splitlines()
            if line.startswith("AnonHugePages")
        ),
        0,
    )
    print(
        json.dumps(
            {
                "seconds_per_epoch": r.history[-1]["seconds"] / len(r.history),
                "test": r.test_accuracy,
                "huge_mb": huge_kb / 1024,
            }
        ),
        flush=True,
    )


def pair(method: str, epochs: int, mode: str) -> dict:
    """Train `method` in two processes started together on `mode`'s pages, as notebook 01's two
    workers run; return the mean of their seconds per epoch, their test accuracy and huge pages."""
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", HUGE_PAGES_ENV)}
    if MODES[mode]:
        env["GLIBC_TUNABLES"] = MODES[mode]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", method, str(epochs)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    res = []
    for p in procs:
        stdout, stderr = p.communicate()
        if p.returncode:
            raise SystemExit(f"{method} ({mode}) failed:\n{stderr[-3000:]}")
        res.append(json.loads(stdout.strip().splitlines()[-1]))
    if res[0]["test"] != res[1]["test"]:
        raise SystemExit(f"{method} ({mode}): two runs of one seed disagree: {res}")
    return {
        "seconds_per_epoch": statistics.mean(r["seconds_per_epoch"] for r in res),
        "test": res[0]["test"],
        "huge_mb": statistics.mean(r["huge_mb"] for r in res),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--rows", nargs="+", default=ROWS)
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "EPOCHS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], int(a.child[1]))
    from orderlib.data.wordnet import load_noun_graph
    from orderlib.experiments import oe_wordnet as exp
    from orderlib.reports import device_description, git_commit, write_table

    t0, commit = time.perf_counter(), git_commit()
    runs: dict[str, list[dict]] = {m: [] for m in a.rows}
    for rnd in range(a.rounds):
        for method in a.rows:
            order = list(MODES) if rnd % 2 == 0 else list(MODES)[::-1]
            res = {mode: pair(method, a.epochs * EPOCH_SCALE.get(method, 1), mode) for mode in order}
            runs[method].append(res)
            print(rnd, method, {m: round(v["seconds_per_epoch"], 3) for m, v in res.items()}, flush=True)
    rows = []
    for method, rs in runs.items():
        for mode in MODES:
            for metric, key in [
                ("seconds per epoch (median of rounds)", "seconds_per_epoch"),
                ("test accuracy (%)", "test"),
                ("huge pages held at the end (MB)", "huge_mb"),
            ]:
                rows.append(
                    dict(
                        method=method,
                        pages=mode,
                        metric=metric,
                        paper=None,
                        ours=statistics.median(r[mode][key] for r in rs),
                    )
                )
        ratios = [r["4 KB pages"]["seconds_per_epoch"] / r["2 MB huge pages"]["seconds_per_epoch"] for r in rs]
        rows.append(
            dict(
                method=method,
                pages="ratio",
                metric="speed-up per epoch, 4 KB / 2 MB (median of rounds)",
                paper=None,
                ours=statistics.median(ratios),
            )
        )
        rows.append(
            dict(method=method, pages="ratio", metric="speed-up per epoch, lowest round", paper=None, ours=min(ratios))
        )
        if len({r[m]["test"] for r in rs for m in MODES}) != 1:
            raise SystemExit(f"{method}: test accuracy differs between page sizes or rounds: {rs}")
    df = pd.DataFrame(rows)
    graph = load_noun_graph(exp.PRESETS["full"]["wordnet"])
    notes = (
        f"Notebook 01's paper setting (our split), full preset, seed 0, the notebook's dev choices; each row "
        f"{a.epochs} epochs (word2gauss {a.epochs * EPOCH_SCALE['word2gauss']}), {a.rounds} rounds, each page "
        f"size in two one-thread processes started together (the mean of the two), then the other size. "
        f"Huge pages come from glibc's malloc advice "
        f"(GLIBC_TUNABLES={HUGE_PAGES_TUNABLE}, glibc >= 2.35) with the kernel's transparent huge pages in "
        f"'madvise' mode ({Path('/sys/kernel/mm/transparent_hugepage/enabled').read_text().strip()!r} here)."
    )
    meta = {
        "preset": "full",
        "seed": 0,
        "setting": "paper",
        "device": device_description("cpu"),
        "git_commit": commit,
        "rounds": a.rounds,
        "epochs": a.epochs,
        "per_round": runs,
        "data_source": f"WordNet {graph.version} ({graph.source})",
        "data_fingerprint": graph.fingerprint,
        "wall_time_s": time.perf_counter() - t0,
    }
    out = write_table(
        "bench_huge_pages", df, meta, title="Table 1's rows on 4 KB pages and on 2 MB huge pages", notes=notes
    )
    print(df.to_string(index=False))
    print("wrote", out["csv"])


if __name__ == "__main__":
    main()
