"""Figure 4 / supplementary of Vendrov et al.: elementwise max and min of order-embeddings act as
composition and abstraction.

In the order, images (specific) sit above-right of their captions (general): the elementwise max
of two embeddings is below both in the partial order (more specific: "both"), the min above both
(more general: "what they share"). Measured on the test scenes:
- composition: q = max(f_c("a A"), f_c("a B")) for two classes A, B; retrieve test images by
  E(image, q); precision@k = share of the top k that hold both an A and a B. Also with an image
  of an A alone in place of the caption "a A". Baselines: the single caption "a A", and the
  written caption "a A and a B".
- abstraction: q = min(f_i(image of an A), f_i(image of a B)) for single-item scenes of
  different classes; rank one caption per WordNet synset of the lexicon ("a shoe", "footwear",
  "an artifact", ...) by E(q, caption); top-1 is right when it names a common ancestor of A and B.
The symmetric model has no order, so its analogue is the normalised sum (Kiros et al.'s vector
arithmetic) for both operations.
Precision@k and top-1 rates are reported under every tie rule of orderlib.eval.retrieval, the
primary one (the expectation under random tie-breaking) as `ours`: an exact tie needs two equal
penalties, and with unit-norm, non-negative embeddings an order violation is exactly 0 only between
identical vectors (Section 4.4), so the rules agree unless that happens.
"""

from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from orderlib.data.scenes import MASS_NOUNS, Lexicon, Scenes, caption_tokenize, noun_phrase
from orderlib.eval.retrieval import TIES, tie_columns, topk_hits
from orderlib.experiments.oe_retrieval import models_meta
from orderlib.penalties import order_violation
from orderlib.reports import write_table
from orderlib.training.retrieval import embed
from orderlib.viz import cited, side_by_side

CLASS_WORDS = {"jersey.n.03": "t-shirt", "gym_shoe.n.01": "sneaker"}  # else the first lemma
LABEL_WORDS = {"trouser.n.01": "trousers"}  # a class's name under a figure's image, where not CLASS_WORDS


def class_word(lex: Lexicon, synset: str) -> str:
    """The word a caption names a class by: CLASS_WORDS, else the synset's first lemma."""
    return CLASS_WORDS.get(synset, lex.words[synset][0])


def class_caption(lex: Lexicon, label: int) -> str:
    synset = lex.ladders[label][0]
    return noun_phrase(class_word(lex, synset), 1)


def scene_classes(scenes: Scenes, lex: Lexicon, idx: int, width: int = 24) -> str:
    """The classes of scene `idx`'s items in reading order (top left to bottom right), wrapped at `width`."""
    synsets = [lex.ladders[int(c)][0] for c in scenes.labels[idx] if c >= 0]
    names = [LABEL_WORDS.get(s) or class_word(lex, s) for s in synsets]
    return textwrap.fill(", ".join(names), width)


def concept_captions(lex: Lexicon) -> list[tuple[str, str]]:
    """(synset, caption) for every synset the captions can name."""
    return [(s, noun_phrase(class_word(lex, s), 1, s in MASS_NOUNS)) for s in lex.words]


@torch.no_grad()
def encode_captions(model, vocab, texts: list[str]) -> torch.Tensor:
    device = next(model.parameters()).device
    tokens, lengths = vocab.encode([caption_tokenize(t) for t in texts])
    return model.captions(tokens.to(device), lengths)  # (n, D)


def combine(model, a: torch.Tensor, b: torch.Tensor, op: str) -> torch.Tensor:
    """Elementwise max ("compose") or min ("abstract") for order models; the normalised sum for
    the symmetric one."""
    if model.penalty == "cosine":
        return F.normalize(a + b, dim=-1)
    return torch.maximum(a, b) if op == "compose" else torch.minimum(a, b)


def _top_images(model, ims: torch.Tensor, q: torch.Tensor, k: int) -> torch.Tensor:
    return model.penalty_matrix(ims, q).T.topk(k, largest=False).indices  # (n_q, k), low penalty first


