"""What the notebooks show a reader: tables rounded as cited, compact configs, and the figures
(matplotlib; the notebooks save them). Display only: the reports' CSVs are written by reports.write_table."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd

from orderlib.reports import cite_round


def _missing(v) -> bool:
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):  # a list or an array: not one missing value
        return False


def cited(df: pd.DataFrame) -> pd.DataFrame:
    """`df` as a reader cites it: numbers rounded by reports.cite_round (whole numbers as ints, 2
    decimals, below 1 to 3 significant digits), a missing value as an empty cell rather than NaN."""
    return df.map(lambda v: "" if _missing(v) else cite_round(v)).astype(object)


def wide(df: pd.DataFrame, index="method", columns="metric", values="ours", order=None) -> pd.DataFrame:
    """Long report rows as a table (e.g. method x metric) in the order the rows were written, not
    sorted (hit@1, hit@2, hit@5, hit@10 rather than text order); `order` picks and orders the columns.
    Rounded as cited (`cited`)."""
    t = df.pivot_table(index=index, columns=columns, values=values, aggfunc="first", sort=False, dropna=False)
    if order is not None:
        t = t[[c for c in order if c in t.columns]]
    return cited(t)


def _short(v, width: int) -> str:
    if isinstance(v, dict):
        text = ", ".join(f"{k}={_short(x, width)}" for k, x in v.items())
    elif isinstance(v, (list, tuple)):
        text = ", ".join(_short(x, width) for x in v)
    else:
        text = str(v)
    return text if len(text) <= width else text[: width - 1] + "…"


def config_table(cfg: dict, skip=(), width: int = 50) -> pd.DataFrame:
    """A config as one short table, a line per setting (nested values inline, cut at `width`
    characters), in place of the dict's repr; `skip` leaves out keys shown elsewhere."""
    return pd.DataFrame(
        {"value": [_short(v, width) for k, v in cfg.items() if k not in skip]},
        index=pd.Index([k for k in cfg if k not in skip], name="setting"),
    )


def _show(ax, canvas, title: str = "", colour: str | None = None):
    ax.imshow(canvas, cmap="gray", vmin=0, vmax=255)
    ax.set_xticks([])
    ax.set_yticks([])
    if colour:
        for side in ax.spines.values():
            side.set_edgecolor(colour)
            side.set_linewidth(3)
    if title:
        ax.set_title(title, fontsize=8)


