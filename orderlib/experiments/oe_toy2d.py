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


def fit_2d(tree: Subtree, dim=2, steps=4000, lr=0.02, margin=1.0, seed=0, every: int = 20) -> dict:
    """Fit an order-embedding of every ordered pair of the subtree; return embedding and pairs.

    Each step is one full batch (every ordered pair), so a step is an epoch; `history` keeps, every
    `every` steps, the loss and the pairs the embedding gets wrong before that step (read from the
    step's own energies: recording changes nothing of the fit)."""
    n = len(tree.names)
    pos = np.zeros((n, n), dtype=bool)
    cp = closure_pairs(tree.parents)
    pos[cp[:, 0], cp[:, 1]] = True
    off_diag = ~np.eye(n, dtype=bool)
    pos_t, neg_t = torch.as_tensor(pos), torch.as_tensor(~pos & off_diag)
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, dim, generator=g).mul_(2).requires_grad_()
    opt = torch.optim.Adam([x], lr=lr)
    history = []
    for step in range(steps):
        e = order_violation_matrix(x, x)  # (n, n): E[u, v] = E(f(u), f(v))
        loss = max_margin(e[pos_t], e[neg_t], margin)
        if step % every == 0 or step == steps - 1:
            wrong = ((e.detach() <= 1e-9) != pos_t) & torch.as_tensor(off_diag)
            history.append({"epoch": step, "loss": loss.item(), "wrong pairs": int(wrong.sum())})
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
        "history": history,
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
    ones, pink (curved, so that they stay apart from the straight ones) for spurious pairs, predicted
    ordered but not in WordNet; a legend names each."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(8, 8))[1]
    x = fit["x"]
    ax.scatter(x[:, 0], x[:, 1], s=18, color="black", zorder=3)
    for i, name in enumerate(tree.names):
        ax.annotate(name.split(".")[0].replace("_", " "), x[i], fontsize=9, xytext=(4, 3), textcoords="offset points")

    def arrow(u, v, color, bend=0.0):
        style = dict(arrowstyle="->", color=color, lw=1.2, alpha=0.8, connectionstyle=f"arc3,rad={bend}")
        ax.annotate("", xy=x[v], xytext=x[u], zorder=2, arrowprops=style)

    for u, ps in enumerate(tree.parents):
        for v in ps:
            arrow(u, v, "tab:green" if fit["energy"][u, v] <= 1e-9 else "tab:red")
    for u, v in fit["spurious"]:
        arrow(u, v, "hotpink", bend=0.35)
    handles = [
        plt.Line2D([], [], color="tab:green", lw=1.5, label="direct hypernym pair, embedded (E = 0)"),
        plt.Line2D([], [], color="tab:red", lw=1.5, label="direct hypernym pair, violated (E > 0)"),
        plt.Line2D([], [], color="hotpink", lw=1.5, label="spurious pair: E = 0, not in WordNet"),
    ]
    ax.legend(handles=handles, loc="upper right", fontsize=9, title="arrow: hyponym → hypernym", title_fontsize=9)
    ax.set_xlim(left=-0.05)
    ax.set_ylim(bottom=-0.05)
    ax.set_xlabel("dimension 1 (smaller = more general; the origin is the top element)")
    ax.set_ylabel("dimension 2")
    ax.set_title(
        f"2-D order-embedding of the WordNet subtree under {tree.names[0]} ({len(tree.names)} synsets)\n"
        f"{len(fit['spurious'])} spurious, {len(fit['missed'])} missed pairs",
        fontsize=11,
    )
    return ax


# The paper's Figure 2 caption: every true pair embedded, two spurious pairs (its subtree is unnamed).
PAPER_FIGURE2 = {"true hypernym pairs missed": 0, "spurious pairs": 2}


def figure2_rows(fit: dict):
    """The caption's two counts beside ours, for viz.side_by_side (method, metric, paper, ours)."""
    import pandas as pd

    ours = {"true hypernym pairs missed": len(fit["missed"]), "spurious pairs": len(fit["spurious"])}
    return pd.DataFrame(
        [dict(method="2-D order-embedding", metric=k, paper=v, ours=ours[k]) for k, v in PAPER_FIGURE2.items()]
    )