def _rates(penalties: torch.Tensor, relevant: torch.Tensor, k: int) -> dict[str, float]:
    """{tie rule: 100 * mean share of relevant candidates among each query's k best}."""
    relevant = torch.as_tensor(relevant, dtype=torch.bool, device=penalties.device)
    return {rule: 100.0 * float(topk_hits(penalties, relevant, k, rule).mean()) / k for rule in TIES}


@torch.no_grad()
def composition(model, vocab, split, scenes: Scenes, lex: Lexicon, k: int = 10) -> tuple[dict, list]:
    """Precision@k of images holding both classes, per query kind; and the per-pair retrievals."""
    ims, _ = embed(model, split)
    labels = scenes.labels
    has = [(labels == c).any(1) for c in range(len(lex.ladders))]
    pairs = list(itertools.combinations(range(len(lex.ladders)), 2))
    single = np.flatnonzero((labels >= 0).sum(1) == 1)  # one-item scenes: "an image of an A"
    a_cap = encode_captions(model, vocab, [class_caption(lex, a) for a, _ in pairs])
    b_cap = encode_captions(model, vocab, [class_caption(lex, b) for _, b in pairs])
    both = encode_captions(model, vocab, [f"{class_caption(lex, a)} and {class_caption(lex, b)}" for a, b in pairs])
    queries = {
        "caption A max caption B": combine(model, a_cap, b_cap, "compose"),
        "caption A alone": a_cap,
        "written caption 'A and B'": both,
    }
    single_of = {c: single[labels[single].max(1) == c] for c in range(len(lex.ladders))}
    if all(len(v) for v in single_of.values()):  # an image of an A alone, for every class A
        a_img = ims[torch.as_tensor([single_of[a][0] for a, _ in pairs])]
        queries["image of A max caption B"] = combine(model, a_img, b_cap, "compose")
    both_ab = np.stack([has[a] & has[b] for a, b in pairs])  # (pairs, images)
    out, examples = {}, []
    for name, q in queries.items():
        out[f"composition precision@{k}: {name}"] = _rates(model.penalty_matrix(ims, q).T, both_ab, k)
        if name == "caption A max caption B":
            top = _top_images(model, ims, q, k).cpu().numpy()  # (pairs, k), for the figure
            examples = [dict(a=a, b=b, top=row) for (a, b), row in zip(pairs, top)]
    return out, examples


@torch.no_grad()
def abstraction(
    model, vocab, split, scenes: Scenes, lex: Lexicon, n_pairs: int = 300, seed: int = 0
) -> tuple[dict, list]:
    """Share of image pairs (single items, different classes) whose min's top-1 synset caption is
    a common ancestor (and the lowest one); and the examples."""
    ims, _ = embed(model, split)
    concepts = concept_captions(lex)
    caps = encode_captions(model, vocab, [c for _, c in concepts])
    single = np.flatnonzero((scenes.labels >= 0).sum(1) == 1)
    cls = scenes.labels[single].max(1)
    rng = np.random.default_rng(seed)
    i, j = rng.choice(single, n_pairs), rng.choice(single, n_pairs)
    keep = scenes.labels[i].max(1) != scenes.labels[j].max(1)
    i, j = i[keep], j[keep]
    q = combine(model, ims[torch.as_tensor(i)], ims[torch.as_tensor(j)], "abstract")
    pen = model.penalty_matrix(q, caps)  # (pairs, synsets)
    synsets = [c for c, _ in concepts]
    la, lb = scenes.labels[i].max(1), scenes.labels[j].max(1)
    common = np.array([[s in lex.ancestors(a) & lex.ancestors(b) for s in synsets] for a, b in zip(la, lb)])
    lowest = np.array([[s == lex.lowest_common([a, b]) for s in synsets] for a, b in zip(la, lb)])
    top = pen.argmin(1).cpu().numpy()  # (pairs,), for the figure
    examples = [
        dict(i=int(ia), j=int(ib), caption=concepts[t][1], common=bool(common[n, t]))
        for n, (t, ia, ib) in enumerate(zip(top, i, j))
    ]
    single_pen = model.penalty_matrix(ims[torch.as_tensor(single)], caps)
    true_of = np.array([[s in lex.ancestors(c) for s in synsets] for c in cls])
    return {
        "abstraction top-1: min of two images names a common ancestor (%)": _rates(pen, common, 1),
        "abstraction top-1: min of two images names their lowest common ancestor (%)": _rates(pen, lowest, 1),
        "top-1 synset caption of one image is true of it (%)": _rates(single_pen, true_of, 1),
    }, examples


