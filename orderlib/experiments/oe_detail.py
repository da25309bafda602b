"""Section 4.6 of Vendrov et al.: captions of very different detail for the same image.

Among co-referring caption pairs (two captions of one image) in the dev split, take the 100 with
the biggest length difference (ties: earlier image, then earlier caption first). Report
- image retrieval over the dev images: mean rank of the image over the 200 captions of those
  pairs (paper, COCO, 1000 images: order 6.4, cosine 9.7), also split into the shorter and the
  longer captions, and over all dev captions for reference;
- caption retrieval with the shorter caption as query over all other dev captions: mean rank of
  the longer one (paper: order 34.0, cosine 47.6). The longer, more detailed caption is the more
  specific side: candidates take the image's place in the penalty, the query the caption's.
Mean ranks are reported under the primary tie rule (the expectation under random tie-breaking:
repeated caption texts tie exactly) with the other rules beside them (orderlib.eval.retrieval).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from orderlib.eval.retrieval import TIES, TargetRanks, ranks_of_targets, tie_columns
from orderlib.experiments.oe_retrieval import TIES_NOTE, models_meta
from orderlib.reports import write_table
from orderlib.training.retrieval import CAPTIONS_PER_IMAGE, CaptionedImages, embed
from orderlib.viz import cited

PAPER_SEC46 = {
    ("order-embeddings", "image retrieval mean rank, 100 most length-different pairs"): 6.4,
    ("order-embeddings (symm.)", "image retrieval mean rank, 100 most length-different pairs"): 9.7,
    ("order-embeddings", "caption retrieval: mean rank of the longer caption, shorter as query"): 34.0,
    ("order-embeddings (symm.)", "caption retrieval: mean rank of the longer caption, shorter as query"): 47.6,
}


def length_different_pairs(lengths: torch.Tensor, k: int = 100) -> np.ndarray:
    """(k, 2) caption indices (shorter, longer) of the k co-referring pairs with the biggest
    length difference; lengths is (5N,) with image i's captions at 5i..5i+4."""
    n = len(lengths) // CAPTIONS_PER_IMAGE
    a, b = np.triu_indices(CAPTIONS_PER_IMAGE, 1)  # the 10 pairs within one image
    first = (np.arange(n)[:, None] * CAPTIONS_PER_IMAGE + a).ravel()
    second = (np.arange(n)[:, None] * CAPTIONS_PER_IMAGE + b).ravel()
    L = np.asarray(lengths)
    diff = np.abs(L[first] - L[second])
    top = np.argsort(-diff, kind="stable")[:k]
    short_first = L[first[top]] <= L[second[top]]
    return np.stack([np.where(short_first, first[top], second[top]), np.where(short_first, second[top], first[top])], 1)


def image_ranks(model, ims: torch.Tensor, caps: torch.Tensor, caption_idx) -> TargetRanks:
    """Rank counts of each listed caption's own image among all images."""
    idx = torch.as_tensor(caption_idx)
    targets = idx.div(CAPTIONS_PER_IMAGE, rounding_mode="floor")[:, None]
    return ranks_of_targets(lambda r: model.penalty_matrix(ims, caps[idx[r]]).T, len(idx), len(ims), targets)


def caption_ranks(model, caps: torch.Tensor, pairs: np.ndarray) -> TargetRanks:
    """Rank counts of each pair's longer caption among all captions but the query, the shorter
    caption being the query (candidates in the image role: the specific side)."""
    q = torch.as_tensor(pairs[:, 0])

    def penalty(rows):
        p = model.penalty_matrix(caps, caps[q[rows]]).T.clone()  # (b, 5N)
        p[torch.arange(len(rows)), q[rows]] = float("nan")  # the query is no candidate: NaN ranks last
        return p

    return ranks_of_targets(penalty, len(pairs), len(caps), torch.as_tensor(pairs[:, 1])[:, None])


def detail_metrics(model, split: CaptionedImages, k: int = 100) -> dict[str, dict[str, float]]:
    """{metric: {tie rule: value}} for one model (mean ranks; the length difference has no rule)."""
    ims, caps = embed(model, split)
    pairs = length_different_pairs(split.lengths, k)
    with torch.no_grad():
        short, long = image_ranks(model, ims, caps, pairs[:, 0]), image_ranks(model, ims, caps, pairs[:, 1])
        every = image_ranks(model, ims, caps, np.arange(len(caps)))
        longer = caption_ranks(model, caps, pairs)
    f = lambda r: {rule: float(r.ranks(rule).double().mean()) for rule in TIES}
    gap = float((split.lengths[pairs[:, 1]] - split.lengths[pairs[:, 0]]).double().mean())
    return {
        "image retrieval mean rank, 100 most length-different pairs": f(TargetRanks.cat([short, long])),
        "image retrieval mean rank, shorter captions of those pairs": f(short),
        "image retrieval mean rank, longer captions of those pairs": f(long),
        "image retrieval mean rank, all dev captions": f(every),
        "caption retrieval: mean rank of the longer caption, shorter as query": f(longer),
        "mean length difference of those pairs (words)": {rule: gap for rule in TIES},
    }