def plot_scenes(scenes, idx, ncols: int = 4):
    """Canvases of scenes idx, each with its 5 captions underneath."""
    import matplotlib.pyplot as plt

    idx = list(idx)
    nrows = -(-len(idx) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 4.6 * nrows), squeeze=False)
    canvases = scenes.render(idx)
    for ax, k, canvas in zip(axes.flat, idx, canvases):
        _show(ax, canvas)
        caps = "\n".join(textwrap.fill(f"{j}. {c}", 38) for j, c in enumerate(scenes.captions[5 * k : 5 * k + 5]))
        ax.set_xlabel(caps, fontsize=7, loc="left")
    for ax in axes.flat[len(idx) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_image_retrieval(scenes, captions_idx, ranked, k: int = 5, title: str = ""):
    """One row per query caption: the caption, then the top-k images (ground truth in green)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(captions_idx), k + 1, figsize=(1.9 * (k + 1), 2.0 * len(captions_idx)), squeeze=False)
    for row, (c, top) in enumerate(zip(captions_idx, ranked)):
        axes[row, 0].axis("off")
        axes[row, 0].text(0, 0.5, textwrap.fill(scenes.captions[c], 22), fontsize=8, va="center")
        for col, i in enumerate(top[:k]):
            _show(
                axes[row, col + 1], scenes.render(int(i))[0], f"#{col + 1}", "limegreen" if int(i) == c // 5 else None
            )
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_regularities(scenes, lex_caption, composition_examples, abstraction_examples, k: int = 4, n: int = 3):
    """Figure 4 analogue: rows of caption A max caption B -> top images, then rows of
    min(image i, image j) -> the synset caption it retrieves."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2 * n, k + 2, figsize=(1.8 * (k + 2), 1.9 * 2 * n), squeeze=False)
    for row, ex in enumerate(composition_examples[:n]):
        axes[row, 0].axis("off")
        axes[row, 0].text(
            0, 0.5, f"max(\n'{lex_caption(ex['a'])}',\n'{lex_caption(ex['b'])}')", fontsize=8, va="center"
        )
        axes[row, 1].axis("off")
        axes[row, 1].text(0.2, 0.5, "→", fontsize=16, va="center")
        labels = scenes.labels
        for col, i in enumerate(ex["top"][:k]):
            ok = (labels[i] == ex["a"]).any() and (labels[i] == ex["b"]).any()
            _show(axes[row, col + 2], scenes.render(int(i))[0], "", "limegreen" if ok else "red")
    for r, ex in enumerate(abstraction_examples[:n]):
        row = n + r
        _show(axes[row, 0], scenes.render(ex["i"])[0], "min(")
        _show(axes[row, 1], scenes.render(ex["j"])[0], ")")
        axes[row, 2].axis("off")
        axes[row, 2].text(0.1, 0.5, "→", fontsize=16, va="center")
        axes[row, 3].axis("off")
        axes[row, 3].text(
            0, 0.5, f"'{ex['caption']}'", fontsize=9, va="center", color="green" if ex["common"] else "red"
        )
        for col in range(4, k + 2):
            axes[row, col].axis("off")
    fig.tight_layout()
    return fig


def plot_label_predictions(
    trained: dict, spaces, test, idx, exp, candidates=None, k: int = 5, methods=("softmax baseline", "devise")
):
    """One row per test image: the image, then each method's top-k labels (true label in bold)."""
    import matplotlib.pyplot as plt

    candidates = spaces.classes if candidates is None else candidates
    images = test.images[list(idx)]
    ranked = {m: exp.ranking(trained, m, spaces, images, candidates, k) for m in methods}
    fig, axes = plt.subplots(
        len(idx),
        1 + len(methods),
        figsize=(1.6 + 2.4 * len(methods), 1.6 * len(idx)),
        squeeze=False,
        gridspec_kw={"width_ratios": [1] + [1.5] * len(methods)},
    )
    for row, i in enumerate(idx):
        _show(axes[row, 0], test.images[i], exp.label_name(spaces, spaces.classes[test.labels[i]]))
        true = spaces.classes[test.labels[i]]
        for col, m in enumerate(methods, 1):
            ax = axes[row, col]
            ax.axis("off")
            if row == 0:
                ax.set_title(m, fontsize=9)
            for j, lab in enumerate(ranked[m][row]):
                ax.text(
                    0,
                    0.9 - 0.19 * j,
                    exp.label_name(spaces, int(lab)),
                    fontsize=8,
                    fontweight="bold" if lab == true else "normal",
                    transform=ax.transAxes,
                )
    fig.tight_layout()
    return fig


def plot_attribute_grid(images, attrs, objs, title: str = ""):
    """Fashion-MNIST Attributes: images (A, O, H, W, 3), one row per attribute, one column per object."""
    import matplotlib.pyplot as plt

    n_a, n_o = len(attrs), len(objs)
    fig, axes = plt.subplots(n_a, n_o, figsize=(0.9 * n_o + 1, 0.9 * n_a), squeeze=False)
    for a in range(n_a):
        for o in range(n_o):
            _show(axes[a, o], images[a][o])
            if o == 0:
                axes[a, o].set_ylabel(attrs[a], fontsize=8, rotation=0, ha="right", va="center")
            if a == 0:
                axes[a, o].set_title(objs[o], fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_pair_predictions(images, examples, ncols: int = 5):
    """Images of unseen pairs with their top-5 predicted pairs (the right one in green).
    examples: [(image index, ground truth, [pred@1, ...]), ...]."""
    import matplotlib.pyplot as plt

    nrows = -(-len(examples) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 4.0 * nrows), squeeze=False)
    for ax, (i, gt, preds) in zip(axes.flat, examples):
        _show(ax, images[i], f"GT: {gt}", "tab:green" if preds[0] == gt else "tab:red")
        ax.set_xlabel(
            "\n".join(f"{r + 1}. {p}" + (" *" if p == gt else "") for r, p in enumerate(preds)), fontsize=7, loc="left"
        )
    for ax in axes.flat[len(examples) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_arithmetic(images, examples, ncols: int = 3):
    """Vector arithmetic examples: image - F(old) + F(new) and the pairs it retrieves.
    examples: [(image index, ground truth, kind, old word, new word, [top-5]), ...]."""
    import matplotlib.pyplot as plt

    nrows = -(-len(examples) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 4.2 * nrows), squeeze=False)
    for ax, (i, gt, _kind, old, new, top) in zip(axes.flat, examples):
        _show(ax, images[i], textwrap.fill(f"[{gt}] - F({old}) + F({new})", 30))
        ax.set_xlabel("\n".join(f"{r + 1}. {p}" for r, p in enumerate(top)), fontsize=7, loc="left")
    for ax in axes.flat[len(examples) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_fact_retrievals(images, i2f, f2i, ncols: int = 6):
    """Sherlock's Figures 5 and 6 on the stand-in: top row, test images with their top-5 facts
    (the true fact starred; the title green when it is first); below, per fact query, its top-5
    test images (green frame: an image of that fact)."""
    import matplotlib.pyplot as plt

    k = max(len(ranked) for _, ranked, _ in f2i) if f2i else 0
    ncols = max(ncols, k, len(i2f))
    fig, axes = plt.subplots(1 + len(f2i), ncols, figsize=(2.4 * ncols, 3.6 + 2.0 * len(f2i)), squeeze=False)
    for ax, (i, gt, preds) in zip(axes[0], i2f):
        _show(ax, images[i], gt, None if not preds else "tab:green" if preds[0] == gt else "tab:red")
        ax.set_xlabel(
            "\n".join(f"{r + 1}. {p}" + (" *" if p == gt else "") for r, p in enumerate(preds)), fontsize=6, loc="left"
        )
    for ax in axes[0][len(i2f) :]:
        ax.axis("off")
    for row, (fact, ranked, hits) in zip(axes[1:], f2i):
        for r, (ax, i, hit) in enumerate(zip(row, ranked, hits)):
            _show(ax, images[i], f"{fact} #{r + 1}" if r == 0 else f"#{r + 1}", "tab:green" if hit else "tab:red")
        for ax in row[len(ranked) :]:
            ax.axis("off")
    fig.tight_layout()
    return fig


def plot_fact_curves(scale, per_fact):
    """Sherlock's Figure 4 (K1 as the number of facts grows; solid: among all facts, dashed:
    among the image's order) and Figure 7 (K10 by training images per SPO fact), side by side;
    one row per evaluation protocol when the frames have a `protocol` column (strict, implied).
    One legend below the panels names every method and both line styles.
    scale: rows (facts, method, candidates, K1); per_fact: rows (bin, method, K10)."""
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(scale["protocol"])) if "protocol" in scale else [None]
    fig, axes = plt.subplots(len(names), 2, figsize=(12, 4.2 * len(names)), squeeze=False)
    methods = dict.fromkeys(list(scale["method"]) + list(per_fact["method"]))
    palette = [f"C{i}" for i in range(10)] + ["black", "gold", "navy", "lime", "maroon"]  # "C10" is "C0" again
    colours = {m: palette[i % len(palette)] for i, m in enumerate(methods)}
    for (a, b), name in zip(axes, names):
        sc = scale if name is None else scale[scale["protocol"] == name]
        pf = per_fact if name is None else per_fact[per_fact["protocol"] == name]
        tag = "" if name is None else f" [{name} protocol]"
        for (m, c), g in sc.groupby(["method", "candidates"], sort=False):
            g = g.sort_values("facts")
            a.plot(g["facts"], g["K1"], marker="o", color=colours[m], ls="-" if c == "all facts" else "--")
        facts = sorted(set(sc["facts"]))
        a.set_xscale("log")
        a.set_xticks(facts, [str(n) for n in facts])
        a.minorticks_off()
        a.set_xlabel("facts (log scale)")
        a.set_ylabel("K1 (%)")
        a.set_title(f"Figure 4: K1 as the number of facts grows{tag}", fontsize=10)
        bins = list(dict.fromkeys(pf["bin"]))
        for m, g in pf.groupby("method", sort=False):
            a_ = g.set_index("bin").reindex(bins)
            b.plot(range(len(bins)), a_["K10"], marker="o", color=colours[m])
        b.set_xticks(range(len(bins)), bins)
        b.set_xlabel("training images of the SPO fact")
        b.set_ylabel("K10 (%)")
        b.set_title(f"Figure 7: K10 of SPO facts by training images per fact{tag}", fontsize=10)
    handles = [plt.Line2D([], [], color=c, marker="o", label=m) for m, c in colours.items()]
    handles += [
        plt.Line2D([], [], color="grey", ls="-", label="Figure 4: among all facts"),
        plt.Line2D([], [], color="grey", ls="--", label="Figure 4: among the facts of the image's order"),
    ]
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=9, frameon=False, bbox_to_anchor=(0.5, 0.0))
    return fig


