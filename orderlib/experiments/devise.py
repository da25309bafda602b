"""DeViSE (Frome et al., NIPS 2013) Tables 1-3 at Fashion-MNIST scale: presets and runner.

Their scale vs ours: ImageNet (1.2M images, 1,000 training labels, up to 21k zero-shot labels,
Wikipedia skip-gram) vs Fashion-MNIST (60k real images, 10 labels mapped to WordNet 3.0 synsets,
zero-shot label sets of hundreds to ~10k real WordNet noun synsets, GloVe 6B on Wikipedia + Gigaword
by default, and a skip-gram on WordNet's own glosses beside it). Label vectors exist for all 82,115
WordNet 3.0 noun synsets, so any of them can be a candidate label.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from orderlib.checkpoint import cached, code_version
from orderlib.concepts import HypernymyConfig, train_concept_model
from orderlib.data.fashion_mnist import CLASSES, SYNSETS, ensure_fashion_mnist, load_fashion_mnist
from orderlib.data.fashion_mnist import fingerprint as fmnist_fingerprint
from orderlib.data.hypernymy import make_splits
from orderlib.data.wordnet import NounGraph, ensure_wordnet, load_noun_graph, open_wordnet
from orderlib.encoders.cnn import CNNConfig, ItemCNN, to_input
from orderlib.encoders.skipgram import (
    NAMED_VECTORS,
    SkipGramConfig,
    definition_vectors,
    load_word_vectors,
    random_vectors,
    sense_vectors,
    train_skipgram,
    word_vectors_parameter,
    wordnet_corpus,
)
from orderlib.eval.hierarchy import hierarchical_precision, hit_at_k, hops_from, neighbours, ring_set
from orderlib.params import device, matmul, one_of
from orderlib.reports import git_commit, model_record
from orderlib.training.devise import DeViSEConfig, embed_images, rank_labels, train_devise
from orderlib.training.item_cnn import train_item_cnn

# Table 1 of Frome et al. (ILSVRC 2012 1K; hit@k in %, hp@k as fractions); 500-D rows for DeViSE and
# random embeddings (the paper also lists 1000-D).
PAPER_TABLE1 = {
    "softmax baseline": dict(
        zip(
            ["hit@1", "hit@2", "hit@5", "hit@10", "hp@2", "hp@5", "hp@10", "hp@20"],
            [55.6, 67.4, 78.5, 85.0, 0.452, 0.342, 0.313, 0.319],
        )
    ),
    "devise": dict(
        zip(
            ["hit@1", "hit@2", "hit@5", "hit@10", "hp@2", "hp@5", "hp@10", "hp@20"],
            [53.2, 65.2, 76.7, 83.3, 0.447, 0.352, 0.331, 0.341],
        )
    ),
    "random embeddings": dict(
        zip(
            ["hit@1", "hit@2", "hit@5", "hit@10", "hp@2", "hp@5", "hp@10", "hp@20"],
            [52.4, 63.9, 74.8, 80.6, 0.428, 0.315, 0.271, 0.248],
        )
    ),
    "chance": dict(
        zip(
            ["hit@1", "hit@2", "hit@5", "hit@10", "hp@2", "hp@5", "hp@10", "hp@20"],
            [0.1, 0.2, 0.5, 1.0, 0.007, 0.013, 0.022, 0.042],
        )
    ),
}
# Tables 2-3 (zero-shot, 500-D): our candidate set -> the paper's data set of the same construction.
_HIT = ["hit@1", "hit@2", "hit@5", "hit@10", "hit@20"]
_HP = ["hp@1", "hp@2", "hp@5", "hp@10", "hp@20"]
_PAPER_ZS = {
    ("2-hop", "devise-0"): ([6.0, 10.0, 18.1, 26.4, 36.4], [0.06, 0.152, 0.192, 0.217, 0.233], 1589),
    ("2-hop", "devise+seen"): ([0.8, 2.7, 7.9, 14.2, 22.7], [0.008, 0.204, 0.196, 0.201, 0.214], 2589),
    ("2-hop", "softmax baseline"): (None, [0, 0.236, 0.181, 0.174, 0.179], None),
    ("3-hop", "devise-0"): ([1.7, 2.9, 5.3, 8.2, 12.5], [0.017, 0.037, 0.191, 0.214, 0.236], 7860),
    ("3-hop", "devise+seen"): ([0.5, 1.4, 3.4, 5.9, 9.7], [0.005, 0.053, 0.192, 0.201, 0.214], 8860),
    ("3-hop", "softmax baseline"): (None, [0, 0.053, 0.157, 0.143, 0.130], None),
    ("all artifacts", "devise-0"): ([0.8, 1.4, 2.5, 3.9, 6.0], [0.008, 0.017, 0.072, 0.085, 0.096], 20841),
    ("all artifacts", "devise+seen"): ([0.3, 0.8, 1.9, 3.2, 5.3], [0.003, 0.025, 0.083, 0.092, 0.101], 21841),
    ("all artifacts", "softmax baseline"): (None, [0, 0.023, 0.071, 0.069, 0.065], None),
}


def _paper_zero_shot() -> dict:
    out = {}
    for (cset, method), (hits, hps, n) in _PAPER_ZS.items():
        name = f"{method} ({cset})"
        out.update({(name, m): v for m, v in zip(_HIT, hits or [])})
        out.update({(name, m): v for m, v in zip(_HP, hps)})
        if n:
            out[(name, "candidate labels")] = n
    # Table 4: hit@5 on a fixed 800/200 split, over the 200 unseen labels and over all 1000.
    out[("devise-0 (held-out only)", "hit@5")] = 31.8
    out[("devise+seen (held-out + seen)", "hit@5")] = 9.0
    return out


PAPER_ZEROSHOT = _paper_zero_shot()

UNSEEN = (4, 5, 6)  # Coat, Sandal, Shirt: each has relatives among the 7 seen classes
PRESETS = {
    "full": dict(
        seed=0,
        cnn=dict(epochs=8),
        skipgram=dict(dim=300, epochs=5),
        label_dim=300,
        devise=dict(epochs=10, finetune_epochs=2),
        order=dict(dim=50, epochs=10, patience=10),
        unseen=UNSEEN,
        hop_sets=(2, 3),
        top="artifact.n.01",
        items=50000,
        held_out=10000,  # train[50000:50000 + held_out]: where early stopping looks
        word_vectors="glove-6b-50d",  # the paper's kind: pretrained on a large corpus (None: gloss skip-gram)
    ),
    "small": dict(
        seed=0,
        cnn=dict(epochs=1),
        skipgram=dict(dim=50, epochs=1),
        label_dim=50,
        devise=dict(epochs=2, finetune_epochs=1),
        order=dict(dim=50, epochs=1, patience=1, train_fraction=0.2),
        unseen=UNSEEN,
        hop_sets=(2, 3),
        top="artifact.n.01",
        items=5000,
        held_out=2000,
        word_vectors="glove-6b-50d",
    ),
}

# Notebook parameters and their valid values (orderlib.params.validate).
PARAMETERS = {"PRESET": one_of(PRESETS), "MATMUL": matmul, "DEVICE": device, "WORD_VECTORS": word_vectors_parameter}


@dataclass
class LabelSpaces:
    """Label vectors for every WordNet 3.0 noun synset (rows follow graph.names)."""

    graph: NounGraph
    skipgram: np.ndarray  # (N, D) unit norm, from the skip-gram on WordNet glosses
    random: np.ndarray  # (N, D) unit norm, D of `text`
    order: np.ndarray  # (N, 50) >= 0, WordNet order-embedding
    classes: np.ndarray  # (10,) graph index of each Fashion-MNIST class
    notes: dict
    provenance: dict = field(default_factory=dict)  # trained label spaces -> reports.model_record
    pretrained: np.ndarray | None = None  # (N, D') unit norm, from cfg["word_vectors"] (sense_vectors)

    @property
    def text(self) -> np.ndarray:
        """The label vectors of the "devise" row: the pretrained ones where given, else the gloss skip-gram."""
        return self.skipgram if self.pretrained is None else self.pretrained


def label_spaces(cfg: dict, workdir: Path, device="cpu", progress: bool = True) -> LabelSpaces:
    """Label vectors from pretrained word vectors (cfg["word_vectors"]: a name of NAMED_VECTORS or a
    word2vec / GloVe file; `sense_vectors`), from a skip-gram on WordNet glosses, random unit vectors
    of the first's dimension, and a WordNet order-embedding of all nouns (each built once and cached
    in workdir)."""
    ensure_wordnet("3.0")
    graph = load_noun_graph("3.0")
    index = graph.index()
    built = set()  # what this call trained rather than loaded from workdir

    def build_skipgram():
        built.add("skipgram")
        t0 = time.perf_counter()
        wn = open_wordnet("3.0")
        corpus = wordnet_corpus(wn)
        wv = train_skipgram(corpus, SkipGramConfig(**cfg["skipgram"], seed=cfg["seed"]))
        counts = Counter(w for sentence in corpus for w in sentence)
        vec = definition_vectors(wv, [wn.synset(n) for n in graph.names], counts)
        return {
            "vectors": vec,
            "corpus_tokens": sum(map(len, corpus)),
            "vocabulary": len(wv.words),
            "seconds": time.perf_counter() - t0,
            "trained_at": git_commit(),
        }

    def from_file():
        wv = load_word_vectors(cfg["word_vectors"])
        wn = open_wordnet("3.0")
        vec = sense_vectors(wv, [wn.synset(n) for n in graph.names])
        return {"vectors": vec, "vocabulary": len(wv.words), "file": str(cfg["word_vectors"])}

    pre = None
    if cfg.get("word_vectors"):  # a named source or a user's pretrained word2vec / GloVe file
        path = Path(cfg["word_vectors"])
        stat = path.stat() if path.is_file() else None
        source = cfg["word_vectors"] if cfg["word_vectors"] in NAMED_VECTORS else path.resolve()  # a name, else a file
        pre_key = f"{graph.fingerprint}|{source}|{stat and (stat.st_size, stat.st_mtime_ns)}|{code_version(sense_vectors.__module__)}"
        pre = cached(Path(workdir) / "pretrained_labels.pt", pre_key, from_file)
    sg_key = (
        f"{graph.fingerprint}|{sorted(cfg['skipgram'].items())}|{cfg['seed']}|sif|"
        f"{code_version(train_skipgram.__module__, definition_vectors.__module__)}"
    )
    sg = cached(Path(workdir) / "skipgram_labels.pt", sg_key, build_skipgram)
    dim = (pre or sg)["vectors"].shape[1]
    rand = random_vectors((len(graph.names), dim), cfg["seed"])

    def build_order():
        built.add("order")
        data = make_splits(graph.parents, "clean", n_test=1000, n_dev=1000, seed=cfg["seed"])
        hc = HypernymyConfig(model="order-embeddings", seed=cfg["seed"], **cfg["order"])
        r = train_concept_model(data, hc, device, Path(workdir) / "order_labels_train.pt", progress)
        return {
            "vectors": r.model.emb.weight.detach().cpu().numpy(),
            "test_accuracy": r.test_accuracy,
            "seconds": r.seconds,
            "trained_at": git_commit(),
        }

    order = cached(
        Path(workdir) / "order_labels.pt",
        f"{graph.fingerprint}|{sorted(cfg['order'].items())}|{cfg['seed']}|{code_version('orderlib.concepts.train')}",
        build_order,
    )
    notes = {
        "text vectors": pre["file"] if pre else "skip-gram on WordNet 3.0 glosses and examples",
        "text vocabulary": (pre or sg)["vocabulary"],
        "gloss skip-gram corpus tokens": sg["corpus_tokens"],
        "order-embedding WordNet test accuracy (%)": order["test_accuracy"],
    }
    classes = np.array([index[s] for s in SYNSETS])
    trained = {"skip-gram label vectors": ("skipgram", sg), "order-embedding label vectors": ("order", order)}
    provenance = {
        name: model_record(v.get("seconds"), v.get("trained_at"), key not in built)
        for name, (key, v) in trained.items()
    }  # caches from before these were kept: unknown
    return LabelSpaces(graph, sg["vectors"], rand, order["vectors"], classes, notes, provenance, pre and pre["vectors"])


def held_out_items(cfg: dict, train) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST train[50000:] (images, labels), its first cfg["held_out"] where given: never
    trained on, where the CNN and DeViSE choose their epochs."""
    end = None if cfg.get("held_out") is None else 50000 + cfg["held_out"]
    return train.images[50000:end], train.labels[50000:end]


