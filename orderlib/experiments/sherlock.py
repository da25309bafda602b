"""Sherlock (Elhoseiny et al., AAAI 2017) on Fashion-MNIST Facts: presets, data, language views,
every method of Tables 1, 4 and 5 and Figures 4 and 7 (notebook 09).

Their data vs ours: the large-scale set (202k facts, 814k web images, GloVe 840B, VGG-16 from
ImageNet) vs Fashion-MNIST Facts (810 facts over 10 objects, 20 attributes and 6 relations,
long-tailed training counts, real Fashion-MNIST items; the CNN pre-trained on plain items for
Utama's notebook; GloVe 6B 50-d vectors from Wikipedia + Gigaword, and a skip-gram on WordNet's
text beside them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from orderlib.data.fact_tasks import GLOSS, FactTask, fact_task, facts_of, vocabulary
from orderlib.data.facts import VERSION, Fact, implies
from orderlib.encoders.skipgram import word_vectors_parameter
from orderlib.encoders.word_vectors import token_vectors, vector_note
from orderlib.eval.facts import fact_map
from orderlib.experiments import sherlock_tables
from orderlib.experiments.sherlock_tables import CAPTION_METHODS, scale_point
from orderlib.params import device, matmul, one_of, workers
from orderlib.paths import slug
from orderlib.reports import model_record
from orderlib.training.item_cnn import pretrain_item_cnn
from orderlib.training.workers import run_in_workers

# One visible place for the settings. "base": the preset of notebook 08 (Utama) whose pre-trained
# CNN and word vectors are reused, and of notebook 03 whose caption models are reused.
PRESETS = {
    "full": dict(
        seed=0,
        train_images=20000,
        test_per_fact=3,
        dev_per_fact=1,
        base="full",
        word_vectors="glove-6b-50d",  # the paper's kind: pretrained on a large corpus (None: the gloss skip-gram)
        sem=dict(epochs=12, hidden=256, lr=1e-3, batch=32),
        order=dict(margin=0.05),
        cca_dim=64,
        eszsl_gamma=1.0,
        eszsl_lambda=1.0,
        caption_epochs=10,
        scale_objects=(3, 5),
        scale_epochs=5,
    ),
    "small": dict(
        seed=0,
        train_images=1500,
        test_per_fact=1,
        dev_per_fact=1,
        base="small",
        word_vectors="glove-6b-50d",
        sem=dict(epochs=2, hidden=32, lr=1e-3, batch=32),
        order=dict(margin=0.05),
        cca_dim=16,
        eszsl_gamma=1.0,
        eszsl_lambda=1.0,
        caption_epochs=2,
        scale_objects=(3,),
        scale_epochs=1,
    ),
}
PARAMETERS = {
    "PRESET": one_of(PRESETS),
    "MATMUL": matmul,
    "DEVICE": device,
    "WORD_VECTORS": word_vectors_parameter,
    "WORKERS": workers,
}


def frozen_features(cnn, images: np.ndarray, batch: int = 256) -> np.ndarray:
    """(N, 4C) features of fact canvases (uint8 (N, H, W, 3)) for the closed-form baselines: the
    pre-trained CNN's feature map averaged over each cell of the 2x2 grid, so where items are is
    kept (channel-major: feature c * 4 + cell)."""
    from orderlib.encoders.cnn import to_input

    cnn.eval()
    device = next(cnn.parameters()).device
    with torch.no_grad():
        return torch.cat(
            [
                torch.nn.functional.adaptive_avg_pool2d(cnn.feature_map(to_input(images[i : i + batch], device)), 2)
                .flatten(1)
                .cpu()
                for i in range(0, len(images), batch)
            ]
        ).numpy()  # (N, C * 4)


def baseline_distances(task: FactTask, train_x: np.ndarray, test_x: np.ndarray, cfg: dict) -> dict[str, torch.Tensor]:
    """(test images, facts) distances of ESZSL and multiview CCA fitted on the training images."""
    from orderlib.encoders.multiview import ESZSL, MultiviewCCA

    lang = task.language.flatten(1).numpy()  # (F, 3d), wild-cards zero (as Sherlock fills them)
    seen = np.flatnonzero(task.train_counts > 0)
    index = np.full(len(task.facts), -1)
    index[seen] = np.arange(len(seen))
    ez = ESZSL.fit(
        train_x, index[task.train.fact], lang[seen], cfg.get("eszsl_gamma", 1.0), cfg.get("eszsl_lambda", 1.0)
    )
    cca = MultiviewCCA.fit(train_x, lang[task.train.fact], k=cfg.get("cca_dim", 64), reg=cfg.get("cca_reg", 1e-3))
    return {"ESZSL": ez.distance(test_x, lang), "MV CCA": cca.distance(test_x, lang)}


# ---------------------------------------------------------------------------------------------
# The notebook's runner: every method trained on one FactTask, then the tables and figures.

SEM_ROWS = {  # method -> SEMConfig fields, and "vectors": the language view it regresses (none: task.language)
    "SEM-A": dict(branched=True),
    "SEM-B": dict(branched=False),
    "SEM-A, S/P/O averaged (ablation)": dict(branched=True, average=True),
    "structured order-embedding (SEM-A)": dict(branched=True, objective="order"),
    "SEM-A, gloss skip-gram vectors": dict(branched=True, vectors=GLOSS),
}


@dataclass
class FactData:
    """A FactTask with its rendered images and frozen-CNN features per split."""

    task: FactTask
    images: dict  # split -> uint8 (N, 64, 64, 3)
    features: dict  # split -> (N, 4C) float32


def base_config(cfg: dict) -> dict:
    """The Utama preset whose CNN and word vectors this notebook reuses."""
    from orderlib.experiments import utama

    return {**utama.PRESETS[cfg["base"]], "word_vectors": cfg.get("word_vectors")}


def gloss_words(cfg: dict, workdir) -> dict[str, np.ndarray] | None:
    """{word: vector} of the skip-gram on WordNet 3.0's text (notebook 08's cache), for the GLOSS
    rows; None where cfg["word_vectors"] is None, as the other rows' words are then those."""
    if not cfg.get("word_vectors"):
        return None
    skipgram = {**base_config(cfg), "word_vectors": None}
    return dict(zip(vocabulary(), token_vectors(skipgram, vocabulary(), workdir)))


