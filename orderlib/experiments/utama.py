"""Utama, "Evaluating Attribute-Object Compositionality in Text-Image Multimodal Embeddings":
presets and runner for Tables 1-3 on Fashion-MNIST Attributes (or MIT-States where present).

Their data vs ours: MIT-States (53k web images, 115 attributes x 245 objects, 1,262 training
pairs, 700 unseen test pairs, ResNet-101 from ImageNet, fastText vectors) vs Fashion-MNIST
Attributes (real items rendered under 20 WordNet adjectives x 10 objects, 120 training pairs, 50
unseen test pairs, 30 unseen validation pairs; a small CNN pre-trained on the objects of plain
training items; GloVe 6B 50-d vectors from Wikipedia + Gigaword, and, beside them, a skip-gram on
WordNet glosses and random vectors). One pair split serves both protocols: Misra et al.'s closed
world (rank the unseen test pairs) and the generalised one (seen and unseen pairs, calibration-bias
sweep). Epochs are chosen on the validation pairs (generalised AUC), never on test.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
import torch

from orderlib.checkpoint import cached
from orderlib.data.attribute_tasks import AttributeTask as Task
from orderlib.data.attribute_tasks import pair_index
from orderlib.data.attributes import ATTRS, OBJECTS, VERSION, make_attribute_images, render_item, split_pairs
from orderlib.data.fashion_mnist import ensure_fashion_mnist, load_fashion_mnist
from orderlib.data.fashion_mnist import fingerprint as fmnist_fingerprint
from orderlib.encoders.cnn import ItemCNN, item_features
from orderlib.encoders.skipgram import random_vectors, word_vectors_parameter
from orderlib.encoders.word_vectors import describe_vectors, synset_vectors, token_vectors, vector_note
from orderlib.eval.compositional import generalised_sweep, predict_scores
from orderlib.experiments.utama_tables import inputs
from orderlib.params import device, existing, matmul, one_of, workers
from orderlib.paths import slug
from orderlib.reports import model_record
from orderlib.training.composition import CompositionConfig, train_recogniser
from orderlib.training.workers import run_in_workers

# The word vectors a row may start its word table from (ROWS' "vectors"; a row that names none: DEFAULT).
DEFAULT, GLOSS, RANDOM = "WORD_VECTORS", "gloss skip-gram", "random"
# Rows: name -> settings over the preset's defaults. The paper's rows first, then beyond it, then Utama's
# ablation of the word vectors (random against pretrained initialisation) on LE and the LSTM encoder.
ROWS = {
    "visual product": dict(model="visual_product", lr=1e-3),
    "label embedding (LE)": dict(model="le", composer="mlp", lr=1e-3),
    "CRF (Eq. 7)": dict(model="crf", lr=1e-3),
    "VSE++, tensor text encoder": dict(model="vse", composer="tensor"),
    "VSE++, MLP text encoder": dict(model="vse", composer="mlp"),
    "VSE++, MLP + explicit interaction": dict(model="vse", composer="mlp_interaction"),
    "VSE++, RNN (LSTM) text encoder": dict(model="vse", composer="lstm"),
    "VSE++, RNN (GRU) text encoder": dict(model="vse", composer="gru"),
    "VSE++, RNN (LSTM) + finetune": dict(model="vse", composer="lstm", finetune=True),
    "order-embeddings, RNN (LSTM)": dict(model="order", composer="lstm", margin=0.05, lr=1e-3),
    "CompCos-style cosine classifier": dict(model="compcos", composer="mlp", lr=1e-3),
    "label embedding (LE), gloss skip-gram vectors": dict(model="le", composer="mlp", lr=1e-3, vectors=GLOSS),
    "label embedding (LE), random vectors": dict(model="le", composer="mlp", lr=1e-3, vectors=RANDOM),
    "VSE++, RNN (LSTM) text encoder, gloss skip-gram vectors": dict(model="vse", composer="lstm", vectors=GLOSS),
    "VSE++, RNN (LSTM) text encoder, random vectors": dict(model="vse", composer="lstm", vectors=RANDOM),
}
# Relative training time of the rows that take far longer than the rest (full preset at 2762204: 212 s
# and 177 s against 5-26 s), so that side-by-side workers start them first.
ROW_COST = {"VSE++, tensor text encoder": 10.0, "VSE++, RNN (LSTM) + finetune": 8.0}

PRESETS = {
    "full": dict(
        seed=0,
        unseen=dict(val=30, test=50),
        per_pair=dict(train=100, val=20, test_seen=15, test_unseen=40),
        cnn=dict(width=32, epochs=3),
        cnn_items=50000,
        skipgram=dict(dim=300, epochs=5),
        word_vectors="glove-6b-50d",  # the paper's kind: pretrained on a large corpus (None: the gloss skip-gram)
        train=dict(epochs=20, dim=256, hidden=256, tensor_dim=32, batch=64),
        finetune_epochs=20,
        context_items=50,
    ),
    "small": dict(
        seed=0,
        unseen=dict(val=30, test=50),
        per_pair=dict(train=12, val=3, test_seen=2, test_unseen=6),
        cnn=dict(width=16, epochs=1),
        cnn_items=10000,
        skipgram=dict(dim=50, epochs=1),
        word_vectors="glove-6b-50d",
        train=dict(epochs=3, dim=64, hidden=64, tensor_dim=8, batch=32),
        finetune_epochs=1,
        context_items=8,
    ),
}
PARAMETERS = {
    "PRESET": one_of(PRESETS),
    "MATMUL": matmul,
    "DEVICE": device,
    "WORD_VECTORS": word_vectors_parameter,
    "MIT_STATES": existing("dir"),
    "MIT_FEATURES": existing("file"),
    "WORKERS": workers,
}


def word_vectors(cfg: dict, workdir: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The stand-in's word vectors of every row (`vector_sets` of `synset_vectors`), and notes on them."""
    return vector_sets(cfg, synset_vectors(cfg, workdir), workdir)


