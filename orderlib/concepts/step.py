"""One optimisation step of a Table 1 model, chosen once when training starts (`build_step`).

Every step takes true pairs pos (B, 2) and negatives neg (K * B, 2), K blocks of B aligned with pos
(the loss sees E(pos) repeated K times beside E(neg)), and keeps its state as
{"rows": RowAdam's, "dense": torch Adam's}, the layout checkpoints store:

- `CompiledStep` rows: the C++ step (csrc/concept_step.cpp) on the touched rows;
- `RowStep`: autograd over the touched rows gathered into small leaves, then RowAdam (lazy or
  sparse), or over all rows each step (dense Adam on a Riemannian model);
- `DenseStep`: torch's Adam over every parameter, then the constraint on every row.

In all three, dense parameters besides the tables (bilinear's W and b) take torch's Adam.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch.func import functional_call

from orderlib.concepts import compiled
from orderlib.concepts.base import ConceptModel
from orderlib.concepts.row_adam import RowAdam
from orderlib.losses import LOSSES

OPTIMIZERS = {
    "adam": "dense Adam over every row every step (what the authors' Torch7 optim.adam did)",
    "lazy_adam": "dense Adam's trajectory computed on touched rows only (RowAdam with catch-up)",
    "sparse_adam": "SparseAdam's rule: rows absent from a batch do not move",
}
# Riemannian tables (a TableSpec with ball=True) take Riemannian Adam steps under each of these:
# every row every step under "adam", touched rows only (SparseRiemannianAdam's rule) otherwise.


class Step(Protocol):
    def step(self, pos: torch.Tensor, neg: torch.Tensor) -> float: ...

    def flush(self) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class _Adam:
    """The state every step keeps: RowAdam on the tables (or None) and torch's Adam on the rest."""

    def __init__(self, model: ConceptModel, lr: float, tables: dict, catch_up: bool, device):
        self.model = model
        self.rows = (
            RowAdam({k: t.data for k, t in tables.items()}, lr=lr, catch_up=catch_up, manifolds=model.manifolds())
            if tables
            else None
        )
        dense = [p for n, p in model.named_parameters() if n not in tables and p.requires_grad]
        # fused: one kernel per step instead of ~10 ATen calls (bilinear's W: 220 -> ~20 us a step)
        fused = torch.device(device).type in ("cpu", "cuda")
        self.dense = torch.optim.Adam(dense, lr=lr, fused=fused) if dense else None
        self.constant = model.constant_columns() if self.rows is not None else {}  # DenseStep: constrain does it

    def _hold_constants(self, rows: torch.Tensor) -> None:
        """Reset the constant columns on `rows` to 1 and their moments to 0, so no catch-up moves them."""
        for name, k in self.constant.items():
            self.rows.tables[name][rows, -k:] = 1.0
            self.rows.moments[name][rows, :, -k:] = 0.0

    def state_dict(self) -> dict:
        return {
            "rows": self.rows.state_dict() if self.rows else None,
            "dense": self.dense.state_dict() if self.dense else None,
        }

    def load_state_dict(self, state: dict) -> None:
        if self.rows:
            self.rows.load_state_dict(state["rows"])
        if self.dense:
            self.dense.load_state_dict(state["dense"])


class _Touched:
    """The distinct rows of a batch and each index's place among them, without a sort."""

    def __init__(self, n: int, all_rows: bool = False):
        self.n, self.all_rows, self.pos = n, all_rows, None

    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.all_rows:
            return torch.arange(self.n, device=idx.device), idx
        if self.pos is None or self.pos.device != idx.device:
            self.pos = torch.zeros(self.n, dtype=torch.long, device=idx.device)
        mark = torch.zeros(self.n, dtype=torch.bool, device=idx.device)
        mark[idx] = True
        rows = mark.nonzero().squeeze(1)
        self.pos[rows] = torch.arange(len(rows), device=idx.device)
        return rows, self.pos[idx]


