"""DeViSE on 200 labels over seeds (beyond the paper): the attribute-object pairs of notebook 08's
stand-in as labels (orderlib/experiments/devise_pairs.py).

A seed draws the images (items, tints, jitter of every pair's train / held-out / test images), the
random label and word vectors and every trained head. Notebook 08's frozen CNN and its word vectors
(GloVe 6B 50-d, the gloss skip-gram) are the same in every seed. Writes
reports/tables/devise_pair_labels.* (per-seed rows, mean / sd / min / max, each paired claim with
its verdict, orderlib.spread); checkpoints under runs/<preset>/checkpoints/devise_pair_labels/seed<N>/.

    .venv/bin/python benchmarks/seed_spread/devise_pair_labels.py [--seeds 0 1 2] [--preset full]
"""

from __future__ import annotations

import time

import pandas as pd

from orderlib import spread
from orderlib.checkpoint import fingerprint
from orderlib.data.attributes import all_pairs
from orderlib.experiments import devise_pairs as exp
from orderlib.experiments import utama
from orderlib.reports import git_commit, report_meta
from orderlib.runs import resolve_device, run_paths
from orderlib.training.item_cnn import pretrain_item_cnn

METRICS = ("hit@1", "hit@2", "hit@5", "hp@2", "hp@5", "hp@10")
DEVISE, GLOSS, RAND, RAND_WORDS = (
    "devise",
    "devise (gloss skip-gram labels)",
    "random embeddings",
    "devise (random word vectors)",
)
# (claim, metric, a, b): "a beats b", as the paper claims it on ImageNet's 1,000 labels, or beyond it
CLAIMS = [
    ("DeViSE above softmax on hp@5 (the paper's)", "hp@5", DEVISE, exp.SOFTMAX),
    ("softmax above DeViSE on hit@1 (the paper's)", "hit@1", exp.SOFTMAX, DEVISE),
    ("DeViSE above random label vectors, hit@1", "hit@1", DEVISE, RAND),
    ("DeViSE above random label vectors, hp@5", "hp@5", DEVISE, RAND),
    ("GloVe labels above gloss skip-gram labels, hit@1", "hit@1", DEVISE, GLOSS),
    ("GloVe labels above gloss skip-gram labels, hp@5", "hp@5", DEVISE, GLOSS),
    ("composed random word vectors above random label vectors, hp@5", "hp@5", RAND_WORDS, RAND),
    ("DeViSE above composed random word vectors, hit@1", "hit@1", DEVISE, RAND_WORDS),
]
KEYS = ["method", "metric"]


def one_seed(cfg: dict, workdir, cnn, pretrained, gloss, device) -> tuple[pd.DataFrame, dict, str]:
    """One seed's rows over all 200 labels, the models they rest on and the images' fingerprint."""
    pairs = all_pairs()  # label i is row i
    data = exp.images(cfg, pairs)
    vectors = exp.label_vectors(pretrained, gloss, pairs, cfg["seed"])
    models, records = exp.train_rows(cnn, data, vectors, cfg, workdir, device)
    metrics = exp.pair_label_metrics(models, cnn, vectors, data, pairs)
    rows = [dict(method=r, metric=k, paper=None, ours=v[k]) for r, v in metrics.items() for k in METRICS]
    return pd.DataFrame(rows), records, fingerprint(*[x for split in data.values() for x in split])


def main() -> None:
    args = spread.command_line(__doc__, exp.PRESETS, workers=False)
    t0, commit = time.perf_counter(), git_commit()
    device = resolve_device("auto")
    paths = run_paths("devise_pair_labels", args.preset)
    ucfg, shared = utama.PRESETS[args.preset], run_paths("utama", args.preset).checkpoints
    cnn, _ = pretrain_item_cnn(ucfg, shared, device, progress=False)  # notebook 08's, loaded once
    words, word_notes = utama.word_vectors(ucfg, shared)
    pretrained, gloss = words[utama.DEFAULT], words.get(utama.GLOSS, words[utama.DEFAULT])
    base = exp.PRESETS[args.preset]

    seeds, models, fingerprints = spread.run_seeds(
        args.seeds,
        lambda s: one_seed({**base, "seed": s}, paths.checkpoints / f"seed{s}", cnn, pretrained, gloss, device),
    )
    claims = spread.claims(seeds, CLAIMS)
    notes = (
        "Beyond the paper: DeViSE's Table 1 with the 200 attribute-object pairs of Fashion-MNIST Attributes "
        "(notebook 08's stand-in) as labels, every pair seen in training (per pair: "
        f"{base['per_pair']['train']} training, {base['per_pair']['held']} held-out, {base['per_pair']['test']} "
        "test images). Both heads read notebook 08's frozen CNN (trained on plain items, never on attributes): "
        "'softmax baseline' is a linear softmax layer, the DeViSE rows a linear map onto a pair's label vector, "
        "the unit mean of its attribute's and object's word vectors ('random embeddings': random per label; "
        "'random word vectors': random per word, composed). hit@k (%) and hp@k (a fraction) over all 200 "
        "labels; hp@k's hierarchy gives a pair its attribute and its object as parents, so its first ring "
        "is the 28 pairs sharing one. A seed draws the images, the random vectors and the heads."
    )
    meta = report_meta(
        preset=args.preset,
        seed=args.seeds,
        device=device,
        commit=commit,
        data_source=utama.source(ucfg.get("word_vectors")),
        data_fingerprint=" ".join(fingerprints),
        wall_time_s=time.perf_counter() - t0,
        trained={"ImageNet stand-in CNN (notebook 08)": cnn.provenance, **models},
        config=base,
        seeds=args.seeds,
        word_vectors=word_notes,
    )
    written = spread.write_report(
        "devise_pair_labels",
        seeds,
        claims,
        KEYS,
        meta,
        paths.tables,
        "DeViSE with 200 attribute-object labels over seeds (beyond the paper)",
        notes,
    )
    print(claims[["claim", "mean_difference", "sd_difference", "verdict"]].round(3).to_string(index=False))
    print("wrote", written["csv"])


if __name__ == "__main__":
    main()
