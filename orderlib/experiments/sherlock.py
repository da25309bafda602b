"""Sherlock (Elhoseiny et al., AAAI 2017) on Fashion-MNIST Facts: presets, data, language views,
every method of Tables 1, 4 and 5 and Figures 4 and 7 (notebook 09).

Their data vs ours: the large-scale set (202k facts, 814k web images, GloVe 840B, VGG-16 from
ImageNet) vs Fashion-MNIST Facts (810 facts over 10 objects, 20 attributes and 6 relations,
long-tailed training counts, real Fashion-MNIST items; the CNN pre-trained on plain items for
Utama's notebook; GloVe 6B 50-d vectors from Wikipedia + Gigaword, and a skip-gram on WordNet's
text beside them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from orderlib.data.attributes import ATTRS, OBJECTS
from orderlib.data.facts import (
    RELATIONS,
    VERSION,
    Fact,
    all_facts,
    generalisation_cases,
    implies,
    long_tail_counts,
    make_fact_images,
)
from orderlib.data.fashion_mnist import load_fashion_mnist
from orderlib.eval.facts import (  # noqa: F401
    IMPLIED,
    PROTOCOLS,
    STRICT,
    average_precision,
    fact_map,
    fact_scores,
    fact_topk,
    flexible_relevance,
    implied_chance,
    implied_hits,
    implied_topk,
    implied_truth,
    slot_scores,
)
from orderlib.params import device, matmul, one_of, workers
from orderlib.params import word_vectors as word_vectors_param
from orderlib.reports import model_record
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
    "WORD_VECTORS": word_vectors_param,
    "WORKERS": workers,
}

# Sherlock's Table 4, large-scale row: K1 / K5 / K10 (%) and mAP100 (%).
PAPER_TABLE4 = {
    "SEM-A": (16.39, 17.62, 18.41, 0.96),
    "SEM-B": (13.27, 14.19, 14.80, 0.73),
    "MV CCA": (12.28, 12.84, 13.15, 1.0),
    "ESZSL": (5.80, 5.84, 5.86, 0.4),
    "order-embeddings (symm.), caption-trained": (3.48, 3.48, 3.5, 0.021),
    "order-embeddings (symm.), retrained on facts": (5.87, 6.06, 6.15, 0.29),
}
# Table 5 (K10, SPO facts with <= 5 training images): case -> {method: K10}, and the number of facts.
PAPER_TABLE5 = {
    "SP, O": (
        {
            "SEM-A": 2.063,
            "SEM-B": 1.751,
            "ESZSL": 0.149,
            "order-embeddings (symm.), caption-trained": 0.013,
            "order-embeddings (symm.), retrained on facts": 0.367,
            "MV CCA": 1.221,
        },
        10605,
    ),
    "SO, P": (
        {
            "SEM-A": 3.022,
            "SEM-B": 1.961,
            "ESZSL": 0.098,
            "order-embeddings (symm.), caption-trained": 0.025,
            "order-embeddings (symm.), retrained on facts": 0.473,
            "MV CCA": 1.462,
        },
        4842,
    ),
    "SO, PO": (
        {
            "SEM-A": 3.092,
            "SEM-B": 1.645,
            "ESZSL": 0.041,
            "order-embeddings (symm.), caption-trained": 0.000,
            "order-embeddings (symm.), retrained on facts": 0.543,
            "MV CCA": 1.786,
        },
        1755,
    ),
    "SO, SP": (
        {
            "SEM-A": 2.962,
            "SEM-B": 2.097,
            "ESZSL": 0.038,
            "order-embeddings (symm.), caption-trained": 0.013,
            "order-embeddings (symm.), retrained on facts": 0.586,
            "MV CCA": 1.109,
        },
        3133,
    ),
}
PAPER_STRUCTURE_ABLATION_K1 = 8.1  # "averaged S, P and O parts" (vs SEM-A's 16.39)


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


ALL, SAME_ORDER = "all facts", "facts of the image's order"


def same_order(dist: torch.Tensor, task: FactTask) -> torch.Tensor:
    """dist (test images, facts) with facts of another order than the image's fact set to +inf:
    image -> fact retrieval when the fact type is given (a diagnostic beyond the paper)."""
    img_order = task.orders[torch.as_tensor(task.test.fact)]
    return dist.masked_fill(img_order[:, None] != task.orders[None, :], float("inf"))


DOT_SCORED = ("ESZSL",)  # methods whose "distance" is minus a compatibility score, not a distance


def implied_scores(method: str, dist: torch.Tensor) -> torch.Tensor:
    """(N, F) `implied` scores (high = match) of a method's (test images, facts) distances: the v2
    script's per-fact `euc` (eval.facts.fact_scores) of the distance taken as squared (the SEM rows'
    is the squared Euclidean distance over the fact's own slots; CCA's and the symmetric caption
    model's 1 - cos is half a squared distance between unit vectors; order violations are squared
    norms); ESZSL (minus its bilinear compatibility) keeps the script's `dot`."""
    d = torch.as_tensor(dist, dtype=torch.float64)
    return -d if method in DOT_SCORED else fact_scores(d)


