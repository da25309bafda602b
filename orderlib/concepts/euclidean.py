"""Table 1's Euclidean concept models: order-embeddings (Sec. 3 of Vendrov et al.), its symmetric
and bilinear baselines, word2gauss's Gaussians and density order embeddings."""

from __future__ import annotations

import math

import torch
from torch import nn

from orderlib import penalties
from orderlib.concepts.base import ConceptModel
from orderlib.concepts.spec import TableSpec


class OrderEmbedding(ConceptModel):
    """Order-embeddings: a table in R^N_+ scored by the order violation (Eq. 2, loss Eq. 4)."""

    def __init__(self, n: int, dim: int = 50, generator=None):
        super().__init__()
        self.emb = nn.Embedding(n, dim)
        with torch.no_grad():  # N(0, 1) then clamped at 0, as the authors' code
            self.emb.weight.normal_(generator=generator).clamp_(min=0)

    def energy(self, u, v):
        return penalties.order_violation(self.emb(u), self.emb(v))  # (B,)

    def table_specs(self):
        return {"emb.weight": TableSpec(lower=0.0)}

    def compiled_energy(self):
        return {"energy": "order", "params": []}


class SymmetricEmbedding(ConceptModel):
    """The "symmetric" row: the same table, unconstrained, scored by cosine distance."""

    def __init__(self, n: int, dim: int = 50, generator=None):
        super().__init__()
        self.emb = nn.Embedding(n, dim)
        with torch.no_grad():
            self.emb.weight.normal_(generator=generator).mul_(dim**-0.5)  # unit-scale rows

    def energy(self, u, v):
        return penalties.cosine_distance(self.emb(u), self.emb(v))

    def compiled_energy(self):
        return {"energy": "cosine", "params": [1e-8]}


class BilinearEmbedding(ConceptModel):
    """The "bilinear" row: energy -(e_u^T W e_v + b), Socher et al. (2013)'s bilinear model.

    A signed score has no zero-penalty anchor, so it trains with Socher et al.'s ranking hinge.
    `linear=True` adds the linear layer of their neural tensor network, V [e_u; e_v] (Eq. (1) of
    Socher et al. with one slice and no nonlinearity): each row gets a last column held at 1 and W
    is (D + 1, D + 1), so [e_u; 1]^T W [e_v; 1] = e_u^T W' e_v + a . e_u + c . e_v + const.
    """

    loss = "ranking_hinge"

    def __init__(self, n: int, dim: int = 50, generator=None, linear: bool = False):
        super().__init__()
        self.linear = bool(linear)
        width = dim + self.linear
        self.emb = nn.Embedding(n, width)
        self.w = nn.Parameter(torch.eye(width))
        self.b = nn.Parameter(torch.zeros(()))
        with torch.no_grad():
            self.emb.weight.normal_(generator=generator).mul_(dim**-0.5)
            self.w.add_(0.01 * torch.randn(width, width, generator=generator))
            if self.linear:
                self.emb.weight[:, -1] = 1.0

    def energy(self, u, v):
        return -(penalties.bilinear_score(self.emb(u), self.w, self.emb(v)) + self.b)

    def table_specs(self):
        return {"emb.weight": TableSpec(constant=int(self.linear))}

    def compiled_energy(self):
        return {"energy": "bilinear", "params": [], "dense": ["w", "b"]}


class GaussianEmbedding(ConceptModel):
    """The "word2gauss" row: diagonal Gaussians scored by KL(N_u || N_v) (Vilnis & McCallum, 2015).

    Means are kept in a ball of radius `mu_max` and variances in [var_min, var_max] after each
    step, as in word2gauss; trained with the ranking hinge, margin chosen on dev.
    """

    loss = "ranking_hinge"

    def __init__(
        self, n: int, dim: int = 50, generator=None, mu_max: float = 2.0, var_min: float = 0.05, var_max: float = 5.0
    ):
        super().__init__()
        self.mu = nn.Embedding(n, dim)
        self.log_var = nn.Embedding(n, dim)
        self.mu_max, self.var_min, self.var_max = mu_max, var_min, var_max
        with torch.no_grad():
            self.mu.weight.normal_(generator=generator).mul_(0.1)
            self.log_var.weight.zero_()

    def energy(self, u, v):
        return penalties.gaussian_kl(self.mu(u), self.log_var(u).exp(), self.mu(v), self.log_var(v).exp())

    def table_specs(self):
        return {
            "mu.weight": TableSpec(norm=(0.0, self.mu_max)),
            "log_var.weight": TableSpec(lower=math.log(self.var_min), upper=math.log(self.var_max)),
        }


class DensityOrderEmbedding(ConceptModel):
    """Density order embeddings (Athiwaratkun & Wilson, ICLR 2018): diagonal Gaussians scored by
    the thresholded divergence d_gamma = max(0, KL(N_u || N_v) - gamma), trained with Eq. (4)'s
    max-margin loss on it (theirs: sum d_gamma(pos) + sum max(0, m - d_gamma(neg))).

    As the authors' code (benathi/density-order-emb): means used at unit norm (normalised in the
    forward pass, `normalize`), initialised unit-norm, variances all `var_init` (5e-5), no bounds
    unless `var_min`/`var_max` are given. Their energy is 2 KL + D, so their gamma = 500 and
    m = 2000 are gamma = 225, m = 1000 here (Adam does not see the overall factor 2).
    """

    def __init__(
        self,
        n: int,
        dim: int = 50,
        generator=None,
        gamma: float = 225.0,
        var_init: float = 5e-5,
        normalize: bool = True,
        var_min: float | None = None,
        var_max: float | None = None,
    ):
        super().__init__()
        self.mu = nn.Embedding(n, dim)
        self.log_var = nn.Embedding(n, dim)
        self.gamma, self.normalize = gamma, normalize
        self.log_var_min = -math.inf if var_min is None else math.log(var_min)
        self.log_var_max = math.inf if var_max is None else math.log(var_max)
        with torch.no_grad():
            w = self.mu.weight.normal_(generator=generator)
            w.div_(w.norm(dim=-1, keepdim=True).clamp(min=1e-12))
            self.log_var.weight.fill_(math.log(var_init)).clamp_(self.log_var_min, self.log_var_max)

    def _mean(self, idx):
        mu = self.mu(idx)  # (B, D)
        return mu / mu.norm(dim=-1, keepdim=True).clamp(min=1e-12) if self.normalize else mu

    def energy(self, u, v):
        return penalties.density_order_violation(
            self._mean(u), self.log_var(u).exp(), self._mean(v), self.log_var(v).exp(), self.gamma
        )  # (B,)

    def table_specs(self):
        return {"mu.weight": TableSpec(), "log_var.weight": TableSpec(lower=self.log_var_min, upper=self.log_var_max)}

    def compiled_energy(self):
        return {"energy": "density-order", "params": [self.gamma, float(self.normalize)]}
