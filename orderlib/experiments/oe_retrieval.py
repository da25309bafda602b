"""Table 2 of Vendrov et al.: caption-image retrieval, presets and runner.

Data (`data` in a preset):
- "scenes": Fashion-MNIST Scenes (orderlib.data.scenes), the stand-in this machine can build:
  real Fashion-MNIST items on a canvas, 5 generated captions each from WordNet, features from a
  frozen CNN trained on Fashion-MNIST items (orderlib.encoders.cnn).
- "precomp": a `*_precomp` folder (COCO or Flickr30k features + captions, the layout of the
  order-embedding and VSE++ releases) given as `data_dir`: the paper's own protocol.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from orderlib.checkpoint import code_version, fingerprint, load_checkpoint, locked, save_checkpoint
from orderlib.data.fashion_mnist import ensure_fashion_mnist, load_fashion_mnist
from orderlib.data.fashion_mnist import fingerprint as fmnist_fingerprint
from orderlib.data.precomp import load_precomp
from orderlib.data.scenes import VERSION, Lexicon, Scenes, caption_tokenize, make_scenes
from orderlib.data.wordnet import ensure_wordnet, open_wordnet
from orderlib.encoders.cnn import CNNConfig, scene_features
from orderlib.eval.retrieval import (
    TIE_COLUMNS,
    TIES,
    rank_metrics,
    retrieval_metrics_of_embeddings,
    retrieval_ranks,
    tie_columns,
)
from orderlib.params import ParameterError, device, existing, matmul, one_of, positive_int, subset_of, validate, workers
from orderlib.paths import sha256_files
from orderlib.penalties import order_violation
from orderlib.reports import model_record, report_meta
from orderlib.training.item_cnn import train_item_cnn
from orderlib.training.retrieval import (
    CaptionedImages,
    RetrievalConfig,
    RetrievalData,
    embed,
    prepare,
    train_retrieval_model,
)
from orderlib.training.workers import run_in_workers

# Table 2 of Vendrov et al. (COCO, VGG-19 features): (method, metric) -> value. No R@5 is printed.
_MEASURES = ("R@1", "R@10", "med r", "mean r")
_PAPER_ROWS = {
    ("1k", "order-embeddings (reversed)"): (11.2, 44.0, 14.2, 86.6, 12.3, 53.5, 9.0, 30.1),
    ("1k", "order-embeddings (1-crop)"): (41.4, 84.2, 2.0, 8.7, 33.5, 82.2, 2.6, 10.0),
    ("1k", "order-embeddings (symm.)"): (45.4, 88.7, 2.0, 5.8, 36.3, 85.8, 2.0, 9.0),
    ("1k", "order-embeddings"): (46.7, 88.9, 2.0, 5.7, 37.9, 85.9, 2.0, 8.1),
    ("5k", "order-embeddings (symm.)"): (21.5, 62.9, 6.0, 24.4, 16.8, 56.3, 8.0, 40.4),
    ("5k", "order-embeddings"): (23.3, 65.0, 5.0, 24.4, 18.0, 57.6, 7.0, 35.9),
}
PAPER_TABLE2 = {
    (method, f"{size} {side} {m}"): v
    for (size, method), values in _PAPER_ROWS.items()
    for (side, m), v in zip([(s, m) for s in ("caption", "image") for m in _MEASURES], values)
}

# Rows: the paper's four models (Section 4.5), then beyond the paper on the same data: VSE++'s
# max of hinges and an InfoNCE (CLIP-style) loss, each with the order and the cosine penalty.
ROWS = {  # method -> (RetrievalConfig fields, image features)
    "order-embeddings": (dict(penalty="order", loss="sum", margin=0.05), "10crop"),
    "order-embeddings (symm.)": (dict(penalty="cosine", loss="sum", margin=0.2), "10crop"),
    "order-embeddings (reversed)": (dict(penalty="order-reversed", loss="sum", margin=0.05), "10crop"),
    "order-embeddings (1-crop)": (dict(penalty="order", loss="sum", margin=0.05), "1crop"),
    "VSE++ max of hinges (order)": (dict(penalty="order", loss="max", margin=0.05), "10crop"),
    "VSE++ max of hinges (cosine)": (dict(penalty="cosine", loss="max", margin=0.2), "10crop"),
    "InfoNCE (order)": (dict(penalty="order", loss="infonce", temperature=0.05), "10crop"),
    "InfoNCE (cosine)": (dict(penalty="cosine", loss="infonce", temperature=0.05), "10crop"),
}
EXTRA_ROWS = [r for r in ROWS if not r.startswith("order-embeddings")]

_PAPER = dict(word_dim=300, dim=1024, batch=128, lr=1e-3, clip=2.0)  # Section 4.4
PRESETS = {
    "full": dict(
        _PAPER,
        epochs=15,
        patience=4,
        seed=0,
        data="scenes",
        n_train=10000,
        n_dev=1000,
        n_test=5000,
        cnn=dict(epochs=5),
        cnn_items=50000,
        rows=list(ROWS),
    ),
    "small": dict(
        _PAPER,
        word_dim=32,
        dim=64,
        epochs=3,
        patience=3,
        seed=0,
        data="scenes",
        n_train=1000,
        n_dev=500,
        n_test=1000,
        cnn=dict(epochs=1),
        cnn_items=10000,
        rows=list(ROWS),
    ),
}


PARAMETERS = {
    "PRESET": one_of(PRESETS),
    "MATMUL": matmul,
    "DATA": one_of(["scenes", "precomp"]),
    "DATA_DIR": existing("dir"),
    "DEVICE": device,
    "ROWS": subset_of(ROWS, allow_none=True),
    "PAIRS": positive_int,
    "WORKERS": workers,
}  # of the three notebooks together


def check_parameters(**params) -> dict:
    """Validate the Table 2 / Section 4.6 / Figure 4 notebook parameters before any work (see
    orderlib.params): presets, data, rows, and a precomp folder's files and test size. A notebook
    passes every parameter it takes, and takes only those: `-p ROWS x` fails Figure 4's notebook."""
    out = validate({name: PARAMETERS[name] for name in params if name in PARAMETERS}, **params)
    if out.get("DATA") == "precomp":
        if not out.get("DATA_DIR"):
            raise ParameterError(
                "DATA='precomp' needs DATA_DIR: a folder such as coco_precomp/ holding "
                "{train,dev,test}_caps.txt and {train,dev,test}_ims.npy"
            )
        folder = Path(out["DATA_DIR"])
        missing = [
            f for s in ("train", "dev", "test") for f in (f"{s}_caps.txt", f"{s}_ims.npy") if not (folder / f).is_file()
        ]
        if missing:
            raise ParameterError(f"DATA_DIR={str(folder)!r} lacks {missing} (the *_precomp layout)")
    return out


