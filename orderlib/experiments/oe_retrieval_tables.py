"""What the Table 2 notebook shows and writes (Vendrov et al., Section 4): the compact tables, the
figures, the report and its sanity checks, over `oe_retrieval`'s runner, which stays as it trains."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from orderlib.data.scenes import LEVELS, caption_tokenize
from orderlib.eval.retrieval import TIE_COLUMNS
from orderlib.experiments import oe_retrieval as exp
from orderlib.penalties import order_violation
from orderlib.reports import report_meta, write_table
from orderlib.viz import cited, side_by_side

CEILING = "ceiling: repeated caption texts"
PAPER_ROWS = [
    "order-embeddings",
    "order-embeddings (symm.)",
    "order-embeddings (reversed)",
    "order-embeddings (1-crop)",
]
PAPER_METRICS = [f"{n} {side} {m}" for n in ("1k", "5k") for side in ("caption", "image") for m in ("R@1", "R@10")]
SELECTION = "dev image R@1 + R@5 + R@10"  # the authors' model selection (training.retrieval.dev_score)


def data_label(cfg: dict) -> str:
    """What `ours` ran on, for the side-by-side tables' last column."""
    if cfg["data"] == "precomp":
        return "precomp features (the paper's protocol)"
    return "stand-in: Fashion-MNIST Scenes"


def cnn_line(sd) -> str:
    """The frozen item CNN's held-out accuracy by epoch, as one line."""
    acc = [round(h["held_out_accuracy"], 2) for h in sd.cnn_history]
    return f"frozen CNN, accuracy on held-out Fashion-MNIST items (train[50000:]) by epoch: {acc}"


def caption_levels(sd) -> pd.DataFrame:
    """The five caption levels of the test scenes: mean words, and test image 0's caption of each."""
    caps = np.array(sd.scenes["test"].captions, dtype=object).reshape(-1, 5)
    words = [np.mean([len(caption_tokenize(c)) for c in caps[:, j]]) for j in range(5)]
    return cited(pd.DataFrame({"level": LEVELS, "mean words": words, "test image 0's caption": caps[0]}))


def toy_energies() -> pd.DataFrame:
    """Eq. (2) by hand on 2-d vectors (no unit norm): E(image, caption) is 0 when the caption is
    above the image (no larger in any coordinate), and E(x, y) + E(y, x) = ||x - y||^2 always."""
    x = torch.tensor([0.8, 0.6])
    captions = {"caption above the image": (0.5, 0.2), "caption below it": (1.0, 0.9), "neither": (0.2, 1.0)}
    rows = [
        {
            "pair": name,
            "image x": "(0.8, 0.6)",
            "caption y": str(c),
            "E(x, y)": float(order_violation(x, torch.tensor(c))),
            "E(y, x)": float(order_violation(torch.tensor(c), x)),
            "||x - y||²": float((x - torch.tensor(c)).pow(2).sum()),
        }
        for name, c in captions.items()
    ]
    return cited(pd.DataFrame(rows).set_index("pair"))


