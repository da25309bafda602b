"""What notebook 09 shows a reader of Sherlock beside the tables: the data in three lines, a
hand-worked case of the wild-card distance, training curves, compact side-by-side views of Tables
1, 4 and 5, Table 4 in full and Table 5 by fact kind as figures, retrieval examples that say what
each retrieved image is, and the reports' provenance and notes (written as notebook 09 always
wrote them: same ids, same CSVs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from orderlib.data.fact_tasks import FactTask
from orderlib.data.facts import RELATIONS, Fact, all_facts, generalisation_cases, implies
from orderlib.encoders.sherlock import SEM, slot_mask, structured_loss
from orderlib.eval.facts import ALL, FACT_PROTOCOLS, SAME_ORDER
from orderlib.experiments import sherlock as exp
from orderlib.experiments import sherlock_tables as tables
from orderlib.experiments.utama_walkthrough import shown  # noqa: F401 (the notebook shows its figures with it)
from orderlib.reports import NotebookReports
from orderlib.viz import cited

DATA = "stand-in: Fashion-MNIST Facts"
MODEL_CODE = (SEM.forward, slot_mask, structured_loss)  # Eq. 5, the wild-card weights, the loss
SEM_ROWS = list(exp.SEM_ROWS)
RETRAINED = [f"{m}, retrained on facts" for m in tables.CAPTION_METHODS]
TABLE4_ROWS = [  # the paper's rows first (TACL15 is Kiros et al.'s model: our symmetric variant)
    "SEM-A",
    "SEM-B",
    "SEM-A, S/P/O averaged (ablation)",
    "MV CCA",
    "ESZSL",
    "order-embeddings (symm.), caption-trained",
    "order-embeddings (symm.), retrained on facts",
    "order-embeddings, caption-trained",
    "order-embeddings, retrained on facts",
    "structured order-embedding (SEM-A)",
    "SEM-A, gloss skip-gram vectors",
    "chance",
]
TABLE5_ROWS = [
    "SEM-A",
    "SEM-B",
    "SEM-A, S/P/O averaged (ablation)",
    "structured order-embedding (SEM-A)",
    "MV CCA",
    "ESZSL",
    "order-embeddings (symm.), caption-trained",
    "order-embeddings (symm.), retrained on facts",
]
INVERSE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above",
           "bigger than": "smaller than", "smaller than": "bigger than"}  # fmt: skip


def fact_vocabulary() -> pd.DataFrame:
    """The stand-in's facts per order, an example of each, and the P slot's vocabulary."""
    facts = all_facts()
    return pd.DataFrame(
        {
            "order": [1, 2, 3],
            "facts": [sum(f.order == k for f in facts) for k in (1, 2, 3)],
            "example": [str(next(f for f in facts if f.order == k)) for k in (1, 2, 3)],
            "P vocabulary": ["(wild-card)", "20 attributes", ", ".join(RELATIONS)],
        }
    )


def data_summary(task: FactTask, cnn_history: list[dict], words: dict) -> str:
    """The preset's data in three lines: the CNN, the long tail of training images, Table 5's cases."""
    counts = pd.Series(task.train_counts)
    half = int((counts.sort_values(ascending=False).cumsum() < counts.sum() / 2).sum()) + 1
    missing = [w for w, v in words.items() if not np.any(v)] or "none"
    n = task.notes
    cases = generalisation_cases(task.facts, task.train_counts)
    return "\n".join(
        [
            f"CNN pre-trained on plain items: held-out accuracy {cnn_history[-1]['held_out_accuracy']:.1f}%; "
            f"fact words without a vector: {missing}",
            f"{n['facts']} facts, {n['train images']} training images (per seen fact: median "
            f"{counts[counts > 0].median():g}, max {counts.max()}; {half} facts hold half of them), "
            f"{n['test images']} test images; {n['unseen facts']} facts never seen in training",
            "few-example SPO facts per Table 5 case: " + ", ".join(f"{k} {len(v)}" for k, v in cases.items()),
        ]
    )


def wildcard_check() -> pd.DataFrame:
    """Sherlock's test distance worked by hand: an image embedding v = [v_S | v_P | v_O] of
    <sandal, left of, bag> against three facts of 2-d word vectors; a wild-card slot is left out,
    so <sandal> has one term and can never be farther than a fact that completes it."""
    from orderlib.encoders.sherlock import structured_distance

    word = {"sandal": [1.0, 0.0], "red": [0.0, 1.0], "left of": [1.0, 1.0], "bag": [0.0, -1.0], None: [0.0, 0.0]}
    v = torch.tensor([[0.9, 0.1], [0.8, 1.2], [0.1, -0.8]])  # (3 slots, d): near <sandal, left of, bag>
    facts = [Fact("sandal"), Fact("sandal", "red"), Fact("sandal", "left of", "bag")]
    lang = torch.tensor([[word[f.s], word[f.p], word[f.o]] for f in facts])  # (F, 3, d)
    orders = torch.tensor([f.order for f in facts])
    library = structured_distance(v[None], lang, orders)[0]  # (F,)
    by_hand = [sum(float(((v[k] - lang[j, k]) ** 2).sum()) for k in range(f.order)) for j, f in enumerate(facts)]
    return pd.DataFrame(
        {
            "slots compared": [" + ".join("SPO"[: f.order]) for f in facts],
            "distance by hand": np.round(by_hand, 3),
            "structured_distance": library.numpy().round(3),
            "rank": library.argsort().argsort().numpy() + 1,
        },
        index=pd.Index([str(f) for f in facts], name="image of <sandal, left of, bag> vs fact"),
    )


def training_figures(results: dict) -> list:
    """viz.plot_training twice, as the rows select their epoch: the SEM rows on the dev images' fact ->
    image mAP, the caption models retrained on facts on dev image-retrieval R@1 + R@5 + R@10; the
    legend below the panels, off the curves."""
    from matplotlib.ticker import MaxNLocator

    from orderlib.viz import plot_training

    figs = []
    for rows, metric, label, title in (
        (SEM_ROWS, "dev mAP", "dev fact → image mAP (%)", "SEM rows (the paper's, the ablation, beyond it)"),
        (RETRAINED, "dev_score", "dev image retrieval R@1 + R@5 + R@10", "caption models retrained on fact phrases"),
    ):
        hist = {m: results[m]["fit"].history for m in rows if m in results}
        if hist:
            fig = plot_training(hist, metric, label)
            for ax in fig.axes:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            fig.suptitle(title, fontsize=10)
            fig.axes[1].get_legend().remove()
            fig.tight_layout()
            handles, labels = fig.axes[1].get_legend_handles_labels()
            fig.legend(
                handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False
            )
            figs.append(fig)
    return figs


def _side(df: pd.DataFrame, rows: list[str], labels: list[str], data: str) -> pd.DataFrame:
    from orderlib.viz import side_by_side

    return side_by_side(df, data=data, methods=[m for m in rows if m in set(df.method)], metrics=labels)


def table1_side(df1: pd.DataFrame, data: str = DATA) -> pd.DataFrame:
    """Table 1 side by side: each caption model as trained on captions and retrained on fact phrases,
    i2f top-1 and f2i mAP under both protocols (the paper's column: 6DS)."""
    d = df1.assign(method=df1.method + ", " + df1.training, metric=df1.metric + " (" + df1.protocol + ")")
    labels = [f"{m} ({p})" for m in ("i2f top-1", "f2i mAP") for p in FACT_PROTOCOLS]
    return _side(d, list(dict.fromkeys(d.method)), labels, data)


def table4_side(df4: pd.DataFrame, data: str = DATA) -> pd.DataFrame:
    """Table 4 side by side: K1 among all facts, over all test images, under both protocols."""
    d = df4[(df4.scope == "all") & (df4.candidates == ALL) & (df4.metric == "K1")]
    d = d.assign(metric="K1 (" + d.protocol + ")")
    return _side(d, TABLE4_ROWS, [f"K1 ({p})" for p in FACT_PROTOCOLS], data)


OWN_ORDER_K10 = "ours, among SPO facts"  # table5_side's column: K10 among the image's own order


def table5_side(df5: pd.DataFrame, case: str = "SP, O", data: str = DATA) -> pd.DataFrame:
    """Table 5 side by side for one case: K10 among all facts (the paper's) under both protocols and,
    beside ours, K10 among the SPO facts only (the image's own order; what the seed-spread claims judge)."""
    d = df5[(df5.case == case) & (df5.metric == "K10")]
    d = d.assign(metric=f"K10, {case} (" + d.protocol + ")")
    side = _side(d[d.candidates == ALL], TABLE5_ROWS, [f"K10, {case} ({p})" for p in FACT_PROTOCOLS], data)
    own = d[d.candidates == SAME_ORDER].set_index(["method", "metric"])["ours"]
    values = pd.DataFrame({OWN_ORDER_K10: [own.get(key, np.nan) for key in zip(side.method, side.metric)]})
    side.insert(side.columns.get_loc("ours") + 1, OWN_ORDER_K10, cited(values)[OWN_ORDER_K10])
    return side


def tie_line(ties: pd.DataFrame, n_images: int) -> str:
    """sherlock_tables.top_ties in a heading and one line per protocol: the methods with test images
    whose best score two or more facts share."""
    lines = [f"ties: test images (of {n_images}) whose best score two or more facts share (a method not named: none)"]
    for protocol, g in ties.groupby("protocol", sort=False):
        tied = [f"{r.method} {r.images} (up to {r.most} facts)" for r in g[g.images > 0].itertuples()]
        lines.append(f"  {protocol}: " + (", ".join(tied) if tied else "none"))
    return "\n".join(lines)


FIG4_PARTS = {ALL: "Fig 4 K1: all", SAME_ORDER: "own order"}  # fact_curve_values' columns


def fact_curve_values(scale: pd.DataFrame, per_fact: pd.DataFrame) -> pd.DataFrame:
    """The values viz.plot_fact_curves plots, one row per method: per protocol, Figure 4's K1 among all
    facts and among the image's order at each number of facts, Figure 7's K10 per bin of training
    images of the SPO fact (rounded as cited)."""
    long = pd.concat(
        [
            scale.assign(part=scale.candidates.map(FIG4_PARTS), x=scale.facts.astype(str), value=scale.K1),
            per_fact.assign(part="Fig 7 K10", x=per_fact.bin, value=per_fact.K10),
        ]
    )
    sizes = [str(n) for n in sorted(set(scale.facts))]
    parts = [(part, sizes) for part in FIG4_PARTS.values()] + [("Fig 7 K10", list(dict.fromkeys(per_fact.bin)))]
    columns = [(p, part, x) for p in FACT_PROTOCOLS for part, xs in parts for x in xs]
    wide = long.drop_duplicates(["method", "protocol", "part", "x"]).set_index(["method", "protocol", "part", "x"])
    wide = wide["value"].unstack(["protocol", "part", "x"]).reindex(index=list(dict.fromkeys(long.method)))
    wide = wide.reindex(columns=pd.MultiIndex.from_tuples(columns))
    wide.index.name = None
    return cited(wide)


TABLE4_COLUMNS = [  # (candidates, scope, metric, label)
    (ALL, "all", "K1", "K1"),
    (ALL, "all", "K5", "K5"),
    (ALL, "all", "K10", "K10"),
    (ALL, "all", "mAP", "mAP"),
    (ALL, "all", "mAP@100", "mAP@100"),
    (SAME_ORDER, "all", "K1", "K1, own order"),
    (SAME_ORDER, "order 1", "K1", "K1, own order:\n<S> images"),
    (SAME_ORDER, "order 2", "K1", "K1, own order:\n<S,P> images"),
    (SAME_ORDER, "order 3", "K1", "K1, own order:\n<S,P,O> images"),
]


def plot_table4(df4: pd.DataFrame):
    """Table 4 in full as two annotated heatmaps (strict, implied): every method against K1/K5/K10
    and mAP/mAP@100 among all facts, and K1 among the facts of the image's order, per fact order."""
    import matplotlib.pyplot as plt

    rows = [m for m in TABLE4_ROWS if m in set(df4.method)]
    fig, axes = plt.subplots(1, 2, figsize=(17, 0.42 * len(rows) + 2.6), sharey=True)
    for ax, protocol in zip(axes, FACT_PROTOCOLS):
        d = df4[df4.protocol == protocol].set_index(["method", "candidates", "scope", "metric"])["ours"]
        grid = np.array([[d.get((m, c, s, k), np.nan) for c, s, k, _ in TABLE4_COLUMNS] for m in rows], float)
        ax.imshow(np.nan_to_num(grid, nan=0.0), cmap="Blues", vmin=0, vmax=100, aspect="auto")
        for (i, j), x in np.ndenumerate(grid):
            if np.isfinite(x):
                ax.text(j, i, f"{x:.3g}" if x < 1 else f"{x:.1f}", ha="center", va="center", fontsize=8,
                        color="white" if x > 60 else "black")  # fmt: skip
        ax.set_xticks(range(len(TABLE4_COLUMNS)), [c[-1] for c in TABLE4_COLUMNS], fontsize=8, rotation=30, ha="right")
        ax.set_yticks(range(len(rows)), rows, fontsize=9)
        ax.set_title(f"{protocol} protocol (%)", fontsize=10)
    fig.suptitle("Table 4 on the stand-in: image → fact K@k, fact → image mAP (test images)", fontsize=11)
    fig.tight_layout()
    return fig


def plot_table5(df5: pd.DataFrame):
    """Table 5 by fact kind: K10 among all facts of test images of few-example SPO facts, per case,
    per method: the paper's large-scale numbers, then ours under each protocol (own y scales)."""
    import matplotlib.pyplot as plt

    k10 = df5[(df5.metric == "K10") & (df5.candidates == ALL)]
    cases = list(dict.fromkeys(k10.case))
    rows = [m for m in TABLE5_ROWS if m in set(k10.method)]
    paper = k10[k10.paper.notna()].drop_duplicates(["method", "case"]).set_index(["method", "case"])["paper"]
    panels = [("the paper (large-scale set)", paper)] + [
        (f"ours, {p} protocol", k10[k10.protocol == p].set_index(["method", "case"])["ours"]) for p in FACT_PROTOCOLS
    ]
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6), gridspec_kw={"width_ratios": [0.8, 1, 1]})
    width = 0.8 / len(rows)
    for ax, (title, values) in zip(axes, panels):
        present = [c for c in cases if any((m, c) in values.index for m in rows)]
        for k, m in enumerate(rows):
            y = [values.get((m, c), np.nan) for c in present]
            ax.bar(np.arange(len(present)) + (k - (len(rows) - 1) / 2) * width, y, width, color=f"C{k}", label=m)
        ax.set_xticks(range(len(present)), [c.replace("unseen SPO facts", "unseen SPO\n(0 images)") for c in present])
        ax.set(xlabel="case: parts seen in >= 15 training images of other SPO facts", ylabel="K10 (%)")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.suptitle("Table 5: SPO facts with at most 5 training images, by which of their parts were seen", fontsize=11)
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=9, frameon=False)
    return fig