def plot_table1(per_seed: pd.DataFrame, history: pd.DataFrame, methods: list[str], paper: dict[str, float]):
    """Table 1 as figures, one row per setting: left, each method's test accuracy over seeds (mean ± sd,
    dots: single seeds, x: the paper's number on the paper protocol); right, test accuracy after
    each epoch (mean and ± 1 sd band over seeds; epochs on a log axis). One legend for the figure.
    per_seed: rows (setting, method, seed, ours); history: rows (setting, method, seed, epoch,
    test_accuracy); `paper`: setting -> {method: the paper's number} (empty for the clean protocol)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    settings = list(dict.fromkeys(per_seed["setting"]))
    shown = [m for m in methods if m in set(per_seed["method"])]
    colours = dict(zip(shown, sns.color_palette("tab10", len(shown))))
    fig, axes = plt.subplots(
        len(settings), 2, figsize=(12, 3.6 * len(settings)), squeeze=False, gridspec_kw={"width_ratios": [1, 1.2]}
    )
    for (left, right), s in zip(axes, settings):
        d = per_seed[per_seed.setting == s]
        order = [m for m in shown if m in set(d.method)]
        sns.pointplot(data=d, y="method", x="ours", order=order, errorbar="sd", linestyle="none", ax=left, color="k")
        sns.stripplot(data=d, y="method", x="ours", order=order, hue="method", palette=colours, size=4, ax=left)
        marks = [(paper[s][m], order.index(m)) for m in order if m in paper.get(s, {})]
        if marks:
            left.scatter(*zip(*marks), marker="x", color="crimson", s=50, zorder=3, label="the paper")
        if left.get_legend():
            left.get_legend().remove()
        left.set(xlabel="test accuracy (%)", ylabel="", title=f"{s}: test accuracy over seeds")
        h = history[history.setting == s].assign(epoch=lambda x: x.epoch + 1)
        sns.lineplot(
            data=h, x="epoch", y="test_accuracy", hue="method", hue_order=order, palette=colours,
            errorbar="sd", marker="o", markersize=3, markeredgewidth=0, ax=right, legend=False,
        )  # fmt: skip
        right.set_xscale("log")
        right.set(xlabel="epoch (log)", ylabel="test accuracy (%)", title=f"{s}: after each epoch")
    handles = [plt.Line2D([], [], color=colours[m], lw=2, label=m) for m in shown]
    handles.append(plt.Line2D([], [], color="crimson", marker="x", ls="none", label="the paper's Table 1"))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=9, frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- a walkthrough's building blocks


class Code:
    """Library source shown in a notebook (Markdown in Jupyter, plain text elsewhere)."""

    def __init__(self, text: str, title: str):
        self.text, self.title = text, title

    def _repr_markdown_(self) -> str:
        return f"`{self.title}`\n\n```python\n{self.text}```"

    def __repr__(self) -> str:
        return f"# {self.title}\n{self.text}"


def show_code(*objs) -> Code:
    """The source of library functions or classes, as the library holds it (never a copy), headed
    by where it lives: the model's code to read beside its equation."""
    import inspect
    from pathlib import Path

    parts, where = [], []
    for obj in objs:
        parts.append(inspect.getsource(obj))
        where.append(f"{obj.__module__}.{obj.__qualname__} ({Path(inspect.getfile(obj)).name})")
    return Code("\n".join(parts), ", ".join(where))