@dataclass
class SceneData:
    """Scenes of every split, the frozen CNN and its features (10-crop and 1-crop)."""

    scenes: dict[str, Scenes]
    features: dict[str, dict[str, torch.Tensor]]  # crop -> split -> (N, F)
    lexicon: Lexicon
    cnn: torch.nn.Module
    cnn_history: list[dict]
    fingerprint: str
    source: str


def _features_key(scenes: dict[str, Scenes], cnn_cfg: dict) -> str:
    h = hashlib.sha256(repr(sorted(cnn_cfg.items())).encode())
    for s in sorted(scenes):
        h.update(scenes[s].fingerprint().encode())
    return h.hexdigest()


def build_scene_data(cfg: dict, device, workdir: Path, progress: bool = True) -> SceneData:
    """Generate the scenes, train (or load) the frozen CNN, compute (or load) the features."""
    ensure_wordnet("3.0")
    _, source = ensure_fashion_mnist()
    lexicon = Lexicon.from_wordnet(open_wordnet("3.0"))
    fm = {s: load_fashion_mnist(s) for s in ("train", "test")}
    sizes = {"train": cfg["n_train"], "dev": cfg["n_dev"], "test": cfg["n_test"]}
    scenes = {
        s: make_scenes(fm["test" if s == "test" else "train"], s, n, lexicon, cfg["seed"]) for s, n in sizes.items()
    }
    cnn_cfg = CNNConfig(**cfg["cnn"], seed=cfg["seed"])
    k = cfg["cnn_items"]  # CNN training items: the first k of train[0:50000], never a dev/test item
    train = fm["train"]
    cnn, history = train_item_cnn(
        train.images[:k],
        train.labels[:k],
        train.images[50000:],
        train.labels[50000:],
        cnn_cfg,
        device,
        Path(workdir) / "item_cnn.pt",
        progress,
    )
    key = _features_key(
        scenes,
        {
            **asdict(cnn_cfg),
            "items": k,
            "cnn": fingerprint(cnn.state_dict()),
            "code": code_version("orderlib.encoders.cnn", "orderlib.data.scenes"),
        },
    )
    cache = Path(workdir) / "scene_features.pt"
    with locked(cache):
        cached = load_checkpoint(cache)
        if cached is None or cached["key"] != key:
            feats = {"10crop": {}, "1crop": {}}
            for s, sc in scenes.items():
                feats["10crop"][s], feats["1crop"][s] = scene_features(cnn, sc.render(), progress=progress)
            save_checkpoint(cache, {"key": key, "features": feats})
        else:
            feats = cached["features"]
    fp = hashlib.sha256((fmnist_fingerprint() + key).encode()).hexdigest()
    return SceneData(
        scenes, feats, lexicon, cnn, history, fp, f"{VERSION} from Fashion-MNIST ({source}) and WordNet 3.0"
    )


