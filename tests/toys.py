"""Toy data shared by several test files: entailment pairs and retrieval splits small enough to
train on in a second, with a signal the models learn."""

import numpy as np
import torch

from orderlib.data.entailment import PairSet

WORDS = ["dog", "cat", "bird", "runs", "sleeps", "sings", "big", "small", "red", "blue"]
COLOURS, SHAPES = ["red", "green", "blue", "black"], ["ball", "box", "cup", "hat", "pen"]


def toy_pairs(n: int, seed: int) -> PairSet:
    """Premise = 'adj noun verb'; hypothesis = 'noun verb' (entailed) or a changed verb/noun."""
    rng = np.random.default_rng(seed)
    prem, hyp, lab = [], [], []
    for _ in range(n):
        noun, verb, adj = rng.choice(WORDS[:3]), rng.choice(WORDS[3:6]), rng.choice(WORDS[6:])
        prem.append(f"the {adj} {noun} {verb}")
        kind = rng.integers(3)
        if kind == 0:
            hyp.append(f"the {noun} {verb}")
        else:
            other = rng.choice([v for v in WORDS[3:6] if v != verb])
            hyp.append(f"the {noun} {other}")
        lab.append(int(kind))
    return PairSet(prem, hyp, np.array(lab, dtype=np.int8), "toy")


def toy_split(n, seed):
    """Image = one-hot colour + one-hot shape + noise; captions say the colour, the shape, or both."""
    rng = np.random.default_rng(seed)
    c, s = rng.integers(4, size=n), rng.integers(5, size=n)
    feats = np.zeros((n, 9), np.float32)
    feats[np.arange(n), c] = 1
    feats[np.arange(n), 4 + s] = 1
    feats += 0.05 * rng.standard_normal(feats.shape).astype(np.float32)
    caps = []
    for ci, si in zip(c, s):
        caps += [[COLOURS[ci]], [SHAPES[si]], [COLOURS[ci], SHAPES[si]], ["a", COLOURS[ci], SHAPES[si]], ["a", "thing"]]
    return torch.as_tensor(feats), caps
