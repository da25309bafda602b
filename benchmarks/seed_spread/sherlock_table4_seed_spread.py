"""Sherlock Tables 4 and 5's headline claims over seeds (notebook 09, Fashion-MNIST Facts).

A seed draws the stand-in data (the long-tailed training counts and every train / dev / test fact
image: `fact_task`) and every trained row; the frozen "VGG-16" (notebook 08's item CNN) and the word
vectors are the notebook's in every seed. Rows: SEM-A, SEM-B, the S/P/O-averaged ablation, SEM-A on
the gloss skip-gram vectors, the closed-form baselines (MV CCA, ESZSL) and the two caption models
retrained on fact phrases. Each claim is judged under both of the authors' evaluation scripts
(`strict`, `implied`). Writes reports/tables/sherlock_table4_seed_spread.* (orderlib.spread);
checkpoints under runs/<preset>/checkpoints/sherlock_table4_seeds/ (resumable; the notebook's seed
uses notebook 09's checkpoints, runs/<preset>/checkpoints/sherlock/).

    .venv/bin/python benchmarks/seed_spread/sherlock_table4_seed_spread.py [--seeds 0 1 2] [--preset full] [--workers auto]
"""

from __future__ import annotations

import time

import pandas as pd

from orderlib import spread
from orderlib.eval.facts import ALL, IMPLIED, SAME_ORDER, STRICT, generalisation_rows, retrieval_rows
from orderlib.experiments import sherlock as exp
from orderlib.reports import git_commit, report_meta
from orderlib.runs import resolve_device, run_paths
from orderlib.training.workers import resolve_workers

SEM_A, SEM_B, AVERAGED, GLOSS_A = "SEM-A", "SEM-B", "SEM-A, S/P/O averaged (ablation)", "SEM-A, gloss skip-gram vectors"
CCA, ESZSL = "MV CCA", "ESZSL"
OE, SYMM = "order-embeddings, retrained on facts", "order-embeddings (symm.), retrained on facts"
SEM_ROWS = (SEM_A, SEM_B, AVERAGED, GLOSS_A)
K1, K10, MAP, FEW = "K1, all facts", "K10, all facts", "mAP, all facts", "K10, few-example SP, O facts"


def m(metric: str, protocol: str) -> str:
    return f"{metric} ({protocol})"


# (a, b, metric, the paper's claim?): SEM-A's comparisons, each judged under both protocols below
SEM_A_ABOVE = [
    (CCA, K1, True),
    (ESZSL, K1, True),
    (OE, K1, True),
    (SEM_B, K1, True),
    (AVERAGED, K1, True),
    (CCA, K10, False),
    (CCA, MAP, False),
    (AVERAGED, FEW, True),
    (CCA, FEW, True),
    (SEM_B, FEW, True),  # Table 5: SEM-A above SEM-B in every case
]
FACT_PROTOCOLS = (STRICT, IMPLIED)
NAME = {AVERAGED: "the S/P/O-averaged ablation", OE: "order-embeddings retrained on facts"}  # in a claim
# (claim, metric, a, b): "a beats b" (higher is better for every metric here)
CLAIMS = [
    *[
        (f"SEM-A above {NAME.get(b, b)}, {metric} ({p})" + (" (the paper's)" if paper else ""), m(metric, p), SEM_A, b)
        for b, metric, paper in SEM_A_ABOVE
        for p in FACT_PROTOCOLS
    ],
    *[(f"GloVe above gloss skip-gram, SEM-A, {K1} ({p})", m(K1, p), SEM_A, GLOSS_A) for p in FACT_PROTOCOLS],
    *[(f"order above symmetric, retrained on facts, {K1} ({p})", m(K1, p), OE, SYMM) for p in FACT_PROTOCOLS],
]

KEYS = ["method", "metric"]  # what a row of the report is


