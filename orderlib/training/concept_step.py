"""Table 1's table models stepped by one compiled call per batch (orderlib/csrc/concept_step.cpp):
energy, loss, a hand-written gradient, lazy Adam and the constraint in one pass over the touched
rows, where the PyTorch step (`hypernymy._Stepper`) makes about 50 small ATen calls.

Its optimiser state lives in the RowAdam it is given, so checkpoints are the same either way. Used
where `applies` holds; elsewhere, or with ORDERLIB_FUSED=0, the PyTorch step runs.
"""

from __future__ import annotations

import math

import torch

from orderlib.kernels import concept_step_kernel
from orderlib.optim import RowAdam

# the kernel's energy codes, and the parameters each takes (a model's fused_energy()["params"], in order)
ENERGIES = {
    "order_violation": (0, []),
    "cosine": (1, ["eps"]),
    "density_order": (2, ["gamma", "normalize"]),
    "box": (3, ["temperature"]),
    "gumbel_box": (4, ["beta", "temperature"]),
    "bilinear": (5, []),
    "poincare_distance": (6, []),
    "cones": (7, ["K"]),
}
LOSSES = {"max_margin": 0, "ranking_hinge": 1, "binary_cross_entropy": 2, "logistic_ranking": 3}  # the kernel's codes


def ball_flags(spec: dict) -> list[bool]:
    """Per table of a fused_energy() spec: are its rows points of the unit Poincaré ball."""
    return [bool(b) for b in spec.get("ball", [False] * len(spec["tables"]))]


def applies(model, optimizer: str, loss: str, device: torch.device) -> bool:
    """True where the compiled step computes what the PyTorch step would."""
    spec = model.fused_energy()
    dense = [n for n, p in model.named_parameters() if n not in model.tables() and p.requires_grad]
    if spec is None:
        return False
    balls = {t for t, b in zip(spec["tables"], ball_flags(spec)) if b}
    return (
        optimizer in ("lazy_adam", "sparse_adam")
        and dense == spec.get("dense", [])
        and set(model.manifolds()) == balls
        and loss in LOSSES
        and torch.device(device).type == "cpu"
        and all(t.dtype in (torch.float32, torch.float64) for t in model.tables().values())
    )


class FusedStep:
    """Call with (pairs ((1 + K) B, 2), B) for one step; state lives in `rows` (a RowAdam). The
    energy's dense parameters (if any) are left with their gradient in `.grad`, not stepped."""

    def __init__(self, model, rows: RowAdam, loss: str, margin: float):
        self.kernel = concept_step_kernel()
        if self.kernel is None:
            raise RuntimeError("the compiled table-model step is unavailable (orderlib.kernels.concept_step_status())")
        spec = model.fused_energy()
        self.names = spec["tables"]
        self.lower = [lo for lo, _ in spec["bounds"]]
        self.upper = [hi for _, hi in spec["bounds"]]
        self.ball = ball_flags(spec)
        norms = spec.get("norm_bounds", [(0.0, math.inf)] * len(self.names))
        self.norm_lo, self.norm_hi = [float(lo) for lo, _ in norms], [float(hi) for _, hi in norms]
        self.energy, names = ENERGIES[spec["energy"]]
        self.params = [float(x) for x in spec["params"]]
        if len(self.params) != len(names):
            raise ValueError(f"{spec['energy']} takes parameters {names}, got {spec['params']}")
        self.loss, self.margin, self.rows = LOSSES[loss], float(margin), rows
        n = rows.last.shape[0]
        self.mark = torch.full((n,), -1, dtype=torch.long)  # (N,) scratch: a concept's local row
        self.dense = [model.get_parameter(name) for name in spec.get("dense", [])]
        self.grads = [torch.zeros_like(p, memory_format=torch.contiguous_format) for p in self.dense]

    def __call__(self, pairs: torch.Tensor, b: int) -> float:
        r = self.rows
        loss = self.kernel.concept_step(
            [r.tables[k] for k in self.names],
            [r.moments[k] for k in self.names],
            self.lower,
            self.upper,
            r.last,
            self.mark,
            pairs.contiguous(),
            b,
            r.t,
            r.lr,
            r.betas[0],
            r.betas[1],
            r.eps,
            r.window,
            r.EXACT_UNTIL,
            r.catch_up,
            self.energy,
            self.params,
            self.loss,
            self.margin,
            [p.data for p in self.dense],
            self.grads,
            self.ball,
            self.norm_lo,
            self.norm_hi,
        )
        for p, g in zip(self.dense, self.grads):  # for the caller's optimizer
            p.grad = g
        r.t += 1
        return loss

    def flush(self) -> None:
        """Bring every row up to the current step (RowAdam.flush's catch-up rule, in one compiled pass)."""
        r = self.rows
        if r.catch_up:
            self.kernel.concept_flush(
                [r.tables[k] for k in self.names],
                [r.moments[k] for k in self.names],
                self.lower,
                self.upper,
                r.last,
                r.t,
                r.lr,
                r.betas[0],
                r.betas[1],
                r.window,
                r.EXACT_UNTIL,
                self.ball,
                self.norm_lo,
                self.norm_hi,
            )