def regularities_table(models: dict, vocab, split, scenes: Scenes, lex: Lexicon) -> tuple[pd.DataFrame, dict]:
    rows, examples = [], {}
    for method, model in models.items():
        comp, ex_c = composition(model, vocab, split, scenes, lex)
        abst, ex_a = abstraction(model, vocab, split, scenes, lex)
        examples[method] = (ex_c, ex_a)
        rows += [dict(method=method, metric=m, paper=None, **tie_columns(v)) for m, v in {**comp, **abst}.items()]
    return pd.DataFrame(rows), examples


# ---------------------------------------------------------------- what the Figure 4 notebook shows

SHORT = {  # report metric -> the label a reader sees
    "composition precision@10: caption A max caption B": "compose P@10: max('a A', 'a B')",
    "composition precision@10: caption A alone": "compose P@10: 'a A' alone",
    "composition precision@10: written caption 'A and B'": "compose P@10: written 'a A and a B'",
    "composition precision@10: image of A max caption B": "compose P@10: max(image of an A, 'a B')",
    "abstraction top-1: min of two images names a common ancestor (%)": "abstract top-1: min names a common ancestor",
    "abstraction top-1: min of two images names their lowest common ancestor (%)": "abstract top-1: min names the lowest one",
    "top-1 synset caption of one image is true of it (%)": "one image's top-1 synset caption is true of it",
}
FIGURE_PAIRS = ({7, 8}, {3, 9}, {1, 5})  # sneaker + bag, dress + boot, trousers + sandal


def toy_regularities() -> pd.DataFrame:
    """Eqs. (1)-(2) by hand on 2-d vectors: max(a, b) sits below a and b in the order (E(max, a) =
    E(max, b) = 0: more specific than both), min(a, b) above them (E(a, min) = E(b, min) = 0),
    while a and b themselves are not ordered (E > 0 both ways)."""
    v = {"a": torch.tensor([0.2, 0.9]), "b": torch.tensor([0.7, 0.1])}
    v["max(a, b)"], v["min(a, b)"] = torch.maximum(v["a"], v["b"]), torch.minimum(v["a"], v["b"])
    pairs = [("max(a, b)", "a"), ("max(a, b)", "b"), ("a", "min(a, b)"), ("b", "min(a, b)"), ("a", "b"), ("b", "a")]
    show = lambda n: f"{n} = ({float(v[n][0]):.1f}, {float(v[n][1]):.1f})"
    rows = [{"x (specific side)": show(x), "y (general side)": show(y), "E(x, y)": float(order_violation(v[x], v[y]))}
            for x, y in pairs]  # fmt: skip
    return cited(pd.DataFrame(rows))


def results(df: pd.DataFrame) -> pd.DataFrame:
    """Both models' rates side by side (viz.side_by_side), the metrics under their short labels;
    the paper's column is empty: Figure 4 shows examples only."""
    shown = df.assign(metric=df.metric.map(SHORT))
    data = "stand-in: Fashion-MNIST Scenes, test split"
    return side_by_side(shown, data, methods=list(dict.fromkeys(df.method)), metrics=list(SHORT.values()))


def tie_gap(df: pd.DataFrame) -> float:
    """The largest difference between the two exact tie bounds over every row (0: no rate depends
    on how ties are broken)."""
    return float((df["ties against"] - df["ties for"]).abs().max())


def _label_scenes(fig, scenes: Scenes, lex: Lexicon, picks: list, shown: list, k: int, n: int) -> None:
    """Name the classes under every scene of the figure: the retrieved images and the min's two images."""
    at = lambda row, col: fig.axes[row * (k + 2) + col]  # plt.subplots' axes, row by row
    scene_of = {(r, c + 2): i for r, e in enumerate(picks[:n]) for c, i in enumerate(e["top"][:k])}
    scene_of |= {(n + r, c): e[key] for r, e in enumerate(shown[:n]) for c, key in enumerate(("i", "j"))}
    for (row, col), i in scene_of.items():
        text = scene_classes(scenes, lex, int(i))
        at(row, col).text(0.5, -0.03, text, transform=at(row, col).transAxes, ha="center", va="top", fontsize=7.5)


