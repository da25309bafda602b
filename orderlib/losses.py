"""Losses over penalties: inputs are energies (low = the pair holds), shape (B,)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def max_margin(e_pos: torch.Tensor, e_neg: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Return mean E(pos) + mean max(0, margin - E(neg)) (Eq. 4 of Vendrov et al., batch means)."""
    return e_pos.mean() + torch.clamp(margin - e_neg, min=0).mean()


def ranking_hinge(e_pos: torch.Tensor, e_neg: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Return mean max(0, margin + E(pos) - E(neg)) over aligned (pos, corrupted) pairs.

    The contrastive max-margin of Socher et al. (2013) and word2gauss; it needs no zero-energy
    anchor, so it fits signed scores (bilinear) and unbounded energies (KL).
    """
    return torch.clamp(margin + e_pos - e_neg, min=0).mean()


def contrastive(e: torch.Tensor, margin: float, max_violation: bool = False) -> torch.Tensor:
    """Return the in-batch contrastive hinge over an all-pairs penalty matrix e (B, B), where
    e[i, j] = E(image i, caption j) and the diagonal holds the true pairs.

    Sum of hinges (Eq. 5 of Vendrov et al., with S = -E): sum over i != j of
    max(0, margin + e[i, i] - e[i, j]) (contrastive captions) + max(0, margin + e[j, j] - e[i, j])
    (contrastive images). max_violation=True keeps only the hardest negative of each positive in
    each direction (VSE++, Faghri et al.). Summed over the batch, as both papers' code does.
    """
    if e.dim() != 2 or e.shape[0] != e.shape[1]:
        raise ValueError(f"expected a square (B, B) penalty matrix, got {tuple(e.shape)}")
    pos = e.diagonal()  # (B,)
    off = ~torch.eye(e.shape[0], dtype=torch.bool, device=e.device)  # (B, B) negatives
    cost_cap = torch.clamp(margin + pos[:, None] - e, min=0) * off  # (B, B): image i vs caption j
    cost_im = torch.clamp(margin + pos[None, :] - e, min=0) * off  # (B, B): caption j vs image i
    if max_violation:
        return cost_cap.max(1).values.sum() + cost_im.max(0).values.sum()
    return cost_cap.sum() + cost_im.sum()


def info_nce(e: torch.Tensor, temperature: float) -> torch.Tensor:
    """Return the symmetric InfoNCE (CLIP-style) loss over a (B, B) penalty matrix with true pairs
    on the diagonal: cross-entropy of logits -e / temperature over captions for each image and
    over images for each caption, averaged over the two directions and the batch."""
    if e.dim() != 2 or e.shape[0] != e.shape[1]:
        raise ValueError(f"expected a square (B, B) penalty matrix, got {tuple(e.shape)}")
    logits = -e / temperature  # (B, B)
    target = torch.arange(e.shape[0], device=e.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def in_batch_loss(e: torch.Tensor, kind: str, margin: float, temperature: float) -> torch.Tensor:
    """Dispatch on the loss name of a retrieval model: "sum" (Eq. 5 of Vendrov et al.), "max"
    (VSE++'s hardest negatives), "infonce"."""
    if kind == "sum":
        return contrastive(e, margin)
    if kind == "max":
        return contrastive(e, margin, max_violation=True)
    if kind == "infonce":
        return info_nce(e, temperature)
    raise ValueError(f"unknown in-batch loss {kind!r}; expected sum, max or infonce")


def hinge_rank(
    scores: torch.Tensor,
    target: torch.Tensor,
    margin: float = 0.1,
    first_violator: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Return the DeViSE hinge rank loss (Eq. 1 of Frome et al.), averaged over the batch.

    scores (B, L): similarity of each image to each candidate label; target (B,) the true label.
    Per image: sum over labels j != target of max(0, margin - s_target + s_j). first_violator=True
    keeps the paper's shortcut: visit the other labels in random order and stop at the first one
    that violates the margin, so each image contributes that one term (or nothing).
    """
    b = scores.shape[0]
    rows = torch.arange(b, device=scores.device)
    viol = margin - scores[rows, target][:, None] + scores  # (B, L)
    viol[rows, target] = 0.0
    if not first_violator:
        return torch.clamp(viol, min=0).sum(1).mean()
    keys = torch.rand(viol.shape, generator=generator).to(scores.device)  # a random visiting order
    keys = torch.where(viol > 0, keys, torch.full_like(keys, 2.0))  # non-violators are never first
    first = keys.argmin(1)  # (B,)
    return torch.clamp(viol[rows, first], min=0).mean()


LOSSES = {"max_margin": max_margin, "ranking_hinge": ranking_hinge}


def binary_cross_entropy(e_pos: torch.Tensor, e_neg: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Return mean -log P(pos) + mean -log(1 - P(neg)) for energies E = -log P (margin unused).

    The box models' objective (Li et al., ICLR 2019; Dasgupta et al., NeurIPS 2020), whose
    energy is -log P(v | u): positives push P(v | u) to 1, negatives to 0.
    """
    return e_pos.mean() - torch.log(-torch.expm1(-e_neg.clamp(min=1e-6))).mean()


def logistic_ranking(e_pos: torch.Tensor, e_neg: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Return mean log(1 + exp(E(pos) - E(neg))) over aligned (pos, corrupted) pairs (margin unused).

    Nickel & Kiela's (NeurIPS 2017) softmax loss over {v} and the negatives, with distance
    energies, for one negative per term: -log(e^-E(pos) / (e^-E(pos) + e^-E(neg))).
    """
    return F.softplus(e_pos - e_neg).mean()


LOSSES.update({"binary_cross_entropy": binary_cross_entropy, "logistic_ranking": logistic_ranking})