class CompiledStep(_Adam):
    """The C++ step on the touched rows (compiled.BoundKernel), torch's Adam on dense parameters."""

    def __init__(self, model: ConceptModel, lr: float, catch_up: bool, loss: str, margin: float, device):
        super().__init__(model, lr, model.tables(), catch_up, device)
        self.kernel = compiled.BoundKernel(model, self.rows, loss, margin)
        self.touched = _Touched(self.rows.last.shape[0])

    def step(self, pos, neg) -> float:
        pairs = torch.cat([pos, neg])  # ((1 + K) B, 2)
        loss = self.kernel(pairs, len(pos))  # rows stepped; dense parameters left with their gradient
        if self.constant:
            self._hold_constants(self.touched(pairs.flatten())[0])
        if self.dense is not None:
            self.dense.step()
        return loss

    def flush(self) -> None:
        self.kernel.flush()


class RowStep(_Adam):
    """Autograd over the gathered rows, then RowAdam on them (all rows each step if `all_rows`)."""

    def __init__(self, model: ConceptModel, lr: float, catch_up: bool, loss_fn, all_rows: bool, device):
        super().__init__(model, lr, model.tables(), catch_up, device)
        self.loss_fn = loss_fn
        self.touched = _Touched(self.rows.last.shape[0], all_rows)

    def step(self, pos, neg) -> float:
        b = len(pos)
        pairs = torch.cat([pos, neg])
        rows, inv = self.touched(pairs.flatten())
        current = self.rows.prepare(rows, self.model.constrain)  # with pending momentum moves
        local = {k: v.requires_grad_() for k, v in current.items()}
        inv = inv.view(-1, 2)
        e = functional_call(self.model, local, (inv[:, 0], inv[:, 1]))  # ((1 + K) B,)
        loss = self.loss_fn(e[:b].repeat(len(neg) // b), e[b:])
        if self.dense is not None:
            self.dense.zero_grad(set_to_none=True)
        loss.backward()
        self.rows.step(rows, {k: v.grad for k, v in local.items()}, self.model.constrain)
        if self.constant:
            self._hold_constants(rows)
        if self.dense is not None:
            self.dense.step()
        return float(loss.detach())

    def flush(self) -> None:
        self.rows.flush(self.model.constrain)


class DenseStep(_Adam):
    """torch's Adam over every parameter, then the constraint on every row (the authors' optim.adam)."""

    def __init__(self, model: ConceptModel, lr: float, loss_fn, device):
        super().__init__(model, lr, {}, False, device)
        self.loss_fn = loss_fn

    def step(self, pos, neg) -> float:
        b = len(pos)
        pairs = torch.cat([pos, neg])
        e = self.model(pairs[:, 0], pairs[:, 1])
        loss = self.loss_fn(e[:b].repeat(len(neg) // b), e[b:])
        self.dense.zero_grad(set_to_none=True)
        loss.backward()
        self.dense.step()
        self.model.constrain_all_()
        return float(loss.detach())

    def flush(self) -> None:
        pass


def build_step(
    model: ConceptModel, optimizer: str, loss: str, margin: float, lr: float, device="cpu", fused: bool | None = None
) -> Step:
    """The step for `optimizer` (OPTIMIZERS) and `loss` (orderlib.losses.LOSSES): the compiled one
    where it applies and `fused` is not False (True insists: an error where it does not apply)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; expected one of {sorted(OPTIMIZERS)}")
    usable = compiled.applies(model, optimizer, loss, device) and compiled.concept_step_kernel() is not None
    if fused and not usable:
        raise RuntimeError(
            f"the compiled step does not apply to {type(model).__name__} with optimizer {optimizer!r}, "
            f"loss {loss!r} on {device} ({compiled.concept_step_status()})"
        )
    catch_up = optimizer == "lazy_adam"
    if usable and fused is not False:
        return CompiledStep(model, lr, catch_up, loss, margin, device)
    base = LOSSES[loss]
    loss_fn = lambda e_pos, e_neg: base(e_pos, e_neg, margin)  # noqa: E731
    if optimizer != "adam" or model.manifolds():  # dense Adam on a Riemannian model: RowAdam on every row
        return RowStep(model, lr, catch_up, loss_fn, optimizer == "adam", device)
    return DenseStep(model, lr, loss_fn, device)
