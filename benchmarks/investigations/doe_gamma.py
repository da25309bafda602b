"""Density order embeddings on Table 1's split past the notebook's grid: dev and test accuracy
across the threshold gamma, the negative kinds re-chosen there, and a longer schedule.

Notebook 01 chooses the row's negative kinds on dev at lr 0.01, gamma 225, then Adam lr x gamma from
{0.01, 0.003, 0.001, 0.0005} x {225, 100}, and picks gamma 100, the low end of that grid, short of
Athiwaratkun & Wilson's 92.3 by a few hundredths (issue 13). At the chosen lr this trains the row
over a wider gamma range (the grid's two values included, retrained here), the extra negative
kinds again at the best-on-dev gamma (the notebook chose them at other settings), and the best of
these with twice the patience and 60 epochs, so a reader can see whether any lever is left.
Same data, trainer and dev selection as the notebook (orderlib.experiments.oe_wordnet); the
notebook's final settings are "lr 0.001, gamma 100", 40 epochs, patience 5.
Writes reports/tables/oe_table1_doe_gamma.* (full preset; others under runs/<preset>/reports/);
checkpoints under runs/<preset>/checkpoints/ (resumable).

    .venv/bin/python benchmarks/investigations/doe_gamma.py [--gammas 225 150 100 75 50 25] [--lr 0.001] [--seeds 0]
        [--long-seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from orderlib.experiments import oe_wordnet as exp
from orderlib.experiments import oe_wordnet_tables as tables
from orderlib.reports import device_description, git_commit, training_provenance, write_table
from orderlib.runs import run_paths

METRICS = {
    "dev accuracy (%)": "dev",
    "test accuracy (%)": "test",
    "test accuracy, best epoch chosen on test (%)": "best_test_over_epochs",
    "epochs trained": "epochs_run",
}
LONG = {"epochs": 60, "patience": 10}  # the longer schedule tried at the best gamma


def point_jobs(
    cfg: dict,
    setting: str,
    seeds: list[int],
    lr: float,
    gammas: list[float],
    schedule: dict,
    run_dir,
    negatives: tuple[str, ...] = (),
) -> list[dict]:
    """One training job per (gamma, seed) at `lr` on `schedule` (epochs, patience overrides) with
    the extra negative kinds `negatives` (random corruptions only when empty)."""
    jobs = []
    for g in gammas:
        for s in seeds:
            o = {"negatives": tuple(negatives), "lr": lr, "model_kwargs": {"gamma": g}, **schedule}
            jobs.append(
                exp.training_job("grid", setting, exp.DOE, s, cfg, "cpu", run_dir, exp._cost(cfg, exp.DOE, o), o)
            )
    return jobs


def rows_of(results: list[dict], block: str) -> list[dict]:
    """Long-format rows of finished jobs: one per (negatives, gamma, seed, metric), then the mean
    over two or more seeds of each (negatives, gamma, metric) (seed "mean", with sd (n-1) and n_seeds)."""
    rows = [
        dict(
            method=exp.DOE,
            block=block,
            negatives=exp.negatives_label(r["overrides"]["negatives"]),
            epochs=r["config"]["epochs"],
            patience=r["config"]["patience"],
            gamma=r["overrides"]["model_kwargs"]["gamma"],
            lr=f"{r['overrides']['lr']:g}",
            seed=str(r["seed"]),
            metric=m,
            paper=None,
            published=tables.PUBLISHED_LATER[exp.DOE] if m == "test accuracy (%)" else None,
            ours=r[k],
            sd=None,
            n_seeds=None,
        )
        for r in results
        for m, k in METRICS.items()
    ]
    return tables.with_seed_means(rows, ["negatives", "gamma", "metric"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="full", choices=list(exp.PRESETS))
    ap.add_argument("--setting", default="paper", choices=list(exp.SETTINGS))
    ap.add_argument("--gammas", type=float, nargs="+", default=[225.0, 150.0, 100.0, 75.0, 50.0, 25.0])
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds of the gamma sweep")
    ap.add_argument("--long-seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the longer schedule")
    ap.add_argument("--workers", default="auto")
    args = ap.parse_args()
    t0, commit = time.perf_counter(), git_commit()
    cfg, graph, workers = exp.load_setting(args.preset, args.setting, args.workers)
    paths = run_paths("oe_table1_doe_gamma", args.preset)  # full: reports/; others: runs/<preset>/

    def run(seeds, gammas, schedule=None, kinds=((),)):  # every (kinds, gamma, seed) in one parallel batch
        jobs = [
            j
            for k in kinds
            for j in point_jobs(cfg, args.setting, seeds, args.lr, gammas, schedule or {}, paths.checkpoints, k)
        ]
        return exp.run_jobs(jobs, workers)

    def best_of(results, key):  # the best mean dev over seeds; ties: the one run first
        dev = pd.DataFrame([dict(k=key(r), dev=r["dev"]) for r in results])
        return dev.groupby("k", sort=False).dev.mean().idxmax()

    gamma_sweep = run(args.seeds, args.gammas)
    best = float(best_of(gamma_sweep, lambda r: r["overrides"]["model_kwargs"]["gamma"]))
    at_best = [r for r in gamma_sweep if r["overrides"]["model_kwargs"]["gamma"] == best]
    neg_sweep = run(args.seeds, [best], kinds=exp.DOE_NEGATIVES[1:])
    kinds = best_of(at_best + neg_sweep, lambda r: r["overrides"]["negatives"])
    blocks = [("gamma sweep", gamma_sweep), (f"negative kinds at gamma {best:g}", neg_sweep)]
    if kinds != ():  # a kind won on dev at the chosen lr and gamma: its seeds on the notebook's schedule
        blocks.append(("best negative kinds over seeds", run(args.long_seeds, [best], kinds=[kinds])))
    blocks.append(("longer schedule", run(args.long_seeds, [best], LONG, [kinds])))
    df = pd.DataFrame([row for name, results in blocks for row in rows_of(results, name)])
    models = {
        f"{name}: gamma {r['overrides']['model_kwargs']['gamma']:g}, "
        f"{exp.negatives_label(r['overrides']['negatives'])}, seed {r['seed']}, {len(r['history'])} epochs": tables.run_record(
            r
        )
        for name, results in blocks
        for r in results
    }
    notes = (
        f"Density order embeddings on Table 1's {args.setting!r} setting ({args.preset} preset: WordNet "
        f"{graph.version}, 4,000 test and 4,000 dev pairs, the notebook's split), Adam lr {args.lr:g} (the "
        f"notebook's choice), margin 1000, 50-d, batch 500, the epoch chosen on dev as in notebook 01. Blocks, "
        f"in order: gamma swept with random corruptions only (seeds {args.seeds}); the extra negative kinds "
        f"(their S2 swap, S4 sibling) at the best-on-dev gamma ({best:g}), where the notebook chose them at "
        f"lr 0.01, gamma 225 (seeds {args.seeds}); the winning kinds over seeds {args.long_seeds} if they are "
        f"not random corruptions alone; then the best setting with {LONG['epochs']} epochs and patience "
        f"{LONG['patience']} (seeds {args.long_seeds}). Table 1's row is 3 seeds, 40 epochs, patience 5. "
        f"'published' is Athiwaratkun & Wilson's 92.3 (epoch picked on test). A measurement beside Table 1, "
        f"not a row of it: the notebook's grid is {{0.01, 0.003, 0.001, 0.0005}} x {{225, 100}}."
    )
    meta = {
        "preset": args.preset,
        "seed": sorted(set(args.seeds + args.long_seeds)),
        "split_seed": cfg["split_seed"],
        "setting": args.setting,
        "device": device_description("cpu"),
        "workers": workers,
        "git_commit": commit,
        "data_source": f"WordNet {graph.version} ({graph.source})",
        "data_fingerprint": graph.fingerprint,
        "best_gamma_on_dev": best,
        "best_negatives_on_dev": exp.negatives_label(kinds),
        "wall_time_s": time.perf_counter() - t0,
        "training": training_provenance(models, commit),
    }
    df["n_seeds"] = df["n_seeds"].astype("Int64")
    out = write_table(
        "oe_table1_doe_gamma",
        df,
        meta,
        paths.tables,
        title="Density order embeddings past Table 1's grid (measurement)",
        notes=notes,
    )
    print(
        df.pivot_table(
            index=["block", "negatives", "gamma", "seed"], columns="metric", values="ours", sort=False
        ).round(2)
    )
    print("wrote", out["csv"])


if __name__ == "__main__":
    main()
