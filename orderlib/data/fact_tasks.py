"""Fashion-MNIST Facts as a retrieval task (notebook 09): long-tailed training images, test and dev
images of every fact, and each fact's language view (slot word vectors, zeros at wild-cards)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from orderlib.data.attributes import ATTRS, OBJECTS
from orderlib.data.facts import RELATIONS, Fact, all_facts, long_tail_counts, make_fact_images
from orderlib.data.fashion_mnist import load_fashion_mnist

GLOSS = "gloss skip-gram"  # the word vectors a SEM row may name instead of WORD_VECTORS' (its "vectors")


@dataclass
class FactTask:
    facts: list[Fact]
    train_counts: np.ndarray  # (F,) images per fact in training
    train: object  # FactImages
    test: object  # FactImages
    dev: object  # FactImages (model selection), or None
    language: torch.Tensor  # (F, 3, d) slot word vectors, zeros at wild-cards
    orders: torch.Tensor  # (F,)
    notes: dict = field(default_factory=dict)
    languages: dict = field(default_factory=dict)  # other word vectors' views (SEM_ROWS' "vectors") -> (F, 3, d')


def slot_vectors(words: dict[str, np.ndarray], facts: list[Fact], centre: bool = True) -> torch.Tensor:
    """(F, 3, d) language views: each slot's word vector (a multi-word predicate: the mean of its
    words'), zeros for wild-cards (Sherlock Eqs. 2, 4, 6). With `centre`, each slot's vocabulary
    (the 10 objects for S and O; the 20 attributes and 6 relations for P) is centred on its mean
    and the vectors scaled to unit length: a fixed linear map per slot that spreads the targets
    (skip-gram vectors of WordNet's small corpus share one direction, cosine ~0.8 between the
    objects, where GloVe's 840B-token vectors, the paper's, are far apart)."""
    d = len(next(iter(words.values())))

    def vec(phrase):
        parts = [words[w] for w in phrase.split() if w in words]
        return np.mean(parts, 0).astype(np.float32) if parts else np.zeros(d, np.float32)

    slot_words = {"s": OBJECTS, "p": tuple(ATTRS) + tuple(RELATIONS), "o": OBJECTS}
    table = {k: {w: vec(w) for w in ws} for k, ws in slot_words.items()}
    if centre:
        for vs in table.values():
            mean = np.mean(list(vs.values()), 0)
            for w, v in vs.items():
                c = v - mean
                vs[w] = (c / max(np.linalg.norm(c), 1e-8)).astype(np.float32)

    def slot(k, phrase):
        if phrase is None:
            return np.zeros(d, np.float32)
        return table[k][phrase] if phrase in table[k] else vec(phrase)

    return torch.tensor(
        np.stack([[slot("s", f.s), slot("p", f.p), slot("o", f.o)] for f in facts]), dtype=torch.float32
    )


def vocabulary() -> list[str]:
    """Every word a fact slot uses (objects, attributes, the relations' words)."""
    return sorted(set(OBJECTS) | set(ATTRS) | {w for r in RELATIONS for w in r.split()})


def facts_of(objects: int | None = None) -> list[Fact]:
    """Every fact, or those whose objects are among the first `objects` (Figure 4's stand-ins)."""
    facts = all_facts()
    if objects is None:
        return facts
    keep = set(OBJECTS[:objects])
    return [f for f in facts if f.s in keep and (f.o is None or f.o in keep)]


def fact_task(
    cfg: dict, words: dict[str, np.ndarray], objects: int | None = None, gloss: dict[str, np.ndarray] | None = None
) -> FactTask:
    """Training images with long-tailed counts, `test_per_fact` test images of every fact (seen
    in training or not), `dev_per_fact` dev images of every fact (Fashion-MNIST train[50000:]),
    and the facts' language views (of `gloss` too, where given: the GLOSS rows').
    `objects` keeps the facts of the first k objects (Figure 4)."""
    facts = facts_of(objects)
    counts = long_tail_counts(
        facts, cfg["train_images"], cfg.get("exponent", 1.0), cfg.get("unseen", 0.1), seed=cfg["seed"]
    )
    train_source = load_fashion_mnist("train")  # train and dev items: disjoint ranges of it
    train = make_fact_images(train_source, "train", facts, counts, cfg["seed"])
    test = make_fact_images(
        load_fashion_mnist("test"), "test", facts, np.full(len(facts), cfg["test_per_fact"]), cfg["seed"]
    )
    dev = (
        make_fact_images(train_source, "dev", facts, np.full(len(facts), cfg["dev_per_fact"]), cfg["seed"])
        if cfg.get("dev_per_fact")
        else None
    )
    orders = torch.tensor([f.order for f in facts])
    notes = {
        "facts": len(facts),
        "train images": int(counts.sum()),
        "test images": len(test),
        "unseen facts": int((counts == 0).sum()),
        "facts with <= 5 training images": int((counts <= 5).sum()),
    }
    languages = {GLOSS: slot_vectors(gloss, facts)} if gloss else {}
    return FactTask(facts, counts, train, test, dev, slot_vectors(words, facts), orders, notes, languages)