def detail_table(models: dict, split: CaptionedImages, k: int = 100) -> pd.DataFrame:
    """Long table: method, metric, paper, ours (primary tie rule), the other tie rules."""
    rows = [
        dict(
            method=method,
            metric=metric,
            paper=PAPER_SEC46.get((method, metric)),
            **tie_columns(v),
            target_images=len(split),
        )
        for method, model in models.items()
        for metric, v in detail_metrics(model, split, k).items()
    ]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- what the Section 4.6 notebook shows


def texts_shared(split: CaptionedImages, caption_idx) -> np.ndarray:
    """For each listed caption, how many images of `split` have a caption of the very same text
    (itself included): a text shared by n images ties them all for image retrieval."""
    text = lambda i: tuple(split.tokens[i, : split.lengths[i]].tolist())
    images: dict[tuple, set] = {}
    for i in range(len(split.lengths)):
        images.setdefault(text(i), set()).add(i // CAPTIONS_PER_IMAGE)
    return np.array([len(images[text(int(i))]) for i in caption_idx])


def pairs_table(split: CaptionedImages, pairs: np.ndarray) -> pd.DataFrame:
    """The two sides of the pairs: mean words, and how many target images share the caption's text
    (1: the caption names its own image only)."""
    rows = {}
    for j, side in enumerate(("shorter captions", "longer captions")):
        shared = texts_shared(split, pairs[:, j])
        rows[side] = {
            "mean words": float(split.lengths[pairs[:, j]].double().mean()),
            "images sharing the text: mean": float(shared.mean()),
            "max": int(shared.max()),
        }
    return cited(pd.DataFrame(rows).T)


def tie_gap(df: pd.DataFrame) -> float:
    """The largest difference between the two exact tie bounds over every row of a report: 0 when
    no rank depends on how ties are broken."""
    return float((df["ties against"] - df["ties for"]).abs().max())


def write_report(df: pd.DataFrame, ex, cfg: dict, pairs: int, *, preset, device, commit, t_start, tables) -> dict:
    """Write report `oe_sec46_detail` (CSV, Markdown, provenance) under `tables`."""
    dev = ex.data["10crop"].dev
    notes = (
        f"Data: {ex.source}; target set: the {len(dev)} dev images. "
        + (
            "Stand-in data (Fashion-MNIST Scenes, generated captions of 5 levels of detail) in place of COCO: "
            "the paper column is COCO's and not comparable number for number. "
            if cfg["data"] == "scenes"
            else ""
        )
        + f"Pairs: the {pairs} co-referring caption pairs with the biggest length difference (words). "
        "Image retrieval ranks the dev images for each caption; caption retrieval ranks every other dev caption "
        "for the shorter caption, the candidates taking the image's (specific) side of the penalty. "
        "Ranks 1-based. Models: the Table 2 notebook's, same preset (their training commit and time are in the "
        ".meta.json). "
        + TIES_NOTE.replace(
            "repeated caption texts embed identically",
            "repeated caption texts embed identically, and an order violation of 0 ties exactly",
        )
    )
    meta = models_meta(ex, cfg, preset=preset, device=device, commit=commit, t_start=t_start, pairs=pairs)
    title = "Order-Embeddings Section 4.6: caption detail"
    return write_table("oe_sec46_detail", df, meta, tables, title=title, notes=notes)


def check_detail(df: pd.DataFrame) -> None:
    """The report's sanity checks: every cell filled, ranks >= 1, pairs that differ in length, and
    every tie rule within the two exact bounds."""
    ours = df.set_index(["method", "metric"])["ours"]
    assert df["ours"].notna().all()
    assert (df[df.metric.str.contains("mean rank")].ours >= 1).all()
    assert ours[("order-embeddings", "mean length difference of those pairs (words)")] > 0
    m = df[df.metric.str.contains("mean rank")]
    assert ((m["ties for"] - 1e-9 <= m.ours) & (m.ours <= m["ties against"] + 1e-9)).all()  # within the exact bounds
