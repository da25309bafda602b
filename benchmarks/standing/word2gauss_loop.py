"""word2gauss epochs: the compiled word2gauss loop vs the generic table trainer (torch, lazy Adam).

Table 1's word2gauss row trains the paper's 200 epochs; this measures what makes that affordable.
Both train the same 50-d diagonal Gaussians on the paper protocol's 830k training pairs, one epoch
each from scratch, alternating for ROUNDS rounds on one thread in one run, so a change in the
machine's load hits both alike; the median of the rounds' ratios is the speed-up (the two are
different optimisers, word2gauss's own per-pair Adagrad and batched Adam, so their dev accuracies
after the epoch are shown too). Writes reports/tables/oe_word2gauss_speed.*.

    .venv/bin/python benchmarks/standing/word2gauss_loop.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from orderlib.concepts import HypernymyConfig, train_concept_model, word2gauss_status
from orderlib.concepts.word2gauss import Word2GaussConfig, train_word2gauss
from orderlib.data.hypernymy import make_splits
from orderlib.data.wordnet import ensure_wordnet, load_noun_graph
from orderlib.experiments.oe_wordnet import PRESETS
from orderlib.reports import device_description, write_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5, help="alternating one-epoch runs of each trainer")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    cfg = PRESETS["full"]
    ensure_wordnet(cfg["wordnet"])
    graph = load_noun_graph(cfg["wordnet"])
    data = make_splits(graph.parents, "paper", cfg["n_test"], cfg["n_dev"], cfg["split_seed"])
    w2g, table = "compiled word2gauss loop (per-pair Adagrad)", "torch table trainer (lazy Adam, batch 500)"
    secs: dict[str, list[float]] = {w2g: [], table: []}
    dev: dict[str, list[float]] = {w2g: [], table: []}
    for r in range(args.rounds):  # interleaved one-epoch runs: a change in machine load hits both alike
        runs = {
            w2g: train_word2gauss(data, Word2GaussConfig(epochs=1, patience=1, seed=r), None, progress=False),
            table: train_concept_model(
                data,
                HypernymyConfig(model="word2gauss", epochs=1, patience=1, margin=7.0, seed=r),
                "cpu",
                None,
                progress=False,
            ),
        }
        for method, run in runs.items():
            secs[method].append(run.seconds)
            dev[method].append(run.history[0]["dev_accuracy"])
    ratios = [t / w for t, w in zip(secs[table], secs[w2g])]  # per round
    rows = []
    for method in (w2g, table):
        rows.append(
            dict(method=method, metric="seconds per epoch (median of rounds)", ours=float(np.median(secs[method])))
        )
        rows.append(
            dict(method=method, metric="dev accuracy after 1 epoch (%, mean)", ours=float(np.mean(dev[method])))
        )
    rows += [
        dict(method=w2g, metric=f"speed-up over the table trainer ({k} of rounds)", ours=float(f(ratios)))
        for k, f in (("median", np.median), ("min", np.min), ("max", np.max))
    ]
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    ratio = float(np.median(ratios))
    meta = {
        "preset": "full",
        "seed": 0,
        "device": device_description("cpu"),
        "threads": 1,
        "data_source": f"WordNet {graph.version} ({graph.source})",
        "data_fingerprint": graph.fingerprint,
        "wall_time_s": time.perf_counter() - t0,
        "rounds": args.rounds,
        "speedup": round(ratio, 2),
        "seconds": secs,
        "word2gauss_trainer": word2gauss_status(),
    }
    notes = (
        f"One epoch of each trainer from scratch, alternating, {args.rounds} rounds on one thread; seconds "
        f"per epoch include evaluation on dev and test. Speed-up of the compiled loop: {ratio:.1f}x "
        f"(median of the rounds' ratios, {min(ratios):.1f}-{max(ratios):.1f}x). The two are different "
        f"optimisers (per-pair Adagrad, batched Adam), so their first-epoch accuracies differ."
    )
    write_table("oe_word2gauss_speed", df, meta, title="word2gauss: compiled loop vs torch table trainer", notes=notes)
    print(df.to_string(index=False))
    print(f"speed-up {ratio:.1f}x")


if __name__ == "__main__":
    main()