def word_notes(cfg: dict) -> dict:
    """Which word vectors the rows regress, for the reports' provenance."""
    notes = {"text vectors": vector_note(cfg.get("word_vectors"), tokens=True)}
    if cfg.get("word_vectors"):
        notes["SEM-A, gloss skip-gram vectors"] = vector_note(None, tokens=True)
    return notes


def pretrained(cfg: dict, workdir, device="cpu", progress: bool = True):
    """(CNN pre-trained on plain items, its history, {word: vector}): shared with notebook 08."""
    ucfg = base_config(cfg)
    cnn, history = pretrain_item_cnn(ucfg, workdir, device, progress)
    words = dict(zip(vocabulary(), token_vectors(ucfg, vocabulary(), workdir)))
    return cnn, history, words


def fact_data(cfg: dict, words: dict, cnn, objects: int | None = None, gloss: dict | None = None) -> FactData:
    task = fact_task(cfg, words, objects, gloss)
    images = {s: getattr(task, s).render() for s in ("train", "dev", "test")}
    return FactData(task, images, {s: frozen_features(cnn, x) for s, x in images.items()})


def train_sem_rows(
    cfg: dict,
    data: FactData,
    cnn,
    workdir,
    device="cpu",
    progress: bool = True,
    rows=None,
    epochs: int | None = None,
    seed: int | None = None,
    workers: int = 1,
) -> dict[str, dict]:
    """Train every SEM row (epochs chosen on the dev images' fact -> image mAP); return method ->
    {"dist": (test images, facts), "fit": FitResult}. A row that names "vectors" regresses that
    view of task.languages and is left out where the task has none. `seed` (default cfg["seed"])
    seeds the models' initialisation and batch order only: the data are `data`'s whatever the seed.
    With `workers` > 1, the rows train side by side in that many one-thread processes (training.workers)."""
    from orderlib.checkpoint import fingerprint
    from orderlib.training.sherlock import SEMConfig, distances, train_sem

    task, out = data.task, {}
    implied = implies(task.facts)
    views = {None: task.language, **task.languages}
    seed = cfg["seed"] if seed is None else seed
    suffix = "" if seed == cfg["seed"] else f"_seed{seed}"
    rows = [m for m in (rows or SEM_ROWS) if SEM_ROWS[m].get("vectors") in views]
    here = {}
    if workers > 1 and len(rows) > 1:
        here = run_in_workers(
            _train_row_job,
            {
                m: dict(
                    kind="sem",
                    cfg=cfg,
                    data=data,
                    cnn=cnn,
                    workdir=workdir,
                    device=str(device),
                    method=m,
                    epochs=epochs,
                    seed=seed,
                )
                for m in rows
            },
            workers,
            progress=progress,
            desc="SEM rows",
        )
    for method in rows:
        fields = {**cfg["sem"], **SEM_ROWS[method], "seed": seed}
        language = views[fields.pop("vectors", None)]
        if fields.get("objective") == "order":
            fields.update(cfg["order"])
        if epochs is not None:
            fields["epochs"] = epochs
        scfg = SEMConfig(**fields)

        def dev_map(model, average=scfg.average, language=language):
            d = distances(model, data.images["dev"], language, task.orders, average)  # (dev images, facts)
            return {"dev mAP": fact_map(d.T, task.dev.fact, torch.arange(len(task.facts)))}

        model, fitted = train_sem(
            scfg,
            cnn,
            data.images["train"],
            language[task.train.fact],
            task.orders[task.train.fact],
            dev_map,
            "dev mAP",
            workdir / f"{slug(method)}_{len(task.facts)}{suffix}.pt",
            progress,
            device,
            fingerprint(task.train.fingerprint(), task.dev.fingerprint(), data.images["dev"], language, task.orders),
            fact=task.train.fact,
            implied=implied,
        )
        if method in here:  # trained by a worker in this run: loaded here, not resumed
            fitted.resumed = here[method]["resumed"]
        out[method] = {
            "dist": distances(model, data.images["test"], language, task.orders, scfg.average),
            "fit": fitted,
            "model": model,
        }
    return out