def hit_kind(found: Fact, query: Fact) -> str:
    """How a retrieved image's fact relates to an SPO query."""
    if found == query:
        return "the queried fact"
    if found.order == 3 and (found.s, found.o) == (query.o, query.s):
        return "same scene, other wording" if found.p == INVERSE.get(query.p) else "subject and object swapped"
    if found.order == 3 and (found.s, found.o, found.p) == (query.s, query.o, INVERSE.get(query.p)):
        return "subject and object swapped"  # <a, right of, b> is the mirror image of <a, left of, b>
    return "another fact"


KIND_COLOURS = {"the queried fact": "tab:green", "same scene, other wording": "tab:purple",
                "subject and object swapped": "tab:orange", "another fact": "tab:red"}  # fmt: skip
I2F_COLOURS = {"the image's fact": "tab:green", "a lower-order fact true of it": "tab:blue", "wrong": "tab:red"}


def fact_examples(dist: torch.Tensor, task: FactTask, seed: int = 0) -> tuple[list, list]:
    """sherlock_tables.examples' picks (SEM-A's raw distances: the `strict` ranking), with what each
    answer is: image -> fact, per top-5 fact whether it is the image's fact, a lower-order fact
    true of it (<sandal> of a <sandal, red> image), or wrong; fact -> image, each top-5 image's own
    fact and how it relates to the query (KIND_COLOURS)."""
    i2f, f2i = tables.examples(dist, task, seed=seed)
    index = {str(f): j for j, f in enumerate(task.facts)}
    true_of = implies(task.facts)
    img_fact = np.asarray(task.test.fact)
    out_i2f = []
    for i, gt, preds in i2f:
        g = img_fact[i]
        kinds = [
            "the image's fact"
            if index[p] == g
            else "a lower-order fact true of it"
            if true_of[g, index[p]]
            else "wrong"
            for p in preds
        ]
        out_i2f.append((i, gt, list(zip(preds, kinds))))
    out_f2i = []
    for fact, ranked, _ in f2i:
        q = task.facts[index[fact]]
        out_f2i.append(
            (fact, [(i, str(task.facts[img_fact[i]]), hit_kind(task.facts[img_fact[i]], q)) for i in ranked])
        )
    return out_i2f, out_f2i