def spurious_table(tree: Subtree, fit: dict):
    """The spurious pairs by name: the synset placed as a hyponym, then the one placed as its hypernym."""
    import pandas as pd

    rows = [(tree.names[u], tree.names[v]) for u, v in fit["spurious"]]
    return pd.DataFrame(rows, columns=["spurious hyponym", "spurious hypernym"])


def energy_check(margin: float = 1.0):
    """Eq. (2) and the max-margin loss worked by hand on four points of the plane: per pair, whether
    it is a hypernym pair, E by hand, E from order_violation_matrix (what fit_2d trains) and the
    loss term. Returns the table, the loss by hand and losses.max_margin on the same pairs."""
    import pandas as pd

    names = ["feline", "big cat", "cheetah", "tiglon"]
    x = torch.tensor([[0.0, 0.0], [0.0, 2.0], [1.0, 3.0], [0.5, 2.5]])  # hand-placed
    pairs = [(1, 0, True), (2, 1, True), (3, 1, True), (1, 2, False), (2, 3, False)]  # (u, v, in WordNet)
    # E(u, v) = sum_i max(0, v_i - u_i)^2: 0 wherever u sits above and right of v, else the squared gaps:
    # (big cat, cheetah): (1 - 0)^2 + (3 - 2)^2 = 2; (cheetah, tiglon): 0, a spurious order.
    by_hand = [0.0, 0.0, 0.0, 2.0, 0.0]
    e = order_violation_matrix(x, x)
    rows = [
        {
            "pair (u, v)": f"({names[u]}, {names[v]})",
            "in WordNet": pos,
            "E by hand": h,
            "E, library": round(float(e[u, v]), 6),
            "loss term": h if pos else max(0.0, margin - h),
        }
        for (u, v, pos), h in zip(pairs, by_hand)
    ]
    table = pd.DataFrame(rows).set_index("pair (u, v)")
    pos_e = torch.stack([e[u, v] for u, v, p in pairs if p])
    neg_e = torch.stack([e[u, v] for u, v, p in pairs if not p])
    loss_by_hand = table[table["in WordNet"]]["loss term"].mean() + table[~table["in WordNet"]]["loss term"].mean()
    return table, float(loss_by_hand), round(float(max_margin(pos_e, neg_e, margin)), 6)


def training_figure(fit: dict, n_pairs: int):
    """viz.plot_training of the fit: the loss and the pairs the embedding gets wrong (of `n_pairs`
    ordered pairs) per step; every step sees every pair, so a step is an epoch. No selection: the
    last step is the figure."""
    from orderlib.viz import plot_training

    fig = plot_training({"2-D order-embedding": fit["history"]}, "wrong pairs", f"pairs wrong (of {n_pairs})")
    loss, wrong = fig.axes
    for ax in fig.axes:
        for line in ax.lines:
            line.set_marker("")
        ax.set_xlabel("step (full batch: every ordered pair)")
    loss.set_title("training loss (Eq. 3, batch means)", fontsize=10)
    wrong.set_title("pairs the embedding gets wrong (missed + spurious)", fontsize=10)
    wrong.get_legend().remove()
    return fig


def sweep_claims(sweep, n_true: int):
    """The caption's reading checked on every seed of the sweep: claim, over seeds, seeds, verdict."""
    import pandas as pd

    n = len(sweep)
    kept = int((sweep["missed"] == 0).sum())
    lo, hi = int(sweep["spurious"].min()), int(sweep["spurious"].max())
    few = int((sweep["spurious"] <= PAPER_FIGURE2["spurious pairs"]).sum())
    return pd.DataFrame(
        [
            {
                "claim": f"all {n_true} true pairs embedded",
                "over seeds": f"missed: {int(sweep['missed'].min())} to {int(sweep['missed'].max())}",
                "seeds": n,
                "verdict": f"holds in {kept} of {n} seeds",
            },
            {
                "claim": "only a few spurious pairs (the paper: 2)",
                "over seeds": f"spurious: {lo} to {hi}",
                "seeds": n,
                "verdict": f"2 or fewer in {few} of {n} seeds",
            },
        ]
    )
