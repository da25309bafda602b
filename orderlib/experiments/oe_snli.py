"""Table 3 of Vendrov et al.: 2-class textual entailment on SNLI (and SICK), presets and runner.

Protocols (`data` in a preset):
- "embedded": the TSV copies of SNLI dev/test and SICK, without SNLI train. SNLI: train on SNLI
  dev minus a seeded held-out part, choose the threshold and stop early on that held-out part,
  report on the full SNLI test.
  SICK: train on SICK train, hold out SICK dev, report on SICK test.
- "official": the paper's protocol with the official `snli_1.0` jsonl release: train on train,
  hold out dev, report on test.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from orderlib.data.entailment import LABELS, PairSet, holdout_split, load_pairs, load_split, tokenize
from orderlib.eval.threshold import roc_points
from orderlib.params import device, existing, matmul, one_of, workers
from orderlib.reports import model_record
from orderlib.training.entailment import EntailmentConfig, energies, prepare, train_entailment_model
from orderlib.training.workers import run_in_workers

PAPER_TABLE3 = {  # SNLI test, 2-class accuracy (%), Table 3
    "EOP classifier (Bowman et al., 2015)": 75.0,
    "skip-thoughts": 87.7,
    "order-embeddings (symmetric)": 79.3,
    "order-embeddings": 88.6,
}
# Our "GRU features + MLP" row is in the spirit of skip-thoughts (features of two sentence vectors
# fed to a classifier) but is not a reproduction of it: no skip-thought vectors are used.
MODELS = ["order-embeddings", "order-embeddings (symmetric)", "GRU features + MLP", "bag-of-words logistic regression"]

_PAPER = dict(word_dim=300, dim=1024, batch=128, lr=1e-3, margin=0.2, clip=2.0)  # Section 5.3
PRESETS = {
    "full": dict(
        _PAPER, epochs=10, patience=3, holdout=0.1, train_limit=None, seed=0, data="embedded", datasets=["snli", "sick"]
    ),
    "small": dict(
        _PAPER,
        word_dim=32,
        dim=64,
        epochs=2,
        patience=2,
        holdout=0.1,
        train_limit=2000,
        seed=0,
        data="embedded",
        datasets=["snli", "sick"],
    ),
}

# Notebook parameters and their valid values (orderlib.params.validate).
PARAMETERS = {
    "PRESET": one_of(PRESETS),
    "MATMUL": matmul,
    "DATA": one_of(["embedded", "official"]),
    "DATA_DIR": existing("dir"),
    "DEVICE": device,
    "WORKERS": workers,
}


def splits(dataset: str, cfg: dict, directory=None) -> tuple[PairSet, PairSet, PairSet, str]:
    """Return (train, held-out, test, description) for one dataset under the preset's protocol."""
    if cfg["data"] not in ("embedded", "official"):
        raise ValueError(f"unknown data {cfg['data']!r}; expected 'embedded' or 'official'")
    if cfg["data"] == "official":
        if dataset != "snli":
            raise ValueError("the official protocol covers SNLI only")
        train, dev, test = (load_split("snli_1.0", s, directory) for s in ("train", "dev", "test"))
        how = "official SNLI 1.0: train on train, threshold/early stopping on dev, report on test"
    elif dataset == "snli":
        dev, test = load_pairs("snli", "dev", directory), load_pairs("snli", "test", directory)
        tr, ho = holdout_split(len(dev), cfg["holdout"], cfg["seed"])
        train, dev = dev.subset(tr), dev.subset(ho)
        how = (
            f"SNLI dev minus a {cfg['holdout']:.0%} held-out part as training data (without the 550k-pair "
            "train split), threshold/early stopping on the held-out part, report on SNLI test"
        )
    elif dataset == "sick":
        train, dev, test = (load_pairs("sick", s, directory) for s in ("train", "dev", "test"))
        how = "SICK: train on train, threshold/early stopping on dev, report on test"
    else:
        raise ValueError(f"unknown dataset {dataset!r}")
    if cfg.get("train_limit") and len(train) > cfg["train_limit"]:
        keep = np.sort(np.random.default_rng(cfg["seed"]).permutation(len(train))[: cfg["train_limit"]])
        train = train.subset(keep)
        how += f"; first {cfg['train_limit']} training pairs of a seeded shuffle"
    return train, dev, test, how