def headline(method: str, dist, task, scoring: str = "euc") -> list[dict]:
    """K1, K10 and mAP among all facts over all test images (Table 4) and K10 among SPO facts on the
    few-example SP, O facts (Table 5), under each protocol, as long rows."""
    t4 = pd.DataFrame(retrieval_rows(method, dist, task, scoring=scoring))
    t4 = t4[(t4.scope == "all") & (t4.candidates == ALL) & t4.metric.isin(["K1", "K10", "mAP"])]
    t5 = pd.DataFrame(generalisation_rows(method, dist, task, scoring=scoring))
    t5 = t5[(t5.case == "SP, O") & (t5.candidates == SAME_ORDER) & (t5.metric == "K10")]
    rows = [dict(method=method, metric=m(f"{r.metric}, all facts", r.protocol), ours=r.ours) for r in t4.itertuples()]
    rows += [dict(method=method, metric=m(FEW, r.protocol), ours=r.ours) for r in t5.itertuples()]
    return rows


def one_seed(cfg: dict, workdir, cnn, words, gloss, device, workers: int) -> tuple[pd.DataFrame, dict, str]:
    """One seed's headline rows, the models they rest on and the data's fingerprint; the CNN and the
    word vectors (`words`, `gloss`) are the same in every seed."""
    data = exp.fact_data(cfg, words, cnn, gloss=gloss)
    results = exp.train_sem_rows(cfg, data, cnn, workdir, device, progress=False, rows=list(SEM_ROWS), workers=workers)
    results.update(exp.closed_form_rows(cfg, data))
    results.update(exp.caption_retrained_rows(cfg, data, workdir, device, progress=False, workers=workers))
    rows = [
        row
        for method in (*SEM_ROWS, CCA, ESZSL, OE, SYMM)
        for row in headline(method, results[method]["dist"], data.task, results[method].get("scoring", "euc"))
    ]
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    return df, exp.model_records(results, cnn), exp.data_fingerprint(data.task)


def main() -> None:
    args = spread.command_line(__doc__, exp.PRESETS)
    t0, commit = time.perf_counter(), git_commit()
    device = resolve_device("auto")
    workers = resolve_workers(args.workers, device)
    paths = run_paths("sherlock_table4_seed_spread", args.preset)
    shared = run_paths("utama", args.preset).checkpoints  # notebook 08's CNN and skip-gram, as notebook 09
    base = exp.PRESETS[args.preset]
    cnn, _, words = exp.pretrained(base, shared, device, progress=False)  # no seed of their own: loaded once
    gloss = exp.gloss_words(base, shared)

    # the notebook's own seed uses its checkpoints, so notebook 09 then loads it
    folder = spread.seed_folders("sherlock", "sherlock_table4_seeds", args.preset, base["seed"])
    seeds, models, fingerprints = spread.run_seeds(
        args.seeds, lambda s: one_seed({**base, "seed": s}, folder(s), cnn, words, gloss, device, workers)
    )
    claims = spread.claims(seeds, CLAIMS)
    notes = (
        "Notebook 09's rows (Fashion-MNIST Facts, 810 facts, the full preset's sizes) retrained from each seed; a "
        "seed draws the training counts, every fact image and every trained row, so the data differ between seeds "
        "(one fingerprint per seed in the .meta.json); the frozen CNN (notebook 08's) and the word vectors are "
        "the same in every seed. K@k (%) image -> fact among all 810 facts, mAP (%) fact -> image, over all test "
        "images; 'K10, few-example SP, O facts': Table 5's case SP, O, K10 among the SPO facts. '(strict)' / "
        "'(implied)': the authors' two evaluation scripts (docs/sherlock.md). No paper column: the paper's data "
        "differ."
    )
    meta = report_meta(
        preset=args.preset,
        seed=args.seeds,
        device=device,
        processes=workers,
        commit=commit,
        data_source=exp.source(),
        data_fingerprint=" ".join(fingerprints),
        wall_time_s=time.perf_counter() - t0,
        trained=models,
        config=base,
        seeds=args.seeds,
        word_vectors=exp.word_notes(base),
    )
    written = spread.write_report(
        "sherlock_table4_seed_spread",
        seeds,
        claims,
        KEYS,
        meta,
        paths.tables,
        "Sherlock Tables 4 and 5: headline claims over seeds (measurement)",
        notes,
    )
    print(claims[["claim", "mean_difference", "sd_difference", "verdict"]].round(3).to_string(index=False))
    print("wrote", written["csv"])


if __name__ == "__main__":
    main()
