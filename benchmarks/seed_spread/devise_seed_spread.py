"""DeViSE's headline rows over seeds: Table 1 (notebook 06) and zero-shot (notebook 07).

Each seed retrains everything a seed touches: the gloss skip-gram label vectors, the WordNet
order-embedding labels, the random label vectors, the CNN and every DeViSE model. The data and the
GloVe vectors are real and fixed (Fashion-MNIST, WordNet 3.0, GloVe 6B), so nothing about them is drawn. Writes
reports/tables/devise_seed_spread.* (per-seed rows, mean / sd / min / max, and each paired claim
with its verdict, orderlib.spread); checkpoints under runs/<preset>/checkpoints/devise_seeds/
(resumable; the notebooks' seed uses notebooks 06 and 07's checkpoints, runs/<preset>/checkpoints/devise/).

    .venv/bin/python benchmarks/seed_spread/devise_seed_spread.py [--seeds 0 1 2] [--preset full]
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from orderlib import spread
from orderlib.data.fashion_mnist import CLASSES, load_fashion_mnist
from orderlib.experiments import devise as exp
from orderlib.reports import git_commit, report_meta
from orderlib.runs import run_paths

TABLE1 = {
    "methods": (
        "softmax baseline",
        "devise",
        "devise (gloss skip-gram labels)",
        "random embeddings",
        "devise (order-embedding labels)",
    ),
    "metrics": ("hit@1", "hit@2", "hp@2", "hp@5"),
}
ZERO_SHOT = {
    "methods": tuple(
        f"{m}-0 ({s})"
        for s in ("held-out only", "2-hop")
        for m in (
            "devise",
            "devise, gloss skip-gram labels",
            "random embeddings",
            "devise, order-embedding labels",
            "chance",
        )
    )
    + ("devise-0 (3-hop)", "softmax baseline (2-hop)", "softmax baseline (3-hop)"),
    "metrics": ("hit@1", "hit@5", "hit@20", "hp@5", "hp@20"),
}
# (claim, table, metric, a, b): "a beats b", as the paper claims it (or, beyond it, as we ask it)
CLAIMS = [
    ("DeViSE above softmax on hp@5 (the paper's)", "Table 1", "hp@5", "devise", "softmax baseline"),
    ("softmax above DeViSE on hit@1 (the paper's)", "Table 1", "hit@1", "softmax baseline", "devise"),
    ("DeViSE above random label vectors, hit@1", "Table 1", "hit@1", "devise", "random embeddings"),
    ("DeViSE above random label vectors, hp@5", "Table 1", "hp@5", "devise", "random embeddings"),
    (
        "GloVe labels above gloss skip-gram labels, hit@1",
        "Table 1",
        "hit@1",
        "devise",
        "devise (gloss skip-gram labels)",
    ),
    ("GloVe labels above gloss skip-gram labels, hp@5", "Table 1", "hp@5", "devise", "devise (gloss skip-gram labels)"),
    ("order-embedding labels above DeViSE, hp@5", "Table 1", "hp@5", "devise (order-embedding labels)", "devise"),
    ("DeViSE above order-embedding labels, hit@1", "Table 1", "hit@1", "devise", "devise (order-embedding labels)"),
    (
        "DeViSE-0 above chance among the held-out labels, hit@1",
        "zero-shot",
        "hit@1",
        "devise-0 (held-out only)",
        "chance-0 (held-out only)",
    ),
    (
        "DeViSE-0 above random label vectors, held-out labels, hit@1",
        "zero-shot",
        "hit@1",
        "devise-0 (held-out only)",
        "random embeddings-0 (held-out only)",
    ),
    (
        "DeViSE-0 above gloss skip-gram labels, held-out labels, hit@1",
        "zero-shot",
        "hit@1",
        "devise-0 (held-out only)",
        "devise, gloss skip-gram labels-0 (held-out only)",
    ),
    (
        "order-embedding labels-0 above DeViSE-0, held-out labels, hit@1",
        "zero-shot",
        "hit@1",
        "devise, order-embedding labels-0 (held-out only)",
        "devise-0 (held-out only)",
    ),
    ("DeViSE-0 above chance, 2-hop set, hit@20", "zero-shot", "hit@20", "devise-0 (2-hop)", "chance-0 (2-hop)"),
    ("DeViSE-0 above chance, 2-hop set, hp@20", "zero-shot", "hp@20", "devise-0 (2-hop)", "chance-0 (2-hop)"),
    # the paper's Table 3: DeViSE's guesses nearer in the hierarchy than the softmax model's (ours
    # ranks only its 7 training labels, the paper's 1,000)
    (
        "DeViSE-0 above softmax, 2-hop set, hp@5 (the paper's Table 3)",
        "zero-shot",
        "hp@5",
        "devise-0 (2-hop)",
        "softmax baseline (2-hop)",
    ),
    (
        "DeViSE-0 above softmax, 2-hop set, hp@20 (the paper's Table 3)",
        "zero-shot",
        "hp@20",
        "devise-0 (2-hop)",
        "softmax baseline (2-hop)",
    ),
    (
        "DeViSE-0 above softmax, 3-hop set, hp@20 (the paper's Table 3)",
        "zero-shot",
        "hp@20",
        "devise-0 (3-hop)",
        "softmax baseline (3-hop)",
    ),
]

KEYS = ["table", "method", "metric"]  # what a row of the report is


def one_seed(cfg: dict, workdir, test) -> tuple[pd.DataFrame, dict, str]:
    """Table 1's and zero-shot's headline rows of one seed, the models they rest on and the data's
    fingerprint (Fashion-MNIST and the WordNet graph: the same for every seed)."""
    spaces = exp.label_spaces(cfg, workdir, progress=False)
    trained = exp.train_models(cfg, spaces, list(range(len(CLASSES))), workdir, progress=False)
    t1 = exp.devise_table1(
        exp.candidate_set_metrics(trained, spaces, test.images, test.labels, spaces.classes), len(CLASSES)
    )
    seen = [c for c in range(len(CLASSES)) if c not in cfg["unseen"]]
    zs_trained = exp.train_models(cfg, spaces, seen, workdir, progress=False)
    held = np.isin(test.labels, cfg["unseen"])
    sets = exp.zero_shot_sets(cfg, spaces)
    zs = exp.zero_shot_table(zs_trained, spaces, test.images[held], test.labels[held], sets)
    parts = []
    for name, df, keep in (("Table 1", t1, TABLE1), ("zero-shot", zs, ZERO_SHOT)):
        df = df[df.method.isin(keep["methods"]) & df.metric.isin(keep["metrics"])]
        parts.append(df[["method", "metric", "paper", "ours"]].assign(table=name))
    models = {
        **{f"Table 1: {k}": v for k, v in exp.model_records(trained, spaces).items()},
        **{f"zero-shot: {k}": v for k, v in exp.model_records(zs_trained, spaces).items()},
    }
    return pd.concat(parts, ignore_index=True), models, exp.fingerprint(spaces)


def main() -> None:
    args = spread.command_line(__doc__, exp.PRESETS, workers=False)
    t0, commit = time.perf_counter(), git_commit()
    paths = run_paths("devise_seed_spread", args.preset)
    test = load_fashion_mnist("test")
    base = exp.PRESETS[args.preset]

    # the notebook's own seed uses its checkpoints, so notebooks 06 and 07 then load it
    folder = spread.seed_folders("devise", "devise_seeds", args.preset, base["seed"])
    seeds, models, fingerprints = spread.run_seeds(args.seeds, lambda s: one_seed({**base, "seed": s}, folder(s), test))
    claims = pd.concat(
        [spread.claims(seeds[seeds.table == t], [(c, m, a, b)]).assign(table=t) for c, t, m, a, b in CLAIMS],
        ignore_index=True,
    )
    notes = (
        "Notebooks 06 and 07's headline rows retrained from each seed (gloss skip-gram, order-embedding and random "
        "label vectors, the CNN, every DeViSE model); Fashion-MNIST, WordNet 3.0 and the GloVe 6B vectors of the "
        "'devise' rows are real data, the same in every run. hit@k in %, hp@k as fractions."
    )
    meta = report_meta(
        preset=args.preset,
        seed=args.seeds,
        device="cpu",
        commit=commit,
        data_source=exp.source(base.get("word_vectors")),
        data_fingerprint=" ".join(sorted(set(fingerprints))),
        wall_time_s=time.perf_counter() - t0,
        trained=models,
        config=base,
        seeds=args.seeds,
    )
    written = spread.write_report(
        "devise_seed_spread",
        seeds,
        claims,
        KEYS,
        meta,
        paths.tables,
        "DeViSE headline rows over seeds (measurement)",
        notes,
    )
    print(claims[["table", "claim", "mean_difference", "sd_difference", "verdict"]].round(3).to_string(index=False))
    print("wrote", written["csv"])


if __name__ == "__main__":
    main()
