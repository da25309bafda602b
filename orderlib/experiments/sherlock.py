"""Sherlock (Elhoseiny et al., AAAI 2017) on Fashion-MNIST Facts: data, language views and the
retrieval tables (work in progress: the notebook and the caption-model baselines come next).

Their data vs ours: the large-scale set (202k facts, 814k web images, GloVe 840B, VGG-16 from
ImageNet) vs Fashion-MNIST Facts (810 facts over 10 objects, 20 attributes and 6 relations,
long-tailed training counts, real Fashion-MNIST items; the CNN pre-trained on plain items for
Utama's notebook; skip-gram on WordNet's text).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from orderlib.data.attributes import ATTRS, OBJECTS
from orderlib.data.facts import RELATIONS, Fact, all_facts, generalisation_cases, long_tail_counts, make_fact_images
from orderlib.data.fashion_mnist import load_fashion_mnist
from orderlib.eval.facts import fact_map, fact_topk  # noqa: F401 (fact_topk re-exported for the notebook)

# Sherlock's Table 4, large-scale row: K1 / K5 / K10 (%) and mAP100 (%).
PAPER_TABLE4 = {
    "SEM-A": (16.39, 17.62, 18.41, 0.96), "SEM-B": (13.27, 14.19, 14.80, 0.73),
    "MV CCA": (12.28, 12.84, 13.15, 1.0), "ESZSL": (5.80, 5.84, 5.86, 0.4),
    "caption model, COCO pretrained": (3.48, 3.48, 3.5, 0.021), "caption model, retrained": (5.87, 6.06, 6.15, 0.29),
}
# Table 5 (K10, SPO facts with <= 5 training images): case -> {method: K10}, and the number of facts.
PAPER_TABLE5 = {
    "SP, O": ({"SEM-A": 2.063, "SEM-B": 1.751, "ESZSL": 0.149, "caption model, COCO pretrained": 0.013,
               "caption model, retrained": 0.367, "MV CCA": 1.221}, 10605),
    "SO, P": ({"SEM-A": 3.022, "SEM-B": 1.961, "ESZSL": 0.098, "caption model, COCO pretrained": 0.025,
               "caption model, retrained": 0.473, "MV CCA": 1.462}, 4842),
    "SO, PO": ({"SEM-A": 3.092, "SEM-B": 1.645, "ESZSL": 0.041, "caption model, COCO pretrained": 0.000,
                "caption model, retrained": 0.543, "MV CCA": 1.786}, 1755),
    "SO, SP": ({"SEM-A": 2.962, "SEM-B": 2.097, "ESZSL": 0.038, "caption model, COCO pretrained": 0.013,
                "caption model, retrained": 0.586, "MV CCA": 1.109}, 3133),
}
PAPER_STRUCTURE_ABLATION_K1 = 8.1  # "averaged S, P and O parts" (vs SEM-A's 16.39)


@dataclass
class FactTask:
    facts: list[Fact]
    train_counts: np.ndarray  # (F,) images per fact in training
    train: object  # FactImages
    test: object  # FactImages
    language: torch.Tensor  # (F, 3, d) slot word vectors, zeros at wild-cards
    orders: torch.Tensor  # (F,)
    notes: dict = field(default_factory=dict)


def slot_vectors(words: dict[str, np.ndarray], facts: list[Fact]) -> torch.Tensor:
    """(F, 3, d) language views: each slot's word vector (a multi-word predicate: the mean of its
    words'), zeros for wild-cards (Sherlock Eqs. 2, 4, 6)."""
    d = len(next(iter(words.values())))

    def vec(phrase):
        if phrase is None:
            return np.zeros(d, np.float32)
        parts = [words[w] for w in phrase.split() if w in words]
        return np.mean(parts, 0) if parts else np.zeros(d, np.float32)

    return torch.tensor(np.stack([[vec(f.s), vec(f.p), vec(f.o)] for f in facts]), dtype=torch.float32)


def vocabulary() -> list[str]:
    """Every word a fact slot uses (objects, attributes, the relations' words)."""
    return sorted(set(OBJECTS) | set(ATTRS) | {w for r in RELATIONS for w in r.split()})


def fact_task(cfg: dict, words: dict[str, np.ndarray]) -> FactTask:
    """Training images with long-tailed counts, `test_per_fact` test images of every fact (seen
    in training or not), and the facts' language views."""
    facts = all_facts()
    counts = long_tail_counts(facts, cfg["train_images"], cfg.get("exponent", 1.0), cfg.get("unseen", 0.1),
                              seed=cfg["seed"])
    train = make_fact_images(load_fashion_mnist("train"), "train", facts, counts, cfg["seed"])
    test = make_fact_images(load_fashion_mnist("test"), "test", facts, np.full(len(facts), cfg["test_per_fact"]),
                            cfg["seed"])
    orders = torch.tensor([f.order for f in facts])
    notes = {"facts": len(facts), "train images": int(counts.sum()), "test images": len(test),
             "unseen facts": int((counts == 0).sum()), "facts with <= 5 training images": int((counts <= 5).sum())}
    return FactTask(facts, counts, train, test, slot_vectors(words, facts), orders, notes)