def train_cnn(cfg: dict, classes, workdir: Path, device="cpu", progress: bool = True) -> tuple[ItemCNN, list]:
    """The visual model: the item CNN on Fashion-MNIST train[0:items] of `classes` only."""
    train = load_fashion_mnist("train")
    k = cfg["items"]
    name = "cnn_all.pt" if len(classes) == len(CLASSES) else "cnn_seen.pt"
    return train_item_cnn(
        train.images[:k],
        train.labels[:k],
        *held_out_items(cfg, train),
        CNNConfig(**cfg["cnn"], seed=cfg["seed"], classes=tuple(classes)),
        device,
        Path(workdir) / name,
        progress,
    )


METHOD_SPACES = {  # method -> (LabelSpaces attribute, score)
    "devise": ("text", "dot"),
    "devise (gloss skip-gram labels)": ("skipgram", "dot"),  # where "devise" has pretrained vectors
    "random embeddings": ("random", "dot"),
    "devise (order-embedding labels)": ("order", "order"),
}
SHORT = {  # method -> its name in the zero-shot rows
    "devise (gloss skip-gram labels)": "devise, gloss skip-gram labels",
    "devise (order-embedding labels)": "devise, order-embedding labels",
}


def train_models(
    cfg: dict,
    spaces: LabelSpaces,
    seen,
    workdir: Path,
    device="cpu",
    progress: bool = True,
    methods=tuple(METHOD_SPACES),
) -> dict:
    """The CNN (softmax baseline) and one DeViSE model per label space, trained on `seen` classes
    (the gloss skip-gram's own row only where "devise" has pretrained vectors)."""
    cnn, cnn_history = train_cnn(cfg, seen, workdir, device, progress)
    train = load_fashion_mnist("train")
    k = cfg["items"]
    remap = {c: i for i, c in enumerate(seen)}

    def subset(images, labels):
        keep = np.isin(labels, seen)
        return images[keep], np.array([remap[int(l)] for l in labels[keep]])

    x, y = subset(train.images[:k], train.labels[:k])
    hx, hy = subset(*held_out_items(cfg, train))
    tag = "all" if len(seen) == len(CLASSES) else "seen"
    models = {"softmax baseline": cnn}
    histories = {"softmax baseline": cnn_history}
    for method in methods:
        if method == "devise (gloss skip-gram labels)" and spaces.pretrained is None:
            continue  # "devise" is that row
        space, score = METHOD_SPACES[method]
        vectors = getattr(spaces, space)[spaces.classes[list(seen)]]
        model, hist = train_devise(
            cnn,
            x,
            y,
            hx,
            hy,
            torch.as_tensor(vectors),
            DeViSEConfig(score=score, seed=cfg["seed"], **cfg["devise"]),
            device,
            Path(workdir) / f"devise_{tag}_{space}",
            progress,
        )
        models[method], histories[method] = model, hist
    return {"models": models, "histories": histories, "seen": list(seen)}