def example_counts(f2i: list) -> str:
    """One line: how the fact -> image examples' top-5 images relate to their queries."""
    kinds = pd.Series([k for _, ranked in f2i for _, _, k in ranked]).value_counts()
    parts = [f"{kinds.get(k, 0)} {k}" for k in KIND_COLOURS]
    return f"fact → image, {int(kinds.sum())} top-5 images of {len(f2i)} SPO queries: " + ", ".join(parts)


def plot_fact_examples(images, i2f: list, f2i: list):
    """Figures 5 and 6 on the stand-in. Top row: test images, each with its fact and its five nearest
    facts (I2F_COLOURS: its fact, a lower-order fact true of it, wrong). Below, one row per SPO
    query: its five nearest test images, each titled with its own fact and framed by how that fact
    relates to the query (KIND_COLOURS). A legend for each part at the bottom."""
    import matplotlib.pyplot as plt

    ncols = max(len(i2f), max((len(r) for _, r in f2i), default=0))
    ratios = [1.0] + ([0.5] if i2f and i2f[0][2] else []) + [1.0] * len(f2i)  # room for the top row's lists
    fig, axes = plt.subplots(len(ratios), ncols, figsize=(2.9 * ncols, 0.4 + 2.9 * sum(ratios)), squeeze=False,
                             gridspec_kw={"height_ratios": ratios, "hspace": 0.35})  # fmt: skip
    for ax, (i, gt, preds) in zip(axes[0], i2f):
        _frame(ax, images[i], f"image of\n{gt}", I2F_COLOURS[preds[0][1]] if preds else None)
        for r, (p, kind) in enumerate(preds):
            ax.text(0.0, -0.04 - 0.12 * r, f"{r + 1}. {p}", transform=ax.transAxes, fontsize=9, va="top",
                    color=I2F_COLOURS[kind])  # fmt: skip
    for row, (fact, ranked) in zip(axes[len(ratios) - len(f2i) :], f2i):
        row[0].set_ylabel(f"query\n{fact}", fontsize=10)
        for r, (ax, (i, own, kind)) in enumerate(zip(row, ranked)):
            _frame(ax, images[i], f"#{r + 1}: {own}", KIND_COLOURS[kind])
    for ax in [a for a in axes.flat if not a.images]:
        ax.axis("off")
    fig.subplots_adjust(left=0.04, right=0.99, top=1 - 0.5 / fig.get_figheight(), bottom=0.02)
    if not f2i:
        return fig
    swatch = lambda c, k: plt.Rectangle((0, 0), 1, 1, fc="none", ec=c, lw=3, label=k)
    top = fig.legend(handles=[swatch(c, k) for k, c in I2F_COLOURS.items()], loc="upper center", ncol=3, fontsize=10,
                     bbox_to_anchor=(0.5, 0.0), frameon=False, title="top row, each image's five nearest facts:")  # fmt: skip
    fig.add_artist(top)
    fig.legend(handles=[swatch(c, k) for k, c in KIND_COLOURS.items()], loc="upper center", ncol=4, fontsize=10,
               bbox_to_anchor=(0.5, -0.05), frameon=False, title="rows below, the retrieved image's own fact is:")  # fmt: skip
    return fig