def side_by_side(df: pd.DataFrame, data: str, methods=None, metrics=None, max_rows: int = 25) -> pd.DataFrame:
    """A report's rows for a reader: method, metric, the paper's number, ours, and what ours ran on
    (`data`, e.g. "stand-in: Fashion-MNIST, 10 labels") in a column of its own. `methods` and
    `metrics` pick and order rows; more than `max_rows` is a figure's job, so it raises."""
    d = df
    if methods is not None:
        d = d[d["method"].isin(methods)].assign(_m=lambda x: x["method"].map({m: i for i, m in enumerate(methods)}))
    if metrics is not None:
        d = d[d["metric"].isin(metrics)].assign(_k=lambda x: x["metric"].map({m: i for i, m in enumerate(metrics)}))
    d = d.sort_values([c for c in ("_m", "_k") if c in d], kind="stable")
    if len(d) > max_rows:
        raise ValueError(f"{len(d)} rows to show side by side, more than {max_rows}: pick rows or plot them")
    out = d[["method", "metric", "paper", "ours"]].assign(**{"ours ran on": data})
    return cited(out.reset_index(drop=True))


def made(csv: Path) -> str:
    """Which run wrote a report, from the `.meta.json` beside its CSV: "<id>, commit <short>,
    <date>" ("<id>" alone without one). A table read from a report carries it in its first column's
    name, so that a reader sees when its numbers come from another run than the notebook's."""
    csv = Path(csv)
    table_id = csv.name.removesuffix(".csv")
    try:
        meta = json.loads(csv.with_name(f"{table_id}.meta.json").read_text())
    except (OSError, ValueError):
        return table_id
    commit = meta.get("git_commit") or ""
    return f"{table_id}, commit {commit[:7] or 'unknown'}, {str(meta.get('created', ''))[:10]}"


