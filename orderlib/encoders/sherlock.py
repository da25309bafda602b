"""Sherlock's structured embedding model (SEM; Elhoseiny et al., AAAI 2017, Eqs. 1-6).

A fact is three blocks [S | P | O]. The language view is fixed word vectors per slot (zero for a
wild-card); the visual view is a CNN: SEM-A shares its lower layers, then splits into an S branch
and a PO branch (Eq. 5); SEM-B shares every layer under three heads. The loss is
sum_slot w_slot * 1/2 ||v_slot - l_slot||^2 with w = 0 for wild-cards, which retrieval distances
ignore too. `average=True` is the ablation that averages S, P and O into one vector.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from orderlib.encoders.cnn import ItemCNN, to_input
from orderlib.penalties import order_violation_matrix


def _head(channels: int, hidden: int, grid: int = 2) -> nn.Sequential:
    """theta_u: two fully connected layers (VGG's fc6, fc7) over the feature map pooled to a
    grid x grid layout, so where things are (S left of O) survives, as VGG's fc6 sees its 7x7 map."""
    return nn.Sequential(
        nn.AdaptiveAvgPool2d(grid),
        nn.Flatten(),
        nn.Linear(channels * grid * grid, hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, hidden),
        nn.ReLU(inplace=True),
    )


class SEM(nn.Module):
    """SEM-A (branched=True) or SEM-B over a pre-trained ItemCNN's layers (copied, trainable)."""

    def __init__(self, cnn: ItemCNN, dim: int, hidden: int = 256, branched: bool = True):
        super().__init__()
        trunk = list(copy.deepcopy(cnn.trunk).children())
        shared, top = trunk[:-3], trunk[-3:]  # the last conv block is the branch
        self.shared = nn.Sequential(*shared)
        self.branched = branched
        self.s_branch = nn.Sequential(*copy.deepcopy(top), _head(cnn.channels, hidden))
        self.po_branch = nn.Sequential(*copy.deepcopy(top), _head(cnn.channels, hidden)) if branched else None
        self.W = nn.ModuleDict({k: nn.Linear(hidden, dim) for k in "SPO"})
        self.dim = dim

    def forward(self, images) -> torch.Tensor:
        """uint8 (B, H, W, 3) images -> (B, 3, dim): v_S, v_P, v_O."""
        d = self.shared(to_input(images, self.W["S"].weight.device))
        s = self.s_branch(d)
        e = self.po_branch(d) if self.branched else s
        return torch.stack([self.W["S"](s), self.W["P"](e), self.W["O"](e)], 1)


def slot_mask(orders: torch.Tensor) -> torch.Tensor:
    """Slot weights w (B, 3) of facts of the given orders (1: S; 2: S, P; 3: S, P, O)."""
    return (torch.arange(3, device=orders.device)[None] < orders[:, None]).float()


def structured_loss(v: torch.Tensor, l: torch.Tensor, orders: torch.Tensor, average: bool = False) -> torch.Tensor:
    """Mean over the batch of sum_slot w_slot 1/2 ||v_slot - l_slot||^2; v, l (B, 3, d)."""
    w = slot_mask(orders)  # (B, 3)
    if average:
        diff = ((v * w[..., None]).sum(1) - (l * w[..., None]).sum(1)) / w.sum(1, keepdim=True)  # (B, d)
        return 0.5 * diff.pow(2).sum(1).mean()
    return (0.5 * (v - l).pow(2).sum(-1) * w).sum(1).mean()


def structured_distance(
    v: torch.Tensor, l: torch.Tensor, orders: torch.Tensor, average: bool = False, per_slot: bool = False
) -> torch.Tensor:
    """(N, F) distances between image embeddings v (N, 3, d) and facts l (F, 3, d) of `orders`
    (F,): squared Euclidean over each fact's non-wild-card slots (Sherlock's "Testing"). Summed
    over the slots, as the paper says, lower-order facts have fewer terms and so win image -> fact
    retrieval; per_slot=True divides by the number of slots compared."""
    w = slot_mask(orders)  # (F, 3)
    if average:
        lv = (l * w[..., None]).sum(1) / w.sum(1, keepdim=True)  # (F, d)
        out = []
        for k in range(3):  # images averaged over the slots each fact keeps: orders 1, 2, 3
            vk = v[:, : k + 1].mean(1)  # (N, d)
            out.append(torch.cdist(vk, lv).pow(2))
        stacked = torch.stack(out)  # (3, N, F)
        return stacked.gather(0, (orders - 1)[None, None, :].expand(1, v.shape[0], -1))[0]
    total = sum(torch.cdist(v[:, k], l[:, k]).pow(2) * w[None, :, k] for k in range(3))
    return total / orders[None].to(total.dtype) if per_slot else total


class StructuredOrder(nn.Module):
    """Beyond the paper: Sherlock's [S | P | O] space as an order embedding (Vendrov et al.).
    Facts: f_k = |U_k l_k| per slot and zero at wild-cards, so <sandal> lies above
    <sandal, red> and every image of a sandal; images: |SEM-A(x)|. E(image, fact) =
    ||max(0, f - v)||^2 over all blocks (Eq. 2 of Vendrov et al.), zero when the fact is true of
    the image; a wild-card block costs nothing by construction."""

    def __init__(self, cnn: ItemCNN, word_dim: int, dim: int, hidden: int = 256, branched: bool = True):
        super().__init__()
        self.visual = SEM(cnn, dim, hidden, branched)
        self.U = nn.ModuleList(nn.Linear(word_dim, dim, bias=False) for _ in range(3))

    def facts(self, l: torch.Tensor, orders: torch.Tensor) -> torch.Tensor:
        """(F, 3, dim) fact embeddings of word vectors l (F, 3, word_dim) of `orders` (F,)."""
        f = torch.stack([self.U[k](l[:, k]).abs() for k in range(3)], 1)  # (F, 3, dim)
        return f * slot_mask(orders.to(f.device))[..., None]

    def forward(self, images) -> torch.Tensor:
        """uint8 (B, H, W, 3) images -> (B, 3, dim), non-negative."""
        return self.visual(images).abs()


def order_energy(v: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """(N, F) E(image, fact) = ||max(0, f - v)||^2 of images v (N, 3, d) and facts f (F, 3, d)."""
    return order_violation_matrix(v.flatten(1), f.flatten(1))


def structured_order_loss(v: torch.Tensor, f: torch.Tensor, implied: torch.Tensor, margin: float) -> torch.Tensor:
    """Eq. (5) of Vendrov et al. over a batch of B images v (B, 3, d) and their facts f (B, 3, d):
    sum of hinges alpha + E(i, i) - E(i, j) in both directions, skipping pairs where fact j is
    true of image i (`implied` (B, B) bool, e.g. <sandal> for an image of <sandal, red>)."""
    e = order_energy(v, f)  # (B images, B facts)
    pos = e.diagonal()[:, None]  # (B, 1)
    neg = ~implied
    cost_fact = (margin + pos - e).clamp(min=0) * neg  # image i: wrong facts j
    cost_image = (margin + pos.T - e).clamp(min=0) * neg  # fact j: images i it is not true of
    return (cost_fact.sum() + cost_image.sum()) / len(e)
