"""Table 1's word2gauss baseline (Vilnis & McCallum, 2015), trained as the seomoz/word2gauss code that
Vendrov et al. ran: one (positive, corrupted) pair at a time with per-coordinate Adagrad, means
kept in a ball and variances in a box (docs/protocols.md). The loop is compiled
(orderlib/csrc/word2gauss.cpp, built by orderlib/concepts/compiled.py) so the paper's 200 epochs take minutes. Each epoch's shuffle and
negatives come from an RNG seeded by (seed, epoch), so a resumed run is the run it continues.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from orderlib import penalties
from orderlib.checkpoint import code_version
from orderlib.concepts.base import ConceptModel
from orderlib.concepts.compiled import W2G_SOURCE, source_key, word2gauss_kernel, word2gauss_status
from orderlib.concepts.train import hypernymy_accuracy
from orderlib.data.hypernymy import HypernymyData
from orderlib.training import ThresholdResult, fit


@dataclass
class Word2GaussConfig:
    """word2gauss's settings; the defaults are the code's own where Vendrov et al. give none."""

    model: str = "word2gauss"
    dim: int = 50
    epochs: int = 200  # Vendrov et al., Sec. 3.4
    patience: int = 200  # epochs without a better dev accuracy before stopping (200: never)
    margin: float = 7.0  # Vendrov et al.'s grid-search choice
    eta: float = 0.1  # word2gauss's default global Adagrad rate (means and variances)
    mu_max: float = 2.0  # word2gauss's default bound on ||mu||
    var_min: float = 0.7  # word2gauss's default bounds on each variance
    var_max: float = 1.5
    max_grad: float = 10.0  # word2gauss clips each gradient coordinate at 10
    mu0: float = 0.1  # word2gauss's init: mu ~ N(0, mu0^2), var ~ clip(N(var_mean0, var_std0^2))
    var_mean0: float = 0.5
    var_std0: float = 1.0
    train_fraction: float = 1.0
    seed: int = 0


class DiagonalGaussians(ConceptModel):
    """One diagonal Gaussian per concept, variances stored directly (as word2gauss does);
    energy KL(N_u || N_v) (Vilnis & McCallum, 2015), low when u lies inside v."""

    loss = "ranking_hinge"

    def __init__(self, n: int, cfg: Word2GaussConfig, generator: torch.Generator):
        super().__init__()
        self.mu = nn.Embedding(n, cfg.dim)
        self.var = nn.Embedding(n, cfg.dim)
        with torch.no_grad():
            self.mu.weight.normal_(generator=generator).mul_(cfg.mu0)
            self.var.weight.normal_(generator=generator).mul_(cfg.var_std0).add_(cfg.var_mean0)
            self.var.weight.clamp_(cfg.var_min, cfg.var_max)

    def energy(self, u, v):
        return penalties.gaussian_kl(self.mu(u), self.var(u), self.mu(v), self.var(v))  # (B,)


class _Adagrad:
    """word2gauss's per-coordinate squared-gradient sums, for `fit`'s checkpoints."""

    def __init__(self, model: DiagonalGaussians):
        self.acc_mu = torch.zeros_like(model.mu.weight.data)
        self.acc_var = torch.zeros_like(model.var.weight.data)

    def state_dict(self) -> dict:
        return {"acc_mu": self.acc_mu, "acc_var": self.acc_var}

    def load_state_dict(self, state: dict) -> None:
        self.acc_mu.copy_(state["acc_mu"])
        self.acc_var.copy_(state["acc_var"])


def epoch_pairs(data: HypernymyData, cfg: Word2GaussConfig, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """Return this epoch's shuffled positives and their corrupted pairs, (P, 2) each."""
    rng = np.random.default_rng([cfg.seed, epoch])
    pos = data.epoch_positives(rng, cfg.train_fraction)
    return pos, data.train_negatives(rng, pos)


def train_word2gauss(
    data: HypernymyData, cfg: Word2GaussConfig, checkpoint: Path | None = None, progress: bool = True
) -> ThresholdResult:
    """Train word2gauss on CPU for `cfg.epochs` epochs, keeping the epoch with the best dev accuracy;
    resume from `checkpoint` if present. Needs the compiled loop (a C++ compiler and ninja)."""
    kernel = word2gauss_kernel()
    if kernel is None:
        raise RuntimeError(
            f"the word2gauss trainer needs a C++ compiler and ninja to build "
            f"{W2G_SOURCE.name} ({word2gauss_status()}); install g++ (apt install g++) "
            f"and `pip install ninja`"
        )
    model = DiagonalGaussians(data.n_nodes, cfg, torch.Generator().manual_seed(cfg.seed))
    opt = _Adagrad(model)

    def one_epoch(epoch: int) -> float:
        pos, neg = epoch_pairs(data, cfg, epoch)
        with torch.no_grad():
            return kernel.train_epoch(
                model.mu.weight.data,
                model.var.weight.data,
                opt.acc_mu,
                opt.acc_var,
                torch.from_numpy(np.ascontiguousarray(pos)),
                torch.from_numpy(np.ascontiguousarray(neg)),
                cfg.eta,
                cfg.eta,
                cfg.margin,
                cfg.mu_max,
                cfg.var_min,
                cfg.var_max,
                cfg.max_grad,
            )

    key = {
        **asdict(cfg),
        "code": code_version(__name__),
        "kernel": source_key(W2G_SOURCE),
        "data": data.key(),
    }
    model.eval()
    fitted = fit(
        model,
        opt,
        key,
        one_epoch,
        lambda: hypernymy_accuracy(model, data, "cpu"),
        "dev_accuracy",
        cfg.epochs,
        cfg.patience,
        checkpoint,
        progress,
        cfg.model,
    )
    ev = hypernymy_accuracy(model, data, "cpu")
    return ThresholdResult.of(model, fitted, ev)