def vector_sets(
    cfg: dict, vectors: np.ndarray, workdir: Path, words: list[str] | None = None
) -> tuple[dict[str, np.ndarray], dict]:
    """Every row's word vectors by the set ROWS names, and notes on them: DEFAULT, `vectors` (from
    cfg["word_vectors"], or the gloss skip-gram's where that is None); GLOSS, the gloss skip-gram's,
    only where cfg["word_vectors"] names other vectors (else DEFAULT's rows are those); RANDOM, unit
    vectors of `vectors`' shape (beyond the paper, which only initialises from skip-gram vectors).
    GLOSS is built as DEFAULT was: of the stand-in's synsets, or, given the `words` themselves
    (MIT-States), as `token_vectors` reads them."""
    d, seed = vectors.shape[1], cfg["seed"]
    sets = {DEFAULT: vectors, RANDOM: random_vectors(vectors.shape, seed)}
    notes = {"text vectors": vector_note(cfg.get("word_vectors"), words is not None)}
    if cfg.get("word_vectors"):
        gloss = {**cfg, "word_vectors": None}
        sets[GLOSS] = synset_vectors(gloss, workdir) if words is None else token_vectors(gloss, words, workdir)
        notes["rows with gloss skip-gram vectors"] = vector_note(None, words is not None)
    notes["rows with random vectors"] = f"random unit vectors, {d}-d, seed {seed}"
    return sets, notes


def standin_task(cfg: dict, cnn: ItemCNN) -> Task:
    """Fashion-MNIST Attributes under the preset's pair split, with frozen CNN features."""
    pairs = split_pairs(cfg["unseen"]["val"], cfg["unseen"]["test"], cfg["seed"])
    train, test = load_fashion_mnist("train"), load_fashion_mnist("test")
    pp, s = cfg["per_pair"], cfg["seed"]
    sets = {
        "train": [make_attribute_images(train, "train", pairs["seen"], pp["train"], s)],
        "val": [
            make_attribute_images(train, "dev", pairs["seen"], pp["val"], s),
            make_attribute_images(train, "dev", pairs["val_unseen"], pp["val"], s),
        ],
        "test": [
            make_attribute_images(test, "test", pairs["seen"], pp["test_seen"], s),
            make_attribute_images(test, "test", pairs["test_unseen"], pp["test_unseen"], s),
        ],
    }
    images = {k: np.concatenate([d.render() for d in v]) for k, v in sets.items()}
    labels = {k: np.concatenate([d.labels for d in v]) for k, v in sets.items()}
    feats = {k: item_features(cnn, v) for k, v in images.items()}
    notes = {
        "data": VERSION,
        "images": {k: len(v) for k, v in labels.items()},
        "pairs": {k: len(v) for k, v in pairs.items()},
        "split fingerprints": {k: [d.fingerprint()[:16] for d in v] for k, v in sets.items()},
    }
    return Task(list(ATTRS), list(OBJECTS), pairs, feats, labels, images, notes)


