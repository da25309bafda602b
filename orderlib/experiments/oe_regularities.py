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
Penalties can tie exactly (an order violation of 0 is common), so precision@k and top-1 rates are
reported under every tie rule of orderlib.eval.retrieval, the primary one (the expectation under
random tie-breaking) as `ours`.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from orderlib.data.scenes import MASS_NOUNS, Lexicon, Scenes, caption_tokenize, noun_phrase
from orderlib.eval.retrieval import TIES, tie_columns, topk_hits
from orderlib.training.retrieval import embed

CLASS_WORDS = {"jersey.n.03": "t-shirt", "gym_shoe.n.01": "sneaker"}  # else the first lemma


def class_caption(lex: Lexicon, label: int) -> str:
    synset = lex.ladders[label][0]
    return noun_phrase(CLASS_WORDS.get(synset, lex.words[synset][0]), 1)


def concept_captions(lex: Lexicon) -> list[tuple[str, str]]:
    """(synset, caption) for every synset the captions can name."""
    return [(s, noun_phrase(CLASS_WORDS.get(s, w[0]), 1, s in MASS_NOUNS)) for s, w in lex.words.items()]


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
