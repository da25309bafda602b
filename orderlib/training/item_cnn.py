"""Training of the item CNN (encoders/cnn.py): the ImageNet stand-in the notebooks freeze, trained on
single Fashion-MNIST items with random shifts and mirror images, early-stopped on held-out items."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from orderlib.checkpoint import code_version, fingerprint
from orderlib.data.attributes import plain_images
from orderlib.data.fashion_mnist import load_fashion_mnist
from orderlib.encoders.cnn import MEAN, STD, CNNConfig, ItemCNN, predict, to_input
from orderlib.reports import model_record
from orderlib.training.loop import fit, seeded_rng


def augment(x: torch.Tensor, shift: int, g: torch.Generator) -> torch.Tensor:
    """Random shifts (zero padding) and mirror images of a (B, 1, H, W) batch."""
    b, _, h, w = x.shape
    padded = F.pad(x, (shift,) * 4, value=-MEAN / STD)  # pad with the background value
    dy, dx = torch.randint(0, 2 * shift + 1, (2, b), generator=g)
    out = torch.stack([padded[i, :, dy[i] : dy[i] + h, dx[i] : dx[i] + w] for i in range(b)])
    flip = torch.rand(b, generator=g) < 0.5
    out[flip] = out[flip].flip(-1)
    return out


def train_item_cnn(
    images: np.ndarray,
    labels: np.ndarray,
    held_images: np.ndarray,
    held_labels: np.ndarray,
    cfg: CNNConfig,
    device="cpu",
    checkpoint=None,
    progress: bool = True,
) -> tuple[ItemCNN, list[dict]]:
    """Train the classifier on (images, labels), early-stop on held-out accuracy; return it frozen
    (eval mode, no gradients) with its history. Labels outside `cfg.classes` are dropped from
    both sets; kept labels are renumbered 0..k-1 in the order of `cfg.classes`."""
    device = torch.device(device)
    classes = tuple(sorted(set(labels.tolist()))) if cfg.classes is None else tuple(cfg.classes)
    remap = np.full(max(max(classes), int(labels.max()), int(held_labels.max())) + 1, -1)
    remap[list(classes)] = np.arange(len(classes))
    keep, hkeep = remap[labels] >= 0, remap[held_labels] >= 0
    x, y = torch.as_tensor(images[keep]), torch.as_tensor(remap[labels[keep]])
    hx, hy = torch.as_tensor(held_images[hkeep]), torch.as_tensor(remap[held_labels[hkeep]])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = ItemCNN(len(classes), cfg.width, cfg.in_channels).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def one_epoch(epoch: int) -> float:
        model.train()
        g = torch.Generator().manual_seed(cfg.seed * 1000 + epoch)
        order, total = torch.randperm(len(y), generator=g), 0.0
        lr = cfg.lr * 0.5 * (1 + np.cos(np.pi * epoch / cfg.epochs))  # cosine schedule per epoch
        for group in opt.param_groups:
            group["lr"] = lr
        steps = range(0, len(order), cfg.batch)
        with seeded_rng(cfg.seed * 1000 + 500 + epoch, device):  # dropout draws follow the seed
            for i in tqdm(steps, desc=f"cnn epoch {epoch}", leave=False, disable=not progress):
                idx = order[i : i + cfg.batch]
                xb = augment(to_input(x[idx]), cfg.shift, g).to(device)
                loss = F.cross_entropy(model(xb), y[idx].to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item()
        return total / len(steps)

    def held_out_accuracy() -> dict:
        return {"held_out_accuracy": 100.0 * float((predict(model, hx) == hy.numpy()).mean())}

    cfg_dict = {
        **asdict(cfg),
        "classes": list(classes),
        "n_train": int(len(y)),
        "code": code_version(__name__),
        "data": fingerprint(x, y, hx, hy),
    }
    fitted = fit(
        model,
        opt,
        cfg_dict,
        one_epoch,
        held_out_accuracy,
        "held_out_accuracy",
        cfg.epochs,
        cfg.epochs,
        checkpoint,
        progress,
        "item CNN",
    )
    model.eval().requires_grad_(False)
    model.classes = classes
    model.provenance = model_record(fitted.seconds, fitted.trained_at, fitted.resumed, epochs_run=len(fitted.history))
    return model, fitted.history


def pretrain_item_cnn(cfg: dict, workdir: Path, device="cpu", progress: bool = True) -> tuple[ItemCNN, list]:
    """The ImageNet stand-in of notebooks 08 and 09: object classification of plain, randomly tinted
    training items (no attribute, no pair ever shown), held-out accuracy on plain val items."""
    train = load_fashion_mnist("train")
    k = cfg["cnn_items"]
    x = plain_images(train, np.arange(k), cfg["seed"])
    hx = plain_images(train, np.arange(50000, 52000), cfg["seed"] + 1)
    return train_item_cnn(
        x,
        train.labels[:k],
        hx,
        train.labels[50000:52000],
        CNNConfig(**cfg["cnn"], seed=cfg["seed"], in_channels=3),
        device,
        Path(workdir) / "cnn.pt",
        progress,
    )