@dataclass
class Protocol:
    """One protocol's view of a method's distances: scores (high = match), each image's true facts
    (N, F) and each fact's relevant images (F, N)."""

    name: str
    scores: torch.Tensor
    truth: torch.Tensor
    relevant: torch.Tensor

    def typed(self, task: FactTask) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and truth with the facts of another order than the image's fact left out."""
        other = task.orders[torch.as_tensor(task.test.fact)][:, None] != task.orders[None, :]
        return self.scores.masked_fill(other, -float("inf")), self.truth & ~other

    def topk(self, scores: torch.Tensor, truth: torch.Tensor, target: torch.Tensor, ks=(1, 5, 10)) -> dict:
        """K@k: the project's top-k (strict) or the v2 script's rule over the true facts (implied)."""
        return fact_topk(-scores, target, ks) if self.name == STRICT else implied_topk(scores, truth, ks)

    def map(self, qf: torch.Tensor, top: int | None = None) -> float:
        return fact_map(-self.scores[:, qf].T, None, None, top, relevant=self.relevant[qf])


def protocols(method: str, dist: torch.Tensor, task: FactTask, names=PROTOCOLS) -> list[Protocol]:
    """The `strict` (GetSherlockResults.m) and `implied` (GetSherlockResults_notharsh_v2.m) views."""
    img_fact = torch.as_tensor(task.test.fact)
    dist = torch.as_tensor(dist)
    out = []
    for name in names:
        if name == STRICT:
            own = torch.nn.functional.one_hot(img_fact, len(task.facts)).bool()  # (N, F)
            out.append(Protocol(STRICT, -dist, own, own.T))
        else:
            imp = implies(task.facts)
            out.append(
                Protocol(
                    IMPLIED,
                    implied_scores(method, dist),
                    implied_truth(imp, img_fact),
                    flexible_relevance(imp, img_fact, torch.arange(len(task.facts))),
                )
            )
    return out


def retrieval_rows(
    method: str, dist: torch.Tensor, task: FactTask, paper: dict = PAPER_TABLE4, names=PROTOCOLS
) -> list[dict]:
    """Table 4 rows of one method from its (test images, facts) distances, per protocol: image ->
    fact K1/5/10 among all facts (the paper) and among the facts of the image's order, and fact ->
    image mAP / mAP@100 (calcAP.m's), overall and per fact order. The `strict` rows use the
    distances as they are (the project's ties); the paper's values stand beside both protocols."""
    img_fact = torch.as_tensor(task.test.fact)
    paper_values = dict(zip(("K1", "K5", "K10", "mAP@100"), paper.get(method, (None,) * 4)))  # the "all" scope's
    rows = []
    for p in protocols(method, dist, task, names):
        typed_scores, typed_truth = p.typed(task)
        ap = {top: average_precision(-p.scores.T, p.relevant, top) for top in (None, 100)}  # (F,) each, once
        if p.name == IMPLIED:  # per-image credit, once for every image; a scope averages its images'
            hits = {
                c: implied_hits(s, t)
                for c, (s, t) in ((ALL, (p.scores, p.truth)), (SAME_ORDER, (typed_scores, typed_truth)))
            }
        for scope, sel in (
            ("all", torch.ones(len(img_fact), dtype=torch.bool)),
            *[(f"order {k}", task.orders[img_fact] == k) for k in (1, 2, 3)],
        ):
            qf = torch.unique(img_fact[sel]).numpy()

            def topk(candidates, s, t):
                if p.name == STRICT:
                    return p.topk(s[sel], t[sel], img_fact[sel])
                return {f"K{k}": 100.0 * float(np.nanmean(h[sel].numpy())) for k, h in hits[candidates].items()}

            metrics = {
                **topk(ALL, p.scores, p.truth),
                "mAP": 100.0 * float(np.nanmean(ap[None][qf])),
                "mAP@100": 100.0 * float(np.nanmean(ap[100][qf])),
            }
            rows += [
                dict(
                    method=method,
                    protocol=p.name,
                    scope=scope,
                    candidates=ALL,
                    metric=metric,
                    paper=paper_values.get(metric) if scope == "all" else None,
                    ours=value,
                )
                for metric, value in metrics.items()
            ]
            rows += [
                dict(
                    method=method,
                    protocol=p.name,
                    scope=scope,
                    candidates=SAME_ORDER,
                    metric=metric,
                    paper=None,
                    ours=value,
                )
                for metric, value in topk(SAME_ORDER, typed_scores, typed_truth).items()
            ]
    return rows