_IMAGE_SIDE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (versions, digest, image side)


def image_side(model, images) -> torch.Tensor:
    """A model's image side for uint8 `images`: an ItemCNN's logits (the softmax baseline), a DeViSE
    model's label-space embeddings. Kept for the last images each model saw, until its parameters
    change: Tables 2-4 rank the same images over many candidate sets. Held weakly: a model that is
    gone takes its entry with it (the seed spreads train many in one process)."""
    versions = tuple(p._version for p in model.parameters())
    digest = hashlib.sha1(np.ascontiguousarray(images).data).hexdigest()
    hit = _IMAGE_SIDE.get(model)
    if hit and hit[:2] == (versions, digest):
        return hit[2]
    if isinstance(model, ItemCNN):
        model.eval()
        with torch.no_grad():
            device = next(model.parameters()).device
            side = torch.cat([model(to_input(images[i : i + 1024], device)).cpu() for i in range(0, len(images), 1024)])
    else:
        side = embed_images(model, images)
    _IMAGE_SIDE[model] = (versions, digest, side)
    return side


def ranking(trained: dict, method: str, spaces: LabelSpaces, images, candidates: np.ndarray, k: int) -> np.ndarray:
    """(N, <= k) graph indices of each image's top labels by `method`, best first. The softmax
    baseline ranks the labels it was trained on, whatever the candidates."""
    model = trained["models"][method]
    side = image_side(model, images)
    if method == "softmax baseline":
        order = torch.sort(side, dim=1, descending=True, stable=True).indices[:, :k].numpy()
        return spaces.classes[trained["seen"]][order]  # (N, min(k, seen)) graph indices
    space, _ = METHOD_SPACES[method]
    vec = torch.as_tensor(getattr(spaces, space)[candidates])
    return candidates[rank_labels(model, side, vec, min(k, len(candidates)))]


