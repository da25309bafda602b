"""What notebooks 06 and 07 show a reader of DeViSE (Frome et al., NIPS 2013): a hand-worked Eq. (1),
the training curves, the reports' notes and provenance, examples of mistakes with their WordNet
distance to the truth, the zero-shot curves beside the paper's Tables 2-3, and seed-spread rows.
Display and report plumbing only: every number comes from orderlib.experiments.devise or a report."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from orderlib.data.fashion_mnist import CLASSES
from orderlib.eval.hierarchy import hops_from
from orderlib.experiments import devise as exp
from orderlib.losses import hinge_rank
from orderlib.paths import repo_root, reports_root
from orderlib.reports import cite_round, report_meta, write_table

# both kinds of model select their epoch by it: held-out images of the training labels (train images
# 50,000-59,999), not the held-out labels of notebook 07
SELECTION = "hit@1 on held-out images of the training labels (%)"

# What the notebooks put side by side (viz.side_by_side) and read over seeds (seed_rows, viz.verdicts).
_T1 = ["softmax baseline", "devise", "random embeddings", "devise (gloss skip-gram labels)"]
_T1_ORDER = "devise (order-embedding labels)"
TABLE1_ROWS = dict(methods=[*_T1[:3], _T1_ORDER, "chance"], metrics=["hit@1", "hit@2", "hp@2", "hp@5"])
TABLE1_SEED_ROWS = [(m, k) for k in ("hit@1", "hp@5") for m in [*_T1, _T1_ORDER]]
TABLE1_CLAIMS = ["(the paper's)", "DeViSE above random", "GloVe labels", "order-embedding labels above DeViSE,"]
TABLE1_CLAIMS += ["DeViSE above order-embedding"]
PAIR_SEED_ROWS = [(m, k) for k in ("hit@1", "hp@5") for m in _T1[:2]]
_HELD = [f"{m} (held-out only)" for m in ("devise-0", "devise, gloss skip-gram labels-0", "random embeddings-0")]
_HELD += ["devise, order-embedding labels-0 (held-out only)", "chance-0 (held-out only)"]
_PLUS = [f"{m} (held-out + seen)" for m in ("devise+seen", "random embeddings+seen", "chance+seen")]
TABLE4_ROWS = dict(methods=_HELD + _PLUS, metrics=["hit@1", "hit@5"])  # table4_view drops the -0 rows' hit@5
_SETS = ("2-hop", "3-hop", "all artifacts")
TABLES23_ROWS = dict(
    methods=[f"{m} ({s})" for s in _SETS for m in ("devise-0", "devise+seen", "softmax baseline", "chance-0")],
    metrics=["hit@20", "hp@20"],
)
_HOP2 = [
    "devise-0 (2-hop)",
    "random embeddings-0 (2-hop)",
    "devise, order-embedding labels-0 (2-hop)",
    "chance-0 (2-hop)",
]
ZEROSHOT_SEED_ROWS = [(m, "hit@1") for m in _HELD] + [(m, k) for k in ("hit@20", "hp@20") for m in _HOP2]
ZEROSHOT_CLAIMS = ["DeViSE-0 above", "labels-0 above DeViSE-0"]


# ---------------------------------------------------------------- the model, by hand


def hinge_example(margin: float = 0.1) -> tuple[pd.DataFrame, dict]:
    """Eq. (1) on one image and four unit label vectors in 2-D, term by term, beside what
    losses.hinge_rank returns: the full sum, and the paper's shortcut (stop at the first violator
    in a random order) averaged over 2,000 orders, which is the mean of the violating terms."""
    names = ["T-shirt (true)", "shirt", "pullover", "bag"]
    angles = torch.tensor([0.0, 0.35, 0.5, 1.5])
    t = torch.stack([angles.cos(), angles.sin()], 1)  # (4, 2) unit rows
    mv = torch.tensor([[0.95, 0.3]])  # M v(image)
    s = (mv @ t.T)[0]
    terms = torch.clamp(margin - s[0] + s, min=0)
    terms[0] = 0.0
    table = pd.DataFrame({"label": names, "t_j M v": s.numpy(), "hinge term": terms.numpy()})
    g = torch.Generator().manual_seed(0)
    scores, target = (mv @ t.T).expand(2000, 4), torch.zeros(2000, dtype=torch.long)
    check = {
        "Eq. (1) by hand (sum of terms)": float(terms.sum()),
        "hinge_rank, full sum": float(hinge_rank(mv @ t.T, target[:1], margin, first_violator=False)),
        "hinge_rank, first violator (mean of 2,000 orders)": float(hinge_rank(scores, target, margin, generator=g)),
        "mean of the violating terms": float(terms[terms > 0].mean()),
    }
    return table.round(4), {k: round(v, 4) for k, v in check.items()}


# ---------------------------------------------------------------- training


def training_histories(trained: dict) -> dict[str, list[dict]]:
    """Each model's history for viz.plot_training: epochs numbered on from the frozen-CNN stage into
    the fine-tuning stage, and the selection metric under one name (the softmax baseline's
    held-out accuracy is its held-out hit@1)."""
    out = {}
    for name, history in trained["histories"].items():
        rows, offset, last = [], 0, None
        for r in history:
            stage = r.get("stage")
            if last is not None and stage != last:
                offset = rows[-1]["epoch"] + 1
            last = stage
            metric = r.get("held_out_hit@1", r.get("held_out_accuracy"))
            rows.append({"epoch": r["epoch"] + offset, "loss": r["loss"], SELECTION: metric, "stage": stage})
        out[name] = rows
    return out


def plot_curves(trained: dict):
    """viz.plot_training of `training_histories`: the loss on a log scale (the softmax baseline's is
    cross-entropy, DeViSE's Eq. (1)), a dotted line where DeViSE starts fine-tuning the CNN, and
    the legend below both panels."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from orderlib.viz import plot_training

    histories = training_histories(trained)
    fig = plot_training(histories, SELECTION)
    a, b = fig.axes
    a.set(
        yscale="log", ylabel="training loss (log scale)", title="training loss (softmax: cross-entropy; DeViSE: Eq. 1)"
    )
    handles, labels = b.get_legend_handles_labels()
    b.get_legend().remove()
    starts = {r["epoch"] for h in histories.values() for r in h if r["stage"] == "fine-tuned"}
    for ax in (a, b):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if starts:
            ax.axvline(min(starts) + 0.5, color="grey", ls=":", lw=1)
    if starts:
        handles.append(plt.Line2D([], [], color="grey", ls=":", label="DeViSE: from here the CNN is fine-tuned too"))
        labels.append(handles[-1].get_label())
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.set_size_inches(11, 4.2)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    return fig


# ---------------------------------------------------------------- label spaces


def nearest_table(spaces, n: int = 5) -> pd.DataFrame:
    """Per class: the n noun synsets nearest its "devise" label vector (cosine),
    named with their sense numbers (boot.n.01 and boot.n.02 are different synsets)."""
    rows = []
    for i, c in enumerate(CLASSES):
        g = int(spaces.classes[i])
        near = np.argsort(-(spaces.text @ spaces.text[g]))
        near = [spaces.graph.names[int(j)] for j in near if j != g][:n]
        rows.append({"class": c, f"{n} nearest noun synsets (cosine)": ", ".join(near)})
    return pd.DataFrame(rows).set_index("class")


def text_similarity(spaces, unseen, seen) -> pd.DataFrame:
    """Cosine of each held-out label's vector to each seen label's (the "devise" row's vectors):
    what zero-shot transfer has to go on."""
    t = spaces.text
    sims = t[spaces.classes[list(unseen)]] @ t[spaces.classes[list(seen)]].T
    return pd.DataFrame(sims, index=[CLASSES[c] for c in unseen], columns=[CLASSES[c] for c in seen]).round(2)


# ---------------------------------------------------------------- reports


def table1_notes(spaces) -> str:
    return (
        "Their scale vs ours: the paper's column is ILSVRC 2012 1K (1,000 labels, 500-D skip-gram on Wikipedia); "
        "ours is Fashion-MNIST test (10,000 real images, 10 labels as WordNet 3.0 synsets), a CNN trained here, "
        f"label vectors from {spaces.notes['text vectors']} (lemmas and gloss averaged); 'devise (gloss skip-gram "
        "labels)' uses a skip-gram on WordNet 3.0 glosses instead. Not comparable number for number. "
        "With 10 labels hit@10 = 100 and hp@10, hp@20 are the same for every model. 'devise (order-embedding "
        "labels)' is beyond the paper: labels are a WordNet order-embedding, score -E(|Mv|, t). hit@k in %, hp@k "
        "as fractions, as the paper prints them."
    )


def zeroshot_notes(spaces) -> str:
    return (
        "Their scale vs ours: the paper's column is ImageNet (2-hop 1,589 / 3-hop 7,860 / 21K 20,841 zero-shot "
        "labels; Table 4: 200 unseen of 1,000); ours: 3,000 Fashion-MNIST test images of 3 held-out classes (Coat, "
        "Sandal, Shirt), candidate sets of real WordNet 3.0 noun synsets (counts in 'candidate labels'), label vectors "
        f"from {spaces.notes['text vectors']} ('gloss skip-gram labels': a skip-gram on WordNet glosses). '-0' ranks "
        "the set, '+seen' the set plus the 7 seen labels (the paper's +1K). The softmax "
        "baseline names seen labels only; its hp@k ring sets are built over the set plus the seen labels. "
        "'devise, order-embedding labels' is beyond the paper. hit@k in %, hp@k as fractions."
    )


def write_report(table_id: str, df: pd.DataFrame, run: dict, title: str, notes: str, **extra) -> dict:
    """reports.write_table with the provenance every DeViSE table carries. `run`: preset, cfg,
    spaces, trained, device, commit, t_start and paths, as the notebook holds them."""
    cfg, spaces = run["cfg"], run["spaces"]
    meta = report_meta(
        preset=run["preset"],
        seed=cfg["seed"],
        device=run["device"],
        commit=run["commit"],
        data_source=exp.source(cfg["word_vectors"]),
        data_fingerprint=exp.fingerprint(spaces),
        wall_time_s=time.perf_counter() - run["t_start"],
        trained=exp.model_records(run["trained"], spaces),
        config=cfg,
        label_spaces=spaces.notes,
        **extra,
    )
    return write_table(table_id, df, meta, run["paths"].tables, title=title, notes=notes)


def spread_tables(table_id: str = "devise_seed_spread") -> Path:
    """The folder holding the seed-spread reports: reports_root()'s tables, or the committed ones
    where a benchmark rerunning a notebook points reports_root() at a folder without them."""
    here = reports_root() / "tables"
    return here if (here / f"{table_id}.csv").exists() else repo_root() / "reports" / "tables"


def seed_rows(table_id: str, rows: list[tuple[str, str]], tables: Path | None = None) -> pd.DataFrame:
    """Rows of a seed-spread report (<table_id>.csv in `tables`, default spread_tables): per
    (method, metric), the mean ± sd over seeds and each seed's value, so a claim's verdict can be
    read against its numbers; the row column names the run that wrote it (viz.made)."""
    from orderlib.viz import made

    csv = (tables or spread_tables(table_id)) / f"{table_id}.csv"
    df = pd.read_csv(csv)
    out = []
    for method, metric in rows:
        stat = df[(df["method"] == method) & (df["metric"] == metric)].set_index("statistic")["ours"]
        if stat.empty:
            raise KeyError(f"{table_id}: no row {method!r}, {metric!r}")
        seeds = sorted(s for s in stat.index if s.startswith("seed "))
        row = {"row": method, "metric": metric, "mean ± sd": f"{cite_round(stat['mean'])} ± {cite_round(stat['sd'])}"}
        out.append({**row, **{s: cite_round(stat[s]) for s in seeds}})
    return pd.DataFrame(out).astype(object).rename(columns={"row": f"row ({made(csv)})"})


# ---------------------------------------------------------------- mistakes, as the paper's Figure 2


def both_wrong(trained: dict, spaces, images, labels, candidates=None, methods=("softmax baseline", "devise")):
    """Indices of the images every method gets wrong at top-1 (over `candidates`), in test order."""
    candidates = spaces.classes if candidates is None else candidates
    true = spaces.classes[labels]
    wrong = np.ones(len(labels), bool)
    for m in methods:
        wrong &= exp.ranking(trained, m, spaces, images, candidates, 1)[:, 0] != true
    return np.flatnonzero(wrong)


def _hops(n) -> str:
    return "over 30 hops" if n is None else f"{n} hop" + ("" if n == 1 else "s")


def plot_predictions(
    trained: dict, spaces, test, idx, candidates=None, k: int = 5, methods=("softmax baseline", "devise"), titles=None
):
    """One row per test image: the image, then each method's top-k labels, each with its WordNet
    distance to the true label in hops (hypernym and hyponym edges); the true label in green, and,
    where it is not in the top k, its rank among the candidates. `titles`: a column title per
    method, where its name is not what the reader knows it by."""
    import matplotlib.pyplot as plt

    candidates = spaces.classes if candidates is None else candidates
    adj = exp._adjacency(spaces.graph)
    images = test.images[list(idx)]
    n_cand = len(candidates)
    ranked = {m: exp.ranking(trained, m, spaces, images, candidates, n_cand) for m in methods}
    fig, axes = plt.subplots(
        len(idx),
        1 + len(methods),
        figsize=(1.6 + 3.3 * len(methods), 1.6 * len(idx) + 0.5),
        dpi=80,  # a 10-point label is still 11 pixels high; the notebook stays small
        squeeze=False,
        gridspec_kw={"width_ratios": [1] + [2.2] * len(methods)},
    )
    for row, i in enumerate(idx):
        true = int(spaces.classes[test.labels[i]])
        dist = hops_from([true], adj, 30)
        ax = axes[row, 0]
        ax.imshow(test.images[i], cmap="gray_r", interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"true: {exp.label_name(spaces, true)}", fontsize=10, color="green")
        for col, m in enumerate(methods, 1):
            ax = axes[row, col]
            ax.axis("off")
            if row == 0:
                ax.set_title((titles or {}).get(m, m), fontsize=11)
            top = [int(x) for x in ranked[m][row]]
            for j, lab in enumerate(top[:k]):
                hit = lab == true
                ax.text(
                    0,
                    0.9 - 0.16 * j,
                    f"{j + 1}. {exp.label_name(spaces, lab)}  ({_hops(dist.get(lab))})",
                    fontsize=10,
                    color="green" if hit else "black",
                    fontweight="bold" if hit else "normal",
                    transform=ax.transAxes,
                )
            if true not in top[:k]:
                where = f"rank {top.index(true) + 1} of {len(top)}" if true in top else "not a label it can name"
                ax.text(0, 0.9 - 0.16 * k, f"true label: {where}", fontsize=9, color="green", transform=ax.transAxes)
    fig.suptitle(
        "Top labels per image; (n hops): WordNet distance to the true label (0 = correct); green: the true label",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- zero-shot curves (Tables 2-3)

_ZS_ROWS = {  # row prefix -> (style, label)
    "devise-0": ("C0", "DeViSE-0"),
    "devise+seen": ("C1", "DeViSE+seen (paper: +1K)"),
    "softmax baseline": ("C2", "softmax baseline"),
    "random embeddings-0": ("C4", "random embeddings-0"),
    "devise, order-embedding labels-0": ("C5", "order-embedding labels-0 (beyond the paper)"),
    "chance-0": ("grey", "chance-0"),
}


def table4_view(df: pd.DataFrame, data: str) -> pd.DataFrame:
    """viz.side_by_side of TABLE4_ROWS without the -0 rows' hit@5: among 3 held-out labels every
    model has all of them in its top 5, so those rows read 100 by construction."""
    from orderlib.viz import side_by_side

    out = side_by_side(df, data=data, **TABLE4_ROWS)
    trivial = out.method.str.endswith("-0 (held-out only)") & (out.metric == "hit@5")
    return out[~trivial].reset_index(drop=True)


def plot_zero_shot(df: pd.DataFrame, sets=("2-hop", "3-hop", "all artifacts")):
    """Tables 2 (flat hit@k) and 3 (hierarchical precision@k) as curves over k, one column per
    candidate set: ours solid, the paper's (ImageNet, 500-D) dashed with crosses, same colour."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(sets), figsize=(3.8 * len(sets), 6.4), dpi=80, squeeze=False, sharex=True)
    for col, s in enumerate(sets):
        for prefix, (colour, label) in _ZS_ROWS.items():
            d = df[df["method"] == f"{prefix} ({s})"].set_index("metric")
            if d.empty:
                continue
            for row, kind in enumerate(("hit", "hp")):
                ks = [k for k in (1, 2, 5, 10, 20) if f"{kind}@{k}" in d.index]
                ax = axes[row, col]
                ax.plot(ks, [d.loc[f"{kind}@{k}", "ours"] for k in ks], color=colour, marker="o", ms=3, label=label)
                paper = [(k, d.loc[f"{kind}@{k}", "paper"]) for k in ks if pd.notna(d.loc[f"{kind}@{k}", "paper"])]
                if paper:
                    ax.plot(*zip(*paper), color=colour, ls="--", marker="x", ms=5)
        n = int(df[(df["method"] == f"devise-0 ({s})") & (df["metric"] == "candidate labels")]["ours"].iloc[0])
        paper_n = df[(df["method"] == f"devise-0 ({s})") & (df["metric"] == "candidate labels")]["paper"].iloc[0]
        axes[0, col].set_title(f"{s}: {n:,} labels (paper: {int(paper_n):,})", fontsize=11)
        axes[0, col].set_ylabel("flat hit@k (%)")
        axes[1, col].set_ylabel("hierarchical precision@k")
        axes[1, col].set_xlabel("k")
        axes[1, col].set_xscale("log")
        axes[1, col].set_xticks([1, 2, 5, 10, 20], ["1", "2", "5", "10", "20"])
    handles, labels = axes[0, 0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="black", ls="--", marker="x", label="the paper (ImageNet), dashed"))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