def chance_rows(task: FactTask) -> list[dict]:
    """Chance: k / number of candidate facts for K@k (all facts; facts of the image's order); under
    `implied`, among all facts, the expected v2 credit of random scores (eval.facts.implied_chance)."""
    img_fact = torch.as_tensor(task.test.fact)
    img_order = task.orders[img_fact]
    n_typed = torch.bincount(task.orders, minlength=4)[img_order].double()  # (N,) candidates of each image
    n_true = implied_truth(implies(task.facts), img_fact).sum(1).numpy()
    rows = []
    for protocol in PROTOCOLS:
        for k in (1, 5, 10):
            k_all = (
                100.0 * min(k, len(task.facts)) / len(task.facts)
                if protocol == STRICT
                else implied_chance(n_true, len(task.facts), k)
            )
            rows.append(
                dict(
                    method="chance",
                    protocol=protocol,
                    scope="all",
                    candidates=ALL,
                    metric=f"K{k}",
                    paper=None,
                    ours=k_all,
                )
            )
            rows.append(
                dict(
                    method="chance",
                    protocol=protocol,
                    scope="all",
                    candidates=SAME_ORDER,
                    metric=f"K{k}",
                    paper=None,
                    ours=100.0 * float((k / n_typed).clamp(max=1).mean()),
                )
            )
    return rows


def generalisation_rows(method: str, dist: torch.Tensor, task: FactTask, cases: dict | None = None) -> list[dict]:
    """Table 5: K10 over test images of the few-example SPO facts of each case, among all facts
    (the paper) and among the SPO facts, per protocol."""
    cases = cases if cases is not None else generalisation_cases(task.facts, task.train_counts)
    img_fact = np.asarray(task.test.fact)
    rows = []
    for p in protocols(method, dist, task):
        typed = p.typed(task)
        for case, fact_ids in cases.items():
            paper_k10, paper_facts = PAPER_TABLE5.get(case, ({}, None))
            sel = torch.as_tensor(np.isin(img_fact, fact_ids))
            target = torch.as_tensor(img_fact)[sel]
            for candidates, (s, t) in ((ALL, (p.scores, p.truth)), (SAME_ORDER, typed)):
                value = p.topk(s[sel], t[sel], target, ks=(10,))["K10"] if bool(sel.any()) else float("nan")
                rows.append(
                    dict(
                        method=method,
                        protocol=p.name,
                        case=case,
                        candidates=candidates,
                        metric="K10",
                        paper=paper_k10.get(method) if candidates == ALL else None,
                        ours=value,
                    )
                )
            rows.append(
                dict(
                    method=method,
                    protocol=p.name,
                    case=case,
                    candidates="",
                    metric="facts",
                    paper=paper_facts,
                    ours=float(len(fact_ids)),
                )
            )
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

PAPER_TABLE4["SEM-A, S/P/O averaged (ablation)"] = (PAPER_STRUCTURE_ABLATION_K1, None, None, None)
# Sherlock's Table 1 on 6DS (186 facts, the largest of its Table 1 sets): (i2f top-1, f2i mAP).
PAPER_TABLE1 = {
    ("order-embeddings (symm.)", "captions"): (15.71, 9.37),
    ("order-embeddings (symm.)", "fact phrases"): (26.13, 26.17),
    ("order-embeddings", "captions"): (12.56, 10.21),
    ("order-embeddings", "fact phrases"): (31.57, 35.23),
}
GLOSS = "gloss skip-gram"  # the word vectors a SEM row may name instead of WORD_VECTORS' (its "vectors")
SEM_ROWS = {  # method -> SEMConfig fields, and "vectors": the language view it regresses (none: task.language)
    "SEM-A": dict(branched=True),
    "SEM-B": dict(branched=False),
    "SEM-A, S/P/O averaged (ablation)": dict(branched=True, average=True),
    "structured order-embedding (SEM-A)": dict(branched=True, objective="order"),
    "SEM-A, gloss skip-gram vectors": dict(branched=True, vectors=GLOSS),
}
CAPTION_METHODS = ("order-embeddings", "order-embeddings (symm.)")  # Vendrov et al.'s model; Kiros et al.'s (TACL15)
TRAININGS = {"captions": "caption-trained", "fact phrases": "retrained on facts"}


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
    from orderlib.experiments import utama

    if not cfg.get("word_vectors"):
        return None
    skipgram = {**base_config(cfg), "word_vectors": None}
    return dict(zip(vocabulary(), utama.token_vectors(skipgram, vocabulary(), workdir)))


