"""DeViSE (Frome et al., 2013): a linear map M from CNN features into a fixed label-embedding space,
trained with the hinge rank loss (Eq. 1); a label is predicted by nearness.

Score "dot": s = t_label . M v, t unit-norm (Section 3.3). Score "order" (beyond the paper): the
labels are WordNet order-embeddings and s = -E(|M v|, t_label), so an image sits below its label
as a hyponym sits below its hypernym.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from orderlib.encoders.cnn import ItemCNN
from orderlib.penalties import order_violation_matrix

SCORES = ("dot", "order")


class DeViSE(nn.Module):
    def __init__(self, cnn: ItemCNN, label_dim: int, score: str = "dot"):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"unknown score {score!r}; expected one of {SCORES}")
        self.cnn = cnn
        self.M = nn.Linear(cnn.channels, label_dim, bias=False)
        self.score = score

    def embed_features(self, features: torch.Tensor) -> torch.Tensor:
        v = self.M(features)  # (B, D)
        return v.abs() if self.score == "order" else v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed normalised images (B, 1, 28, 28) through the CNN and M."""
        return self.embed_features(self.cnn.features(x))

    def scores(self, embedded: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """(B, L) similarity of embedded images (B, D) to label vectors (L, D); high = better."""
        if self.score == "order":
            return -order_violation_matrix(embedded, labels)
        return embedded @ labels.T
