"""The frozen image CNN that stands in for the papers' ImageNet networks: a small classifier trained
on single Fashion-MNIST items, whose penultimate layer gives the features.

On a scene canvas the feature map is pooled per cell of the 2x2 grid, so where an item is survives
as well as what it is. Test-time augmentation (5 crops and their mirror images) stands in for the
10-crop average of Section 4.2 of Vendrov et al.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST train pixel statistics (of x / 255)


def to_input(images: np.ndarray | torch.Tensor, device=None) -> torch.Tensor:
    """uint8 (B, H, W) grey or (B, H, W, 3) colour -> normalised float (B, 1 or 3, H, W)."""
    x = torch.as_tensor(images, device=device).float().div_(255.0)
    x = (x - MEAN) / STD
    return x.permute(0, 3, 1, 2) if x.dim() == 4 else x[:, None]


class ItemCNN(nn.Module):
    """Three conv blocks (3x3 conv, batch norm, ReLU; 2x2 max-pool after the first two), global
    average pooling and a linear classifier. Fully convolutional: any canvas size goes in.

    The trunk runs channels-last (NHWC) whatever layout comes in: oneDNN's convolutions train
    1.3-1.5x faster so on one CPU thread (bench_compute_floor, the item CNN's NCHW and NHWC rows)."""

    def __init__(self, n_classes: int = 10, width: int = 16, in_channels: int = 1):
        super().__init__()
        w = width
        block = lambda i, o: [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]
        self.trunk = nn.Sequential(
            *block(in_channels, w), nn.MaxPool2d(2), *block(w, 2 * w), nn.MaxPool2d(2), *block(2 * w, 4 * w)
        )
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(4 * w, n_classes))
        self.channels = 4 * w

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.trunk(x.contiguous(memory_format=torch.channels_last))  # (B, C, H/4, W/4), NHWC in memory

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_map(x).mean((2, 3))  # (B, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))  # (B, n_classes) logits


@dataclass
class CNNConfig:
    width: int = 16
    epochs: int = 5
    batch: int = 128
    lr: float = 2e-3
    weight_decay: float = 5e-4
    shift: int = 2  # random translation of up to this many pixels, as items sit in their slots
    seed: int = 0
    classes: tuple[int, ...] | None = None  # train on these labels only (zero-shot held-outs excluded)
    in_channels: int = 1  # 3: colour images, uint8 (N, H, W, 3)


@torch.no_grad()
def predict(model: ItemCNN, images, batch: int = 1024) -> np.ndarray:
    """Class indices (model numbering) for uint8 (N, H, W) or (N, H, W, 3) images."""
    model.eval()
    device = next(model.parameters()).device
    return (
        np.concatenate(
            [
                model(to_input(images[i : i + batch], device)).argmax(1).cpu().numpy()
                for i in range(0, len(images), batch)
            ]
        )
        if len(images)
        else np.zeros(0, int)
    )


@torch.no_grad()
def item_features(model: ItemCNN, images, batch: int = 1024) -> torch.Tensor:
    """(N, C) penultimate features of single items (uint8 (N, H, W) or (N, H, W, 3))."""
    model.eval()
    device = next(model.parameters()).device
    out = [model.features(to_input(images[i : i + batch], device)).cpu() for i in range(0, len(images), batch)]
    return torch.cat(out) if out else torch.zeros(0, model.channels)


def crop_offsets(pad: int) -> list[tuple[int, int]]:
    """(dy, dx) of the 4 corner crops and the centre crop of a canvas padded by `pad`."""
    return [(0, 0), (0, 2 * pad), (2 * pad, 0), (2 * pad, 2 * pad), (pad, pad)]


@torch.no_grad()
def scene_features(
    model: ItemCNN, canvases, grid: int = 2, pad: int = 2, batch: int = 256, progress: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (10-crop, 1-crop) features, each (N, C * grid * grid), of uint8 (N, H, W) canvases:
    the feature map averaged over each cell of a grid x grid partition, flattened, averaged over
    the 10 views (5 crops x mirror) or taken from the centre crop alone."""
    model.eval()
    device = next(model.parameters()).device
    n, h, w = canvases.shape
    ten, one = [], []
    for i in tqdm(range(0, n, batch), desc="scene features", disable=not progress):
        x = F.pad(to_input(canvases[i : i + batch], device), (pad,) * 4, value=-MEAN / STD)
        views = []
        for dy, dx in crop_offsets(pad):
            crop = x[:, :, dy : dy + h, dx : dx + w]
            for mirrored in (False, True):
                fmap = model.feature_map(crop.flip(-1) if mirrored else crop)
                fmap = fmap.flip(-1) if mirrored else fmap  # back to the canvas's left and right
                views.append(F.adaptive_avg_pool2d(fmap, grid).flatten(1))  # (B, C * grid^2)
        ten.append(torch.stack(views).mean(0).cpu())
        one.append(views[-2].cpu())  # centre crop, not mirrored
    return torch.cat(ten), torch.cat(one)
