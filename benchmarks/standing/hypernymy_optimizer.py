"""Dense Adam vs lazy_adam vs sparse_adam for the Table 1 order-embedding (paper protocol).

Trains the same model from the same init with each optimizer for EPOCHS epochs and records
seconds per epoch and dev/test accuracy after each, in one run on one machine. Writes
reports/tables/oe_optimizer_choice.{csv,md,meta.json}.

    .venv/bin/python benchmarks/standing/hypernymy_optimizer.py [--epochs 5]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from orderlib.concepts import OPTIMIZERS, train_concept_model
from orderlib.data.hypernymy import make_splits
from orderlib.data.wordnet import ensure_wordnet, load_noun_graph
from orderlib.experiments.oe_wordnet import PRESETS, model_config
from orderlib.reports import device_description, git_commit, model_record, training_provenance, write_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=5)
    args = ap.parse_args()
    t0, commit = time.perf_counter(), git_commit()
    cfg = PRESETS["full"]
    ensure_wordnet(cfg["wordnet"])
    graph = load_noun_graph(cfg["wordnet"])
    data = make_splits(graph.parents, "paper", cfg["n_test"], cfg["n_dev"], cfg["split_seed"])
    rows, models = [], {}
    for method in OPTIMIZERS:
        c = model_config("order-embeddings", cfg, epochs=args.epochs, patience=args.epochs, optimizer=method)
        r = train_concept_model(data, c, "cpu", None, progress=True)  # no checkpoint: trained here
        models[method] = model_record(r.seconds, commit, False, epochs_run=len(r.history))
        rows.append(dict(method=method, metric="seconds per epoch", ours=r.seconds / len(r.history)))
        for h in r.history:
            e = h["epoch"] + 1
            rows.append(dict(method=method, metric=f"dev accuracy after {e} epochs (%)", ours=h["dev_accuracy"]))
            rows.append(dict(method=method, metric=f"test accuracy after {e} epochs (%)", ours=h["test_accuracy"]))
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    meta = {
        "preset": "full",
        "seed": cfg["seeds"][0],
        "device": device_description("cpu"),
        "data_source": f"WordNet {graph.version} ({graph.source})",
        "data_fingerprint": graph.fingerprint,
        "wall_time_s": time.perf_counter() - t0,
        "git_commit": commit,
        "training": training_provenance(models, commit),
        "epochs": args.epochs,
        "model": "order-embeddings, paper protocol, lr 0.01, batch 500+500",
    }
    write_table(
        "oe_optimizer_choice",
        df,
        meta,
        title="Optimizer choice for Table 1: lazy vs dense Adam",
        notes="Same init, batches and negatives for each optimizer. "
        + " ".join(f"{k}: {v}." for k, v in OPTIMIZERS.items()),
    )
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
