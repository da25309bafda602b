"""Sentence-pair models for entailment (Section 5 of Vendrov et al.). Each returns an energy per
pair, low = "the premise entails the hypothesis", so one dev-chosen threshold classifies them all.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from orderlib.encoders.sentence import PAD, GRUSentenceEncoder
from orderlib.penalties import cosine_distance, order_violation

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # p tokens, p lengths, h tokens, h lengths


class OrderEntailment(nn.Module):
    """E(f(p), f(h)) = ||max(0, f(h) - f(p))||^2 with f = |GRU| (Sections 5.1 and 4.2): the
    premise is the specific side, the hypothesis the general one."""

    loss_kind = "max_margin"

    def __init__(self, vocab_size: int, word_dim: int, dim: int):
        super().__init__()
        self.encoder = GRUSentenceEncoder(vocab_size, word_dim, dim, absolute=True)

    def forward(self, p, pl, h, hl) -> torch.Tensor:
        return order_violation(self.encoder(p, pl), self.encoder(h, hl))  # (B,)


class SymmetricEntailment(nn.Module):
    """Order-embeddings (symmetric): cosine distance between GRU states in place of E."""

    loss_kind = "max_margin"

    def __init__(self, vocab_size: int, word_dim: int, dim: int):
        super().__init__()
        self.encoder = GRUSentenceEncoder(vocab_size, word_dim, dim, absolute=False)

    def forward(self, p, pl, h, hl) -> torch.Tensor:
        return cosine_distance(self.encoder(p, pl), self.encoder(h, hl))  # (B,)


class FeatureClassifier(nn.Module):
    """Stand-in for the skip-thoughts row: an MLP on [u, v, |u - v|, u * v] of GRU states u, v,
    trained end to end with cross-entropy (no pretrained sentence vectors are used).
    The energy is -logit(entailment)."""

    loss_kind = "logistic"

    def __init__(self, vocab_size: int, word_dim: int, dim: int, hidden: int | None = None):
        super().__init__()
        self.encoder = GRUSentenceEncoder(vocab_size, word_dim, dim, absolute=False)
        hidden = hidden or dim
        self.mlp = nn.Sequential(nn.Linear(4 * dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, p, pl, h, hl) -> torch.Tensor:
        u, v = self.encoder(p, pl), self.encoder(h, hl)  # (B, D) each
        return -self.mlp(torch.cat([u, v, (u - v).abs(), u * v], -1)).squeeze(-1)  # (B,)


class BagOfWords(nn.Module):
    """Logistic regression on bag-of-words counts of the premise, the hypothesis, and the
    hypothesis words also in the premise. The energy is -logit(entailment)."""

    loss_kind = "logistic"

    def __init__(self, vocab_size: int, word_dim: int = 0, dim: int = 0):
        super().__init__()
        self.w = nn.ModuleDict({k: nn.Embedding(vocab_size, 1, padding_idx=PAD) for k in ("p", "h", "overlap")})
        for e in self.w.values():
            nn.init.zeros_(e.weight)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, p, pl, h, hl) -> torch.Tensor:
        in_premise = ((h[:, :, None] == p[:, None, :]) & (h[:, :, None] != PAD)).any(-1)  # (B, Th)
        logit = (
            self.w["p"](p).squeeze(-1).sum(1)
            + self.w["h"](h).squeeze(-1).sum(1)
            + (self.w["overlap"](h).squeeze(-1) * in_premise).sum(1)
            + self.bias
        )
        return -logit  # (B,)


ENTAILMENT_MODELS = {
    "order-embeddings": OrderEntailment,
    "order-embeddings (symmetric)": SymmetricEntailment,
    "GRU features + MLP": FeatureClassifier,
    "bag-of-words logistic regression": BagOfWords,
}


def build_entailment_model(name: str, vocab_size: int, word_dim: int, dim: int) -> nn.Module:
    if name not in ENTAILMENT_MODELS:
        raise ValueError(f"unknown model {name!r}; known: {list(ENTAILMENT_MODELS)}")
    return ENTAILMENT_MODELS[name](vocab_size, word_dim, dim)


def entailment_loss(model: nn.Module, energy: torch.Tensor, positive: torch.Tensor, margin: float) -> torch.Tensor:
    """Eq. (7) of Vendrov et al. for energy models, sum of E over positives plus sum of
    max(0, margin - E) over negatives, divided by the batch size; binary cross-entropy on
    logit = -energy for the classifiers."""
    if model.loss_kind == "logistic":
        return F.binary_cross_entropy_with_logits(-energy, positive.float())
    per_pair = torch.where(positive, energy, torch.clamp(margin - energy, min=0))
    return per_pair.mean()
