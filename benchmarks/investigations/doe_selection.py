"""Density order embeddings under the authors' checkpoint selection and under Table 1's.

Athiwaratkun & Wilson's main.lua (benathi/density-order-emb) evaluates every 100 optimiser steps
(`eval_freq`): tau chosen on dev, test accuracy at that tau, and keeps the highest *test* accuracy
over all evaluations, about 330 in a 20-epoch run; that maximum is their paper's 92.3. Table 1
(notebook 01) instead keeps the epoch with the best dev accuracy (patience 5). This trains the row
on both paper-protocol splits and on theirs (Vendrov et al.'s split procedure, which their
createDatasets.lua keeps, on the WordNet 3.0 they read), seeds 0-2, at Table 1's settings (lr
0.001, gamma 100, 40 epochs) and at their WordNet command's (lr 0.01, their kl_threshold 500 =
gamma 225 here, 20 epochs), evaluating every 100 steps and after each epoch, and reads each
selection rule off the same runs.
The evaluations' flushes move each trajectory at float rounding, so Table 1's rule read off these
runs matches the notebook's row within 0.13 per seed, not to the digit; the same settings are also
trained by Table 1's own trainer (evaluated after each epoch only), for its exact row on each split.

With `--authors-log` (default: data/density-order-emb/hyp_prediction.log where it exists, which
the workflow's rule then reads), their released run's log (log/hyp_prediction.log of their
repository, the command's output: dev accuracy and test accuracy every 100 steps) is read with the
same rules and its rows added, marked as theirs.

Writes reports/tables/oe_table1_doe_selection.* (full preset; others under runs/<preset>/reports/);
each run's evaluations are kept under runs/<preset>/checkpoints/ and reused by a rerun.

    .venv/bin/python benchmarks/investigations/doe_selection.py [--seeds 0 1 2] [--every 100] [--authors-log FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import time
from pathlib import Path

import pandas as pd

from orderlib.atomic import atomic_write_text
from orderlib.checkpoint import code_version, fingerprint, load_checkpoint
from orderlib.concepts import evaluation_trace
from orderlib.eval.hypernymy import transitive_closure_accuracy
from orderlib.eval.selection import choose_checkpoint
from orderlib.experiments import oe_wordnet as exp
from orderlib.experiments import oe_wordnet_tables as tables
from orderlib.paths import data_root
from orderlib.reports import device_description, git_commit, model_record, training_provenance, write_table
from orderlib.runs import run_paths
from orderlib.training.workers import run_in_workers

SCHEDULES = {  # name -> Table 1 row overrides
    "Table 1's settings": dict(lr=0.001, model_kwargs={"gamma": 100.0}, epochs=40, patience=5),
    "their command": dict(lr=0.01, model_kwargs={"gamma": 225.0}, epochs=20, patience=5),
}
THEIR_SPLIT = "paper, Athiwaratkun & Wilson's split"  # exp.SETTINGS: createDatasets.lua on their WordNet 3.0
SPLITS = {  # setting -> split label
    "paper": "ours",
    "paper, authors' split": "authors",
    THEIR_SPLIT: "theirs (WordNet 3.0)",
}
TABLE1_TRAINER = "test accuracy, Table 1's trainer: evaluated after each epoch only, patience 5 (%)"
PUBLISHED = 92.3  # Athiwaratkun & Wilson (ICLR 2018), Table 1: the best test accuracy over evaluations
RULES = {  # metric -> selection keyword arguments (choose_checkpoint); the chosen evaluation's test accuracy
    "test accuracy, epoch chosen on dev, patience 5 (Table 1) (%)": dict(epoch_ends_only=True, patience=5),
    "test accuracy, evaluation chosen on dev (%)": dict(),
    "test accuracy, epoch chosen on test (%)": dict(epoch_ends_only=True, by="test"),
    "test accuracy, evaluation chosen on test (their rule) (%)": dict(by="test"),
}


def split_data(preset: str, setting: str):
    """Return (preset config, data, WordNet graph) of one setting of oe_wordnet.SETTINGS."""
    cfg, graph, _ = exp.load_setting(preset, setting, 1)  # graph: the setting's WordNet
    return cfg, exp._DATA[setting], graph


def trace_job(setting: str, preset: str, overrides: dict, seed: int, every: int, cache: str) -> dict:
    """Train one run with evaluations every `every` steps (a worker process); reuse `cache` when it
    holds the same run's trace. Return the trace with its training time and commit."""
    cfg, data, _ = split_data(preset, setting)
    c = exp.model_config(exp.DOE, cfg, seed, **overrides)
    key = fingerprint(
        sorted(vars(c).items()), every, code_version("orderlib.concepts.train"), data.train, data.dev, data.test
    )
    path = Path(cache)
    if path.exists():
        saved = json.loads(path.read_text())
        if saved["key"] == key:
            return {**saved, "loaded": True}
    t0 = time.perf_counter()
    records = evaluation_trace(data, c, every, progress=False)
    out = {
        "key": key,
        "records": records,
        "seconds": time.perf_counter() - t0,
        "trained_at": git_commit(),
        "loaded": False,
    }
    atomic_write_text(path, json.dumps(out))
    return out


