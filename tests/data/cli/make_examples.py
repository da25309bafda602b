"""Write the small example inputs of the `orderlib` command (docs/your_data.md), deterministically.

    .venv/bin/python tests/data/cli/make_examples.py [OUT_DIR]    # default: this folder

Synthetic, a few KB each: what `orderlib ... --help` runs and tests/test_cli_*.py read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# A small noun hierarchy (child, parent) with a diamond: dog and cat are both mammals and pets.
EDGES = [
    ("object", "entity"), ("abstraction", "entity"), ("animal", "object"), ("plant", "object"),
    ("artifact", "object"), ("mammal", "animal"), ("bird", "animal"), ("fish", "animal"), ("pet", "animal"),
    ("dog", "mammal"), ("dog", "pet"), ("cat", "mammal"), ("cat", "pet"), ("horse", "mammal"),
    ("puppy", "dog"), ("sparrow", "bird"), ("eagle", "bird"), ("salmon", "fish"), ("shark", "fish"),
    ("tree", "plant"), ("flower", "plant"), ("oak", "tree"), ("pine", "tree"), ("rose", "flower"),
    ("tulip", "flower"), ("tool", "artifact"), ("vehicle", "artifact"), ("hammer", "tool"), ("saw", "tool"),
    ("car", "vehicle"), ("bike", "vehicle"), ("idea", "abstraction"), ("number", "abstraction"),
]  # fmt: skip
SUBJECTS = ("dress", "bag", "shoe")
ATTRIBUTES = ("red", "large")


def retrieval(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """20 images (8-d, non-negative) and 5 captions each below them in the order, with noise;
    captions 7 and 12 are the same vector (a repeated caption: the tie rules differ)."""
    images = rng.uniform(0.0, 1.0, (20, 8))
    captions = np.repeat(images, 5, 0) * rng.uniform(0.7, 1.0, (100, 8)) + rng.normal(0, 0.12, (100, 8))
    captions = np.clip(captions, 0, None)
    captions[12] = captions[7]
    return {"retrieval_images.npy": images.astype(np.float32), "retrieval_captions.npy": captions.astype(np.float32)}


def _names_parents():
    names = list(dict.fromkeys(n for e in EDGES for n in e))
    parents = [[names.index(p) for c, p in EDGES if c == n] for n in names]
    return names, parents


def _ancestors(parents, i) -> set[int]:
    out = set()
    for p in parents[i]:
        out |= {p} | _ancestors(parents, p)
    return out


def hypernymy(rng: np.random.Generator) -> dict:
    """Order embeddings built by hand (each node above its parents on two of 8 coordinates, plus
    noise) and labelled pairs: closure positives and one-side corruptions."""
    names, parents = _names_parents()
    order = sorted(range(len(names)), key=lambda i: len(_ancestors(parents, i)))
    x = np.zeros((len(names), 8))
    for i in order:
        base = np.max([x[p] for p in parents[i]], 0) if parents[i] else np.zeros(8)
        step = np.zeros(8)
        step[rng.choice(8, 2, replace=False)] = rng.uniform(0.5, 1.5, 2)
        x[i] = base + step
    x = np.clip(x + rng.normal(0, 0.15, x.shape), 0, None)
    closure = [(i, a) for i in range(len(names)) for a in sorted(_ancestors(parents, i))]
    truth = set(closure)
    pick = rng.permutation(len(closure))[:32]
    lines = {}
    for split, idx in (("test", pick[:16]), ("dev", pick[16:])):
        rows = []
        for u, v in (closure[k] for k in idx):
            rows.append(f"{names[u]}\t{names[v]}\t1")
            while True:
                w = int(rng.integers(len(names)))
                neg = (w, v) if rng.random() < 0.5 else (u, w)
                if neg[0] != neg[1] and neg not in truth:
                    break
            rows.append(f"{names[neg[0]]}\t{names[neg[1]]}\t0")
        lines[f"hypernymy_{split}.tsv"] = "\n".join(rows) + "\n"
    return {
        "hypernymy_edges.tsv": "".join(f"{c}\t{p}\n" for c, p in EDGES),
        "hypernymy_embeddings.npz": {"names": np.asarray(names), "embeddings": x.astype(np.float32)},
        **lines,
    }


def compositional(rng: np.random.Generator) -> dict:
    """30 images scored against 12 (attribute, object) pairs, 8 of them seen in training (a bias
    towards seen pairs, as trained models have)."""
    seen = np.array([0, 1, 2, 4, 5, 7, 9, 10])
    labels = np.r_[rng.choice(seen, 16), rng.choice(np.setdiff1d(np.arange(12), seen), 14)]
    scores = rng.normal(0, 0.6, (30, 12))
    scores[np.arange(30), labels] += 1.0
    scores[:, seen] += 0.3
    return {
        "compositional_scores.npy": scores.astype(np.float32),
        "compositional_labels.txt": "".join(f"{v}\n" for v in labels),
        "compositional_seen.txt": "".join(f"{v}\n" for v in seen),
    }


def facts(rng: np.random.Generator) -> dict:
    """15 facts (<S>, <S,P>, <S,P,O>) and distances of 30 images to them: low for the image's fact
    and the lower-order facts it implies."""
    fs = [(1, s, "*", "*") for s in SUBJECTS]
    fs += [(2, s, p, "*") for s in SUBJECTS for p in ATTRIBUTES]
    fs += [(3, s, "left of", o) for s in SUBJECTS for o in SUBJECTS if o != s]
    labels = rng.integers(0, len(fs), 30)
    dist = rng.uniform(1.0, 3.0, (30, len(fs)))
    for i, f in enumerate(labels):
        order, s, p, _ = fs[f]
        for j, (o2, s2, p2, _) in enumerate(fs):
            implied = s2 == s and (o2 == 1 or (o2 == 2 and p2 == p and order == 2))
            if j == f or implied:
                dist[i, j] = rng.uniform(0.0, 1.2)
    return {
        "facts.tsv": "".join("\t".join(map(str, f)) + "\n" for f in fs),
        "facts_distances.npy": dist.astype(np.float32),
        "facts_labels.txt": "".join(f"{v}\n" for v in labels),
    }


def make(out: Path = HERE) -> list[Path]:
    """Write every example file into `out`; return their paths."""
    rng = np.random.default_rng(0)
    files = {**retrieval(rng), **hypernymy(rng), **compositional(rng), **facts(rng)}
    out.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = out / name
        if isinstance(content, str):
            path.write_text(content)
        elif isinstance(content, dict):
            np.savez(path, **content)
        else:
            np.save(path, content)
    return [out / n for n in files]


if __name__ == "__main__":
    for path in make(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(path)
