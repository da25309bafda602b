"""The concept model: one learned row per synset (Sec. 3 of Vendrov et al.), an energy over pairs
(low = "u is a hyponym of v"), the loss it trains with, and a `TableSpec` per table.

Everything a trainer needs about the tables (which to step row-wise, which live on the ball, how to
constrain them, what the compiled step is told) is read from `table_specs()`.
"""

from __future__ import annotations

import torch
from torch import nn

from orderlib.concepts.spec import TableSpec


class ConceptModel(nn.Module):
    """Base class: `energy(u, v)` over int64 index tensors (B,) -> (B,)."""

    loss = "max_margin"

    def energy(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Return what the training loss sees: the energy, unless a model trains on another score."""
        return self.energy(u, v)

    def table_specs(self) -> dict[str, TableSpec]:
        """Return {table name: its constraint}; by default every embedding table, unconstrained."""
        return {f"{name}.weight": TableSpec() for name, m in self.named_modules() if isinstance(m, nn.Embedding)}

    def compiled_energy(self) -> dict | None:
        """Describe the energy for the compiled step (orderlib/concepts/compiled.py): its name in
        `orderlib.penalties.ENERGIES` (with a `kernel` code), its parameters in that order and, optionally, the dense parameters it
        reads ("dense"); None where the model has no compiled form."""
        return None

    def tables(self) -> dict[str, nn.Parameter]:
        """Return the per-concept tables by parameter name (rows indexed by concept id)."""
        return {name: self.get_parameter(name) for name in self.table_specs()}

    def manifolds(self) -> dict:
        """Return {table name: geoopt manifold} for tables whose rows are points of the ball."""
        return {name: self.ball for name, spec in self.table_specs().items() if spec.ball}

    def constrain(self, name: str, block: torch.Tensor) -> torch.Tensor:
        """Return rows of table `name` with its spec's constraint re-imposed (after a step). The
        specs are read once per model: a model's constraints are fixed when it is built."""
        specs = self.__dict__.get("_specs")
        if specs is None:
            specs = self.__dict__["_specs"] = self.table_specs()
        return specs[name].constrain(block, getattr(self, "ball", None))

    def constant_columns(self) -> dict[str, int]:
        """Return {table name: k} for tables whose last k columns are held at 1."""
        return {name: spec.constant for name, spec in self.table_specs().items() if spec.constant}

    @torch.no_grad()
    def constrain_all_(self) -> None:
        for name, t in self.tables().items():
            t.copy_(self.constrain(name, t))

    @torch.no_grad()
    def energies(self, pairs: torch.Tensor, batch: int = 65536) -> torch.Tensor:
        """Return the energy of every pair in (P, 2), in batches."""
        out = [self.energy(p[:, 0], p[:, 1]) for p in pairs.split(batch)]
        return torch.cat(out) if out else pairs.new_zeros(0, dtype=torch.float32)
