"""DeViSE on 200 labels (beyond the paper): every attribute-object pair of Fashion-MNIST Attributes.

Notebook 06's stand-in has 10 labels, too few to show whether label vectors help (docs/devise.md).
Here each of the 200 (attribute, object) pairs of notebook 08's stand-in is a label, and images of
every pair are in training (DeViSE's Table 1: seen labels). Both heads read notebook 08's frozen CNN,
which was trained on plain items and never saw an attribute:
- the softmax baseline, a linear softmax layer on the features (DeViSE's baseline is the CNN's own
  softmax; with the CNN frozen, a linear layer is its counterpart to DeViSE's linear map M);
- DeViSE, M onto a pair's label vector (Eq. 1 of Frome et al.'s hinge rank loss), the unit mean of
  its attribute's and object's word vectors, as DeViSE averages a label's words.
hp@k's hierarchy: a pair's parents are its attribute and its object, so the first ring of labels
around a pair is the 28 pairs that share one of them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from orderlib.data.attributes import ATTRS, OBJECTS, make_attribute_images
from orderlib.data.fashion_mnist import load_fashion_mnist
from orderlib.encoders.cnn import ItemCNN, item_features
from orderlib.encoders.skipgram import random_vectors
from orderlib.eval.hierarchy import hierarchical_precision, hit_at_k, neighbours
from orderlib.experiments import devise
from orderlib.paths import slug
from orderlib.reports import model_record
from orderlib.training.devise import DeViSEConfig, embed_images, rank_labels, train_devise
from orderlib.training.loop import fit

PRESETS = {  # the CNN and the word vectors are notebook 08's (its preset of the same name)
    # 50 epochs at 3e-3: at notebook 06's 10 at 1e-3 both heads were still rising (held-out hit@1,
    # seed 0: DeViSE 37.6 at 10 epochs, 51.3 at 48 of 60 at 3e-3; softmax 53 at 10, 63.1 at 58 of 60)
    "full": dict(seed=0, per_pair=dict(train=100, held=20, test=30), epochs=50, batch=128, lr=3e-3),
    "small": dict(seed=0, per_pair=dict(train=12, held=3, test=5), epochs=2, batch=64, lr=1e-3),
}
HIT_KS, HP_KS = (1, 2, 5, 10), (2, 5, 10, 20)
SOFTMAX = "softmax baseline"


def pair_graph(pairs: np.ndarray) -> list[list[int]]:
    """Undirected adjacency over P pair nodes, then the attributes, then the objects: a pair's
    parents are its attribute and its object (hierarchical_precision's rings)."""
    p, n_attrs = len(pairs), len(ATTRS)
    parents = [[p + int(a), p + n_attrs + int(o)] for a, o in pairs] + [[] for _ in range(n_attrs + len(OBJECTS))]
    return neighbours(parents)


def pair_vectors(words: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """(P, d) unit label vectors: the mean of the attribute's and the object's unit word vectors
    (words: (A + O, d), the attributes first, as encoders.word_vectors.synset_vectors orders them)."""
    w = words / np.linalg.norm(words, axis=1, keepdims=True)
    v = w[pairs[:, 0]] + w[len(ATTRS) + pairs[:, 1]]
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def label_vectors(pretrained: np.ndarray, gloss: np.ndarray, pairs: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Each row's (P, d) label vectors from the (A + O, d) pretrained and gloss skip-gram word
    vectors. Random "labels" are drawn per label, as DeViSE's random-embedding row, so pairs share
    nothing; random "words" are drawn per word and composed, so pairs share their parts' vectors."""
    return {
        "devise": pair_vectors(pretrained, pairs),
        "devise (gloss skip-gram labels)": pair_vectors(gloss, pairs),
        "random embeddings": random_vectors((len(pairs), pretrained.shape[1]), seed + 10_000),  # not the words' rows
        "devise (random word vectors)": pair_vectors(random_vectors(pretrained.shape, seed), pairs),
    }


def images(cfg: dict, pairs: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Rendered uint8 (N, 32, 32, 3) images and their label (row of `pairs`) for "train" and "held"
    (Fashion-MNIST train items, as notebook 08's train and dev) and "test" (test items); cfg's seed
    draws the items and their variation."""
    train, test = load_fashion_mnist("train"), load_fashion_mnist("test")
    sources = {"train": (train, "train"), "held": (train, "dev"), "test": (test, "test")}
    out = {}
    for name, (source, split) in sources.items():
        d = make_attribute_images(source, split, pairs, cfg["per_pair"][name], cfg["seed"])
        out[name] = (d.render(), np.repeat(np.arange(len(pairs)), cfg["per_pair"][name]))
    return out


def train_softmax(cnn: ItemCNN, data: dict, n_labels: int, cfg: dict) -> tuple[nn.Linear, dict]:
    """A linear softmax layer on the frozen CNN's features, Adam for cfg["epochs"], kept at its best
    epoch by held-out hit@1 (training.loop.fit, as DeViSE's M). Seconds of work, so no checkpoint."""
    x, y = item_features(cnn, data["train"][0]), torch.as_tensor(data["train"][1])
    hx, hy = item_features(cnn, data["held"][0]), data["held"][1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg["seed"])
        head = nn.Linear(x.shape[1], n_labels).to(x.device)
    opt = torch.optim.Adam(head.parameters(), lr=cfg["lr"])

    def epoch(e: int) -> float:
        g = torch.Generator().manual_seed(cfg["seed"] * 1000 + e)
        order, total, steps = torch.randperm(len(y), generator=g), 0.0, range(0, len(y), cfg["batch"])
        for i in steps:
            idx = order[i : i + cfg["batch"]]
            loss = nn.functional.cross_entropy(head(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        return total / len(steps)

    def held_out() -> dict:
        with torch.no_grad():
            return {"held_out_hit@1": 100.0 * float((head(hx).argmax(1).numpy() == hy).mean())}

    r = fit(head, opt, cfg, epoch, held_out, "held_out_hit@1", cfg["epochs"], cfg["epochs"], progress=False)
    record = model_record(r.seconds, r.trained_at, r.resumed, epochs_run=len(r.history))
    return head.requires_grad_(False), record


def train_rows(cnn: ItemCNN, data: dict, vectors: dict[str, np.ndarray], cfg: dict, workdir: Path, device="cpu"):
    """The softmax baseline and one DeViSE map per row of `vectors` (label_vectors) (frozen CNN, no fine-tuning stage):
    {row: model} and {row: reports.model_record}."""
    head, record = train_softmax(cnn, data, len(next(iter(vectors.values()))), cfg)
    models, records = {SOFTMAX: head}, {SOFTMAX: record}
    dcfg = DeViSEConfig(epochs=cfg["epochs"], finetune_epochs=0, batch=cfg["batch"], lr=cfg["lr"], seed=cfg["seed"])
    for row, vec in vectors.items():
        models[row], _ = train_devise(
            cnn, *data["train"], *data["held"], torch.as_tensor(vec), dcfg, device, Path(workdir) / slug(row), False
        )
        records[row] = models[row].provenance
    return models, records


def ranked(models: dict, cnn: ItemCNN, vectors: dict[str, np.ndarray], test_images: np.ndarray, k: int) -> dict:
    """{row: (N, k) labels, best first}; ties go to the lower label index, as rank_labels breaks them."""
    out = {}
    with torch.no_grad():
        logits = models[SOFTMAX](item_features(cnn, test_images))
    out[SOFTMAX] = torch.sort(logits, dim=1, descending=True, stable=True).indices[:, :k].numpy()
    for row, vec in vectors.items():
        out[row] = rank_labels(models[row], embed_images(models[row], test_images), torch.as_tensor(vec), k)
    return out


def pair_label_metrics(models: dict, cnn: ItemCNN, vectors: dict, data: dict, pairs: np.ndarray) -> dict[str, dict]:
    """hit@k (%) and hp@k (a fraction) of every row over all 200 labels, and of chance (a
    uniformly random ranking's expected values)."""
    test_images, true = data["test"]
    adj, labels = pair_graph(pairs), np.arange(len(pairs))
    kmax = max(*HIT_KS, *HP_KS)
    out = {
        row: {**hit_at_k(r, true, HIT_KS), **hierarchical_precision(r, true, labels, adj, HP_KS)}
        for row, r in ranked(models, cnn, vectors, test_images, kmax).items()
    }
    out["chance"] = devise.chance(true, labels, adj, HIT_KS, HP_KS)
    return out