def _train_row_job(kind: str, method: str, **kw) -> dict:
    """A worker's job: train one SEM row ("sem") or one retrained caption row ("retrained") into its
    checkpoint; return whether it resumed one."""
    if kind == "sem":
        r = train_sem_rows(rows=[method], progress=False, **kw)[method]
    else:
        r = caption_retrained_rows(rows=[method], progress=False, **kw)[f"{method}, retrained on facts"]
    return {"resumed": r["fit"].resumed}


def closed_form_rows(cfg: dict, data: FactData) -> dict[str, dict]:
    """ESZSL and multiview CCA on the frozen features (closed form: no epochs)."""
    dists = baseline_distances(data.task, data.features["train"], data.features["test"], cfg)
    # ESZSL's "distance" is minus its bilinear compatibility: `implied` scores it by the script's dot
    return {m: {"dist": d, "scoring": "dot" if m == "ESZSL" else "euc"} for m, d in dists.items()}


def phrase_distances(model, features: torch.Tensor, facts: list[Fact], vocab) -> torch.Tensor:
    """(images, facts) penalties of a caption model between image features and fact phrases."""
    from orderlib.data.scenes import caption_tokenize

    dev = next(model.parameters()).device
    tokens, lengths = vocab.encode([caption_tokenize(f.phrase()) for f in facts])
    model.eval()
    with torch.no_grad():
        return model.penalty_matrix(
            model.images(torch.as_tensor(features, dtype=torch.float32).to(dev)),
            model.captions(tokens.to(dev), lengths),
        ).cpu()


def caption_trained_rows(cfg: dict, data: FactData, workdir, device="cpu", progress: bool = True) -> dict[str, dict]:
    """Table 2's models of notebook 03 as trained on Fashion-MNIST Scenes captions (Sherlock's
    "COCO pretrained"), shown fact images (grey, as their CNN was trained) and fact phrases."""
    from orderlib.encoders.cnn import scene_features
    from orderlib.experiments import oe_retrieval as oe

    ocfg = oe.PRESETS[cfg["base"]]
    sd = oe.build_scene_data(ocfg, device, workdir, progress)
    rd = oe.scene_retrieval_data(sd)
    trained = oe.train_rows({"10crop": rd}, ocfg, device, workdir, rows=list(CAPTION_METHODS), progress=progress)
    grey = data.images["test"].mean(-1).round().astype(np.uint8)  # (N, 64, 64)
    feats, _ = scene_features(sd.cnn, grey)
    unknown = sorted({w for f in data.task.facts for w in f.phrase().split() if w not in rd.vocab.index})
    return {
        f"{m}, caption-trained": {
            "dist": phrase_distances(trained.results[m].model, feats, data.task.facts, rd.vocab),
            "fit": trained.results[m],
            "unknown_words": unknown,  # fact words its vocabulary lacks (unknown tokens)
        }
        for m in CAPTION_METHODS
    }


