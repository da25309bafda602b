"""Joint image-caption embeddings for retrieval (Section 4 of Vendrov et al.): an image
projection, a GRU caption encoder and the penalty that compares them."""

from __future__ import annotations

import torch
import torch.nn as nn

from orderlib.encoders.image import ImageProjection
from orderlib.encoders.sentence import GRUSentenceEncoder
from orderlib.penalties import cosine_distance_matrix, order_violation_matrix


def _order(images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
    return order_violation_matrix(images, captions)  # captions above images: E(image, caption)


def _order_reversed(images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
    return order_violation_matrix(captions, images).T  # images above captions: E(caption, image)


# penalty name -> (all-pairs penalty of (images (N, D), captions (M, D)) -> (N, M), embeddings >= 0?)
PENALTIES = {
    "order": (_order, True),
    "order-reversed": (_order_reversed, True),
    "cosine": (cosine_distance_matrix, False),
}


class JointEmbedding(nn.Module):
    """Images: |normalise(W . feature)|; captions: |normalise(GRU(words))| (no |.| for cosine).
    `penalty_matrix(images, captions)` is low for matching pairs: S(c, i) = -E of Section 4."""

    def __init__(self, penalty: str, vocab_size: int, feature_dim: int, word_dim: int = 300, dim: int = 1024):
        super().__init__()
        if penalty not in PENALTIES:
            raise ValueError(f"unknown penalty {penalty!r}; known: {list(PENALTIES)}")
        self.penalty = penalty
        fn, absolute = PENALTIES[penalty]
        self._matrix = fn
        self.images = ImageProjection(feature_dim, dim, absolute=absolute)
        self.captions = GRUSentenceEncoder(vocab_size, word_dim, dim, absolute=absolute, normalize=True)

    def penalty_matrix(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        """(N, M) penalties between embedded images (N, D) and embedded captions (M, D)."""
        return self._matrix(images, captions)

    def forward(self, features: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """In-batch (B, B) penalty matrix of B images and their B captions (true pairs on the diagonal)."""
        return self.penalty_matrix(self.images(features), self.captions(tokens, lengths))
