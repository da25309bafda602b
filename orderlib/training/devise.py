"""Train DeViSE (Section 3.3 of Frome et al.): first the map M on the frozen CNN's features, then
M and the CNN together at a lower learning rate ("fine-tune the CNN"), each stage kept at its best
epoch by held-out hit@1 over the training labels."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from orderlib.checkpoint import code_version, fingerprint
from orderlib.encoders.cnn import ItemCNN, item_features, to_input
from orderlib.encoders.devise import DeViSE
from orderlib.losses import hinge_rank
from orderlib.reports import model_record
from orderlib.training import fit, seeded_rng
from orderlib.training.item_cnn import augment


@dataclass
class DeViSEConfig:
    score: str = "dot"
    margin: float = 0.1  # Eq. (1); "a fraction of the norm of the vectors, which is 1.0"
    epochs: int = 10  # stage 1: M alone on frozen features
    finetune_epochs: int = 2  # stage 2: M and the CNN
    batch: int = 128
    lr: float = 1e-3
    finetune_lr: float = 1e-4
    seed: int = 0


@torch.no_grad()
def embed_images(model: DeViSE, images, batch: int = 1024) -> torch.Tensor:
    """(N, D) label-space embeddings of uint8 (N, 28, 28) images."""
    model.eval()
    device = model.M.weight.device
    feats = item_features(model.cnn, images, batch).to(device)
    return torch.cat([model.embed_features(feats[i : i + batch]) for i in range(0, len(feats), batch)])


@torch.no_grad()
def rank_labels(
    model: DeViSE, embedded: torch.Tensor, label_vectors: torch.Tensor, k: int, batch: int = 512
) -> np.ndarray:
    """(N, k) indices into label_vectors, best first (ties broken by index)."""
    out = []
    for i in range(0, len(embedded), batch):
        s = model.scores(embedded[i : i + batch], label_vectors)  # (b, L)
        out.append(torch.sort(s, dim=1, descending=True, stable=True).indices[:, :k].cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, k), np.int64)


def train_devise(
    cnn: ItemCNN,
    images: np.ndarray,
    labels: np.ndarray,
    held_images: np.ndarray,
    held_labels: np.ndarray,
    label_vectors: torch.Tensor,
    cfg: DeViSEConfig,
    device="cpu",
    checkpoint_dir: Path | None = None,
    progress: bool = True,
) -> tuple[DeViSE, list[dict]]:
    """Train DeViSE on images with labels 0..L-1 indexing the rows of label_vectors (L, D): the
    training labels, the only ones the loss compares against. The CNN passed in is not changed."""
    device = torch.device(device)
    t = torch.as_tensor(label_vectors, dtype=torch.float32, device=device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = DeViSE(copy.deepcopy(cnn), t.shape[1], cfg.score).to(device)
    model.cnn.requires_grad_(False)
    feats = item_features(model.cnn, images).to(device)
    y = torch.as_tensor(labels, device=device)

    def held_out() -> dict:
        ranked = rank_labels(model, embed_images(model, held_images), t, 1)[:, 0]
        return {"held_out_hit@1": 100.0 * float((ranked == held_labels).mean())}

    def stage1(epoch: int) -> float:
        g = torch.Generator().manual_seed(cfg.seed * 1000 + epoch)  # per epoch: resume = uninterrupted
        order = torch.randperm(len(y), generator=g)
        total, steps = 0.0, range(0, len(order), cfg.batch)
        for i in tqdm(steps, desc=f"devise epoch {epoch}", leave=False, disable=not progress):
            idx = order[i : i + cfg.batch].to(device)
            loss = hinge_rank(model.scores(model.embed_features(feats[idx]), t), y[idx], cfg.margin, generator=g)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        return total / len(steps)

    def stage2(epoch: int) -> float:
        model.train()
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + 500 + epoch)
        order = torch.randperm(len(y), generator=gen)
        total, steps = 0.0, range(0, len(order), cfg.batch)
        with seeded_rng(cfg.seed * 1000 + 750 + epoch, device):  # the CNN's dropout follows the seed
            for i in tqdm(steps, desc=f"fine-tune epoch {epoch}", leave=False, disable=not progress):
                idx = order[i : i + cfg.batch]
                x = augment(to_input(images[idx.numpy()]), 2, gen).to(device)
                loss = hinge_rank(model.scores(model(x), t), y[idx.to(device)], cfg.margin, generator=gen)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item()
        model.eval()
        return total / len(steps)

    ckpt = (lambda name: Path(checkpoint_dir) / name) if checkpoint_dir else (lambda name: None)
    # a checkpoint belongs to these label vectors, this CNN, these images and this code
    base = {
        **asdict(cfg),
        "labels": int(t.shape[0]),
        "n": int(len(y)),
        "data": fingerprint(t, cnn.state_dict(), images, labels, held_images, held_labels),
        "code": code_version(__name__),
    }
    opt = torch.optim.Adam(model.M.parameters(), lr=cfg.lr)
    r1 = fit(
        model,
        opt,
        {**base, "stage": 1},
        stage1,
        held_out,
        "held_out_hit@1",
        cfg.epochs,
        cfg.epochs,
        ckpt("devise_stage1.pt"),
        progress,
        "DeViSE (frozen CNN)",
    )
    history = [{**h, "stage": "frozen CNN"} for h in r1.history]
    if cfg.finetune_epochs:
        model.cnn.requires_grad_(True)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.finetune_lr)
        r2 = fit(
            model,
            opt,
            {**base, "stage": 2},
            stage2,
            held_out,
            "held_out_hit@1",
            cfg.finetune_epochs,
            cfg.finetune_epochs,
            ckpt("devise_stage2.pt"),
            progress,
            "DeViSE (fine-tune)",
        )
        history += [{**h, "stage": "fine-tuned"} for h in r2.history]
    model.eval().requires_grad_(False)
    fits = [r1, r2] if cfg.finetune_epochs else [r1]
    model.provenance = model_record(
        sum(r.seconds for r in fits), r1.trained_at, any(r.resumed for r in fits), epochs_run=len(history)
    )
    return model, history