def candidate_set_metrics(
    trained: dict,
    spaces: LabelSpaces,
    images,
    labels,
    candidates: np.ndarray,
    hit_ks=(1, 2, 5, 10),
    hp_ks=(2, 5, 10, 20),
) -> dict[str, dict]:
    """Metrics per method over one candidate label set (graph indices); labels are class indices.
    The softmax baseline's ring sets are built over the candidates plus its own labels, so that
    nearby predictions earn credit."""
    adj = _adjacency(spaces.graph)
    true = spaces.classes[labels]  # (N,) graph indices
    kmax = max(max(hit_ks), max(hp_ks))
    out = {}
    for method in trained["models"]:
        ranked = ranking(trained, method, spaces, images, candidates, kmax)
        cand = np.union1d(candidates, spaces.classes[trained["seen"]]) if method == "softmax baseline" else candidates
        out[method] = {**hit_at_k(ranked, true, hit_ks), **hierarchical_precision(ranked, true, cand, adj, hp_ks)}
    out["chance"] = chance(true, candidates, adj, hit_ks, hp_ks)
    return out


def label_name(spaces: LabelSpaces, i: int) -> str:
    """'gym_shoe.n.01' -> 'gym shoe'."""
    return spaces.graph.names[i].rsplit(".", 2)[0].replace("_", " ")