def model_config(model: str, cfg: dict) -> EntailmentConfig:
    keys = ("word_dim", "dim", "batch", "lr", "margin", "clip", "epochs", "patience", "seed")
    return EntailmentConfig(model=model, **{k: cfg[k] for k in keys}, matmul=cfg.get("matmul", "fp32"))


def majority_accuracy(train: PairSet, test: PairSet) -> float:
    """Accuracy (%) of predicting the training majority class (entailment or not) on test."""
    majority = train.positive.mean() > 0.5
    return 100.0 * float((test.positive == majority).mean())


def run_dataset(
    dataset: str,
    cfg: dict,
    device,
    checkpoints=None,
    directory=None,
    progress=True,
    distributed: bool = False,
    models=None,
) -> dict:
    """Train every model (or `models`) on one dataset; return {"rows": [...], "results": {...},
    "data": ...}. With `distributed`, on every rank of a torchrun process group
    (orderlib.tools.train_parallel)."""
    train, dev, test, how = splits(dataset, cfg, directory)
    data = prepare(train, dev, test)
    metric = f"{dataset.upper()} test 2-class accuracy (%)"
    rows = [dict(method="majority class", metric=metric, ours=majority_accuracy(train, test), n_train=len(train))]
    results = {}
    for model in MODELS if models is None else models:
        ckpt = Path(checkpoints) / model_file(dataset, model) if checkpoints else None
        r = train_entailment_model(data, model_config(model, cfg), device, ckpt, progress, distributed)
        results[model] = r
        rows.append(dict(method=model, metric=metric, ours=r.test_accuracy, n_train=len(train)))
    return {"rows": rows, "results": results, "data": data, "pairs": (train, dev, test), "how": how}


def run_datasets(cfg: dict, device, checkpoints=None, directory=None, progress=True, workers: int = 1) -> dict:
    """run_dataset for every dataset of the preset; with `workers` > 1 (and checkpoints to hand the
    models over), the models of all datasets first train side by side in that many one-thread
    processes (training.workers), the GRU models first, and are loaded here from their checkpoints."""
    jobs = (
        {
            f"{d}/{m}": dict(
                dataset=d, model=m, cfg=cfg, device=str(device), checkpoints=Path(checkpoints), directory=directory
            )
            for d in cfg["datasets"]
            for m in MODELS
        }
        if checkpoints
        else {}
    )
    costs = {
        name: (0.05 if j["model"] == "bag-of-words logistic regression" else 1.0)  # no GRU
        * (2.0 if j["dataset"] == "snli" else 1.0)  # SNLI's training pairs are about twice SICK's
        for name, j in jobs.items()
    }
    here = (
        run_in_workers(_train_model_job, jobs, workers, costs, progress, "Table 3 models")
        if workers > 1 and len(jobs) > 1
        else {}
    )
    runs = {d: run_dataset(d, cfg, device, checkpoints, directory, progress) for d in cfg["datasets"]}
    for name, done in here.items():  # trained by a worker in this run: loaded here, not resumed
        d, m = name.split("/", 1)
        runs[d]["results"][m].resumed = done["resumed"]
    return runs


def model_file(dataset: str, model: str) -> str:
    """The checkpoint name of a model ("snli", "order-embeddings (symmetric)" ->
    "snli_order-embeddings_symmetric.pt")."""
    return f"{dataset}_{model.replace(' ', '_').replace('(', '').replace(')', '')}.pt"


def _train_model_job(dataset: str, model: str, cfg: dict, device: str, checkpoints: Path, directory) -> dict:
    """A worker's job: train one model into its checkpoint; return whether it resumed one."""
    run = run_dataset(dataset, cfg, device, checkpoints, directory, progress=False, models=[model])
    return {"resumed": run["results"][model].resumed}


def data_fingerprint(runs: dict[str, dict]) -> str:
    """sha256 over the bytes of every split file the runs read, in a fixed order."""
    h = hashlib.sha256()
    for dataset in sorted(runs):
        for pairs in runs[dataset]["pairs"]:
            h.update(pairs.source.encode())
            h.update(Path(pairs.source).read_bytes())
    return h.hexdigest()