def row_config(cfg: dict, row: str) -> CompositionConfig:
    settings = dict(ROWS[row])
    finetune = settings.pop("finetune", False)
    settings.pop("vectors", None)
    return CompositionConfig(
        **{**cfg["train"], **settings}, seed=cfg["seed"], finetune_epochs=cfg["finetune_epochs"] if finetune else 0
    )


def row_vectors(row: str) -> str:
    """The set of word vectors `row` starts from (DEFAULT, GLOSS or RANDOM)."""
    return ROWS[row].get("vectors", DEFAULT)


def train_rows(
    cfg: dict,
    task: Task,
    vectors: np.ndarray | dict[str, np.ndarray],
    workdir: Path,
    cnn: ItemCNN | None = None,
    device="cpu",
    progress: bool = True,
    rows=tuple(ROWS),
    workers: int = 1,
) -> dict:
    """Train every row's model on the seen pairs; epochs chosen on validation AUC. `vectors`: the
    word vectors of the rows that name none, or a set -> vectors dict (`vector_sets`); a row whose
    set is not there is left out, as "+finetune" is without images. With `workers` > 1, the rows
    train side by side in that many one-thread processes (training.workers)."""
    sets = vectors if isinstance(vectors, dict) else {DEFAULT: vectors}
    val_pairs, val_unseen = task.candidates("val")
    val_target = pair_index(task.labels["val"], val_pairs)
    data_key = task.fingerprint()

    def validation_metrics(model) -> dict:
        sweep = generalised_sweep(predict_scores(model, inputs(task, model, "val"), val_pairs), val_target, val_unseen)
        return {"val_auc": sweep["auc"], "val_hm": sweep["best hm"]}

    # precomputed features only (no images): nothing to finetune
    rows = [r for r in rows if not (row_config(cfg, r).finetune_epochs and not task.images) and row_vectors(r) in sets]
    here = {}
    if workers > 1 and len(rows) > 1:
        here = run_in_workers(
            _train_row_job,
            {
                r: dict(
                    cfg=cfg,
                    task=task,
                    vectors={row_vectors(r): sets[row_vectors(r)]},
                    workdir=Path(workdir),
                    cnn=cnn,
                    device=str(device),
                    row=r,
                )
                for r in rows
            },
            workers,
            {r: ROW_COST.get(r, 1.0) for r in rows},
            progress,
            "Utama rows",
        )
    out = {}
    for row in rows:
        rc = row_config(cfg, row)
        t0 = time.perf_counter()
        finetune_cnn = copy.deepcopy(cnn) if rc.finetune_epochs else None  # the frozen one stays as it is
        model, fits = train_recogniser(
            rc,
            sets[row_vectors(row)],
            len(task.attrs),
            task.features["train"],
            task.labels["train"],
            task.pairs["seen"],
            validation_metrics,
            "val_auc",
            Path(workdir) / f"row_{slug(row)}.pt",
            progress,
            device,
            finetune_cnn,
            task.images.get("train"),
            data_key,
        )
        if row in here:  # trained by a worker in this run: loaded here, not resumed
            for f, resumed in zip(fits, here[row]["resumed"]):
                f.resumed = resumed
        out[row] = {
            "model": model,
            "fits": fits,
            "seconds": sum(f.seconds for f in fits),
            "wall_seconds": here[row]["wall_seconds"] if row in here else time.perf_counter() - t0,
            "trained_at": fits[0].trained_at,
        }
    return out


