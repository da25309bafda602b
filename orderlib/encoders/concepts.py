"""Concept tables for WordNet hypernymy (Sec. 3 of Vendrov et al.): one learned embedding per synset.

Each model gives `energy(u, v)` (low = "u is a hyponym of v") and names its loss; `tables()` and
`manifolds()` tell a trainer which rows to update lazily and which live on a Riemannian manifold.
Importing this module registers the models of `boxes.py` and `hyperbolic.py`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from orderlib import penalties


class ConceptModel(nn.Module):
    """Base class: `energy(u, v)` over int64 index tensors (B,) -> (B,)."""

    loss = "max_margin"

    def energy(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Return what the training loss sees: the energy, unless a model trains on another score."""
        return self.energy(u, v)

    def tables(self) -> dict[str, nn.Parameter]:
        """Return the per-concept tables by parameter name (rows indexed by concept id)."""
        return {f"{name}.weight": m.weight for name, m in self.named_modules() if isinstance(m, nn.Embedding)}

    def manifolds(self) -> dict:
        """Return {table name: geoopt manifold} for tables whose rows are points of a manifold."""
        return {}

    def constrain(self, name: str, block: torch.Tensor) -> torch.Tensor:
        """Return rows of table `name` with the model's constraints re-imposed (after a step)."""
        return block

    def constant_columns(self) -> dict[str, int]:
        """Return {table name: k} for tables whose last k columns are constants held at 1 (an
        affine term written as a bilinear one); trainers reset them and their moments after a step."""
        return {}

    def fused_energy(self) -> dict | None:
        """Describe the energy for the compiled step (orderlib/training/concept_step.py): its name,
        tables, per-table bounds (the constraint), parameters (concept_step.ENERGIES gives their
        order) and, optionally, the dense parameters it reads ("dense"); None where the model has
        no compiled form."""
        return None

    @torch.no_grad()
    def constrain_all_(self) -> None:
        for name, t in self.tables().items():
            t.copy_(self.constrain(name, t))

    @torch.no_grad()
    def energies(self, pairs: torch.Tensor, batch: int = 65536) -> torch.Tensor:
        """Return the energy of every pair in (P, 2), in batches."""
        out = [self.energy(p[:, 0], p[:, 1]) for p in pairs.split(batch)]
        return torch.cat(out) if out else pairs.new_zeros(0, dtype=torch.float32)


class OrderEmbedding(ConceptModel):
    """Order-embeddings: a table in R^N_+ scored by the order violation (Eq. 2, loss Eq. 4)."""

    def __init__(self, n: int, dim: int = 50, generator=None):
        super().__init__()
        self.emb = nn.Embedding(n, dim)
        with torch.no_grad():  # N(0, 1) then clamped at 0, as the authors' code
            self.emb.weight.normal_(generator=generator).clamp_(min=0)

    def energy(self, u, v):
        return penalties.order_violation(self.emb(u), self.emb(v))  # (B,)

    def constrain(self, name, block):
        return block.clamp(min=0)

    def fused_energy(self):
        return {"energy": "order_violation", "tables": ["emb.weight"], "bounds": [(0.0, math.inf)], "params": []}


class SymmetricEmbedding(ConceptModel):
    """The "symmetric" row: the same table, unconstrained, scored by cosine distance."""

    def __init__(self, n: int, dim: int = 50, generator=None):
        super().__init__()
        self.emb = nn.Embedding(n, dim)
        with torch.no_grad():
            self.emb.weight.normal_(generator=generator).mul_(dim**-0.5)  # unit-scale rows

    def energy(self, u, v):
        return penalties.cosine_distance(self.emb(u), self.emb(v))

    def fused_energy(self):
        return {"energy": "cosine", "tables": ["emb.weight"], "bounds": [(-math.inf, math.inf)], "params": [1e-8]}


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

    def constrain(self, name, block):
        if self.linear and name == "emb.weight":
            block = block.clone()
            block[:, -1] = 1.0
        return block

    def constant_columns(self):
        return {"emb.weight": 1} if self.linear else {}

    def fused_energy(self):
        return {
            "energy": "bilinear",
            "tables": ["emb.weight"],
            "bounds": [(-math.inf, math.inf)],
            "params": [],
            "dense": ["w", "b"],
        }


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

    def constrain(self, name, block):
        if name == "mu.weight":
            return block * (self.mu_max / block.norm(dim=-1, keepdim=True).clamp(min=1e-12)).clamp(max=1.0)
        return block.clamp(math.log(self.var_min), math.log(self.var_max))


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

    def constrain(self, name, block):
        if name == "log_var.weight" and (self.log_var_min > -math.inf or self.log_var_max < math.inf):
            return block.clamp(self.log_var_min, self.log_var_max)
        return block

    def fused_energy(self):
        return {
            "energy": "density_order",
            "tables": ["mu.weight", "log_var.weight"],
            "bounds": [(-math.inf, math.inf), (self.log_var_min, self.log_var_max)],
            "params": [self.gamma, float(self.normalize)],
        }


CONCEPT_MODELS = {
    "order-embeddings": OrderEmbedding,
    "order-embeddings (symmetric)": SymmetricEmbedding,
    "order-embeddings (bilinear)": BilinearEmbedding,
    "word2gauss": GaussianEmbedding,
    "density order embeddings": DensityOrderEmbedding,
}


def build_concept_model(name: str, n: int, dim: int = 50, seed: int = 0, **kwargs) -> ConceptModel:
    """Build a Table 1 model by its row name, initialised from `seed` (no global seeding);
    `kwargs` go to its constructor (gamma, beta, K, ...)."""
    if name not in CONCEPT_MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(CONCEPT_MODELS)}")
    g = torch.Generator().manual_seed(seed)
    return CONCEPT_MODELS[name](n, dim, generator=g, **kwargs)


# The later models subclass ConceptModel and add themselves to CONCEPT_MODELS on import.
import orderlib.encoders.boxes  # noqa: E402,F401
import orderlib.encoders.hyperbolic  # noqa: E402,F401
