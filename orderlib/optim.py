"""Lazy (row-wise) Adam for embedding tables.

Only the rows a batch touches are read, updated and written back, with the update rule of
`torch.optim.SparseAdam` (moments of untouched rows stay put, bias correction by global step).
Gradients arrive as small dense (R, D) blocks, so no sparse tensors are built. The two moments
of a row sit side by side, so one gather and one scatter serve both (the step is bound by
random-row memory latency, not arithmetic).
"""
from __future__ import annotations

import torch

_TINY = 1e-30  # floor for the second moment: keeps it out of (slow) denormals, far below eps**2


class RowAdam:
    """Adam on rows of 2-D tables: `step(rows, grads)` with grads[name] of shape (R, D)."""

    def __init__(self, tables: dict[str, torch.Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.tables, self.lr, self.betas, self.eps = tables, lr, betas, eps
        self.t = 0
        self.moments = {k: torch.zeros((v.shape[0], 2, v.shape[1]), dtype=v.dtype, device=v.device)
                        for k, v in tables.items()}  # (N, 2, D): first and second moment

    @torch.no_grad()
    def step(self, rows: torch.Tensor, grads: dict[str, torch.Tensor], constrain=None,
             current: dict[str, torch.Tensor] | None = None) -> None:
        """Update `rows` (unique int64, (R,)) of every table from its (R, D) gradient block.

        `constrain(name, block)` maps updated rows before they are written back; `current[name]`
        may pass the rows' present values when the caller already gathered them.
        """
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        for k, g in grads.items():
            mv = self.moments[k].index_select(0, rows)  # (R, 2, D)
            m, v = mv[:, 0], mv[:, 1]
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2).clamp_(min=_TINY)
            self.moments[k].index_copy_(0, rows, mv)
            new = (current[k].detach().clone() if current is not None
                   else self.tables[k].index_select(0, rows))
            new.sub_((m / c1).div_((v / c2).sqrt_().add_(self.eps)), alpha=self.lr)
            self.tables[k].index_copy_(0, rows, constrain(k, new) if constrain else new)

    def state_dict(self) -> dict:
        return {"t": self.t, "moments": self.moments}

    def load_state_dict(self, state: dict) -> None:
        self.t = state["t"]
        for k in self.moments:
            self.moments[k].copy_(state["moments"][k])
