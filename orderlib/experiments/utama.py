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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from orderlib.checkpoint import cached, code_version, fingerprint
from orderlib.data.attributes import (
    ATTRIBUTES,
    ATTRS,
    OBJECTS,
    VERSION,
    make_attribute_images,
    plain_images,
    render_item,
    split_pairs,
)
from orderlib.data.fashion_mnist import SYNSETS, ensure_fashion_mnist, load_fashion_mnist
from orderlib.data.fashion_mnist import fingerprint as fmnist_fingerprint
from orderlib.encoders.cnn import CNNConfig, ItemCNN, item_features, train_item_cnn
from orderlib.encoders.skipgram import (
    NAMED_VECTORS,
    SkipGramConfig,
    definition_vectors,
    load_word_vectors,
    random_vectors,
    sense_vectors,
    train_skipgram,
    wordnet_corpus,
)
from orderlib.eval.compositional import (
    accuracy_at_bias,
    context_dependence,  # noqa: F401 (the notebook calls exp.context_dependence)
    generalised_sweep,
    sampled_sweep,
    topk_accuracy,
)
from orderlib.params import device, existing, matmul, one_of, workers
from orderlib.params import word_vectors as word_vectors_param
from orderlib.reports import model_record
from orderlib.training.composition import CRF, CompositionConfig, predict_scores, train_recogniser
from orderlib.training.workers import run_in_workers

# Utama's Table 1 (MIT-States, 700 unseen pairs): top-1, top-2, top-3, average accuracy (%).
PAPER_TABLE1 = {
    "chance": (0.14, 0.28, 0.42, 0.28),
    "visual product": (9.8, 16.1, 20.6, 15.5),
    "label embedding (LE)": (11.2, 17.6, 22.4, 17.06),
    "VSE++, tensor text encoder": (5.2, 11.1, 15.9, 10.7),
    "VSE++, MLP text encoder": (6.53, 13.215, 19.431, 13.05),
    "VSE++, MLP + explicit interaction": (8.4, 16.44, 22.813, 15.88),
    "VSE++, RNN (LSTM) text encoder": (9.129, 16.45, 22.479, 16.01),
    "VSE++, RNN (LSTM) + finetune": (9.83, 17.99, 24.27, 17.36),
}
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
MAIN = "VSE++, RNN (LSTM) text encoder"  # the model of Tables 2 and 3
ARITHMETIC = ("VSE++, RNN (LSTM) text encoder", "VSE++, RNN (GRU) text encoder")

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
    "WORD_VECTORS": word_vectors_param,
    "MIT_STATES": existing("dir"),
    "MIT_FEATURES": existing("file"),
    "WORKERS": workers,
}