def training_figure(trained):
    """viz.plot_training of every trained row: the loss (log axis: the sum of hinges, the max of
    hinges and InfoNCE differ by orders of magnitude) and the dev selection score per epoch, a
    star on the epoch each row keeps."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from orderlib.viz import plot_training

    fig = plot_training({m: r.history for m, r in trained.results.items()}, "dev_score", SELECTION)
    loss, dev = fig.axes
    loss.set(yscale="log", ylabel="training loss (log scale)")
    for i, r in enumerate(trained.results.values()):
        dev.plot(r.best_epoch + 1, r.dev_score, marker="*", ms=12, color=f"C{i}", ls="none")
    handles = [*dev.get_legend_handles_labels()[0], plt.Line2D([], [], color="grey", marker="*", ms=10, ls="none")]
    labels = [*trained.results, "the epoch kept"]
    dev.legend(handles, labels, fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    for ax in fig.axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def with_ceiling(df: pd.DataFrame, ex) -> pd.DataFrame:
    """The report's rows: Table 2, then (on scenes) the best 1k image R@1 any model can reach when
    caption texts repeat (exp.caption_duplicates' oracle, averaged over the five levels)."""
    if ex.scenes is None:
        return df
    ceiling = exp.caption_duplicates(ex.scenes.scenes["test"])["oracle image R@1 (%)"].mean()
    row = pd.DataFrame([dict(method=CEILING, metric="1k image R@1", paper=None, ours=ceiling)])
    return pd.concat([df, row], ignore_index=True)


def table2(df: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """Table 2's rows, paper beside ours: R@1 and R@10 both ways, on 1k for the four models and on 5k
    for the two the paper prints there, then the ceiling."""
    in_paper = df.metric.str.startswith("1k") | df.method.isin(PAPER_ROWS[:2])
    return side_by_side(df[in_paper], data_label(cfg), methods=[*PAPER_ROWS, CEILING], metrics=PAPER_METRICS)


def rsum_table(df: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """1k rsum (R@1 + R@5 + R@10, both directions) of every trained row, beyond-the-paper ones included."""
    return side_by_side(df, data_label(cfg), methods=list(exp.ROWS), metrics=["1k rsum"])


def tie_table(df: pd.DataFrame, metric: str = "1k caption R@1") -> pd.DataFrame:
    """One metric under the four tie rules, a row per model."""
    t = df[df.metric == metric].set_index("method")[["ours", *TIE_COLUMNS.values()]]
    return cited(t.rename(columns={"ours": "ours (expected)"}))


def rule_changes(df: pd.DataFrame) -> tuple[str, pd.DataFrame | None]:
    """Order against symmetric, metric by metric under every tie rule (exp.compare_rows): a one-line
    summary, and the metrics whose verdict changes with the rule with their differences per rule
    (None when no verdict does)."""
    claims = exp.compare_rows(df)
    better, same = claims.columns[-2], "same verdict, every rule"
    changed = claims[~claims[same]].set_index("metric").drop(columns=[better, same])
    changed.columns = [c.split(" (")[-1].rstrip(")") for c in changed.columns]
    line = f"order-embeddings beat (symm.) on {int(claims[better].sum())} of {len(claims)} metrics under every tie rule"
    if changed.empty:
        return line + "; no verdict depends on the rule", None
    return line + "; differences (order - symm.) where the verdict depends on the rule:", cited(changed)


def level_table(ex, methods=("order-embeddings", "order-embeddings (symm.)", "order-embeddings (reversed)")):
    """Per caption level of the test scenes: how often its text is shared within a 1k fold, the
    image R@1 that caps (the oracle), and each model's image R@10 for captions of that level."""
    dup = exp.caption_duplicates(ex.scenes.scenes["test"], LEVELS).set_index("caption")
    dup.columns = ["shared %", "images per text", "oracle R@1"]
    methods = [m for m in methods if m in ex.trained.results]
    lv = exp.per_level(ex.trained, LEVELS, methods).pivot(index="caption", columns="method", values="R@10")
    short = lambda m: m.removeprefix("order-embeddings").strip(" ()") or "order"
    lv.columns = [f"image R@10: {short(m)}" for m in lv.columns]
    return cited(dup.join(lv).reindex(LEVELS))


def recall_figure(df: pd.DataFrame, sizes=("1k",)):
    """The retrieval R@K curves: per test size and direction, R@1, R@5 and R@10 of every row (ours,
    the expected tie rule) with a bar from ties against to ties for, and the paper's R@1 and R@10
    (COCO) as crosses in the row's colour. Rows sit side by side at each K so the bars stay apart."""
    import matplotlib.pyplot as plt

    sizes = [s for s in sizes if (df.metric == f"{s} image R@1").any()]
    methods = [m for m in exp.ROWS if m in set(df.method)]
    colours = {m: f"C{i}" for i, m in enumerate(methods)}
    fig, axes = plt.subplots(len(sizes), 2, figsize=(11, 3.4 * len(sizes)), squeeze=False)
    ks = [1, 5, 10]
    for row, size in zip(axes, sizes):
        for ax, side, what in zip(row, ("caption", "image"), ("captions for an image", "images for a caption")):
            for j, m in enumerate(methods):
                d = df[df.method == m].set_index("metric").loc[[f"{size} {side} R@{k}" for k in ks]]
                x = np.arange(len(ks)) + 0.07 * (j - (len(methods) - 1) / 2)
                ours = d["ours"].to_numpy(float)
                bar = [ours - d["ties against"].to_numpy(float), d["ties for"].to_numpy(float) - ours]
                ax.errorbar(x, ours, yerr=bar, color=colours[m], marker="o", ms=3, lw=1, elinewidth=1, capsize=2)
                ax.scatter(x, d["paper"].astype(float), marker="x", s=30, color=colours[m], zorder=3)
            ax.set(xticks=range(len(ks)), xticklabels=[f"R@{k}" for k in ks], ylabel="recall (%)", ylim=(0, 100))
            ax.set_title(f"{size} test images: {side} retrieval ({what})", fontsize=10)
    handles = [plt.Line2D([], [], color=c, marker="o", ms=4, label=m) for m, c in colours.items()]
    handles += [
        plt.Line2D([], [], color="grey", marker="x", ls="none", label="the paper's Table 2 (COCO)"),
        plt.Line2D([], [], color="grey", marker="|", ms=10, ls="none", label="bar: ties against to ties for"),
    ]
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
    return fig


def _nearest(fig):
    """Draw every image of `fig` with nearest-neighbour interpolation: the scenes' pixels as they
    are, and a PNG a third the size (the executed notebook holds every figure)."""
    for ax in fig.axes:
        for im in ax.get_images():
            im.set_interpolation("nearest")
    return fig


def scenes_figure(sd, n: int = 4):
    """viz.plot_scenes of the first `n` test scenes, each with its five captions."""
    from orderlib.viz import plot_scenes

    return _nearest(plot_scenes(sd.scenes["test"], range(n)))


def example_figures(ex, query_image: int = 3, levels=(0, 3, 4), k: int = 4) -> dict:
    """{figure name: figure}: captions of one test image (by default its gist, inventory and layout)
    as queries, the top k test images by the order model and by the symmetric one
    (viz.plot_image_retrieval)."""
    from orderlib.viz import plot_image_retrieval

    queries = [5 * query_image + j for j in levels]
    figs = {}
    for method, short in (("order-embeddings", "order"), ("order-embeddings (symm.)", "symm")):
        if method not in ex.trained.results:
            continue
        ims, caps = ex.trained.test_embeddings(method)
        ranked = ex.trained.results[method].model.penalty_matrix(ims, caps[queries]).T.argsort(1).cpu().numpy()
        title = f"{method}: top {k} test images per caption (green frame: the image the caption describes)"
        fig = plot_image_retrieval(ex.scenes.scenes["test"], queries, ranked, k, title)
        figs[f"oe_table2_examples_{short}"] = _nearest(fig)
    return figs


def save_examples(ex, figures, shown: str = "oe_table2_examples_order") -> list:
    """Save both models' example figures (example_figures) under `figures`; close all but `shown`,
    so the notebook displays one and links the other (an executed copy holds every open figure)."""
    import matplotlib.pyplot as plt

    from orderlib.reports import save_figure

    saved = []
    for name, fig in example_figures(ex).items():
        saved.append(save_figure(fig, name, figures))
        if name != shown:
            plt.close(fig)
    return saved


def _notes(ex, cfg: dict) -> str:
    stand_in = (
        "Stand-in data: Fashion-MNIST Scenes (real Fashion-MNIST items, captions generated "
        "from WordNet 3.0, a frozen CNN trained on Fashion-MNIST items) in place of COCO with VGG-19 features; "
        "the paper column is COCO and is not comparable number for number. "
    )
    return (
        f"Data: {ex.source}. "
        + (stand_in if cfg["data"] == "scenes" else "")
        + "Train images per row in train_images; best_epoch chosen on dev image-retrieval R@1+R@5+R@10. "
        f"'{CEILING}' is the image R@1 of a model that ranks a caption's images first but cannot "
        "tell apart images whose captions read the same (many generated captions repeat across images). "
        "Rows after order-embeddings (1-crop) are beyond the paper (VSE++ max of hinges, InfoNCE) and carry no "
        "paper number; Table 2 prints no R@5. Ranks are 1-based; 1k = mean of five 1,000-image folds. "
        + exp.TIES_NOTE
        + " Training times and the commit that trained each model are in the .meta.json."
    )


def write_report(df: pd.DataFrame, ex, cfg: dict, *, preset, device, workers, commit, t_start, tables) -> dict:
    """Write report `oe_table2_retrieval` (CSV, Markdown, provenance) under `tables`."""
    meta = report_meta(
        preset=preset,
        seed=cfg["seed"],
        device=device,
        processes=workers,
        commit=commit,
        data_source=ex.source,
        data_fingerprint=ex.fingerprint,
        wall_time_s=time.perf_counter() - t_start,
        trained=exp.model_records(ex),
        primary_ties="expected (uniformly random tie-breaking)",
        ties=exp.TIES_NOTE,
        config=cfg,
        rows={m: vars(exp.row_config(m, cfg)) for m in ex.trained.results},
    )
    title = "Order-Embeddings Table 2: caption-image retrieval"
    return write_table("oe_table2_retrieval", df, meta, tables, title=title, notes=_notes(ex, cfg))


def check_table2(df: pd.DataFrame, cfg: dict, preset: str, scenes: bool) -> None:
    """The report's sanity checks: every cell filled, recalls in [0, 100], no image R@1 above the
    ceiling, every tie rule between the two exact bounds, (scenes) image retrieval all but tie-free,
    and (full preset) the order and symmetric models far above chance."""
    ours = df.set_index(["method", "metric"])["ours"]
    assert df["ours"].notna().all()
    if scenes:
        assert (df[df.metric == "1k image R@1"].ours <= df[df.method.str.startswith("ceiling")].ours.max() + 1e-9).all()
    assert set(df.method) >= {"order-embeddings", "order-embeddings (symm.)"} & set(cfg["rows"])
    assert ((df.metric.str.contains("R@")) <= (df.ours.between(0, 100))).all()
    # every convention lies between the two exact bounds (R@K, rsum: against <= for; ranks: the reverse)
    m = df.dropna(subset=["ties against"])
    up = m.metric.str.contains("R@|rsum")
    lo, hi = m["ties against"].where(up, m["ties for"]), m["ties for"].where(up, m["ties against"])
    for col in ("ours", "ties by index"):
        assert (lo - 1e-9 <= m[col]).all() and (m[col] <= hi + 1e-9).all(), col
    if scenes:  # distinct scenes: image retrieval ties are rare float coincidences (< 0.1 point)
        assert m[m.metric.str.contains("image R@")].pipe(lambda t: (t["ties for"] - t["ties against"]) < 0.1).all()
    if preset == "full":  # trained models must be far above chance (R@10 of 1,000 images: 1%)
        assert ours[("order-embeddings", "1k image R@10")] > 5 * 1.0
        assert ours[("order-embeddings (symm.)", "1k image R@10")] > 5 * 1.0