def caption_retrained_rows(
    cfg: dict, data: FactData, workdir, device="cpu", progress: bool = True, rows=CAPTION_METHODS, workers: int = 1
) -> dict[str, dict]:
    """The same caption models retrained on (fact image, fact phrase) pairs ("sandal left of bag"),
    on the frozen features the closed-form baselines use; epochs chosen on the dev images. With
    `workers` > 1, the rows train side by side in one-thread processes (training.workers)."""
    from dataclasses import replace

    from orderlib.data.scenes import caption_tokenize
    from orderlib.experiments import oe_retrieval as oe
    from orderlib.training.retrieval import CAPTIONS_PER_IMAGE, prepare, train_retrieval_model

    task = data.task
    phrases = [caption_tokenize(f.phrase()) for f in task.facts]
    rd = prepare(
        {
            s: (
                torch.as_tensor(data.features[s]),
                [phrases[f] for f in getattr(task, s).fact for _ in range(CAPTIONS_PER_IMAGE)],
            )
            for s in ("train", "dev", "test")
        }
    )
    ocfg = oe.PRESETS[cfg["base"]]
    rows, out, here = list(rows), {}, {}
    if workers > 1 and len(rows) > 1:
        here = run_in_workers(
            _train_row_job,
            {
                m: dict(kind="retrained", cfg=cfg, data=data, workdir=workdir, device=str(device), method=m)
                for m in rows
            },
            workers,
            progress=progress,
            desc="retrained caption rows",
        )
    for m in rows:
        rcfg = replace(oe.row_config(m, ocfg), epochs=cfg["caption_epochs"], seed=cfg["seed"])
        res = train_retrieval_model(
            rd, rcfg, device, workdir / f"retrained_{slug(m)}_{len(task.facts)}.pt", progress, m
        )
        if m in here:  # trained by a worker in this run: loaded here, not resumed
            res.resumed = here[m]["resumed"]
        out[f"{m}, retrained on facts"] = {
            "dist": phrase_distances(res.model, data.features["test"], task.facts, rd.vocab),
            "fit": res,
        }
    return out


def scoring_rows(results: dict, data: FactData, methods=("SEM-A", "SEM-B"), metrics=("euc", "cos", "dot")):
    """sherlock_tables.scoring_rows of the SEM rows' slot embeddings of the test images."""
    from orderlib.training.sherlock import embed_images

    with torch.no_grad():
        embeddings = {m: embed_images(results[m]["model"], data.images["test"]) for m in methods}  # (N, 3, d) each
    return sherlock_tables.scoring_rows(embeddings, data.task, metrics)


def model_records(results: dict[str, dict], cnn) -> dict[str, dict]:
    """The pre-trained CNN (shared with notebook 08) and every trained row (closed-form ones have no
    "fit"): reports.model_record each, for the .meta.json's `training` block."""
    rows = {
        m: model_record(r["fit"].seconds, r["fit"].trained_at, r["fit"].resumed, epochs_run=len(r["fit"].history))
        for m, r in results.items()
        if "fit" in r
    }
    return {"pre-trained CNN (notebook 08's)": cnn.provenance, **rows}


def source() -> str:
    from orderlib.data.fashion_mnist import ensure_fashion_mnist

    return f"{VERSION} from Fashion-MNIST ({ensure_fashion_mnist()[1]}) and WordNet 3.0 words"


def data_fingerprint(task: FactTask) -> str:
    from orderlib.checkpoint import fingerprint

    return fingerprint(
        task.train.fingerprint(),
        task.test.fingerprint(),
        task.dev.fingerprint() if task.dev is not None else "",
        task.language,
    )


def scale_curve(
    cfg: dict,
    results: dict,
    task: FactTask,
    words: dict,
    cnn,
    workdir,
    device="cpu",
    progress: bool = True,
    methods=("SEM-A", "SEM-B", "MV CCA", "ESZSL"),
    workers: int = 1,
) -> pd.DataFrame:
    """Figure 4: K1 of `methods` on the full stand-in (from `results`) and on the stand-ins of the
    first k objects for k in cfg["scale_objects"] (training images in proportion to the facts;
    SEM rows retrained for cfg["scale_epochs"], closed-form baselines refitted)."""
    points = scale_point({m: results[m] for m in methods}, task)
    for k in cfg["scale_objects"]:
        sub_cfg = {**cfg, "train_images": int(round(cfg["train_images"] * len(facts_of(k)) / len(task.facts)))}
        sub = fact_data(sub_cfg, words, cnn, objects=k)
        sub_results = train_sem_rows(
            sub_cfg,
            sub,
            cnn,
            workdir,
            device,
            progress,
            rows=[m for m in methods if m in SEM_ROWS],
            epochs=cfg["scale_epochs"],
            workers=workers,
        )
        sub_results.update({m: r for m, r in closed_form_rows(sub_cfg, sub).items() if m in methods})
        points += scale_point(sub_results, sub.task)
    return pd.DataFrame(points)
