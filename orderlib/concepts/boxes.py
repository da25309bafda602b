"""Box embeddings of WordNet synsets (Li et al., ICLR 2019; Dasgupta et al., NeurIPS 2020).

Energy -log P(v | u) = log vol(u) - log vol(u ∧ v), trained with binary cross-entropy on P(v | u).
A box is stored as lo = sigmoid(a), hi = lo + sigmoid(b) (1 - lo), so every row stays a valid box
in [0, 1]^D after any step.
"""

from __future__ import annotations

import torch
from torch import nn

from orderlib import penalties
from orderlib.concepts.base import ConceptModel


def _logit(p: torch.Tensor) -> torch.Tensor:
    return torch.log(p) - torch.log1p(-p)


class _SigmoidBoxes(ConceptModel):
    """Base: a (N, D) table of min-corner logits and one of side logits; `corners(idx)` -> lo, hi."""

    loss = "binary_cross_entropy"

    def __init__(self, n: int, dim: int = 50, generator=None, lo_range=(0.05, 0.45), frac_range=(0.3, 0.7)):
        super().__init__()
        self.lo = nn.Embedding(n, dim)  # logit of the min corner
        self.side = nn.Embedding(n, dim)  # logit of the side as a fraction of the room above lo
        with torch.no_grad():  # min corners and side fractions uniform in the given ranges
            a, b = lo_range
            self.lo.weight.copy_(_logit(a + (b - a) * torch.rand(n, dim, generator=generator)))
            a, b = frac_range
            self.side.weight.copy_(_logit(a + (b - a) * torch.rand(n, dim, generator=generator)))

    def corners(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the (B, D) min and max corners of boxes `idx`: 0 < lo <= hi < 1."""
        lo = torch.sigmoid(self.lo(idx))
        return lo, lo + torch.sigmoid(self.side(idx)) * (1 - lo)


class BoxEmbedding(_SigmoidBoxes):
    """Box embeddings (Vilnis, Li, Murty & McCallum, ACL 2018) with the hard meet and Li et al.'s
    (ICLR 2019) softplus volume of temperature `temperature`: hard volumes give disjoint boxes no
    gradient, which Vilnis et al. patched case by case; the softplus is the standard fix."""

    def __init__(self, n: int, dim: int = 50, generator=None, temperature: float = 1.0, **kwargs):
        super().__init__(n, dim, generator, **kwargs)
        self.temperature = temperature

    def energy(self, u, v):
        return penalties.box_energy(*self.corners(u), *self.corners(v), self.temperature)  # (B,)

    def compiled_energy(self):
        return {"energy": "box", "params": [self.temperature]}


class GumbelBoxEmbedding(_SigmoidBoxes):
    """Gumbel box embeddings (Dasgupta et al., NeurIPS 2020): the meet's corners by a logsumexp of
    temperature `beta` and volumes by the Bessel approximation of the expected volume (volume
    temperature `temperature`, beta unless given); smoothed boxes (Li et al., ICLR 2019) are its
    ancestor."""

    def __init__(
        self, n: int, dim: int = 50, generator=None, beta: float = 0.01, temperature: float | None = None, **kwargs
    ):
        super().__init__(n, dim, generator, **kwargs)
        self.beta, self.temperature = beta, temperature

    def energy(self, u, v):
        return penalties.gumbel_box_energy(*self.corners(u), *self.corners(v), self.beta, self.temperature)

    def compiled_energy(self):
        return {
            "energy": "gumbel-box",
            "params": [self.beta, self.beta if self.temperature is None else self.temperature],
        }
