"""Which pretrained-vector label builder picks the right sense: WordNet's own structure as the judge.

A label vector should sit near its hypernym's: coat.n.01 near garment.n.01, jersey.n.03 (T-shirt)
near shirt.n.01, not near New Jersey. For a fixed sample of WordNet 3.0 noun synsets, each builder's
vectors rank all 82,115 noun synsets by cosine to the synset; the score is where its nearest hypernym
lands (ties count half, the expected rule). Builders: `lemma_vectors` (DeViSE's first term) and
`sense_vectors` (all lemmas plus the gloss at several weights), on GloVe 6B 50-d. Also prints the
nearest synsets of the ten Fashion-MNIST labels. Writes reports/tables/bench_label_vectors.*.

    .venv/bin/python benchmarks/standing/label_vectors.py [--vectors glove-6b-50d] [--sample 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from orderlib.data.fashion_mnist import SYNSETS
from orderlib.data.wordnet import load_noun_graph, open_wordnet
from orderlib.encoders.skipgram import NAMED_VECTORS, lemma_vectors, load_word_vectors, sense_vectors
from orderlib.reports import git_commit, report_meta, write_table
from orderlib.runs import run_paths

GLOSS_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0)


def hypernym_ranks(vec: np.ndarray, parents: list[list[int]], sample: np.ndarray) -> np.ndarray:
    """Rank (1 = nearest; ties count half) of each sampled synset's nearest hypernym among all other synsets."""
    v = torch.as_tensor(vec)
    ranks = []
    for chunk in np.array_split(sample, max(1, len(sample) // 256)):
        sims = v[torch.as_tensor(chunk)] @ v.T  # (B, N)
        sims[torch.arange(len(chunk)), torch.as_tensor(chunk)] = -np.inf  # not itself
        for row, i in zip(sims, chunk):
            best = max(float(row[p]) for p in parents[i])
            above, tied = int((row > best).sum()), int((row == best).sum()) - 1
            ranks.append(1 + above + tied / 2)
    return np.array(ranks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", default="glove-6b-50d")
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    wv = load_word_vectors(args.vectors)
    wn, graph = open_wordnet("3.0"), load_noun_graph("3.0")
    synsets = [wn.synset(n) for n in graph.names]
    has_parent = np.array([i for i, p in enumerate(graph.parents) if p])
    sample = np.sort(np.random.default_rng(args.seed).choice(has_parent, args.sample, replace=False))
    builders = {"first term (lemma_vectors)": lambda: lemma_vectors(wv, synsets)}
    builders.update(
        {
            f"all lemmas + {w:g} x gloss (sense_vectors)": (lambda w=w: sense_vectors(wv, synsets, w))
            for w in GLOSS_WEIGHTS
        }
    )
    index, rows, near = graph.index(), [], {}
    for name, build in builders.items():
        vec = build()
        r = hypernym_ranks(vec, graph.parents, sample)
        rows += [
            dict(method=name, metric="hypernym MRR", ours=float(np.mean(1 / r))),
            dict(method=name, metric="hypernym median rank", ours=float(np.median(r))),
            dict(method=name, metric="hypernym in top 10 (%)", ours=100 * float(np.mean(r <= 10))),
        ]
        for s in SYNSETS:
            sims = vec @ vec[index[s]]
            near[(name, s)] = [graph.names[int(j)] for j in np.argsort(-sims)[1:4]]
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    print(df.pivot(index="method", columns="metric", values="ours").round(3).to_string())
    for (name, s), n in near.items():
        if name.startswith("first") or "+ 1 x" in name:
            print(f"{name[:28]:28s} {s:18s} {', '.join(n)}")
    notes = (
        f"WordNet 3.0's nouns as the judge of label vectors built from {args.vectors}: for {args.sample} sampled "
        "noun synsets (seeded), the rank of the nearest hypernym among all 82,115 noun synsets by cosine (1 = "
        "nearest, ties count half). 'first term' is DeViSE's recipe (the first lemma, or its words' mean); "
        "'all lemmas + w x gloss' averages every lemma and adds w times the gloss's SIF-weighted mean word vector."
    )
    meta = report_meta(
        preset="full",
        seed=args.seed,
        device="cpu",
        commit=git_commit(),
        data_source=f"WordNet 3.0 nouns; {NAMED_VECTORS.get(args.vectors, (None,) * 4)[3] or args.vectors}",
        data_fingerprint=graph.fingerprint,
        wall_time_s=time.perf_counter() - t0,
        trained={},
        config={"vectors": args.vectors, "sample": args.sample, "gloss_weights": list(GLOSS_WEIGHTS)},
    )
    paths = run_paths("label_vectors", "full")
    written = write_table(
        "bench_label_vectors", df, meta, paths.tables, title="Label vectors from word vectors: sense check", notes=notes
    )
    print("wrote", written["csv"])


if __name__ == "__main__":
    main()
