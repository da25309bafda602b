"""Hyperbolic concept tables for WordNet hypernymy: Poincaré embeddings (Nickel & Kiela, 2017) and
entailment cones (Ganea et al., 2018).

Rows are points of geoopt's unit Poincaré ball (curvature -1); its `TableSpec` says so, and the
trainers take Riemannian Adam steps on the rows a batch touches.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

with warnings.catch_warnings():  # geoopt 0.5 decorates its maths with torch.jit.script, deprecated
    warnings.simplefilter("ignore", FutureWarning)
    import geoopt

from orderlib import penalties
from orderlib.concepts.base import ConceptModel
from orderlib.concepts.spec import TableSpec


def _unit_ball(ball: geoopt.PoincareBall) -> bool:
    """Is this the curvature -1 ball, the only one the compiled step (concept_step.cpp) knows."""
    return abs(float(ball.k) + 1.0) <= 1e-6


class PoincareEmbedding(ConceptModel):
    """Poincare embeddings (Nickel & Kiela, NeurIPS 2017).

    Trained as they trained them: the loss sees the distance d(u, v) (`forward`) through their
    softmax over the positive and its negatives ("logistic_ranking", one negative per term).
    Classified by minus their is-a score, (1 + alpha (|v| - |u|)) d(u, v) (`energy`),
    since the distance alone cannot tell (u, v) from (v, u). Init uniform in [-1e-3, 1e-3]^D.
    """

    loss = "logistic_ranking"

    def __init__(self, n: int, dim: int = 50, generator=None, alpha: float = 1000.0, init_range: float = 1e-3):
        super().__init__()
        self.ball = geoopt.PoincareBall()  # c = 1; holds a fixed (no-grad) curvature parameter
        self.emb = nn.Embedding(n, dim)
        self.alpha = alpha
        with torch.no_grad():
            self.emb.weight.uniform_(-init_range, init_range, generator=generator)

    def table_specs(self):
        return {"emb.weight": TableSpec(ball=True)}

    def forward(self, u, v):
        """Return the distance d(u, v), what Nickel & Kiela's loss is defined on."""
        return penalties.poincare_distance(self.emb(u), self.emb(v))  # (B,)

    def energy(self, u, v):
        return penalties.poincare_isa_energy(self.emb(u), self.emb(v), self.alpha)  # (B,)

    def compiled_energy(self):
        """The training energy (the distance) for the compiled step, which knows the unit ball only."""
        return {"energy": "poincare-distance", "params": []} if _unit_ball(self.ball) else None


class HyperbolicCones(ConceptModel):
    """Hyperbolic entailment cones (Ganea, Becigneul & Hofmann, ICML 2018).

    E(u, v) = max(0, Xi(v, u) - psi(v)): zero iff u lies in the cone of v; trained with the
    max-margin loss of the paper (margin gamma = cfg.margin, 0.01 in their code). Points are
    kept in the annulus r_K + eps <= |x| <= 1 - eps, r_K = 2K / (1 + sqrt(1 + 4K^2)) being where
    psi is defined (K = 0.1, eps = 1e-5 as their code). The paper starts from Poincare embeddings
    (`init_from_poincare`); without them rows start as in their code, at random directions with
    norms uniform in [r_K + eps, r_K + 0.5].
    """

    def __init__(self, n: int, dim: int = 50, generator=None, K: float = 0.1, eps: float = 1e-5):
        super().__init__()
        self.ball = geoopt.PoincareBall()
        self.emb = nn.Embedding(n, dim)
        self.K = K
        self.r_min = 2 * K / (1 + math.sqrt(1 + 4 * K * K)) + eps
        self.r_max = 1 - eps
        with torch.no_grad():
            w = self.emb.weight.normal_(generator=generator)
            r = self.r_min + 0.5 * torch.rand(n, 1, generator=generator)
            w.mul_(r / w.norm(dim=-1, keepdim=True).clamp(min=1e-12))

    def table_specs(self):
        return {"emb.weight": TableSpec(norm=(self.r_min, self.r_max), ball=True)}

    def energy(self, u, v):
        return penalties.cone_violation(self.emb(u), self.emb(v), self.K)  # (B,)

    def compiled_energy(self):
        """The energy for the compiled step, which knows the unit ball only."""
        return {"energy": "cone", "params": [self.K]} if _unit_ball(self.ball) else None


def init_from_poincare(poincare: PoincareEmbedding, rescale: float = 0.7) -> dict[str, torch.Tensor]:
    """Return the cones' initial table from trained Poincare embeddings, scaled by `rescale`
    (0.7 in Ganea et al.'s code); the trainer then clips it into the annulus."""
    return {"emb.weight": poincare.emb.weight.detach().clone() * rescale}