def verdicts(table_id: str, tables=None, claims=None) -> pd.DataFrame:
    """The claims of a seed-spread report (`reports/tables/<table_id>.csv`, written by
    spread.write_report) with their numbers: per claim, the mean ± sd over seeds of a - b, the
    seeds, and the verdict; the claim column names the run that wrote it (`made`). `claims` keeps
    those whose label contains one of its strings."""
    from orderlib.paths import repo_root

    # the committed reports, even where a run writes its own elsewhere (ORDERLIB_REPORTS, e.g. tolerance.py)
    path = Path(tables or repo_root() / "reports" / "tables") / f"{table_id}.csv"
    df = pd.read_csv(path)
    if not {"statistic", "verdict"} <= set(df.columns):
        raise ValueError(f"{path}: not a seed-spread report with claims (no statistic and verdict columns)")
    judged = df[df["verdict"].notna() & df["statistic"].isin(["mean of a - b", "sd of a - b"])]
    keys = [c for c in df.columns if c not in ("statistic", "paper", "ours", "verdict")]
    rows = []
    for key, g in judged.groupby(keys, sort=False):
        stat = g.set_index("statistic")["ours"]
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        same = df[(df["metric"] == row["metric"])]
        for k in keys:
            if k not in ("method", "metric"):
                same = same[same[k] == row[k]]
        seeds = same.loc[same["statistic"].str.startswith("seed "), "statistic"].nunique()
        row["a - b"] = f"{cite_round(stat['mean of a - b'])} ± {cite_round(stat['sd of a - b'])}"
        row["seeds"] = int(seeds)
        row["verdict"] = g["verdict"].iloc[0]
        rows.append(row)
    out = pd.DataFrame(rows).rename(columns={"method": "claim"})
    if claims is not None:
        out = out[out["claim"].map(lambda c: any(s in c for s in claims))]
    return out.reset_index(drop=True).rename(columns={"claim": f"claim ({made(path)})"})


def plot_training(histories: dict, metric: str, metric_label: str | None = None, loss: str = "loss"):
    """Training curves: per epoch, each model's training loss (left) and its selection metric on
    its selection split (right). `histories`: model -> FitResult.history (dicts with epoch, `loss`
    and `metric`)."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.4))
    for name, h in histories.items():
        epochs = [r["epoch"] + 1 for r in h]
        a.plot(epochs, [r[loss] for r in h], marker="o", ms=3, label=name)
        b.plot(epochs, [r[metric] for r in h], marker="o", ms=3, label=name)
    a.set(xlabel="epoch", ylabel="training loss", title="training loss")
    b.set(xlabel="epoch", ylabel=metric_label or metric, title=f"selection: {metric_label or metric}")
    b.legend(fontsize=8, frameon=False, loc="best")
    fig.tight_layout()
    return fig