def word_notes(cfg: dict) -> dict:
    """Which word vectors the rows regress, for the reports' provenance."""
    from orderlib.experiments import utama

    notes = {"text vectors": utama.vector_note(cfg.get("word_vectors"), tokens=True)}
    if cfg.get("word_vectors"):
        notes["SEM-A, gloss skip-gram vectors"] = utama.vector_note(None, tokens=True)
    return notes


def pretrained(cfg: dict, workdir, device="cpu", progress: bool = True):
    """(CNN pre-trained on plain items, its history, {word: vector}): shared with notebook 08."""
    from orderlib.experiments import utama

    ucfg = base_config(cfg)
    cnn, history = utama.pretrain_cnn(ucfg, workdir, device, progress)
    words = dict(zip(vocabulary(), utama.token_vectors(ucfg, vocabulary(), workdir)))
    return cnn, history, words


def fact_data(cfg: dict, words: dict, cnn, objects: int | None = None, gloss: dict | None = None) -> FactData:
    task = fact_task(cfg, words, objects, gloss)
    images = {s: getattr(task, s).render() for s in ("train", "dev", "test")}
    return FactData(task, images, {s: frozen_features(cnn, x) for s, x in images.items()})


def _slug(method: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in method.lower())


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
            workdir / f"{_slug(method)}_{len(task.facts)}{suffix}.pt",
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
    return {m: {"dist": d} for m, d in dists.items()}


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
            rd, rcfg, device, workdir / f"retrained_{_slug(m)}_{len(task.facts)}.pt", progress, m
        )
        if m in here:  # trained by a worker in this run: loaded here, not resumed
            res.resumed = here[m]["resumed"]
        out[f"{m}, retrained on facts"] = {
            "dist": phrase_distances(res.model, data.features["test"], task.facts, rd.vocab),
            "fit": res,
        }
    return out


def table1(results: dict, task: FactTask) -> pd.DataFrame:
    """Sherlock's Table 1: the caption models caption-trained vs retrained on facts; i2f top-1
    among all facts, f2i mAP, per protocol; the paper's column: 6DS."""
    img_fact = torch.as_tensor(task.test.fact)
    rows = []
    for m in CAPTION_METHODS:
        for training, suffix in TRAININGS.items():
            method = f"{m}, {suffix}"
            paper = PAPER_TABLE1[(m, training)]
            for p in protocols(method, results[method]["dist"], task):
                values = (p.topk(p.scores, p.truth, img_fact, ks=(1,))["K1"], p.map(torch.unique(img_fact)))
                rows += [
                    dict(method=m, protocol=p.name, training=training, metric=metric, paper=pv, ours=v)
                    for metric, pv, v in zip(("i2f top-1", "f2i mAP"), paper, values)
                ]
    return pd.DataFrame(rows)


def table4(results: dict, task: FactTask) -> pd.DataFrame:
    rows = [r for m, res in results.items() for r in retrieval_rows(m, res["dist"], task)]
    return pd.DataFrame(rows + chance_rows(task))