def _frame(ax, image, title: str, colour: str | None):
    ax.imshow(image)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)
    for side in ax.spines.values():
        side.set_edgecolor(colour or "black")
        side.set_linewidth(3 if colour else 0.5)


def sample_figure(images, task: FactTask, seed: int = 0):
    """Six test images, two of each fact order, titled with their facts."""
    i2f, _ = tables.examples(torch.zeros(len(task.test), len(task.facts)), task, n_images=6, n_facts=0, seed=seed)
    return plot_fact_examples(images, [(i, gt, []) for i, gt, _ in i2f], [])


@dataclass
class Reports(NotebookReports):
    """Notebook 09's provenance and the writing of its three reports: started with the run's
    settings, `describe`d once every method is trained (the meta every table carries)."""

    their: str = ""

    def describe(self, results: dict, cnn, cnn_history: list, task: FactTask) -> None:
        """Fix the reports' provenance: data, trained methods, CNN, word vectors."""
        source, cfg = exp.source(), self.cfg
        self.meta = self.run_meta(  # wall_time_s is taken again as each table is written
            seed=cfg["seed"],
            processes=self.workers,
            data_source=source,
            data_fingerprint=exp.data_fingerprint(task),
            trained=exp.model_records(results, cnn),
            config=cfg,
            task=task.notes,
            cnn_held_out_accuracy=cnn_history[-1]["held_out_accuracy"],
            word_vectors=exp.word_notes(cfg),
        )
        self.their = (
            "Their data vs ours: the paper's numbers come from its own data sets (Table 1: 6DS, 186 facts; Tables 4 "
            "and 5: the large-scale set, 58k test facts, chance K1 0.0017%); ours from " + source + f", "
            f"{len(task.facts)} facts (chance K1 {100 / len(task.facts):.3f}%), long-tailed training counts, word "
            f"vectors: {exp.word_notes(cfg)['text vectors']}. Not a reproduction of the paper's numbers. "
        )

    def table1(self, df1: pd.DataFrame) -> dict:
        notes = self.their + (
            "i2f top-1: each test image ranks all facts (primary tie rule). f2i mAP: each fact ranks all test "
            "images, AP = mean precision at the ranks of its images, mAP over facts with test images. 'captions': the "
            "model of notebook 03 trained on Fashion-MNIST Scenes captions (fact images converted to grey, the input "
            "its CNN was trained on); 'fact phrases': retrained on (fact image, 'sandal left of bag') pairs over the "
            "frozen features of the closed-form baselines, epochs chosen on dev images. protocol: 'strict' as the "
            "authors' GetSherlockResults.m (an image's fact is its only answer), 'implied' as their "
            "GetSherlockResults_notharsh_v2.m (implied lower-order facts credited, per-fact euc scores, flexible "
            "fact -> image relevance; see Table 4)."
        )
        title = "Sherlock Table 1: caption models, caption-level vs fact-level"
        return self.write_table("sherlock_table1_caption_vs_fact", df1, title, notes)

    def table4(self, df4: pd.DataFrame) -> dict:
        notes = self.their + (
            "Two protocols, the authors' evaluation scripts: 'strict' (GetSherlockResults.m: an image's fact is "
            "its only answer, facts ranked by the model's distance) and 'implied' (GetSherlockResults_notharsh_v2.m: "
            "per-fact euc scores exp(-d^2 / 2 sigma^2), sigma the fact's median distance, ESZSL by dot; an image's "
            "implied lower-order facts also true, each found within k when its rank minus the true facts above it is "
            "<= k + true facts - 1; an <S> query's relevant images all those with subject S, an <S,P> query's its "
            "<S,P,O> images too). K@k: image -> fact top-k accuracy among all facts (the paper) or among the facts of "
            "the image's order (beyond the paper: with wild-card slots ignored in the distance, a first-order fact is "
            "never farther than its completions, so among all facts lower-order facts win). mAP: fact -> image over "
            "all test images; mAP@100: calcAP.m's, the precisions at the relevant images in the top 100 divided by how "
            "many are there (0 if none). Ties: strict, the primary rule (orderlib.eval.retrieval); implied, index "
            "order. SEM epochs chosen on dev fact -> image mAP. The ablation row's paper value is Sherlock's "
            "'averaged S, P and O parts' K1 (8.1). 'SEM-A, gloss skip-gram vectors': SEM-A regressing a skip-gram on "
            "WordNet 3.0's text instead (only where WORD_VECTORS names pretrained vectors). Chance: k / candidates."
        )
        return self.write_table(
            "sherlock_table4_retrieval", df4, "Sherlock Table 4: bi-directional fact retrieval", notes
        )

    def table5(self, df5: pd.DataFrame) -> dict:
        n_cases = df5[df5.metric == "facts"].drop_duplicates("case").set_index("case")["ours"].astype(int).to_dict()
        notes = self.their + (
            "K10 (image -> fact) over test images of SPO facts with <= 5 training images whose parts occur in >= "
            "15 training images of other SPO facts; 'facts' rows give how many facts each case holds (paper: its "
            "large-scale set). Beyond the paper: the 'unseen SPO facts' case (0 training images) and K10 among SPO "
            f"facts only. Facts per case here: {n_cases}. protocol: 'strict' / 'implied' as in Table 4."
        )
        title = "Sherlock Table 5: generalisation to few-example SPO facts"
        return self.write_table("sherlock_table5_generalization", df5, title, notes)