def examples(run: dict, model: str = "order-embeddings", per_kind: int = 2) -> pd.DataFrame:
    """Return up to per_kind test pairs of each outcome (true/false positive/negative), first in
    file order, with the energy and the held-out-chosen threshold's call."""
    r, (_, _, test) = run["results"][model], run["pairs"]
    e = energies(r.model, run["data"].test, next(r.model.parameters()).device)
    called = e <= r.tau
    kinds = {
        "right: entailment": called & test.positive,
        "right: not entailment": ~called & ~test.positive,
        "wrong: missed entailment": ~called & test.positive,
        "wrong: false entailment": called & ~test.positive,
    }
    rows = [
        dict(
            outcome=kind,
            premise=test.premises[i],
            hypothesis=test.hypotheses[i],
            gold=LABELS[test.labels[i]],
            energy=round(float(e[i]), 4),
        )
        for kind, mask in kinds.items()
        for i in np.flatnonzero(mask)[:per_kind]
    ]
    return pd.DataFrame(rows)


def plot_roc(run: dict, models=("order-embeddings", "order-embeddings (symmetric)"), ax=None):
    """ROC of the energy threshold on the test pairs, with each model's held-out-chosen threshold
    marked (the threshold itself never saw test labels); the legend gives each model's test accuracy
    at that threshold. The caller's title says what the models trained on."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(6, 6))[1]
    test = run["pairs"][2]
    for model in models:
        r = run["results"][model]
        e = energies(r.model, run["data"].test, next(r.model.parameters()).device)
        fpr, tpr = roc_points(e, test.positive)
        (line,) = ax.plot(fpr, tpr, label=f"{model}: test accuracy {r.test_accuracy:.1f}%")
        pred = e <= r.tau
        ax.plot(
            [(pred & ~test.positive).sum() / max(1, (~test.positive).sum())],
            [(pred & test.positive).sum() / max(1, test.positive.sum())],
            "o",
            color=line.get_color(),
        )
    ax.plot([0, 1], [0, 1], ":", color="grey", label="chance")
    ax.plot([], [], "o", color="grey", label="threshold chosen on held-out pairs")
    ax.set_xlabel("false positive rate (non-entailment called entailment)")
    ax.set_ylabel("true positive rate (entailment recalled)")
    ax.legend(loc="lower right", fontsize=9)
    return ax


def table(runs: dict[str, dict]) -> pd.DataFrame:
    """Long-format Table 3: method, metric, paper, ours, training pairs (timings: `train_seconds`)."""
    rows = []
    for dataset, run in runs.items():
        for r in run["rows"]:
            paper = PAPER_TABLE3.get(r["method"]) if dataset == "snli" else None
            rows.append({**r, "paper": paper})
    for method, value in PAPER_TABLE3.items():
        if method not in MODELS:  # paper-only rows
            rows.append(
                dict(method=method, metric="SNLI test 2-class accuracy (%)", paper=value, ours=None, n_train=None)
            )
    df = pd.DataFrame(rows)
    return df[["method", "metric", "paper", "ours", "n_train"]]


def model_records(runs: dict[str, dict]) -> dict[str, dict]:
    """{"<dataset>/<model>": reports.model_record}: provenance for the .meta.json's `training` block."""
    return {
        f"{d}/{m}": model_record(r.seconds, r.trained_at, r.resumed, best_epoch=r.best_epoch, epochs_run=len(r.history))
        for d, run in runs.items()
        for m, r in run["results"].items()
    }


def length_asymmetry(runs: dict[str, dict]) -> pd.DataFrame:
    """How much more general the hypothesis is than the premise, per dataset and label: mean
    words of each and the share of pairs whose hypothesis is shorter. The order model encodes
    entailment as "the hypothesis is an abstraction of the premise"; where entailed pairs are
    near-paraphrases of equal length, a symmetric similarity fits them as well or better."""
    rows = []
    for dataset, run in runs.items():
        test = run["pairs"][2]
        p = np.array([len(tokenize(s)) for s in test.premises])
        h = np.array([len(tokenize(s)) for s in test.hypotheses])
        for name, mask in (("entailment", test.positive), ("not entailment", ~test.positive)):
            rows.append(
                {
                    "dataset": dataset,
                    "test pairs": name,
                    "premise words": p[mask].mean(),
                    "hypothesis words": h[mask].mean(),
                    "% hypothesis shorter": 100.0 * (h[mask] < p[mask]).mean(),
                    "% same length": 100.0 * (p[mask] == h[mask]).mean(),
                }
            )
    return pd.DataFrame(rows).round(2)