def table1_job(setting: str, preset: str, overrides: dict, seed: int, checkpoint: str) -> dict:
    """Train one run as notebook 01 does (train_concept_model: evaluated after each epoch only, early
    stopping on dev), resumable from `checkpoint`; return its test accuracy and provenance."""
    cfg, data, _ = split_data(preset, setting)
    r = exp.train_row(data, exp.model_config(exp.DOE, cfg, seed, **overrides), "cpu", Path(checkpoint), False)
    state = load_checkpoint(Path(checkpoint)) or {}
    return {
        "test": r.test_accuracy,
        "best_epoch": r.best_epoch,
        "seconds": r.seconds,
        "trained_at": state.get("trained_at"),
        "loaded": r.resumed,
    }


def run_one(kind: str, **job) -> dict:
    """A worker's job: an evaluation trace ("trace") or a run of Table 1's trainer ("table1")."""
    return trace_job(**job) if kind == "trace" else table1_job(**job)


def read_authors_log(path: Path) -> list[dict]:
    """Their main.lua's evaluations from its output, in order: "Best accuracy <dev> at threshold
    <tau>" then "<dataset> Accuracy <test>" (fractions there, % here), each in the epoch of the
    last "Epoch <n> Batch ..." line before it."""
    records, epoch, dev = [], None, None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if m := re.match(r"Epoch (\d+) Batch \d+", line):
            epoch = int(m.group(1)) - 1
        elif m := re.match(r"Best accuracy ([0-9.]+) at threshold", line):
            dev = 100 * float(m.group(1))
        elif (m := re.match(r"\S+ Accuracy ([0-9.]+)", line)) and dev is not None:
            if epoch is None:
                raise ValueError(f"{path}, line {n}: an evaluation before any 'Epoch <n> Batch' line")
            records.append({"epoch": epoch, "epoch_end": False, "dev": dev, "test": 100 * float(m.group(1))})
            dev = None
    if not records:
        raise ValueError(
            f"{path}: no 'Best accuracy ... / ... Accuracy ...' evaluation lines; expected the "
            f"output of Athiwaratkun & Wilson's main.lua (their log/hyp_prediction.log)"
        )
    return records


