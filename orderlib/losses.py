"""Losses over penalties: inputs are energies (low = the pair holds), shape (B,)."""
from __future__ import annotations

import torch


def max_margin(e_pos: torch.Tensor, e_neg: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Return mean E(pos) + mean max(0, margin - E(neg)) (Eq. 4 of Vendrov et al., batch means)."""
    return e_pos.mean() + torch.clamp(margin - e_neg, min=0).mean()


def ranking_hinge(e_pos: torch.Tensor, e_neg: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Return mean max(0, margin + E(pos) - E(neg)) over aligned (pos, corrupted) pairs.

    The contrastive max-margin of Socher et al. (2013) and word2gauss; it needs no zero-energy
    anchor, so it fits signed scores (bilinear) and unbounded energies (KL).
    """
    return torch.clamp(margin + e_pos - e_neg, min=0).mean()


LOSSES = {"max_margin": max_margin, "ranking_hinge": ranking_hinge}
