"""Figure 2 of Vendrov et al.: a 2-D order-embedding of a small real WordNet subtree.

Every ordered pair of the subtree is a training example: pairs in the transitive closure are
positive, all others negative (Eq. 3 with the full negative set). Positive iff E(u, v) = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from orderlib.data.hypernymy import closure_pairs
from orderlib.data.wordnet import NounGraph
from orderlib.losses import max_margin
from orderlib.params import matmul, one_of
from orderlib.penalties import order_violation_matrix

PRESETS = {
    "full": dict(root="feline.n.01", depth=2, dim=2, steps=4000, lr=0.02, margin=1.0, seed=0, sweep_seeds=6),
    "small": dict(root="feline.n.01", depth=2, dim=2, steps=1500, lr=0.02, margin=1.0, seed=0, sweep_seeds=2),
}

# Notebook parameters and their valid values (orderlib.params.validate).
PARAMETERS = {"PRESET": one_of(PRESETS), "MATMUL": matmul, "WORDNET": one_of(["3.0", "3.1"])}
FIT_KEYS = ("dim", "steps", "lr", "margin", "seed")


@dataclass
class Subtree:
    names: list[str]
    parents: list[list[int]]  # within the subtree; the root has none


def subtree(graph: NounGraph, root: str, depth: int) -> Subtree:
    """Return the hyponyms of `root` down to `depth` levels, with their in-subtree hypernyms."""
    idx = graph.index()
    if root not in idx:
        raise KeyError(f"{root!r} is not a noun synset of WordNet {graph.version}")
    children: dict[int, list[int]] = {}
    for c, ps in enumerate(graph.parents):
        for p in ps:
            children.setdefault(p, []).append(c)
    keep, frontier = [idx[root]], [idx[root]]
    for _ in range(depth):
        frontier = [c for p in frontier for c in children.get(p, []) if c not in keep]
        keep += frontier
    local = {g: i for i, g in enumerate(keep)}
    parents = [[local[p] for p in graph.parents[g] if p in local] for g in keep]
    return Subtree([graph.names[g] for g in keep], parents)


def fit_2d(tree: Subtree, dim=2, steps=4000, lr=0.02, margin=1.0, seed=0) -> dict:
    """Fit an order-embedding of every ordered pair of the subtree; return embedding and pairs."""
    n = len(tree.names)
    pos = np.zeros((n, n), dtype=bool)
    cp = closure_pairs(tree.parents)
    pos[cp[:, 0], cp[:, 1]] = True
    off_diag = ~np.eye(n, dtype=bool)
    pos_t, neg_t = torch.as_tensor(pos), torch.as_tensor(~pos & off_diag)
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, dim, generator=g).mul_(2).requires_grad_()
    opt = torch.optim.Adam([x], lr=lr)
    for _ in range(steps):
        e = order_violation_matrix(x, x)  # (n, n): E[u, v] = E(f(u), f(v))
        loss = max_margin(e[pos_t], e[neg_t], margin)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(min=0)
    with torch.no_grad():
        e = order_violation_matrix(x, x).numpy()
    predicted = (e <= 1e-9) & off_diag
    return {
        "x": x.detach().numpy(),
        "energy": e,
        "true": pos,
        "missed": np.argwhere(pos & ~predicted),
        "spurious": np.argwhere(predicted & ~pos),
    }


def seed_sweep(tree: Subtree, cfg: dict):
    """Return a DataFrame of missed and spurious pair counts of `fit_2d` for seeds 0..sweep_seeds-1."""
    import pandas as pd

    rows = []
    for seed in range(cfg["sweep_seeds"]):
        fit = fit_2d(tree, **{**{k: cfg[k] for k in FIT_KEYS}, "seed": seed})
        rows.append({"seed": seed, "missed": len(fit["missed"]), "spurious": len(fit["spurious"])})
    return pd.DataFrame(rows)


def plot_2d(tree: Subtree, fit: dict, ax=None):
    """Draw the embedding: green arrows for satisfied direct hypernym pairs, red for violated
    ones, pink for spurious pairs (predicted ordered but not in WordNet)."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(8, 8))[1]
    x = fit["x"]
    ax.scatter(x[:, 0], x[:, 1], s=18, color="black", zorder=3)
    for i, name in enumerate(tree.names):
        ax.annotate(name.split(".")[0].replace("_", " "), x[i], fontsize=8, xytext=(4, 3), textcoords="offset points")

    def arrow(u, v, color):
        ax.annotate(
            "", xy=x[v], xytext=x[u], zorder=2, arrowprops=dict(arrowstyle="->", color=color, lw=1.2, alpha=0.8)
        )

    for u, ps in enumerate(tree.parents):
        for v in ps:
            arrow(u, v, "tab:green" if fit["energy"][u, v] <= 1e-9 else "tab:red")
    for u, v in fit["spurious"]:
        arrow(u, v, "hotpink")
    ax.set_xlim(left=-0.05)
    ax.set_ylim(bottom=-0.05)
    ax.set_xlabel("dimension 1")
    ax.set_ylabel("dimension 2")
    ax.set_title(
        f"2-D order-embedding of the WordNet subtree under {tree.names[0]} "
        f"({len(tree.names)} synsets): {len(fit['spurious'])} spurious, "
        f"{len(fit['missed'])} missed pairs"
    )
    return ax