@dataclass
class Task:
    """Features and labels of one attribute-object data set under the shared pair split."""

    attrs: list[str]
    objs: list[str]
    pairs: dict[str, np.ndarray]  # "seen", "val_unseen", "test_unseen": (P, 2) (attr, obj)
    features: dict[str, torch.Tensor]  # "train", "val", "test": (N, F)
    labels: dict[str, np.ndarray]  # (N, 2)
    images: dict[str, np.ndarray] = field(default_factory=dict)  # uint8 (N, 32, 32, 3), stand-in only
    notes: dict = field(default_factory=dict)

    def fingerprint(self) -> str:
        return fingerprint(
            *[torch.as_tensor(self.labels[s]) for s in ("train", "val", "test")],
            *[torch.as_tensor(self.pairs[k]) for k in sorted(self.pairs)],
            *[self.features[s] for s in ("train", "val", "test")],
        )

    def candidates(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """Generalised candidates of val or test: seen + that split's unseen pairs, and the
        unseen mask (P,)."""
        un = self.pairs[f"{split}_unseen"]
        return np.concatenate([self.pairs["seen"], un]), np.r_[
            np.zeros(len(self.pairs["seen"]), bool), np.ones(len(un), bool)
        ]


def _pair_index(labels: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Row of each label (N, 2) in pairs (P, 2); -1 where absent."""
    lookup = {tuple(p): i for i, p in enumerate(pairs.tolist())}
    return np.array([lookup.get(tuple(l), -1) for l in labels.tolist()], np.int64)


def _unseen_test(task: Task) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The closed world: indices of the test images of unseen test pairs, those pairs (P, 2), and
    each image's pair among them."""
    closed = task.pairs["test_unseen"]
    where = _pair_index(task.labels["test"], closed)
    test_un = np.flatnonzero(where >= 0)
    return test_un, closed, where[test_un]


def describe_vectors(word_vectors: str | None) -> str:
    """What WORD_VECTORS (a name of NAMED_VECTORS, a word2vec / GloVe file, or None) are, for notes."""
    if not word_vectors:
        return "skip-gram on WordNet 3.0 glosses, trained here"
    return NAMED_VECTORS[word_vectors][3] if word_vectors in NAMED_VECTORS else f"word vectors from {word_vectors}"


def vector_note(word_vectors: str | None, tokens: bool) -> str:
    """Which vectors the rows read and how: of each word's synset, or the words' own (`tokens`)."""
    if not word_vectors:
        return (
            "skip-gram on WordNet 3.0 text (word tokens)"
            if tokens
            else "skip-gram on WordNet 3.0 glosses (definition vectors of each word's synset)"
        )
    how = "the words' own vectors" if tokens else "each word from its WordNet 3.0 synset's lemmas and gloss"
    return f"{describe_vectors(word_vectors)}; {how}"


def word_vectors(cfg: dict, workdir: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The stand-in's word vectors of every row (`vector_sets` of `synset_vectors`), and notes on them."""
    return vector_sets(cfg, synset_vectors(cfg, workdir), workdir)


def vector_sets(
    cfg: dict, vectors: np.ndarray, workdir: Path, words: list[str] | None = None
) -> tuple[dict[str, np.ndarray], dict]:
    """Every row's word vectors by the set ROWS names, and notes on them: DEFAULT, `vectors` (from
    cfg["word_vectors"], or the gloss skip-gram's where that is None); GLOSS, the gloss skip-gram's,
    only where cfg["word_vectors"] names other vectors (else DEFAULT's rows are those); RANDOM, unit
    vectors of `vectors`' shape (Utama's ablation). GLOSS is built as DEFAULT was: of the stand-in's
    synsets, or, given the `words` themselves (MIT-States), as `token_vectors` reads them."""
    d, seed = vectors.shape[1], cfg["seed"]
    sets = {DEFAULT: vectors, RANDOM: random_vectors(vectors.shape, seed)}
    notes = {"text vectors": vector_note(cfg.get("word_vectors"), words is not None)}
    if cfg.get("word_vectors"):
        gloss = {**cfg, "word_vectors": None}
        sets[GLOSS] = synset_vectors(gloss, workdir) if words is None else token_vectors(gloss, words, workdir)
        notes["rows with gloss skip-gram vectors"] = vector_note(None, words is not None)
    notes["rows with random vectors"] = f"random unit vectors, {d}-d, seed {seed}"
    return sets, notes


def synset_vectors(cfg: dict, workdir: Path) -> np.ndarray:
    """(A + O, d) vectors of the attribute adjectives then the object nouns, from their WordNet 3.0
    synsets: with cfg["word_vectors"], `sense_vectors` (all lemmas and the gloss: grainy's synset,
    farinaceous.s.02, is not its first lemma); without, the definition vectors of a skip-gram on
    WordNet 3.0 glosses (as DeViSE's labels in notebook 06), cached in workdir."""
    from orderlib.data.wordnet import ensure_wordnet, open_wordnet

    ensure_wordnet("3.0")
    names = [ATTRIBUTES[a][0] for a in ATTRS] + list(SYNSETS)
    if cfg.get("word_vectors"):
        wv = load_word_vectors(cfg["word_vectors"])
        wn = open_wordnet("3.0")
        return sense_vectors(wv, [wn.synset(n) for n in names])

    def build():
        wn = open_wordnet("3.0")
        corpus = wordnet_corpus(wn)
        wv = train_skipgram(corpus, SkipGramConfig(**cfg["skipgram"], seed=cfg["seed"]))
        counts = Counter(w for sentence in corpus for w in sentence)
        return definition_vectors(wv, [wn.synset(n) for n in names], counts)

    key = f"{names}|{sorted(cfg['skipgram'].items())}|{cfg['seed']}|{code_version(train_skipgram.__module__)}"
    return cached(Path(workdir) / "word_vectors.pt", key, build)


def pretrain_cnn(cfg: dict, workdir: Path, device="cpu", progress: bool = True) -> tuple[ItemCNN, list]:
    """The ImageNet stand-in: object classification of plain, randomly tinted training items
    (no attribute, no pair ever shown), held-out accuracy on plain val items."""
    train = load_fashion_mnist("train")
    k = cfg["cnn_items"]
    x = plain_images(train, np.arange(k), cfg["seed"])
    hx = plain_images(train, np.arange(50000, 52000), cfg["seed"] + 1)
    return train_item_cnn(
        x,
        train.labels[:k],
        hx,
        train.labels[50000:52000],
        CNNConfig(**cfg["cnn"], seed=cfg["seed"], in_channels=3),
        device,
        Path(workdir) / "cnn.pt",
        progress,
    )


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
    val_target = _pair_index(task.labels["val"], val_pairs)
    data_key = task.fingerprint()

    def evaluate(model) -> dict:
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
            evaluate,
            "val_auc",
            Path(workdir) / f"row_{row_slug(row)}.pt",
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


def row_slug(row: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in row.lower()).strip("_")


def inputs(task: Task, model, split: str):
    """What `model` reads for `split`: the images once it holds a CNN, else the frozen features."""
    return task.images[split] if model.cnn is not None else task.features[split]


def table1(trained: dict, task: Task) -> pd.DataFrame:
    """Closed-world top-k over the unseen test pairs (Misra et al.), and the generalised protocol
    (best seen / unseen / HM, AUC; HM at the bias chosen on val)."""
    test_un, closed, target = _unseen_test(task)
    gen_pairs, gen_unseen = task.candidates("test")
    gen_target = _pair_index(task.labels["test"], gen_pairs)
    val_pairs, val_unseen = task.candidates("val")
    val_target = _pair_index(task.labels["val"], val_pairs)
    rows = []
    p = len(closed)
    chance = {f"top-{k}": 100.0 * k / p for k in (1, 2, 3)}
    chance["average"] = float(np.mean(list(chance.values())))
    rows += [
        dict(method="chance", protocol="closed world", metric=m, paper=PAPER_TABLE1["chance"][i], ours=v)
        for i, (m, v) in enumerate(chance.items())
    ]
    for name, t in trained.items():
        model = t["model"]
        x_test = inputs(task, model, "test")
        scores = predict_scores(model, x_test[test_un], closed)
        paper = PAPER_TABLE1.get(name, (None,) * 4)
        for i, (m, v) in enumerate(topk_accuracy(scores, target).items()):
            rows.append(dict(method=name, protocol="closed world", metric=m, paper=paper[i], ours=v))
        if isinstance(model, CRF):
            pick = model.max_marginal(x_test[test_un], torch.as_tensor(closed)).cpu().numpy()
            rows.append(
                dict(
                    method=name,
                    protocol="closed world",
                    metric="top-1 (max-marginal inference)",
                    paper=None,
                    ours=100.0 * float((pick == target).mean()),
                )
            )
        gen_scores = predict_scores(model, x_test, gen_pairs)
        sweep = generalised_sweep(gen_scores, gen_target, gen_unseen)
        val = generalised_sweep(predict_scores(model, inputs(task, model, "val"), val_pairs), val_target, val_unseen)
        at_val = accuracy_at_bias(gen_scores, gen_target, gen_unseen, val["bias"])
        for m in ("best seen", "best unseen", "best hm", "auc"):
            rows.append(dict(method=name, protocol="generalised", metric=m, paper=None, ours=sweep[m]))
        sampled = sampled_sweep(gen_scores, gen_target, gen_unseen)  # as czsl's Evaluator samples the biases
        for m in ("best hm", "auc"):
            rows.append(
                dict(method=name, protocol="generalised", metric=f"{m} (sampled biases)", paper=None, ours=sampled[m])
            )
        for m in ("seen", "unseen", "hm"):
            rows.append(
                dict(
                    method=name,
                    protocol="generalised",
                    metric=f"{m} at the val-chosen bias",
                    paper=None,
                    ours=at_val[m],
                )
            )
    return pd.DataFrame(rows)


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


def pair_name(task: Task, pair) -> str:
    return f"{task.attrs[pair[0]]} {task.objs[pair[1]]}"


def table2(
    trained: dict, task: Task, dependence: np.ndarray, n_examples: int = 10, seed: int = 0
) -> tuple[pd.DataFrame, list]:
    """Top-5 closed-world predictions of the main model for one test image of each of
    `n_examples` unseen pairs, and the per-attribute breakdown over all unseen test images
    (pair, attribute and object right at top-1), beside each attribute's context dependence."""
    test_un, closed, target = _unseen_test(task)
    rng = np.random.default_rng(seed)
    rows, examples = [], []
    for name in (MAIN, "visual product"):
        model = trained[name]["model"]
        scores = predict_scores(model, inputs(task, model, "test")[test_un], closed)
        top = scores.argsort(1, descending=True)[:, :5].numpy()
        if name == MAIN:
            picks = [
                int(rng.choice(np.flatnonzero(target == p)))
                for p in rng.choice(np.unique(target), min(n_examples, len(np.unique(target))), replace=False)
            ]
            for j in picks:
                gt = pair_name(task, closed[target[j]])
                examples.append((int(test_un[j]), gt, [pair_name(task, closed[k]) for k in top[j]]))
                rows += [
                    dict(
                        section="predictions",
                        method=name,
                        item=f"test image {test_un[j]} ({gt})",
                        metric=f"pred@{r + 1}",
                        paper=None,
                        ours=pair_name(task, closed[k]),
                    )
                    for r, k in enumerate(top[j])
                ]
        pred = closed[top[:, 0]]
        truth = closed[target]
        for a, word in enumerate(task.attrs):
            sel = truth[:, 0] == a
            if not sel.any():
                continue
            for metric, ok in (
                ("pair top-1", (pred[sel] == truth[sel]).all(1)),
                ("attribute right at top-1", pred[sel, 0] == a),
                ("object right at top-1", pred[sel, 1] == truth[sel, 1]),
            ):
                rows.append(
                    dict(
                        section="per attribute",
                        method=name,
                        item=word,
                        metric=metric,
                        paper=None,
                        ours=100.0 * float(ok.mean()),
                    )
                )
            rows.append(
                dict(
                    section="per attribute",
                    method=name,
                    item=word,
                    metric="test images",
                    paper=None,
                    ours=float(sel.sum()),
                )
            )
    for a, word in enumerate(task.attrs):
        rows.append(
            dict(
                section="per attribute",
                method="frozen CNN features",
                item=word,
                metric="context dependence",
                paper=None,
                ours=float(dependence[a]),
            )
        )
    return pd.DataFrame(rows), examples


def dependence_correlation(df: pd.DataFrame, method: str = MAIN) -> dict:
    """Spearman correlation, over attributes, of context dependence with each per-attribute metric."""
    per = df[df.section == "per attribute"]
    dep = per[per.metric == "context dependence"].set_index("item").ours.astype(float)
    out = {}
    for metric in ("pair top-1", "attribute right at top-1"):
        m = per[(per.method == method) & (per.metric == metric)].set_index("item").ours.astype(float)
        both = pd.concat([dep, m], axis=1, join="inner")
        out[metric] = float(both.iloc[:, 0].rank().corr(both.iloc[:, 1].rank()))
    return out


@torch.no_grad()
def table3(trained: dict, task: Task, rows=ARITHMETIC) -> tuple[pd.DataFrame, list]:
    """Vector arithmetic (Utama's Table 3) over every unseen test image (a, o) and every other
    attribute a' (object o'): image - F(a) + F(a') should retrieve (a', o) among all A x O pairs.
    Controls: the image + F(a') without the subtraction, the image alone, F(a') alone."""
    n_a, n_o = len(task.attrs), len(task.objs)
    everything = np.array([(a, o) for a in range(n_a) for o in range(n_o)], np.int64)
    test_un = _unseen_test(task)[0]
    labels = task.labels["test"][test_un]
    out, examples = [], []
    for name in rows:
        if name not in trained:
            continue
        model = trained[name]["model"]
        img = model.embed_images(inputs(task, model, "test")[test_un]).cpu()  # (N, D)
        phr = model.embed_pairs(torch.as_tensor(everything)).cpu()  # (P, D)
        word = torch.nn.functional.normalize(model.composer.encode_words(torch.arange(n_a + n_o)).cpu(), dim=-1)
        for kind, slot, n_vals, offset in (("attribute", 0, n_a, 0), ("object", 1, n_o, n_a)):
            q_idx, new = [], []
            for i, lab in enumerate(labels):
                for v in range(n_vals):
                    if v != lab[slot]:
                        q_idx.append(i)
                        new.append(v)
            q_idx, new = np.array(q_idx), np.array(new)
            tgt_pairs = labels[q_idx].copy()
            tgt_pairs[:, slot] = new
            target = tgt_pairs[:, 0] * n_o + tgt_pairs[:, 1]
            old_w = word[labels[q_idx, slot] + offset]
            new_w = word[new + offset]
            base = img[q_idx]
            queries = {
                "image - F(old) + F(new)": base - old_w + new_w,
                "image + F(new)": base + new_w,
                "image alone": base,
                "F(new) alone": new_w,
            }
            for op, q in queries.items():
                scores = torch.nn.functional.normalize(q, dim=-1) @ phr.T
                acc = topk_accuracy(scores, target, ks=(1, 5))
                for m in ("top-1", "top-5"):
                    out.append(dict(method=name, modification=kind, operation=op, metric=m, paper=None, ours=acc[m]))
                if op == "image - F(old) + F(new)" and name == rows[0]:
                    top = scores.argsort(1, descending=True)[:, :5].numpy()
                    for j in np.random.default_rng(slot).choice(len(q_idx), 3, replace=False):
                        examples.append(
                            (
                                int(test_un[q_idx[j]]),
                                pair_name(task, labels[q_idx[j]]),
                                kind,
                                (task.attrs + task.objs)[labels[q_idx[j], slot] + offset],
                                (task.attrs + task.objs)[new[j] + offset],
                                [pair_name(task, everything[k]) for k in top[j]],
                            )
                        )
    return pd.DataFrame(out), examples


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


def token_vectors(cfg: dict, words: list[str], workdir: Path) -> np.ndarray:
    """(len(words), d) unit vectors of the words themselves (a word the vectors lack, like
    "ancient_building", takes its first known part split at "_" or "-"), from WORD_VECTORS or a
    skip-gram on WordNet 3.0's text; words with no known part get zeros."""
    from orderlib.data.wordnet import ensure_wordnet, open_wordnet

    if cfg.get("word_vectors"):
        wv = load_word_vectors(cfg["word_vectors"])
    else:
        ensure_wordnet("3.0")

        def build():
            return train_skipgram(
                wordnet_corpus(open_wordnet("3.0")), SkipGramConfig(**cfg["skipgram"], seed=cfg["seed"])
            )

        wv = cached(
            Path(workdir) / "skipgram_tokens.pt",
            f"{sorted(cfg['skipgram'].items())}|{cfg['seed']}|{code_version(train_skipgram.__module__)}",
            build,
        )
    rows = []
    for w in words:
        parts = [p for p in [w.lower(), *w.lower().replace("-", "_").split("_")] if p in wv]
        rows.append(wv[parts[0]] if parts else np.zeros(wv.vectors.shape[1], np.float32))
    return np.stack(rows).astype(np.float32)
