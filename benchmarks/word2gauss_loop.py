"""word2gauss epochs: the compiled word2gauss loop vs the generic table trainer (torch, lazy Adam).

Table 1's word2gauss row trains the paper's 200 epochs; this measures what makes that affordable.
Both train the same 50-d diagonal Gaussians on the paper protocol's 830k training pairs for EPOCHS
epochs on one thread, in one run on one machine; the ratio of seconds per epoch is the speed-up
(the two are different optimisers, word2gauss's own per-pair Adagrad and batched Adam, so their
dev accuracies after each epoch are shown too). Writes reports/tables/oe_word2gauss_speed.*.

    .venv/bin/python benchmarks/word2gauss_loop.py [--epochs 3]
"""
from __future__ import annotations

import argparse
import time

import pandas as pd
import torch

from orderlib.data.hypernymy import make_splits
from orderlib.data.wordnet import ensure_wordnet, load_noun_graph
from orderlib.experiments.oe_wordnet import PRESETS
from orderlib.kernels import word2gauss_status
from orderlib.reports import device_description, write_table
from orderlib.train_hypernymy import HypernymyConfig, train_concept_model
from orderlib.train_word2gauss import Word2GaussConfig, train_word2gauss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    cfg = PRESETS["full"]
    ensure_wordnet(cfg["wordnet"])
    graph = load_noun_graph(cfg["wordnet"])
    data = make_splits(graph.parents, "paper", cfg["n_test"], cfg["n_dev"], cfg["split_seed"])
    runs = {
        "compiled word2gauss loop (per-pair Adagrad)": train_word2gauss(
            data, Word2GaussConfig(epochs=args.epochs, patience=args.epochs), None, progress=True),
        "torch table trainer (lazy Adam, batch 500)": train_concept_model(
            data, HypernymyConfig(model="word2gauss", epochs=args.epochs, patience=args.epochs, margin=7.0),
            "cpu", None, progress=True),
    }
    rows = []
    for method, r in runs.items():
        rows.append(dict(method=method, metric="seconds per epoch", ours=round(r.seconds / len(r.history), 2)))
        rows += [dict(method=method, metric=f"dev accuracy after {h['epoch'] + 1} epochs (%)",
                      ours=round(h["dev_accuracy"], 2)) for h in r.history]
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    per_epoch = df[df.metric == "seconds per epoch"].set_index("method").ours
    ratio = per_epoch.iloc[1] / per_epoch.iloc[0]
    meta = {"preset": "full", "seed": 0, "device": device_description("cpu"), "threads": 1,
            "data_source": f"WordNet {graph.version} ({graph.source})", "data_fingerprint": graph.fingerprint,
            "wall_time_s": time.perf_counter() - t0, "epochs": args.epochs, "speedup": round(ratio, 2),
            "word2gauss_trainer": word2gauss_status()}
    notes = (f"Seconds per epoch include evaluation on dev and test after each epoch. Speed-up of the "
             f"compiled loop: {ratio:.1f}x on one thread, measured in this run.")
    write_table("oe_word2gauss_speed", df, meta, title="word2gauss: compiled loop vs torch table trainer",
                notes=notes)
    print(df.to_string(index=False))
    print(f"speed-up {ratio:.1f}x")


if __name__ == "__main__":
    main()
