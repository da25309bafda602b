"""Training Sherlock's structured embedding models (SEM-A, SEM-B, the averaged ablation) on
(image, fact) pairs; the language view stays fixed (Sherlock: "theta_l is fixed"). Beyond the
paper, objective="order" trains the structured order embedding (StructuredOrder)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from orderlib.checkpoint import code_version, fingerprint
from orderlib.encoders.cnn import ItemCNN
from orderlib.encoders.sherlock import (
    SEM,
    StructuredOrder,
    order_energy,
    structured_distance,
    structured_loss,
    structured_order_loss,
)
from orderlib.training import FitResult, fit


@dataclass
class SEMConfig:
    branched: bool = True  # SEM-A; False: SEM-B
    average: bool = False  # the structure ablation: S, P, O parts averaged
    hidden: int = 256
    epochs: int = 10
    lr: float = 1e-3
    batch: int = 64
    clip: float = 2.0
    seed: int = 0
    objective: str = "regression"  # Sherlock's loss; "order": the structured order embedding
    dim: int = 0  # order objective: dimensions per block (0: the word vectors')
    margin: float = 0.05  # order objective: alpha of Vendrov et al.'s Eq. (5)


@torch.no_grad()
def embed_images(model: SEM, images: np.ndarray, batch: int = 512) -> torch.Tensor:
    """(N, 3, d) structured visual embeddings of uint8 (N, H, W, 3) images, on the CPU."""
    model.eval()
    return torch.cat([model(images[i : i + batch]).cpu() for i in range(0, len(images), batch)])


@torch.no_grad()
def distances(
    model: SEM | StructuredOrder,
    images: np.ndarray,
    language: torch.Tensor,
    orders: torch.Tensor,
    average: bool = False,
    per_slot: bool = False,
) -> torch.Tensor:
    """(N images, F facts) structured distances (wild-card slots ignored), or order violations
    E(image, fact) for a StructuredOrder."""
    v = embed_images(model, images)
    if isinstance(model, StructuredOrder):
        return order_energy(v, model.facts(language.to(next(model.parameters()).device), orders).cpu())
    return structured_distance(v, language, orders, average, per_slot)


def train_sem(
    cfg: SEMConfig,
    cnn: ItemCNN,
    images: np.ndarray,
    language: torch.Tensor,
    orders: torch.Tensor,
    evaluate,
    score: str,
    checkpoint: Path | None = None,
    progress: bool = True,
    device="cpu",
    data_key: str = "",
    fact: np.ndarray | None = None,
    implied: np.ndarray | None = None,
) -> tuple[SEM | StructuredOrder, FitResult]:
    """Train SEM on images (N, H, W, 3) whose facts have language vectors (N, 3, d) and orders
    (N,); keep the epoch of best `evaluate(model)[score]`. The order objective also needs each
    image's fact id `fact` (N,) and `implied` (F, F) (orderlib.data.facts.implies)."""
    device = torch.device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        if cfg.objective == "order":
            if fact is None or implied is None:
                raise ValueError("objective='order' needs fact (N,) and implied (F, F)")
            model = StructuredOrder(
                cnn, language.shape[-1], cfg.dim or language.shape[-1], cfg.hidden, cfg.branched
            ).to(device)
        elif cfg.objective == "regression":
            model = SEM(cnn, language.shape[-1], cfg.hidden, cfg.branched).to(device)
        else:
            raise ValueError(f"unknown objective {cfg.objective!r}; known: 'regression', 'order'")
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    language, orders = torch.as_tensor(language, dtype=torch.float32), torch.as_tensor(orders)
    implied = None if implied is None else torch.as_tensor(implied)

    def batch_loss(idx) -> torch.Tensor:
        l, o = language[idx].to(device), orders[idx].to(device)
        if cfg.objective == "order":
            f = torch.as_tensor(fact[idx])
            return structured_order_loss(model(images[idx]), model.facts(l, o), implied[f][:, f].to(device), cfg.margin)
        return structured_loss(model(images[idx]), l, o, cfg.average)

    def one_epoch(epoch: int) -> float:
        model.train()
        rng = np.random.default_rng([cfg.seed, epoch])
        order = rng.permutation(len(images))
        total, steps = 0.0, 0
        for i in range(0, len(order), cfg.batch):
            idx = order[i : i + cfg.batch]
            loss = batch_loss(idx)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
            total, steps = total + loss.item(), steps + 1
        return total / steps

    key = {
        **asdict(cfg),
        "code": code_version(__name__),
        "data": fingerprint(data_key, images, language, orders, fact, implied),  # every image, not a prefix
        "cnn": fingerprint(cnn.state_dict()),  # the pre-trained layers SEM starts from
        "n": len(images),
    }
    result = fit(
        model,
        opt,
        key,
        one_epoch,
        lambda: evaluate(model),
        score,
        cfg.epochs,
        cfg.epochs,
        checkpoint,
        progress,
        ("order " if cfg.objective == "order" else "")
        + "SEM-"
        + ("A" if cfg.branched else "B")
        + (" averaged" if cfg.average else ""),
    )
    model.eval()
    return model, result
