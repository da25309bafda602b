"""An attribute-object data set under one pair split (Utama's Tables 1-3; docs/utama.md): features and
labels per split, the seen pairs and the unseen val / test pairs, and the two protocols' candidates."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from orderlib.checkpoint import fingerprint


@dataclass
class AttributeTask:
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


def pair_index(labels: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Row of each label (N, 2) in pairs (P, 2); -1 where absent."""
    lookup = {tuple(p): i for i, p in enumerate(pairs.tolist())}
    return np.array([lookup.get(tuple(l), -1) for l in labels.tolist()], np.int64)


def unseen_test(task: AttributeTask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The closed world: indices of the test images of unseen test pairs, those pairs (P, 2), and
    each image's pair among them."""
    closed = task.pairs["test_unseen"]
    where = pair_index(task.labels["test"], closed)
    test_un = np.flatnonzero(where >= 0)
    return test_un, closed, where[test_un]
