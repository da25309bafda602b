"""DeViSE (Frome et al., 2013): a linear map M from a CNN's top-layer features into a fixed label
embedding space, trained with the hinge rank loss (Eq. 1); labels are predicted by nearness.

score "dot": s(image, label) = t_label . M v(image), t unit-norm (Section 3.3).
score "order" (beyond the paper; the future work of Vendrov et al.): labels are WordNet
order-embeddings, the image is embedded as |M v| and s = -E(|M v|, t_label): the image should
sit below its label in the order, like a hyponym below its hypernym.
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