def scene_retrieval_data(sd: SceneData, crop: str = "10crop") -> RetrievalData:
    return prepare(
        {s: (sd.features[crop][s], [caption_tokenize(c) for c in sc.captions]) for s, sc in sd.scenes.items()}
    )


def precomp_retrieval_data(folder: Path, crop: str = "10crop", min_count: int = 4) -> RetrievalData:
    """The paper's data from a `*_precomp` folder; words seen fewer than 4 times in train are
    unknown, as VSE++."""
    splits = {s: load_precomp(folder, s, crop) for s in ("train", "dev", "test")}
    return prepare(
        {s: (torch.as_tensor(d.features), [caption_tokenize(c) for c in d.captions]) for s, d in splits.items()},
        min_count,
    )


def row_config(method: str, cfg: dict) -> RetrievalConfig:
    fields, _ = ROWS[method]
    keys = ("word_dim", "dim", "batch", "lr", "clip", "epochs", "patience", "seed")
    return RetrievalConfig(**{k: cfg[k] for k in keys}, **fields, matmul=cfg.get("matmul", "fp32"))


@dataclass
class TrainedRows:
    results: dict = field(default_factory=dict)  # method -> RetrievalResult
    data: dict = field(default_factory=dict)  # crop -> RetrievalData
    _test: dict = field(default_factory=dict, repr=False)

    def test_split(self, method: str) -> CaptionedImages:
        return self.data[ROWS[method][1]].test

    def test_embeddings(self, method: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(images, captions) of the test split embedded by `method`'s model, computed once."""
        if method not in self._test:
            self._test[method] = embed(self.results[method].model, self.test_split(method))
        return self._test[method]


def train_rows(
    data: dict[str, RetrievalData],
    cfg: dict,
    device,
    workdir: Path,
    rows=None,
    progress: bool = True,
    distributed: bool = False,
    workers: int = 1,
) -> TrainedRows:
    """Train (or load from finished checkpoints) every row in `rows` (default: the preset's); with
    `distributed`, on every rank of a torchrun process group (orderlib.tools.train_parallel); with
    `workers` > 1, the rows side by side in that many one-thread processes (training.workers)."""
    out = TrainedRows(data=data)
    rows = list(cfg["rows"] if rows is None else rows)
    unknown = set(rows) - set(ROWS)
    if unknown:
        raise ValueError(f"unknown rows {sorted(unknown)}; known: {list(ROWS)}")
    rows = [m for m in rows if ROWS[m][1] in data]  # e.g. no 1-crop features in a precomp folder
    here = {}
    if workers > 1 and len(rows) > 1 and not distributed:
        here = run_in_workers(
            _train_row_job,
            {
                m: dict(
                    data={ROWS[m][1]: data[ROWS[m][1]]}, cfg=cfg, device=str(device), workdir=Path(workdir), method=m
                )
                for m in rows
            },
            workers,
            progress=progress,
            desc="Table 2 rows",
        )
    for method in rows:
        out.results[method] = train_retrieval_model(
            data[ROWS[method][1]],
            row_config(method, cfg),
            device,
            Path(workdir) / f"{row_file(method)}.pt",
            progress,
            method,
            distributed,
        )
        if method in here:  # trained by a worker in this run: loaded here, not resumed
            out.results[method].resumed = here[method]["resumed"]
    return out


def row_file(method: str) -> str:
    """The checkpoint name of a row ("VSE++ max of hinges (order)" -> "VSE++_max_of_hinges_order")."""
    return method.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "p")


