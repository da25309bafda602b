"""Table 1's models by row name: the one registry, and `build_concept_model`."""

from __future__ import annotations

import torch

from orderlib.concepts.base import ConceptModel
from orderlib.concepts.boxes import BoxEmbedding, GumbelBoxEmbedding
from orderlib.concepts.euclidean import (
    BilinearEmbedding,
    DensityOrderEmbedding,
    GaussianEmbedding,
    OrderEmbedding,
    SymmetricEmbedding,
)
from orderlib.concepts.hyperbolic import HyperbolicCones, PoincareEmbedding

CONCEPT_MODELS = {
    "order-embeddings": OrderEmbedding,
    "order-embeddings (symmetric)": SymmetricEmbedding,
    "order-embeddings (bilinear)": BilinearEmbedding,
    "word2gauss": GaussianEmbedding,
    "density order embeddings": DensityOrderEmbedding,
    "box embeddings": BoxEmbedding,
    "Gumbel box embeddings": GumbelBoxEmbedding,
    "Poincaré embeddings": PoincareEmbedding,
    "hyperbolic entailment cones": HyperbolicCones,
}


def build_concept_model(name: str, n: int, dim: int = 50, seed: int = 0, **kwargs) -> ConceptModel:
    """Build a Table 1 model by its row name, initialised from `seed` (no global seeding);
    `kwargs` go to its constructor (gamma, beta, K, ...)."""
    if name not in CONCEPT_MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(CONCEPT_MODELS)}")
    g = torch.Generator().manual_seed(seed)
    return CONCEPT_MODELS[name](n, dim, generator=g, **kwargs)