def nearest_synsets(spaces: LabelSpaces, cls: int, n: int = 5) -> list[str]:
    """The n noun synsets whose "devise" label vectors are nearest (cosine) to class cls's."""
    sims = spaces.text @ spaces.text[spaces.classes[cls]]
    return [label_name(spaces, int(i)) for i in np.argsort(-sims)[1 : n + 1]]


_ADJ: dict[str, list] = {}


def _adjacency(graph: NounGraph) -> list[list[int]]:
    if graph.fingerprint not in _ADJ:
        _ADJ[graph.fingerprint] = neighbours(graph.parents)
    return _ADJ[graph.fingerprint]


def chance(true: np.ndarray, candidates: np.ndarray, adj, hit_ks, hp_ks) -> dict[str, float]:
    """Expected metrics of a uniformly random ranking of the candidates: hit@k = k / L, hp@k =
    mean |ring set| / L (every candidate is equally likely in the top k)."""
    n = len(candidates)
    cand = set(int(c) for c in candidates)
    out = {f"hit@{k}": 100.0 * min(k, n) / n * float(np.isin(true, candidates).mean()) for k in hit_ks}
    for k in hp_ks:
        sizes = {t: len(ring_set(int(t), cand, k, adj)) for t in np.unique(true)}
        out[f"hp@{k}"] = float(np.mean([min(k, n) / n * sizes[t] / k for t in true]))
    return out


def zero_shot_sets(cfg: dict, spaces: LabelSpaces) -> dict[str, np.ndarray]:
    """Candidate label sets (graph indices) of increasing difficulty, each holding the held-out labels:
    held-out only; within h hops of the seen labels (seen labels themselves excluded); every noun
    synset under cfg["top"] except the seen labels."""
    adj = _adjacency(spaces.graph)
    seen = spaces.classes[[c for c in range(len(CLASSES)) if c not in cfg["unseen"]]]
    unseen = spaces.classes[list(cfg["unseen"])]
    sets = {"held-out only": np.sort(unseen)}
    for h in cfg["hop_sets"]:
        near = np.array(sorted(hops_from(seen, adj, h)))
        sets[f"{h}-hop"] = np.setdiff1d(np.union1d(near, unseen), seen)
    children = defaultdict(list)
    for c, ps in enumerate(spaces.graph.parents):
        for p in ps:
            children[p].append(c)
    top = spaces.graph.index()[cfg["top"]]
    below, stack = set(), [top]
    while stack:
        for v in children[stack.pop()]:
            if v not in below:
                below.add(v)
                stack.append(v)
    sets["all artifacts"] = np.setdiff1d(np.array(sorted(below)), seen)
    return sets