def _train_row_job(data: dict[str, RetrievalData], cfg: dict, device: str, workdir: Path, method: str) -> dict:
    """A worker's job: train one row into its checkpoint; return whether it resumed one."""
    return {"resumed": train_rows(data, cfg, device, workdir, [method], progress=False).results[method].resumed}


def test_sizes(n_test: int) -> dict[str, int]:
    """{"1k": folds, "5k": 1}: 1k = mean over 1000-image folds; 5k when there are 5,000 images."""
    if n_test % 1000:
        raise ValueError(f"the test set must hold a multiple of 1000 images, got {n_test}")
    sizes = {"1k": n_test // 1000}
    if n_test >= 5000:
        sizes[f"{n_test // 1000}k"] = 1
    return sizes


def long_metrics(size: str, m: dict) -> dict[str, float]:
    """Flatten a RetrievalResult's metrics to {"1k caption R@1": ..., "1k rsum": ...}."""
    short = {"median rank": "med r", "mean rank": "mean r"}
    out = {
        f"{size} {side.split()[0]} {short.get(k, k)}": v
        for side in ("caption retrieval", "image retrieval")
        for k, v in m[side].items()
    }
    out[f"{size} rsum"] = m["rsum"]
    return out


TIES_NOTE = (
    "ours: exact expectation under uniformly random tie-breaking (repeated caption texts embed "
    "identically); 'ties against' / 'ties for': every tie counted against / for the model, the two "
    "exact bounds; 'ties by index': ties broken by candidate index, what the authors' evaluation.py "
    "returns with a stable sort. Without ties all four agree."
)


def long_rows(method: str, size: str, by_rule: dict) -> list[dict]:
    """Long rows for one model and test size from a RetrievalResult's `mean`: `ours` under
    the primary rule, one column per other rule."""
    flat = {rule: long_metrics(size, m) for rule, m in by_rule.items()}  # rule -> metric -> value
    return [
        dict(
            method=method,
            metric=metric,
            paper=PAPER_TABLE2.get((method, metric)),
            **tie_columns({rule: flat[rule][metric] for rule in TIES}),
        )
        for metric in flat[TIES[0]]
    ]


def test_table(trained: TrainedRows, cfg: dict) -> pd.DataFrame:
    """Long-format Table 2 on the test split: method, metric, paper, ours (primary tie rule), the
    other tie rules, train images, best epoch."""
    rows = []
    for method, r in trained.results.items():
        ims, caps = trained.test_embeddings(method)
        for size in test_sizes(len(ims)):
            protocol, fold_size = ("1k", 1000) if size == "1k" else ("all", len(ims))
            m = retrieval_metrics_of_embeddings(
                ims, caps, r.model.penalty_matrix, 5, protocol, fold_size, name=f"{method}, test split"
            ).mean
            rows += [
                dict(row, train_images=len(trained.data[ROWS[method][1]].train), best_epoch=r.best_epoch)
                for row in long_rows(method, size, m)
            ]
    return pd.DataFrame(rows)


def model_records(ex) -> dict[str, dict]:
    """Per trained model of a run (`run`'s result): the frozen item CNN where scenes were
    generated, then each row; reports.model_record each, for the .meta.json's `training` block."""
    out = {"item CNN (frozen features)": ex.scenes.cnn.provenance} if ex.scenes is not None else {}
    return {
        **out,
        **{
            method: model_record(r.seconds, r.trained_at, r.resumed, best_epoch=r.best_epoch, epochs_run=len(r.history))
            for method, r in ex.trained.results.items()
        },
    }


def models_meta(ex, cfg: dict, *, preset, device, commit, t_start, **extra) -> dict:
    """The .meta.json of a report on Table 2's trained models (notebooks 04 and 05): data, config,
    the models' training, `extra`, and the primary tie rule."""
    return report_meta(
        preset=preset,
        seed=cfg["seed"],
        device=device,
        commit=commit,
        data_source=ex.source,
        data_fingerprint=ex.fingerprint,
        wall_time_s=time.perf_counter() - t_start,
        trained=model_records(ex),
        config=cfg,
        **extra,
        primary_ties="expected (uniformly random tie-breaking)",
    )


def compare_rows(df: pd.DataFrame, a: str = "order-embeddings", b: str = "order-embeddings (symm.)") -> pd.DataFrame:
    """Per metric of Table 2, whether row `a` beats row `b` under each tie rule (higher R@K and
    rsum, lower ranks are better): does a claim survive every way of counting ties?"""
    rules = ["ours", *TIE_COLUMNS.values()]
    x = df[df.method == a].set_index("metric")[rules]
    y = df[df.method == b].set_index("metric")[rules]
    common = [m for m in x.index if m in y.index]
    out = []
    for metric in common:
        lower = "med r" in metric or "mean r" in metric
        diff = {r: float(x.at[metric, r] - y.at[metric, r]) for r in rules}
        wins = {r: (d < 0) if lower else (d > 0) for r, d in diff.items()}
        out.append(
            {
                "metric": metric,
                **{f"{a} - {b} ({'primary' if r == 'ours' else r})": d for r, d in diff.items()},
                f"{a} better, every rule": all(wins.values()),
                "same verdict, every rule": len(set(wins.values())) == 1,
            }
        )
    return pd.DataFrame(out)


def wide(df: pd.DataFrame, size: str = "1k") -> pd.DataFrame:
    """One row per method, one column per metric of one test size (for reading, not for reports)."""
    sub = df[df.metric.str.startswith(size + " ")]
    return sub.pivot(index="method", columns="metric", values="ours").reindex([m for m in ROWS if m in set(sub.method)])


@dataclass
class Experiment:
    """Everything a Table 2 / Section 4.6 / Figure 4 notebook needs."""

    cfg: dict
    data: dict[str, RetrievalData]  # crop -> data
    trained: TrainedRows
    source: str
    fingerprint: str
    scenes: SceneData | None = None  # None on precomp data


def run(
    cfg: dict, device, workdir: Path, data_dir: str | Path | None = None, rows=None, progress: bool = True
) -> Experiment:
    """Build the data of `cfg["data"]` ("scenes", or "precomp" from `data_dir`), then train or load
    the rows (default: the preset's)."""
    sd = None
    if cfg["data"] == "scenes":
        sd = build_scene_data(cfg, device, workdir, progress)
        data = {c: scene_retrieval_data(sd, c) for c in ("10crop", "1crop")}
        source, fp = sd.source, sd.fingerprint
    elif cfg["data"] == "precomp":
        if data_dir is None:
            raise ValueError("DATA='precomp' needs DATA_DIR: a folder such as coco_precomp/ or f30k_precomp/")
        folder = Path(data_dir)
        data = {"10crop": precomp_retrieval_data(folder)}
        if (folder / "test_ims_1crop.npy").exists():
            data["1crop"] = precomp_retrieval_data(folder, "1crop")
        test_sizes(len(data["10crop"].test))  # a test split too small for the 1k protocol fails before training
        source = f"precomp features + captions from {folder}"
        fp = sha256_files(sorted(f for f in folder.iterdir() if f.is_file()))
    else:
        raise ValueError(f"unknown data {cfg['data']!r}; expected 'scenes' or 'precomp'")
    trained = train_rows(data, cfg, device, workdir, rows, progress)
    return Experiment(cfg, data, trained, source, fp, sd)


@torch.no_grad()
def per_level(trained: TrainedRows, levels=None, methods=None) -> pd.DataFrame:
    """Image retrieval on the test split broken down by caption position within its image (on
    Fashion-MNIST Scenes, the level of detail: 0 gist ... 4 layout), over all test images, under
    the primary tie rule."""
    rows = []
    for method in methods or trained.results:
        r = trained.results[method]
        split = trained.test_split(method)
        ims, caps = trained.test_embeddings(method)
        _, t2i = retrieval_ranks(ims, caps, r.model.penalty_matrix)
        for j in range(5):
            m = rank_metrics(t2i[j::5])
            rows.append(
                {
                    "method": method,
                    "caption": levels[j] if levels else j,
                    "words": float(split.lengths[j::5].double().mean()),
                    **{k: m[k] for k in ("R@1", "R@10", "mean rank")},
                }
            )
    return pd.DataFrame(rows)


@torch.no_grad()
def asymmetry(trained: TrainedRows, methods=None) -> pd.DataFrame:
    """How much of each true pair's squared distance the order penalty charges, E / ||x - y||^2
    (E(x, y) + E(y, x) = ||x - y||^2): 0 = the pair is perfectly ordered the trained way round,
    0.5 = no preferred direction. Also the mean norm of the caption side minus the image side
    after |.| (captions above images means smaller coordinates)."""
    rows = []
    for method in methods or trained.results:
        r = trained.results[method]
        if r.model.penalty == "cosine":
            continue
        ims, caps = trained.test_embeddings(method)
        im = ims.repeat_interleave(5, 0)
        e = order_violation(im, caps) if r.model.penalty == "order" else order_violation(caps, im)
        d = (im - caps).pow(2).sum(1).clamp_min(1e-12)
        rows.append(
            {
                "method": method,
                "penalty": r.model.penalty,
                "E / squared distance": float((e / d).mean()),
                "true pairs with E < 0.05 * squared distance (%)": 100 * float((e < 0.05 * d).double().mean()),
                "L1 norm: captions - images": float((caps.sum(1) - im.sum(1)).mean()),
            }
        )
    return pd.DataFrame(rows)


def caption_duplicates(scenes: Scenes, levels=None, fold: int = 1000) -> pd.DataFrame:
    """Per caption level, within each fold of `fold` images (the 1k test protocol): the share of
    captions whose exact text also describes another image, how many images share it on average,
    and the oracle image R@1: a model that ranks a caption's images first but cannot tell apart the
    images sharing its text finds the right one first with probability 1 / (images sharing it).
    A shared caption also makes true matches in-batch "negatives": harmless to a sum of hinges over
    127 negatives, fatal to a loss that follows the single hardest one (VSE++'s max of hinges)."""
    caps = np.array(scenes.captions, dtype=object).reshape(-1, 5)
    rows = []
    for j in range(5):
        shared = np.concatenate(
            [
                (lambda texts: np.array([Counter(texts)[c] for c in texts]))(caps[f : f + fold, j])
                for f in range(0, len(caps), fold)
            ]
        )
        rows.append(
            {
                "caption": levels[j] if levels else j,
                "% shared with another image": 100.0 * float((shared > 1).mean()),
                "images per text (mean)": float(shared.mean()),
                "oracle image R@1 (%)": 100.0 * float((1.0 / shared).mean()),
            }
        )
    return pd.DataFrame(rows)