def rows_of(records: list[dict], schedule: str, split: str, seed: str, method: str = exp.DOE) -> list[dict]:
    """Long-format rows of one run: each selection rule's test accuracy, the last evaluation's and
    the number of evaluations."""
    base = dict(method=method, schedule=schedule, split=split, seed=seed, paper=None)
    rows = []
    for metric, kw in RULES.items():
        if kw.get("epoch_ends_only") and not any(r["epoch_end"] for r in records):
            continue  # their log marks no epoch ends
        chosen = choose_checkpoint(records, **kw)
        rows.append(
            {
                **base,
                "metric": metric,
                "published": PUBLISHED if "their rule" in metric else None,
                "ours": chosen["test"],
                "chosen_epoch": chosen["epoch"] + 1,
            }
        )
    rows.append(
        {
            **base,
            "metric": "test accuracy at the last evaluation (%)",
            "published": None,
            "ours": records[-1]["test"],
            "chosen_epoch": records[-1]["epoch"] + 1,
        }
    )
    rows.append({**base, "metric": "evaluations", "published": None, "ours": len(records), "chosen_epoch": None})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="full", choices=list(exp.PRESETS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--every", type=int, default=100, help="optimiser steps between evaluations (theirs: 100)")
    ap.add_argument("--schedules", nargs="+", default=list(SCHEDULES), choices=list(SCHEDULES))
    ap.add_argument("--splits", nargs="+", default=list(SPLITS), choices=list(SPLITS))
    log = data_root() / "density-order-emb" / "hyp_prediction.log"
    ap.add_argument(
        "--authors-log",
        type=Path,
        default=log if log.exists() else None,
        help=f"their log/hyp_prediction.log, read with the same rules (default: {log}, where it exists)",
    )
    ap.add_argument("--workers", default="auto")
    args = ap.parse_args()
    t0, commit = time.perf_counter(), git_commit()
    cfg, graph, workers = exp.load_setting(args.preset, "paper", args.workers)
    paths = run_paths("oe_table1_doe_selection", args.preset)
    jobs = {
        f"{setting} | {sched} | seed {s}": dict(
            kind="trace",
            setting=setting,
            preset=args.preset,
            overrides=SCHEDULES[sched],
            seed=s,
            every=args.every,
            cache=str(paths.checkpoints / f"{exp.slug(setting)}-{exp.slug(sched)}-s{s}-every{args.every}.json"),
        )
        for setting in args.splits
        for sched in args.schedules
        for s in args.seeds
    }
    t1 = "Table 1's settings"  # also trained by Table 1's own trainer, for its exact row on each split
    jobs |= {
        f"{setting} | {t1} | seed {s} | Table 1's trainer": dict(
            kind="table1",
            setting=setting,
            preset=args.preset,
            overrides=SCHEDULES[t1],
            seed=s,
            checkpoint=str(paths.checkpoints / f"{exp.slug(setting)}-table-1-trainer-s{s}.pt"),
        )
        for setting in args.splits
        for s in args.seeds
        if t1 in args.schedules
    }
    costs = {n: j["overrides"]["epochs"] for n, j in jobs.items()}
    done = run_in_workers(run_one, jobs, workers, costs, desc="density order embeddings runs")
    traces = {n: r for n, r in done.items() if jobs[n]["kind"] == "trace"}
    rows = []
    for name, tr in traces.items():
        j = jobs[name]
        rows += rows_of(tr["records"], name.split(" | ")[1], SPLITS[j["setting"]], str(j["seed"]))
    for name, r in done.items():
        j = jobs[name]
        if j["kind"] == "table1":
            rows.append(
                dict(
                    method=exp.DOE,
                    schedule=t1,
                    split=SPLITS[j["setting"]],
                    seed=str(j["seed"]),
                    paper=None,
                    metric=TABLE1_TRAINER,
                    published=None,
                    ours=r["test"],
                    chosen_epoch=r["best_epoch"] + 1,
                )
            )
    rows = tables.with_seed_means(rows, ["schedule", "split", "metric"])
    sources = {}
    for setting in args.splits:  # the transitive closure on each split, for scale (split noise)
        _, data, g = split_data(args.preset, setting)
        rows.append(
            dict(
                method="transitive closure",
                schedule="",
                split=SPLITS[setting],
                seed="",
                paper=88.2,
                metric="test accuracy (%)",
                published=None,
                ours=transitive_closure_accuracy(data),
                chosen_epoch=None,
            )
        )
        sources[SPLITS[setting]] = {
            "data_source": f"WordNet {g.version} ({g.source})",
            "data_fingerprint": g.fingerprint,
            **data.stats,
        }
    for r in rows:  # a mean row's chosen epoch: the mean over its seeds
        if r["seed"] == "mean" and r["metric"] != "evaluations":
            r["chosen_epoch"] = round(
                sum(
                    x["chosen_epoch"]
                    for x in rows
                    if x["seed"] not in ("mean",) and all(x[k] == r[k] for k in ("schedule", "split", "metric"))
                )
                / r["n_seeds"],
                1,
            )
    log_meta = None
    if args.authors_log:
        records = read_authors_log(args.authors_log)
        rows += rows_of(
            records,
            "their command",
            SPLITS[THEIR_SPLIT],
            "1234 (theirs)",
            "density order embeddings (the authors' released run, read from its log)",
        )
        log_meta = {
            "file": args.authors_log.name,
            "sha256": hashlib.sha256(args.authors_log.read_bytes()).hexdigest(),
            "source": "github.com/benathi/density-order-emb, log/hyp_prediction.log (commit a512f3f)",
            "evaluations": len(records),
        }
    df = pd.DataFrame(rows)
    df["n_seeds"] = df["n_seeds"].astype("Int64")
    models = {name: model_record(r["seconds"], r["trained_at"], r["loaded"]) for name, r in done.items()}
    notes = (
        f"Density order embeddings on Table 1's paper protocol ({args.preset} preset: WordNet "
        f"{graph.version} unless said, 4,000 test and 4,000 dev pairs; split 'ours' is the notebook's, "
        f"'authors' Vendrov et al.'s regenerated, as in Table 1), evaluated every {args.every} steps and "
        f"after each epoch (tau chosen on dev each time), no early stopping; each rule is read off the same "
        f"runs. 'Table 1's settings': Adam lr 0.001, gamma 100, 40 epochs (the notebook's dev choice; read "
        f"with its rule, the epoch chosen on dev with patience 5, these runs give the notebook's row within "
        f"0.13 per seed, not to the digit: each evaluation's catch-up flush moves the trajectory at float "
        f"rounding); 'their command': lr 0.01, gamma 225 (their kl_threshold 500 on 2 KL + D), 20 epochs, "
        f"margin 1000, 50-d, batches of 500 true and 500 corrupted pairs (theirs: 1,000 from the positives "
        f"and negatives shuffled together). 'their rule' keeps the highest test accuracy over all "
        f"evaluations, as their main.lua did; 'published' is their 92.3. chosen_epoch: the epoch (from 1) of "
        f"the evaluation a rule keeps. Rows of 'the authors' released run' apply the same rules to the "
        f"evaluations printed in their repository's log of that command (seed 1234; CUDA Torch7), where no "
        f"epoch ends are marked. Split 'theirs (WordNet 3.0)': Vendrov et al.'s split procedure, which "
        f"Athiwaratkun & Wilson's createDatasets.lua keeps, on the WordNet 3.0 their preprocessing read "
        f"(NLTK's; 84,427 edges, 837,888 listed pairs, as their script's comments say), regenerated by "
        f"orderlib.data.hypernymy.authors_split; the split their 92.3 was measured on, as far as their code "
        f"shows. The transitive closure rows give each split's baseline (paper: Vendrov et al.'s 88.2). A "
        f"measurement beside Table 1, not a row of it."
    )
    meta = {
        "preset": args.preset,
        "seed": args.seeds,
        "split_seed": cfg["split_seed"],
        "every": args.every,
        "device": device_description("cpu"),
        "workers": workers,
        "git_commit": commit,
        "data_source": f"WordNet {graph.version} ({graph.source})",
        "data_fingerprint": graph.fingerprint,
        "splits": sources,
        "schedules": {k: SCHEDULES[k] for k in args.schedules},
        "authors_log": log_meta,
        "wall_time_s": time.perf_counter() - t0,
        "training": training_provenance(models, commit),
    }
    show = df[df.seed.isin(["mean", "1234 (theirs)"]) | (df.method == "transitive closure")]
    out = write_table(
        "oe_table1_doe_selection",
        df,
        meta,
        paths.tables,
        title="Density order embeddings: the authors' checkpoint selection against Table 1's (measurement)",
        notes=notes,
        show=show,
    )
    print(
        show.pivot_table(index=["method", "schedule", "split"], columns="metric", values="ours", sort=False)
        .round(2)
        .to_string()
    )
    print("wrote", out["csv"])


if __name__ == "__main__":
    main()