def _train_row_job(
    cfg: dict, task: Task, vectors: dict[str, np.ndarray], workdir: Path, cnn: ItemCNN | None, device: str, row: str
) -> dict:
    """A worker's job: train one row into its checkpoint; return its fits' resumed flags and wall time."""
    t = train_rows(cfg, task, vectors, workdir, cnn, device, False, [row])[row]
    return {"resumed": [f.resumed for f in t["fits"]], "wall_seconds": t["wall_seconds"]}


def context_shifts(cfg: dict, cnn: ItemCNN) -> np.ndarray:
    """Per attribute and object, the mean shift of frozen CNN features from a plain item to the
    same item under the attribute, over `context_items` training items per object: (A, O, F)."""
    train = load_fashion_mnist("train")
    rng = np.random.default_rng(cfg["seed"])
    out = []
    for o in range(len(OBJECTS)):
        items = rng.choice(np.flatnonzero(train.labels[:50000] == o), cfg["context_items"], replace=False)
        plain = item_features(cnn, np.stack([render_item(train.images[i], None, o) for i in items]))
        out.append(
            [
                (item_features(cnn, np.stack([render_item(train.images[i], a, o, seed=int(i)) for i in items])) - plain)
                .mean(0)
                .numpy()
                for a in ATTRS
            ]
        )
    return np.stack(out, 1)  # (A, O, F)


def source(word_vectors: str | None = None) -> str:
    _, how = ensure_fashion_mnist()
    text = f"; {describe_vectors(word_vectors)}" if word_vectors else ""
    return f"{VERSION}: Fashion-MNIST ({how}) items under 20 WordNet 3.0 adjectives; WordNet 3.0 glosses{text}"


def data_fingerprint(task: Task) -> str:
    return f"fashion-mnist:{fmnist_fingerprint()[:16]}|task:{task.fingerprint()[:16]}"


def model_records(trained: dict, cnn: ItemCNN | None = None) -> dict[str, dict]:
    """The stand-in's pretrained CNN (where there is one) and every row (its fits summed):
    reports.model_record each, for the .meta.json's `training` block."""
    out = {"ImageNet stand-in CNN": cnn.provenance} if cnn is not None else {}
    return {
        **out,
        **{
            row: model_record(
                t["seconds"],
                t["trained_at"],
                any(f.resumed for f in t["fits"]),
                epochs_run=sum(len(f.history) for f in t["fits"]),
            )
            for row, t in trained.items()
        },
    }


def mit_states_task(cfg: dict, root: str | Path, features: str | Path | None, workdir: Path) -> tuple[Task, np.ndarray]:
    """MIT-States under the natural split (seen = train pairs; val / test unseen = their pairs not
    in train), with precomputed image features (an .npz of `files` and `features`) or, without
    one, ResNet-101 features computed here (torchvision downloads the ImageNet weights). Word
    vectors: the words' own (`token_vectors`; every row's: `vector_sets` with the words)."""
    from orderlib.data.mit_states import image_features, load_features, load_mit_states

    data = load_mit_states(root, "natural")
    feats = {}
    for split in ("train", "val", "test"):
        if features:
            x = load_features(features, data.images[split])
        else:
            x = cached(
                Path(workdir) / f"mit_states_{split}_features.pt",
                f"{root}|{split}|{len(data.images[split])}",
                lambda: image_features(data.image_paths(split)),
            )
        feats[split] = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    train_pairs = {tuple(p) for p in data.pair_index("train").tolist()}
    pairs = {"seen": data.pair_index("train")}
    for split in ("val", "test"):
        p = data.pair_index(split)
        pairs[f"{split}_unseen"] = p[[tuple(q) not in train_pairs for q in p.tolist()]]
    task = Task(
        list(data.attrs),
        list(data.objs),
        pairs,
        feats,
        dict(data.labels),
        notes={
            "data": f"MIT-States natural split at {Path(root).name}",
            "images": {k: len(v) for k, v in data.labels.items()},
            "pairs": {k: len(v) for k, v in pairs.items()},
        },
    )
    return task, token_vectors(cfg, task.attrs + task.objs, workdir)