def scoring_rows(
    results: dict, data: FactData, methods=("SEM-A", "SEM-B"), metrics=("euc", "cos", "dot")
) -> pd.DataFrame:
    """The v2 script's three scorings (GetX_Scores.m: euc, cos, dot) of the SEM rows' slot
    embeddings, each fact compared on its own slots (eval.facts.slot_scores, in blocks of images),
    under the `implied` protocol: image -> fact K1/5/10 among all facts, fact -> image mAP / mAP@100.
    Table 4's `implied` rows use `euc`."""
    from orderlib.training.sherlock import embed_images

    task = data.task
    img_fact = torch.as_tensor(task.test.fact)
    truth = implied_truth(implies(task.facts), img_fact)
    qf = torch.unique(img_fact)
    rows = []
    for m in methods:
        with torch.no_grad():
            v = embed_images(results[m]["model"], data.images["test"])  # (N, 3, d)
        for metric in metrics:
            s = slot_scores(v, task.language, task.orders, metric)
            q = -s[:, qf].T
            values = {
                **implied_topk(s, truth),
                "mAP": fact_map(q, None, None, relevant=truth.T[qf]),
                "mAP@100": fact_map(q, None, None, 100, relevant=truth.T[qf]),
            }
            rows += [dict(method=m, protocol=IMPLIED, scoring=metric, metric=k, ours=x) for k, x in values.items()]
    return pd.DataFrame(rows)


def table5(results: dict, task: FactTask) -> pd.DataFrame:
    """Table 5's four cases plus the SPO facts never seen in training (beyond the paper)."""
    cases = generalisation_cases(task.facts, task.train_counts)
    cases["unseen SPO facts"] = np.flatnonzero((task.orders.numpy() == 3) & (task.train_counts == 0))
    return pd.DataFrame([r for m, res in results.items() for r in generalisation_rows(m, res["dist"], task, cases)])


FIG7_BINS = ((0, 0), (1, 1), (2, 5), (6, 15), (16, 50), (51, None))


def images_per_fact_curve(results: dict, task: FactTask, bins=FIG7_BINS) -> pd.DataFrame:
    """Figure 7: K10 (all facts) of test images of SPO facts by the fact's training images, per protocol."""
    img_fact = np.asarray(task.test.fact)
    n = task.train_counts[img_fact]
    spo = task.orders.numpy()[img_fact] == 3
    views = {m: protocols(m, res["dist"], task) for m, res in results.items()}
    rows = []
    for protocol in PROTOCOLS:
        for lo, hi in bins:
            sel = spo & (n >= lo) & (n <= (hi if hi is not None else np.inf))
            label = f"{lo}" if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
            s = torch.as_tensor(sel)
            for m in results:
                p = next(v for v in views[m] if v.name == protocol)
                value = (
                    p.topk(p.scores[s], p.truth[s], torch.as_tensor(img_fact[sel]), ks=(10,))["K10"]
                    if sel.any()
                    else np.nan
                )
                rows.append(
                    dict(
                        bin=label,
                        facts=len(np.unique(img_fact[sel])),
                        images=int(sel.sum()),
                        method=m,
                        protocol=protocol,
                        K10=value,
                    )
                )
    return pd.DataFrame(rows)


def scale_point(results: dict, task: FactTask) -> list[dict]:
    """One Figure 4 point per method and protocol: K1 among all facts and among the image's order."""
    img_fact = torch.as_tensor(task.test.fact)
    points = []
    for m, res in results.items():
        for p in protocols(m, res["dist"], task):
            for c, (s, t) in ((ALL, (p.scores, p.truth)), (SAME_ORDER, p.typed(task))):
                points.append(
                    dict(
                        facts=len(task.facts),
                        method=m,
                        protocol=p.name,
                        candidates=c,
                        K1=p.topk(s, t, img_fact, ks=(1,))["K1"],
                    )
                )
    return points


def examples(dist: torch.Tensor, task: FactTask, n_images: int = 6, n_facts: int = 3, k: int = 5, seed: int = 0):
    """Image -> fact: (test image, its fact, top-k facts) for images of every order; fact ->
    image: (fact, top-k test images, which are relevant) for SPO facts seen in training."""
    rng = np.random.default_rng(seed)
    img_fact = np.asarray(task.test.fact)
    orders = task.orders.numpy()
    picks = np.concatenate(
        [rng.choice(np.flatnonzero(orders[img_fact] == o), n_images // 3, replace=False) for o in (1, 2, 3)]
    )
    i2f = [
        (int(i), str(task.facts[img_fact[i]]), [str(task.facts[j]) for j in dist[i].argsort()[:k].tolist()])
        for i in picks
    ]
    seen_spo = np.flatnonzero((orders == 3) & (task.train_counts > 0))
    f2i = []
    for f in rng.choice(seen_spo, n_facts, replace=False):
        ranked = dist[:, f].argsort()[:k].tolist()
        f2i.append((str(task.facts[f]), ranked, [bool(img_fact[i] == f) for i in ranked]))
    return i2f, f2i


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
