"""Table 1's table models trained with the compiled step against the PyTorch step, in one run.

orderlib/csrc/concept_step.cpp does one training step (energy, loss, hand-written gradient, lazy
Adam with catch-up, constraint) of order-embeddings, the symmetric (cosine) and bilinear rows
(bilinear's dense W and b: gradient from the kernel, torch's Adam steps them), density order
embeddings, the two box rows and the two hyperbolic rows (geoopt's Riemannian Adam on the ball; the
cones start from the same seed's Poincaré embeddings, trained by the compiled step) in one C++ call;
the PyTorch step (autograd over gathered rows, then RowAdam) does the
same arithmetic in ~50 small ATen calls. Each row is trained here both ways on notebook 01's data,
settings and schedule (full preset: seed 0, the paper protocol on our split; density order
embeddings at the notebook's dev choice, read from oe_table1_wordnet.meta.json), two jobs at a time
on the two cores, and the table gives the seconds per epoch of each, their ratio, and the dev and
test accuracy each reaches (they differ by float rounding, amplified over training: seed noise).
Writes reports/tables/bench_concept_step.* (full preset; others under runs/<preset>/reports/);
checkpoints under runs/<preset>/checkpoints/ (resumable).

    .venv/bin/python benchmarks/standing/concept_step.py [--preset full] [--seeds 0] [--workers auto]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from orderlib.concepts import concept_step_status
from orderlib.experiments import oe_wordnet as exp
from orderlib.experiments import oe_wordnet_tables as tables
from orderlib.reports import device_description, git_commit, training_provenance, write_table
from orderlib.runs import run_paths

METHODS = [
    "order-embeddings",
    "order-embeddings (symmetric)",
    "order-embeddings (bilinear)",
    exp.DOE,
    "box embeddings",
    "Gumbel box embeddings",
    "Poincaré embeddings",
    "hyperbolic entailment cones",
]
STEPS = {False: "PyTorch (autograd + RowAdam)", True: "compiled (concept_step.cpp)"}
SETTING = "paper"
CHOSEN = Path(__file__).resolve().parents[2] / "reports" / "tables" / "oe_table1_wordnet.meta.json"


def chosen_overrides(method: str) -> dict:
    """Notebook 01's dev-grid choice for `method` on the paper setting ({} where it has no grid)."""
    if method not in (exp.DOE, "order-embeddings (bilinear)"):
        return {}
    try:
        chosen = json.loads(CHOSEN.read_text())["chosen"][SETTING][method]
    except (OSError, KeyError, ValueError) as err:
        raise SystemExit(
            f"{CHOSEN}: cannot read notebook 01's dev choice for {method!r} ({err!r}); run notebook 01 first"
        ) from err
    return {**chosen, "negatives": tuple(chosen.get("negatives", ()))}


def jobs_for(cfg: dict, seeds: list[int], run_dir: Path) -> list[dict]:
    """One job per (method, seed, step); the PyTorch step's checkpoint gets its own name."""
    jobs = []
    for method in METHODS:
        o = chosen_overrides(method)
        for seed in seeds:
            for fused in (True, False):
                j = exp.training_job("train", SETTING, method, seed, cfg, "cpu", run_dir, exp._cost(cfg, method, o), o)
                if not fused and j["checkpoint"]:
                    j["checkpoint"] = j["checkpoint"].replace(".pt", "-pytorch-step.pt")
                jobs.append({**j, "fused": fused})
    return jobs


def rows_of(jobs: list[dict], results: list[dict]) -> list[dict]:
    """Long rows per (method, seed, step): seconds per epoch, epochs, dev and test accuracy; and the
    ratio of the PyTorch step's seconds per epoch to the compiled step's."""
    rows, per_epoch = [], {}
    for j, r in zip(jobs, results):
        sec = r["seconds"] / max(1, r["epochs_run"])
        per_epoch[(r["method"], r["seed"], j["fused"])] = sec
        paper = tables.PAPER_TABLE1.get(r["method"])
        for metric, value in [
            ("seconds per epoch (train + dev/test evaluation)", sec),
            ("epochs trained", r["epochs_run"]),
            ("dev accuracy (%)", r["dev"]),
            ("test accuracy (%)", r["test"]),
        ]:
            rows.append(
                dict(
                    method=r["method"],
                    step=STEPS[j["fused"]],
                    seed=r["seed"],
                    metric=metric,
                    paper=paper if metric == "test accuracy (%)" else None,
                    ours=tables.r2(value),
                )
            )
    for (method, seed, fused), sec in per_epoch.items():
        if fused:
            rows.append(
                dict(
                    method=method,
                    step="ratio",
                    seed=seed,
                    metric="speed-up per epoch (PyTorch / compiled)",
                    paper=None,
                    ours=tables.r2(per_epoch[(method, seed, False)] / sec),
                )
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="full", choices=list(exp.PRESETS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--workers", default="auto")
    args = ap.parse_args()
    t0, commit = time.perf_counter(), git_commit()
    cfg, graph, workers = exp.load_setting(args.preset, SETTING, args.workers)
    paths = run_paths("bench_concept_step", args.preset)
    jobs = jobs_for(cfg, args.seeds, paths.checkpoints)
    results = exp.run_jobs(jobs, workers)
    df = pd.DataFrame(rows_of(jobs, results))
    models = {
        f"{r['method']}, seed {r['seed']}, {STEPS[j['fused']]}": tables.run_record(r) for j, r in zip(jobs, results)
    }
    notes = (
        f"Notebook 01's {SETTING!r} setting ({args.preset} preset: WordNet {graph.version}, the notebook's "
        f"split, 50-d, batch 500 + 500, its schedule and early stopping on dev; density order embeddings and "
        f"bilinear at the notebook's dev choices {chosen_overrides(exp.DOE)} and "
        f"{chosen_overrides('order-embeddings (bilinear)')}), each row trained with both steps, "
        f"{workers} jobs at a time, one thread each. Seconds per epoch include the per-epoch dev/test "
        f"evaluation. The two steps compute the same thing up to float rounding; over an epoch's 1,661 Adam "
        f"steps the rounding grows into a different trajectory, so their accuracies differ as two seeds' "
        f"would. 'paper' is Table 1's test accuracy."
    )
    meta = {
        "preset": args.preset,
        "seed": args.seeds,
        "split_seed": cfg["split_seed"],
        "setting": SETTING,
        "device": device_description("cpu"),
        "workers": workers,
        "git_commit": commit,
        "compiled_step": concept_step_status(),
        "data_source": f"WordNet {graph.version} ({graph.source})",
        "data_fingerprint": graph.fingerprint,
        "wall_time_s": time.perf_counter() - t0,
        "training": training_provenance(models, commit),
    }
    out = write_table(
        "bench_concept_step",
        df,
        meta,
        paths.tables,
        title="Table 1's table models: compiled training step vs PyTorch step",
        notes=notes,
    )
    with pd.option_context("display.width", 200, "display.max_columns", 10):
        print(df.pivot_table(index=["method", "seed", "step"], columns="metric", values="ours", sort=False))
    print("wrote", out["csv"])


if __name__ == "__main__":
    main()