def figure(scenes: Scenes, lex: Lexicon, examples: tuple[list, list], k: int = 4):
    """viz.plot_regularities on three class pairs (FIGURE_PAIRS) and three image pairs (two whose
    min names a common ancestor, one whose does not), each scene's classes under it, with what its
    colours mean: a legend and a label per block of rows."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from orderlib.viz import plot_regularities

    comp, abst = examples
    picks = [e for e in comp if {e["a"], e["b"]} in FIGURE_PAIRS]
    shown = [e for e in abst if e["common"]][:2] + [e for e in abst if not e["common"]][:1]
    n = 3  # rows per block
    fig = plot_regularities(scenes, lambda c: class_caption(lex, c), picks, shown, k=k, n=n)
    for r in range(len(shown[:n])):  # the query in words over its two images: "min( this image, this image )"
        for col, words in enumerate(("min( this image,", "this image )")):
            fig.axes[(n + r) * (k + 2) + col].set_title(words, fontsize=9)
    for im in (im for ax in fig.axes for im in ax.get_images()):
        im.set_interpolation("nearest")  # the scenes' pixels as they are, and a PNG a third the size
    _label_scenes(fig, scenes, lex, picks, shown, k, n=n)
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + 2 * n * 0.3)  # room for two lines of classes under each row
    fig.tight_layout()
    fig.subplots_adjust(left=0.05)
    for rows, text in ((fig.axes[0 : n * (k + 2)], "composition"), (fig.axes[n * (k + 2) :], "abstraction")):
        top, bottom = rows[0].get_position().y1, rows[-1].get_position().y0
        fig.text(0.01, (top + bottom) / 2, text, rotation=90, va="center", ha="center", fontsize=11)
    handles = [
        Patch(facecolor="none", edgecolor="limegreen", lw=3, label="retrieved image holds both classes"),
        Patch(facecolor="none", edgecolor="red", lw=3, label="retrieved image lacks one of them"),
        plt.Line2D([], [], color="green", marker="$a$", ls="none", ms=8, label="caption names a common ancestor"),
        plt.Line2D([], [], color="red", marker="$a$", ls="none", ms=8, label="caption is no ancestor of both"),
    ]
    fig.legend(handles=handles, loc="upper center", ncol=2, fontsize=9, frameon=False, bbox_to_anchor=(0.5, 0.0))
    return fig


def write_report(df: pd.DataFrame, ex, cfg: dict, *, preset, device, commit, t_start, tables) -> dict:
    """Write report `oe_fig4_regularities` (CSV, Markdown, provenance) under `tables`."""
    notes = (
        f"Data: {ex.source}; test split. Stand-in data in place of COCO; the paper shows Figure 4 as examples "
        "only and has no numbers. Composition: precision@10 of test images holding both classes for the query "
        "max(f_c('a A'), f_c('a B')) over all 45 class pairs (cosine model: normalised sum). Abstraction: for "
        "random pairs of one-item test images of different classes, the synset caption with the lowest E(min of "
        "the two image embeddings, caption); right when it names a WordNet ancestor of both classes. "
        "Each rate is the expectation under uniformly random tie-breaking (ours), with the exact bounds "
        "('ties against' / 'ties for') and the index-order rule beside it; with unit-norm, non-negative "
        "embeddings an order violation is exactly 0 only between identical vectors, so ties are rare."
    )
    meta = models_meta(ex, cfg, preset=preset, device=device, commit=commit, t_start=t_start)
    title = "Order-Embeddings Figure 4: max as composition, min as abstraction"
    return write_table("oe_fig4_regularities", df, meta, tables, title=title, notes=notes)


def check_regularities(df: pd.DataFrame) -> None:
    """The report's sanity checks: rates in [0, 100], one row per model and metric, every tie rule
    within the two exact bounds."""
    assert df["ours"].between(0, 100).all()
    assert len(df) == 2 * df.metric.nunique()
    assert ((df["ties against"] - 1e-9 <= df.ours) & (df.ours <= df["ties for"] + 1e-9)).all()  # within the bounds