def retrieval_rows(method: str, dist: torch.Tensor, task: FactTask, paper: dict = PAPER_TABLE4) -> list[dict]:
    """Table 4 rows of one method from its (test images, facts) distances: image -> fact K1/5/10
    and fact -> image mAP / mAP@100, overall and per fact order."""
    img_fact = torch.as_tensor(task.test.fact)
    paper_values = dict(zip(("K1", "K5", "K10", "mAP@100"), paper.get(method, (None,) * 4)))  # the "all" scope's
    rows = []
    for scope, sel in (("all", torch.ones(len(img_fact), dtype=torch.bool)),
                       *[(f"order {k}", task.orders[img_fact] == k) for k in (1, 2, 3)]):
        qf = torch.unique(img_fact[sel])
        q = dist[:, qf].T  # (facts, images)
        metrics = {**fact_topk(dist[sel], img_fact[sel]), "mAP": fact_map(q, img_fact, qf),
                   "mAP@100": fact_map(q, img_fact, qf, top=100)}
        rows += [dict(method=method, scope=scope, metric=metric, paper=paper_values.get(metric) if scope == "all" else None,
                      ours=value) for metric, value in metrics.items()]
    return rows


def chance_rows(task: FactTask) -> list[dict]:
    """Chance: k / number of candidate facts for K@k."""
    n = len(task.facts)
    return [dict(method="chance", scope="all", metric=f"K{k}", paper=None, ours=100.0 * k / n) for k in (1, 5, 10)]


def generalisation_rows(method: str, dist: torch.Tensor, task: FactTask, cases: dict | None = None) -> list[dict]:
    """Table 5: K10 over test images of the few-example SPO facts of each case."""
    cases = cases if cases is not None else generalisation_cases(task.facts, task.train_counts)
    img_fact = np.asarray(task.test.fact)
    rows = []
    for case, fact_ids in cases.items():
        sel = np.isin(img_fact, fact_ids)
        paper = PAPER_TABLE5[case][0].get(method)
        value = fact_topk(dist[torch.as_tensor(sel)], torch.as_tensor(img_fact[sel]))["K10"] if sel.any() else float("nan")
        rows += [dict(method=method, case=case, metric="K10", paper=paper, ours=value),
                 dict(method=method, case=case, metric="facts", paper=PAPER_TABLE5[case][1], ours=float(len(fact_ids)))]
    return rows


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def frozen_features(cnn, images: np.ndarray, batch: int = 256) -> np.ndarray:
    """(N, 4C) features of fact canvases (uint8 (N, H, W, 3)) for the closed-form baselines: the
    pre-trained CNN's feature map averaged over each cell of the 2x2 grid, so where items are is
    kept (channel-major: feature c * 4 + cell)."""
    from orderlib.encoders.cnn import to_input

    cnn.eval()
    device = next(cnn.parameters()).device
    with torch.no_grad():
        return torch.cat([torch.nn.functional.adaptive_avg_pool2d(cnn.feature_map(to_input(images[i:i + batch], device)), 2)
                          .flatten(1).cpu() for i in range(0, len(images), batch)]).numpy()  # (N, C * 4)


def baseline_distances(task: FactTask, train_x: np.ndarray, test_x: np.ndarray, cfg: dict) -> dict[str, torch.Tensor]:
    """(test images, facts) distances of ESZSL and multiview CCA fitted on the training images."""
    from orderlib.encoders.multiview import ESZSL, MultiviewCCA

    lang = task.language.flatten(1).numpy()  # (F, 3d), wild-cards zero (as Sherlock fills them)
    seen = np.flatnonzero(task.train_counts > 0)
    index = np.full(len(task.facts), -1)
    index[seen] = np.arange(len(seen))
    ez = ESZSL.fit(train_x, index[task.train.fact], lang[seen], cfg.get("eszsl_gamma", 1.0), cfg.get("eszsl_lambda", 1.0))
    cca = MultiviewCCA.fit(train_x, lang[task.train.fact], k=cfg.get("cca_dim", 64), reg=cfg.get("cca_reg", 1e-3))
    return {"ESZSL": ez.distance(test_x, lang), "MV CCA": cca.distance(test_x, lang)}
