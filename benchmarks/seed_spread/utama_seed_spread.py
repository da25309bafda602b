"""Utama Table 1's headline rows over seeds (notebook 08, Fashion-MNIST Attributes).

A seed draws the stand-in data (which pairs are unseen, which items and tints make each image:
`standin_task`), the pre-trained CNN, the random word vectors and every model, so the spread covers
both the data and the models. Writes reports/tables/utama_seed_spread.* (per-seed rows, mean / sd /
min / max, each paired claim with its verdict, orderlib.spread); checkpoints under
runs/<preset>/checkpoints/utama_seeds/ (resumable; the notebook's seed uses notebook 08's
checkpoints, runs/<preset>/checkpoints/utama/).

    .venv/bin/python benchmarks/seed_spread/utama_seed_spread.py [--seeds 0 1 2] [--preset full] [--workers auto]
"""

from __future__ import annotations

import time

import pandas as pd

from orderlib import spread
from orderlib.experiments import utama as exp
from orderlib.experiments.utama_tables import utama_table1
from orderlib.reports import git_commit, report_meta
from orderlib.runs import resolve_device, run_paths
from orderlib.training.item_cnn import pretrain_item_cnn
from orderlib.training.workers import resolve_workers

VP, LE, LSTM, FT, ORDER = (
    "visual product",
    "label embedding (LE)",
    "VSE++, RNN (LSTM) text encoder",
    "VSE++, RNN (LSTM) + finetune",
    "order-embeddings, RNN (LSTM)",
)
LE_GLOSS, LE_RANDOM = f"{LE}, gloss skip-gram vectors", f"{LE}, random vectors"
LSTM_RANDOM = f"{LSTM}, random vectors"
ROWS = (VP, LE, LE_GLOSS, LE_RANDOM, LSTM, LSTM_RANDOM, FT, ORDER)
METRICS = ("closed world top-1", "generalised best hm", "generalised auc")
TOP1, AUC = METRICS[0], METRICS[2]
# (claim, metric, a, b): "a beats b" (higher is better for every metric here)
CLAIMS = [
    ("LE above the visual product (the paper's)", TOP1, LE, VP),
    ("LE above VSE++ with an LSTM (the paper's)", TOP1, LE, LSTM),
    ("fine-tuning the CNN helps VSE++ LSTM (the paper's)", TOP1, FT, LSTM),
    ("LE above VSE++ LSTM + finetune (the paper's)", TOP1, LE, FT),
    ("pretrained above random word vectors, LE (Utama's ablation)", TOP1, LE, LE_RANDOM),
    ("pretrained above random word vectors, VSE++ LSTM (Utama's ablation)", TOP1, LSTM, LSTM_RANDOM),
    ("GloVe above gloss skip-gram vectors, LE", TOP1, LE, LE_GLOSS),
    ("order-embeddings above VSE++ with an LSTM", TOP1, ORDER, LSTM),
    ("LE above the visual product, AUC", AUC, LE, VP),
]

KEYS = ["method", "metric"]  # what a row of the report is


def one_seed(cfg: dict, workdir, device, workers: int) -> tuple[pd.DataFrame, dict, str]:
    """The headline rows of Table 1 for one seed, the models they rest on and the data's fingerprint."""
    cnn, _ = pretrain_item_cnn(cfg, workdir, device, progress=False)
    task = exp.standin_task(cfg, cnn)
    vectors, _ = exp.word_vectors(cfg, workdir)
    trained = exp.train_rows(cfg, task, vectors, workdir, cnn, device, False, rows=ROWS, workers=workers)
    df = utama_table1(trained, task)
    df = df.assign(metric=df.protocol + " " + df.metric)
    df = df[df.metric.isin(METRICS) & df.method.isin(ROWS)][["method", "metric", "paper", "ours"]]
    return df, exp.model_records(trained, cnn), exp.data_fingerprint(task)


def main() -> None:
    args = spread.command_line(__doc__, exp.PRESETS)
    t0, commit = time.perf_counter(), git_commit()
    device = resolve_device("auto")
    workers = resolve_workers(args.workers, device)
    paths = run_paths("utama_seed_spread", args.preset)
    base = exp.PRESETS[args.preset]

    # the notebook's own seed uses its checkpoints, so notebook 08 then loads it
    folder = spread.seed_folders("utama", "utama_seeds", args.preset, base["seed"])
    seeds, models, fingerprints = spread.run_seeds(
        args.seeds, lambda s: one_seed({**base, "seed": s}, folder(s), device, workers)
    )
    claims = spread.claims(seeds, CLAIMS)
    notes = (
        "Notebook 08's headline rows of Table 1 (Fashion-MNIST Attributes, the full preset) retrained from each "
        "seed; a seed draws the unseen pairs, the rendered images, the pre-trained CNN, the random word vectors and "
        "every model, so the data differ between seeds too (one fingerprint per seed in the .meta.json). Closed "
        "world: top-1 over the unseen test pairs; generalised: exact bias sweep. The paper column is MIT-States', "
        "for orientation only."
    )
    meta = report_meta(
        preset=args.preset,
        seed=args.seeds,
        device=device,
        processes=workers,
        commit=commit,
        data_source=exp.source(base.get("word_vectors")),
        data_fingerprint=" ".join(fingerprints),
        wall_time_s=time.perf_counter() - t0,
        trained=models,
        config=base,
        seeds=args.seeds,
        rows=list(ROWS),
    )
    written = spread.write_report(
        "utama_seed_spread",
        seeds,
        claims,
        KEYS,
        meta,
        paths.tables,
        "Utama Table 1: headline rows over seeds (measurement)",
        notes,
    )
    print(claims[["claim", "mean_difference", "sd_difference", "verdict"]].round(3).to_string(index=False))
    print("wrote", written["csv"])


if __name__ == "__main__":
    main()
