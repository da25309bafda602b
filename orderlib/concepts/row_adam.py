"""Lazy (row-wise) Adam for embedding tables: only the rows a batch touches are read, updated and
written back (`prepare(rows)`, `step(rows, grads)`, `flush()` before evaluating).

`catch_up=False` is torch.optim.SparseAdam's rule: an untouched row stands still.
`catch_up=True` follows dense Adam's trajectory. The k steps a row skipped all point along its
m/sqrt(v), so when it is next touched (or on `flush()`) they are applied at once:
sum_j lr * b1^j / c1(s+j) * sqrt(c2(s+j)) / b2^(j/2) * m/sqrt(v), Adam's eps neglected and the sum
truncated after `window` terms. A non-negativity clamp commutes with these moves, so constraints
stay exact. Tables in `manifolds` take Riemannian Adam's step (Becigneul & Ganea, ICLR 2019) on
touched rows and SparseAdam's rule on the others.
"""

from __future__ import annotations

import math

import torch

_TINY = 1e-30  # floor for the second moment: keeps it out of (slow) denormals, far below eps**2


class RowAdam:
    """Adam on rows of 2-D tables: `step(rows, grads)` with grads[name] of shape (R, D)."""

    EXACT_UNTIL = 2000  # steps; after it, the closed form's relative error is below 1e-3

    def __init__(
        self,
        tables: dict[str, torch.Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        catch_up: bool = False,
        window: int = 128,
        manifolds: dict | None = None,
    ):
        self.tables, self.lr, self.betas, self.eps = tables, lr, betas, eps
        self.catch_up, self.window = catch_up, window
        self.manifolds = dict(manifolds or {})  # table name -> geoopt manifold of its rows
        if set(self.manifolds) - set(tables):
            raise ValueError(f"manifolds for unknown tables: {sorted(set(self.manifolds) - set(tables))}")
        self.t = 0
        self.moments = {
            k: torch.zeros((v.shape[0], 2, v.shape[1]), dtype=v.dtype, device=v.device) for k, v in tables.items()
        }  # (N, 2, D): first and second moment
        some = next(iter(tables.values()))
        self.last = torch.zeros(some.shape[0], dtype=torch.long, device=some.device)  # last step applied
        self._stash = None  # (rows, moments, values) gathered by prepare() for the next step()
        self._lag_cache = None

    def _lags(self, device) -> tuple[torch.Tensor, ...]:
        if self._lag_cache is None or self._lag_cache[0].device != device:
            b1, b2 = self.betas
            j = torch.arange(1, self.window + 1, device=device, dtype=torch.float64)  # (J,)
            self._lag_cache = (j, b1**j, b2**j, b1**j / b2 ** (j / 2))
        return self._lag_cache

    def skipped_factor(self, s: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Return (R,) sum_{j=1..k} b1^j sqrt(c2(s+j)) / (c1(s+j) b2^(j/2)), truncated at `window`.

        Exact on a (R, window) grid while bias corrections still move (s < EXACT_UNTIL); later the
        corrections are flat over the window and the geometric sum is taken in closed form.
        """
        b1, b2 = self.betas
        r = b1 / math.sqrt(b2)
        s, k = s.to(torch.float64), k.to(torch.float64)
        a = (1 - torch.exp((s + 1) * math.log(b2))).sqrt() / (1 - torch.exp((s + 1) * math.log(b1)))
        out = a * r * (1 - torch.exp(k.clamp(max=self.window) * math.log(r))) / (1 - r)  # (R,)
        early = (s < self.EXACT_UNTIL).nonzero().squeeze(1)
        if len(early):
            j, b1j, b2j, ratio = self._lags(s.device)
            se = s[early, None]  # (R', 1)
            c1 = 1 - torch.exp(se * math.log(b1)) * b1j  # (R', J): 1 - b1^(s+j)
            c2 = 1 - torch.exp(se * math.log(b2)) * b2j
            terms = ratio * c2.sqrt() / c1
            out[early] = torch.where(j <= k[early, None], terms, 0.0).sum(1)
        return out

    @torch.no_grad()
    def _apply_skipped(self, rows: torch.Tensor, upto: int, mv: dict, current: dict, constrain) -> None:
        """Advance `rows` through the zero-gradient steps last[rows]+1 .. upto (dense Adam's moves)."""
        k = upto - self.last.index_select(0, rows)  # (R,)
        idle = (k > 0).nonzero().squeeze(1)
        if len(idle) == 0:
            return
        k = k[idle]
        f = self.skipped_factor(upto - k, k)[:, None]  # (R', 1)
        b1, b2 = self.betas
        dtype = next(iter(self.tables.values())).dtype
        d1 = torch.exp(k[:, None] * math.log(b1)).to(dtype)  # (R', 1): b1^k
        d2 = torch.exp(k[:, None] * math.log(b2)).to(dtype)
        for name in mv:
            if name in self.manifolds:
                continue  # Riemannian rows: SparseAdam's rule, no catch-up
            m, v = mv[name][idle, 0], mv[name][idle, 1]  # (R', D)
            new = current[name][idle] - (self.lr * f.to(dtype)) * m / v.clamp(min=_TINY).sqrt()
            current[name][idle] = constrain(name, new) if constrain else new
            mv[name][idle, 0] = m * d1
            mv[name][idle, 1] = (v * d2).clamp(min=_TINY)

    @torch.no_grad()
    def prepare(self, rows: torch.Tensor, constrain=None) -> dict[str, torch.Tensor]:
        """Gather `rows` (unique int64, (R,)) brought up to the current step; return their values.

        Call before taking the rows' gradients; the next `step(rows, ...)` reuses this gather.
        """
        mv = {k: self.moments[k].index_select(0, rows) for k in self.tables}  # (R, 2, D)
        cur = {k: self.tables[k].index_select(0, rows) for k in self.tables}  # (R, D)
        if self.catch_up and self.t > 0:
            self._apply_skipped(rows, self.t, mv, cur, constrain)
        self._stash = (rows, mv, cur)
        return {k: v.clone() for k, v in cur.items()}

    @torch.no_grad()
    def step(self, rows: torch.Tensor, grads: dict[str, torch.Tensor], constrain=None) -> None:
        """Update `rows` of every table from its (R, D) gradient block and write them back.

        `constrain(name, block)` maps updated rows before they are written back.
        """
        mv, cur = self._gather(rows, constrain)
        self.advance()
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for k, g in grads.items():
            m, v = mv[k][:, 0], mv[k][:, 1]
            if k in self.manifolds:
                self._riemannian_step(self.manifolds[k], cur[k], m, v, g, c1, c2)
                continue
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2).clamp_(min=_TINY)
            cur[k].sub_((m / c1).div_((v / c2).sqrt_().add_(self.eps)), alpha=self.lr)
        self._write(rows, mv, cur, constrain)

    def advance(self) -> int:
        """Count one more step and return its number: the one place the step counter moves (the
        compiled step advances it here too)."""
        self.t += 1
        return self.t

    def _riemannian_step(self, manifold, x, m, v, g, c1, c2) -> None:
        """Update points x (R, D) in place by geoopt's RiemannianAdam rule; m, v are their moments."""
        b1, b2 = self.betas
        rg = manifold.egrad2rgrad(x, g)  # (R, D): Riemannian gradient
        m.mul_(b1).add_(rg, alpha=1 - b1)
        v.mul_(b2).add_(manifold.component_inner(x, rg), alpha=1 - b2).clamp_(min=_TINY)  # (R, 1) broadcast
        direction = (m / c1).div_((v / c2).sqrt_().add_(self.eps))
        new_x, new_m = manifold.retr_transp(x, -self.lr * direction, m)
        x.copy_(new_x)
        m.copy_(new_m)

    def _gather(self, rows, constrain):
        """Return (moments, values) of `rows`: prepare()'s gather when it was for these rows."""
        if self._stash is None or self._stash[0] is not rows:
            self.prepare(rows, constrain)
        _, mv, cur = self._stash
        self._stash = None
        return mv, cur

    def _write(self, rows, mv, cur, constrain) -> None:
        for k in self.tables:
            self.moments[k].index_copy_(0, rows, mv[k])
            self.tables[k].index_copy_(0, rows, constrain(k, cur[k]) if constrain else cur[k])
        self.last.index_fill_(0, rows, self.t)

    def flush(self, constrain=None, block: int = 65536) -> None:
        """Bring every row up to the current step (catch-up rule); call before evaluating or saving."""
        if not self.catch_up:
            return
        n = self.last.shape[0]
        for i in range(0, n, block):
            rows = torch.arange(i, min(n, i + block), device=self.last.device)
            self._write(rows, *self._gather(rows, constrain), constrain)

    def state_dict(self) -> dict:
        return {"t": self.t, "moments": self.moments, "last": self.last}

    def load_state_dict(self, state: dict) -> None:
        self.t = state["t"]
        self.last.copy_(state["last"])
        for k in self.moments:
            self.moments[k].copy_(state["moments"][k])
