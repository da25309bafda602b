"""Seed spread: a one-seed number set beside its spread over seeds, and a paired claim judged by it.

A claim "a beats b" is paired by seed (both rows trained from the same seed). It *holds beyond the
spread* when a - b has the claimed sign in every seed and its mean exceeds its standard deviation;
it is *reversed* when the same is true of the opposite sign; otherwise it is *within the spread*.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

HOLDS, WITHIN, REVERSED = "holds beyond the spread", "within the spread", "reversed"


def verdict(a, b, higher_is_better: bool = True) -> str:
    """HOLDS, WITHIN or REVERSED for the claim "a beats b" over paired seeds (at least 2)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size < 2:
        raise ValueError(f"a claim is judged over at least 2 seeds, got {d.size}")
    d = d if higher_is_better else -d
    sd = float(np.std(d, ddof=1))
    if (d > 0).all() and d.mean() > sd:
        return HOLDS
    if (d < 0).all() and -d.mean() > sd:
        return REVERSED
    return WITHIN


def summary(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """mean, sd (n - 1), min and max of `ours` over seeds for each group of `keys`, long format."""
    g = df.groupby(keys, sort=False)["ours"]
    wide = pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1), "min": g.min(), "max": g.max(), "seeds": g.size()})
    return wide.reset_index().melt(keys, var_name="statistic", value_name="ours")


def claims(df: pd.DataFrame, pairs: list[tuple[str, str, str, str]], keys=("method", "metric")) -> pd.DataFrame:
    """One row per claim (label, metric, a, b): the mean and sd over seeds of a - b and the verdict.
    df holds per-seed rows with columns seed, ours and `keys`."""
    method, metric = keys
    rows = []
    for label, m, a, b in pairs:
        va = df[(df[method] == a) & (df[metric] == m)].set_index("seed")["ours"]
        vb = df[(df[method] == b) & (df[metric] == m)].set_index("seed")["ours"]
        va, vb = va.align(vb, join="inner")
        d = va - vb
        rows.append(
            dict(
                claim=label,
                metric=m,
                a=a,
                b=b,
                seeds=len(d),
                mean_difference=float(d.mean()),
                sd_difference=float(d.std(ddof=1)),
                verdict=verdict(va, vb),
            )
        )
    return pd.DataFrame(rows)


def long_table(seeds: pd.DataFrame, claim_rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """A seed-spread report in one long table (`keys`, statistic, paper, ours, verdict): the per-seed
    rows ("seed N"), their `summary`, and each claim of `claims` as two rows ("mean of a - b",
    "sd of a - b"; method = the claim) carrying its verdict. `keys` holds "method" and "metric"."""
    ids = [k for k in keys if k != "method"]
    per_seed = seeds.assign(statistic=seeds.seed.map(lambda s: f"seed {s}"), verdict=None)
    stats = summary(seeds, keys).assign(paper=None, verdict=None)
    judged = (
        claim_rows.melt([*ids, "claim", "verdict"], ["mean_difference", "sd_difference"], var_name="statistic")
        .rename(columns={"claim": "method", "value": "ours"})
        .assign(paper=None, statistic=lambda d: d.statistic.str.replace("_difference", " of a - b"))
    )
    return pd.concat([per_seed, stats, judged], ignore_index=True)[[*keys, "statistic", "paper", "ours", "verdict"]]


RULE = (
    "'seed N' rows are one run each; 'mean', 'sd' (n - 1), 'min', 'max' summarise them. Claim rows (method = "
    "the claim 'a beats b'): the mean and sd over seeds of the paired difference a - b and the verdict: 'holds "
    "beyond the spread' when every seed agrees and the mean exceeds the sd, 'reversed' when every seed "
    "disagrees likewise, else 'within the spread'."
)


def write_report(table_id: str, seeds, claim_rows, keys, meta: dict, out_dir, title: str, notes: str) -> dict:
    """Write a seed-spread report (`long_table`; the Markdown shows mean, sd and the claims, the CSV
    every seed) with `notes` followed by how to read it (RULE); return reports.write_table's paths."""
    from orderlib.reports import write_table

    out = long_table(seeds, claim_rows, keys)
    show = out[out.statistic.isin(["mean", "sd"]) | out.verdict.notna()]
    return write_table(table_id, out, meta, out_dir, title=title, notes=f"{notes} {RULE}", show=show)


def run_seeds(seeds, one, progress: bool = True) -> tuple[pd.DataFrame, dict, list]:
    """Call `one(seed)` -> (long rows, {model: record}, data fingerprint) for each seed; return the rows
    with a `seed` column, the models named "seed N, <model>" and the fingerprints in seed order."""
    from tqdm.auto import tqdm

    rows, models, fingerprints = [], {}, []
    for seed in tqdm(seeds, desc="seeds", disable=not progress):
        df, recs, fp = one(seed)
        rows.append(df.assign(seed=seed))
        models.update({f"seed {seed}, {k}": v for k, v in recs.items()})
        fingerprints.append(fp)
    return pd.concat(rows, ignore_index=True), models, fingerprints


def command_line(doc: str, presets, workers: bool = True, argv=None) -> argparse.Namespace:
    """A seed-spread script's arguments: --preset (default "full"), --seeds (default 0 1 2) and, where
    its rows train side by side, --workers (training.workers; default "auto")."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="full", choices=list(presets))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    if workers:
        ap.add_argument("--workers", default="auto", help="rows trained side by side (training.workers)")
    return ap.parse_args(argv)


def seed_folders(notebook: str, others: str, preset: str, own_seed: int):
    """seed -> checkpoint folder: the notebook's own (`notebook`'s checkpoints, so the notebook then
    loads that seed's models) for `own_seed`, `<others>/seed<N>` for any other seed."""
    from orderlib.runs import run_paths

    def folder(seed: int):
        if seed == own_seed:
            return run_paths(notebook, preset).checkpoints
        return run_paths(others, preset).checkpoints / f"seed{seed}"

    return folder
