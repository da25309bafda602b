"""Table 1 of Vendrov et al. (WordNet hypernym prediction): presets and the runner.

The paper's hyperparameters live in PRESETS["full"]; PRESETS["small"] is the minutes-on-CPU
preset that CI executes. Numbers quoted from the paper are in PAPER_TABLE1.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from orderlib.data.hypernymy import HypernymyData, make_splits, transitive_closure_predict
from orderlib.data.wordnet import NounGraph
from orderlib.train_hypernymy import HypernymyConfig, TrainResult, train_concept_model
from orderlib.params import boolean, device, one_of, subset_of

PAPER_TABLE1 = {  # Table 1 of Vendrov et al. (2016), test accuracy (%) on 4000 withheld edges
    "transitive closure": 88.2,
    "word2gauss": 86.6,
    "order-embeddings (symmetric)": 84.2,
    "order-embeddings (bilinear)": 86.3,
    "order-embeddings": 90.6,
}
# What each of our rows is, beside the paper's, so a gap can be read (shown in the notebook and reports).
ROW_NOTES = {
    "transitive closure": "No learning. Same definition as the paper; its 88.2 came from the authors' own "
                          "random split, which cannot be recovered, so about a point of split noise is expected.",
    "word2gauss": "50-d diagonal Gaussians, KL(N_u || N_v), ranking hinge with the margin chosen on dev from "
                  "{1, 3, 7} after 1/4 epoch each; means within radius 2, variances in [0.05, 5]; Adam lr 0.01. "
                  "The paper trained 200 epochs with the seomoz word2gauss code; we train at most 10.",
    "order-embeddings (symmetric)": "Cosine distance on an unconstrained 50-d table (unit-scale init), Eq. (4), "
                                    "alpha = 1, at most 10 epochs.",
    "order-embeddings (bilinear)": "No code was released: Socher et al. (2013)'s bilinear score e_u^T W e_v + b "
                                   "with their ranking hinge (margin 1), at most 15 epochs.",
    "order-embeddings": "The paper's setting (50-d, alpha = 1, Adam lr 0.01, 500 + 500 pairs per batch), 30 epochs, "
                        "epoch and threshold chosen on dev (the authors chose the epoch on test).",
}
METHODS = list(PAPER_TABLE1)
LEARNED = METHODS[1:]
BEST_PUBLISHED = 92.3  # density order embeddings (Athiwaratkun & Wilson, 2018), same protocol

# Per-model settings. Order-embeddings follows Sec. 3.3 (50-d, alpha = 1, Adam lr 0.01, 500 true +
# 500 corrupted pairs per batch, 30-50 epochs with early stopping on dev: we take 30). The paper
# gives no settings for its baselines; ours are stated here and in the notebook. All use Adam
# with dense Adam's trajectory computed lazily ("lazy_adam", see orderlib/optim.py).
_FULL_MODELS = {
    "order-embeddings": dict(epochs=30, patience=5, lr=0.01, margin=1.0),
    "order-embeddings (symmetric)": dict(epochs=10, patience=3, lr=0.01, margin=1.0),
    "order-embeddings (bilinear)": dict(epochs=15, patience=3, lr=0.01, margin=1.0),
    "word2gauss": dict(epochs=10, patience=3, lr=0.01),
}
PRESETS = {
    "full": dict(wordnet="3.1", dim=50, batch=500, seed=0, n_test=4000, n_dev=4000,
                 train_fraction=1.0, models=_FULL_MODELS,
                 w2g_margins=[1.0, 3.0, 7.0], w2g_grid_epochs=1, w2g_grid_fraction=0.25),
    "small": dict(wordnet="3.1", dim=50, batch=500, seed=0, n_test=4000, n_dev=4000,
                  train_fraction=0.1,
                  models={k: {**v, "epochs": 4, "patience": 4} for k, v in _FULL_MODELS.items()},
                  w2g_margins=[1.0, 7.0], w2g_grid_epochs=1, w2g_grid_fraction=0.04),
}

# Notebook parameters and their valid values (orderlib.params.validate).
PARAMETERS = {"PRESET": one_of(PRESETS), "DEVICE": device, "PROTOCOLS": subset_of(["paper", "clean"]),
              "PROGRESS": boolean}


def model_config(name: str, cfg: dict, **overrides) -> HypernymyConfig:
    """Return the HypernymyConfig of one Table 1 row under a preset."""
    base = dict(dim=cfg["dim"], batch=cfg["batch"], seed=cfg["seed"], train_fraction=cfg["train_fraction"])
    return HypernymyConfig(model=name, **{**base, **cfg["models"][name], **overrides})


def choose_w2g_margin(data: HypernymyData, cfg: dict, device, run_dir: Path | None,
                      progress: bool) -> tuple[float, dict]:
    """Grid-search the word2gauss margin on dev accuracy (as the paper did, on a short budget)."""
    scores = {}
    for m in cfg["w2g_margins"]:
        c = model_config("word2gauss", cfg, margin=m, epochs=cfg["w2g_grid_epochs"],
                         train_fraction=cfg["w2g_grid_fraction"], patience=cfg["w2g_grid_epochs"])
        ckpt = run_dir / f"{data.protocol}-word2gauss-grid-m{m:g}.pt" if run_dir else None
        scores[m] = train_concept_model(data, c, device, ckpt, progress).dev_accuracy
    return max(scores, key=lambda m: (scores[m], -m)), scores


def run_protocol(graph: NounGraph, protocol: str, cfg: dict, device="cpu",
                 run_dir: Path | None = None, progress: bool = True) -> dict:
    """Run every Table 1 row under one protocol; return rows, histories, facts and timings."""
    t0 = time.perf_counter()
    data = make_splits(graph.parents, protocol, cfg["n_test"], cfg["n_dev"], cfg["seed"])
    known = np.r_[data.train, data.dev[data.dev_labels]]  # train + dev positives
    tc = transitive_closure_predict(known, data.test, data.n_nodes)
    results: dict[str, dict] = {"transitive closure": {
        "test": 100 * float((tc == data.test_labels).mean()), "dev": None, "seconds": 0.0}}
    histories: dict[str, list] = {}
    w2g = None
    for name in LEARNED:
        c = model_config(name, cfg)
        if name == "word2gauss":
            margin, grid = choose_w2g_margin(data, cfg, device, run_dir, progress)
            c, w2g = replace(c, margin=margin), {"margin": margin, "grid_dev_accuracy": grid}
        ckpt = run_dir / f"{protocol}-{name}.pt" if run_dir else None
        r: TrainResult = train_concept_model(data, c, device, ckpt, progress)
        histories[name] = r.history
        results[name] = {"test": r.test_accuracy, "dev": r.dev_accuracy, "seconds": r.seconds,
                         "best_epoch": r.best_epoch, "epochs_run": len(r.history),
                         "best_test_over_epochs": max(h["test_accuracy"] for h in r.history),
                         "resumed": r.resumed, "config": c.__dict__}
    return {"protocol": protocol, "data": data, "results": results, "histories": histories,
            "facts": data.stats, "word2gauss": w2g, "wall_time_s": time.perf_counter() - t0}


def table(run: dict) -> pd.DataFrame:
    """Long-format Table 1: method, metric, paper, ours (+ dev accuracy and authors' selection)."""
    rows = []  # the paper column quotes Table 1 (measured on the authors' protocol) in both tables
    for name in METHODS:
        r = run["results"][name]
        rows.append(dict(method=name, metric="test accuracy (%)", paper=PAPER_TABLE1[name],
                         ours=r["test"]))
        if r.get("dev") is not None:
            rows.append(dict(method=name, metric="dev accuracy (%)", paper=None, ours=r["dev"]))
            rows.append(dict(method=name, metric="test accuracy, best epoch chosen on test (%)",
                             paper=None, ours=r["best_test_over_epochs"]))
            rows.append(dict(method=name, metric="epochs trained", paper=None, ours=r["epochs_run"]))
    df = pd.DataFrame(rows, columns=["method", "metric", "paper", "ours"])
    df["protocol"] = run["protocol"]
    return df


def gaps(run: dict) -> pd.DataFrame:
    """Our test accuracy beside the paper's, the gap, and what our row is."""
    rows = [dict(method=m, paper=PAPER_TABLE1[m], ours=round(run["results"][m]["test"], 2),
                 gap=round(run["results"][m]["test"] - PAPER_TABLE1[m], 2), note=ROW_NOTES[m])
            for m in METHODS]
    return pd.DataFrame(rows)


def history_frame(run: dict) -> pd.DataFrame:
    """Per-epoch loss and accuracies of every learned row, long format for plotting."""
    frames = [pd.DataFrame(h).assign(method=name) for name, h in run["histories"].items()]
    return pd.concat(frames, ignore_index=True).assign(protocol=run["protocol"])