def long_rows(method_prefix: str, metrics: dict, paper: dict, extra: dict) -> list[dict]:
    return [
        dict(method=method_prefix, metric=m, paper=paper.get((method_prefix, m)), ours=v, **extra)
        for m, v in metrics.items()
    ]


def devise_table1(results: dict, n_labels: int) -> pd.DataFrame:
    rows = []
    for method, metrics in results.items():
        for m, v in metrics.items():
            rows.append(
                dict(
                    method=method,
                    metric=m,
                    paper=PAPER_TABLE1.get(method, {}).get(m),
                    ours=v,
                    candidate_labels=n_labels,
                )
            )
    return pd.DataFrame(rows)


def fingerprint(spaces: LabelSpaces) -> str:
    return hashlib.sha256((fmnist_fingerprint() + spaces.graph.fingerprint).encode()).hexdigest()


def source(word_vectors: str | None = None) -> str:
    _, src = ensure_fashion_mnist()
    text = NAMED_VECTORS[word_vectors][3] if word_vectors in NAMED_VECTORS else word_vectors
    return f"Fashion-MNIST ({src}); WordNet 3.0 nouns, glosses and examples" + (f"; {text}" if text else "")


def zero_shot_table(trained: dict, spaces: LabelSpaces, images, labels, sets: dict[str, np.ndarray]) -> pd.DataFrame:
    """Long table over candidate sets: for each set S, every model restricted to S ("-0") and the
    DeViSE models over S plus the seen labels ("+seen"), the softmax baseline and chance."""
    hit_ks, hp_ks = (1, 2, 5, 10, 20), (1, 2, 5, 10, 20)
    seen = spaces.classes[trained["seen"]]
    rows = []
    for name, cand in sets.items():
        plus = np.union1d(cand, seen)
        plus_name = "held-out + seen" if name == "held-out only" else name
        zero = candidate_set_metrics(trained, spaces, images, labels, cand, hit_ks, hp_ks)
        with_seen = candidate_set_metrics(trained, spaces, images, labels, plus, hit_ks, hp_ks)
        for method, metrics in zero.items():
            short = SHORT.get(method, method)
            if method == "softmax baseline":
                label, n = f"softmax baseline ({plus_name})", len(plus)
            else:
                label, n = f"{short}-0 ({name})", len(cand)
            rows += long_rows(label, {**metrics, "candidate labels": n}, PAPER_ZEROSHOT, {"candidate_set": name})
        for method, metrics in with_seen.items():
            if method in ("softmax baseline",):
                continue
            short = SHORT.get(method, method)
            label = f"{short}+seen ({plus_name})"
            rows += long_rows(
                label, {**metrics, "candidate labels": len(plus)}, PAPER_ZEROSHOT, {"candidate_set": plus_name}
            )
    return pd.DataFrame(rows)


def error_profile(
    trained: dict, spaces: LabelSpaces, images, labels, candidates: np.ndarray, methods=("devise", "softmax baseline")
) -> pd.DataFrame:
    """For each true class and method: the most frequent top-1 labels, and how far (WordNet hops,
    hypernym and hyponym edges) the top-1 label lies from the true one, against the mean distance
    of all candidates (a random guess)."""
    adj = _adjacency(spaces.graph)
    rows = []
    for c in np.unique(labels):
        true = int(spaces.classes[c])
        dist = hops_from([true], adj, 30)
        guess = float(np.mean([dist.get(int(x), 31) for x in candidates]))
        for method in methods:
            top = ranking(trained, method, spaces, images[labels == c], candidates, 1)[:, 0]
            names, counts = np.unique(top, return_counts=True)
            common = sorted(zip(counts, names), reverse=True)[:3]
            rows.append(
                {
                    "class": CLASSES[c],
                    "method": method,
                    "top-1 labels (% of images)": ", ".join(
                        f"{label_name(spaces, int(n))} ({100 * k / len(top):.0f})" for k, n in common
                    ),
                    "hops top-1 -> truth": float(np.mean([dist.get(int(x), 31) for x in top])),
                    "hops, random guess": guess,
                }
            )
    return pd.DataFrame(rows)


def model_records(trained: dict, spaces: LabelSpaces) -> dict[str, dict]:
    """Every model a DeViSE table rests on (the label spaces, the CNN, each DeViSE model, their
    stages summed): reports.model_record each, for the .meta.json's `training` block."""
    return {**spaces.provenance, **{m: model.provenance for m, model in trained["models"].items()}}
