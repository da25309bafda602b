"""Joint image-caption embeddings for retrieval (Section 4 of Vendrov et al.): an image
projection, a GRU caption encoder and the penalty that compares them."""

from __future__ import annotations

import torch
import torch.nn as nn

from orderlib.encoders.image import ImageProjection
from orderlib.encoders.sentence import GRUSentenceEncoder
from orderlib.penalties import ENERGIES, MATRIX_ENERGIES


class JointEmbedding(nn.Module):
    """Images: |normalise(W . feature)|; captions: |normalise(GRU(words))| (no |.| for cosine).
    `penalty_matrix(images, captions)` is low for matching pairs: S(c, i) = -E of Section 4."""

    def __init__(self, penalty: str, vocab_size: int, feature_dim: int, word_dim: int = 300, dim: int = 1024):
        super().__init__()
        if penalty not in MATRIX_ENERGIES:
            raise ValueError(f"unknown penalty {penalty!r}; known: {list(MATRIX_ENERGIES)}")
        self.penalty = penalty
        e = ENERGIES[penalty]
        self._matrix = e.matrix
        self.images = ImageProjection(feature_dim, dim, absolute=e.nonnegative)
        self.captions = GRUSentenceEncoder(vocab_size, word_dim, dim, absolute=e.nonnegative, normalize=True)

    def penalty_matrix(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        """(N, M) penalties between embedded images (N, D) and embedded captions (M, D)."""
        return self._matrix(images, captions)

    def forward(self, features: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """In-batch (B, B) penalty matrix of B images and their B captions (true pairs on the diagonal)."""
        return self.penalty_matrix(self.images(features), self.captions(tokens, lengths))
