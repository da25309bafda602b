"""A concept table's constraint, written once: `TableSpec` drives the model's `constrain()`, the
row-wise Adam (which tables live on the Poincaré ball) and the compiled step's arguments.

Order of application, as in csrc/concept_step.cpp: element bounds, then the row-norm bounds (or,
on the ball with no finite norm bound, geoopt's projection onto it), then constant columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TableSpec:
    """Constraint of one (N, D) table of a concept model."""

    lower: float = -math.inf  # element bounds
    upper: float = math.inf
    norm: tuple[float, float] = (0.0, math.inf)  # row-norm bounds, applied where the upper one is finite
    ball: bool = False  # rows are points of the model's Poincaré ball: Riemannian Adam, no catch-up
    constant: int = 0  # the last `constant` columns are held at 1 (an affine term written as bilinear)

    def constrain(self, block: torch.Tensor, ball=None) -> torch.Tensor:
        """Return rows `block` (R, D) with the constraint re-imposed; `ball` is the geoopt manifold."""
        if math.isfinite(self.lower) or math.isfinite(self.upper):
            block = block.clamp(
                min=self.lower if math.isfinite(self.lower) else None,
                max=self.upper if math.isfinite(self.upper) else None,
            )
        if math.isfinite(self.norm[1]):
            n = block.norm(dim=-1, keepdim=True).clamp(min=1e-12)
            block = block * (n.clamp(*self.norm) / n)
        elif self.ball:
            block = ball.projx(block)
        if self.constant:
            block = block.clone()
            block[:, -self.constant :] = 1.0
        return block
