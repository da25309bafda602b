"""Image side of the joint embedding: f_i(i) = |W_i . CNN(i)| (Eq. 6 of Vendrov et al.)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class ImageProjection(nn.Module):
    """Project a frozen CNN feature (B, F) linearly to (B, D), L2-normalise (Section 4.4), then
    take |.| for order-embeddings, which live in the non-negative orthant."""

    def __init__(self, feature_dim: int, dim: int, absolute: bool = True, normalize: bool = True):
        super().__init__()
        self.linear = nn.Linear(feature_dim, dim)
        self.absolute, self.normalize = absolute, normalize

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = self.linear(features)  # (B, D)
        if self.normalize:
            x = F.normalize(x, dim=-1)
        return x.abs() if self.absolute else x
