"""The `bench_reproduce` table: each notebook's wall time as papermill recorded it in its executed copy
(`metadata.papermill.duration`, and its longest cell from the cells' durations), its share of the
notebooks' summed time, and the models of the reports it wrote (their `training` blocks): how many,
how many it trained rather than loaded, and their training time. The workflow runs it after the
notebooks (rule bench_reproduce). With `--cuda` it writes `bench_reproduce_cuda` instead, for
notebooks run on a CUDA device here (`make gpu-check`), with each one's time in bench_reproduce.

    python workflow/scripts/timings.py [--preset full] [--cuda] reports/notebooks/*.ipynb

Each row names the commit and machine in the provenance of the reports its notebook wrote; a
fixed workload timed when the table is written (`reference_speed`) says how fast this machine ran.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import pandas as pd

from orderlib.paths import repo_root
from orderlib.reports import device_description, write_table
from orderlib.runs import run_paths

TABLE_ID, CUDA_TABLE_ID = "bench_reproduce", "bench_reproduce_cuda"
SOURCE = "workflow/scripts/timings.py"


def model_counts(metas: list[dict]) -> dict:
    """Models of a notebook's reports (the union over their `training` blocks): how many, how many
    the run trained (not loaded from a checkpoint), their summed training time (s)."""
    models = {}
    for m in metas:
        models.update(m.get("training", {}).get("models", {}))
    return {
        "models": len(models),
        "trained": sum(not r["loaded_from_checkpoint"] for r in models.values()),
        "train_seconds": sum(r["train_seconds"] or 0.0 for r in models.values()),
        "recorded": bool(metas) and all("training" in m for m in metas),
    }


def timed(executed: Path, tables: Path) -> dict:
    """A notebook's record: papermill's durations in its executed copy, and the reports under `tables`
    whose provenance names it (commit, machine, models)."""
    nb = json.loads(Path(executed).read_text())
    pm = nb.get("metadata", {}).get("papermill", {})
    if pm.get("duration") is None or pm.get("exception"):
        raise ValueError(f"{executed}: papermill did not run it to its end (no duration, or an exception)")
    cells = [
        (c.get("execution_count"), c.get("metadata", {}).get("papermill", {}).get("duration") or 0.0)
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code"
    ]
    metas = sorted(
        (
            m
            for m in (json.loads(p.read_text()) for p in Path(tables).glob("*.meta.json"))
            if m.get("notebook") == executed.name
        ),
        key=lambda m: str(m.get("created", "")),
    )
    return {
        "notebook": Path(executed).name,
        "seconds": float(pm["duration"]),
        "preset": pm.get("parameters", {}).get("PRESET"),
        "started": pm.get("start_time"),
        "longest_cell": max(cells, key=lambda c: c[1], default=(None, 0.0)),
        "reports": sorted(m["id"] for m in metas),
        "commit": str(metas[-1].get("git_commit", "")) if metas else "",
        "device": metas[-1].get("device") if metas else None,
        **model_counts(metas),
    }


def short_device(description: str | None) -> str:
    """'cpu:Intel(R) Xeon(R) Processor (2 threads)' -> 'Intel Xeon, 2 threads' (empty if unknown)."""
    if not description:
        return ""
    d = description.split(":", 1)[-1].replace("(R)", "").replace("(TM)", "").replace(" Processor", "")
    return " ".join(d.replace("(", ", ").replace(")", "").split()).replace(" ,", ",")


def bench_table(runs: list[dict], cpu: pd.DataFrame | None = None) -> pd.DataFrame:
    """Long format, one block of rows per notebook and the total: wall time, share of the summed
    time, longest cell and, where its reports record them, model counts and training time; with
    `cpu` (a bench_reproduce table), each notebook's wall time there and the ratio."""
    summed = sum(r["seconds"] for r in runs)
    cpu_min = {} if cpu is None else cpu[cpu.metric == "wall time (min)"].set_index("method").ours.to_dict()
    total = {
        "notebook": "total",
        "seconds": summed,
        **{k: sum(r[k] for r in runs) for k in ("models", "trained", "train_seconds")},
        "recorded": True,
    }
    rows = []
    for r in runs + [total]:
        at, on = str(r.get("commit", ""))[:7], short_device(r.get("device"))

        def add(metric, value):
            rows.append(
                dict(method=r["notebook"], metric=metric, paper=None, ours=value, **{"timed at": at, "timed on": on})
            )

        add("wall time (min)", r["seconds"] / 60)
        add("share of the run's wall time (%)", 100 * r["seconds"] / summed if summed else None)
        if "longest_cell" in r:
            add("longest cell (min)", r["longest_cell"][1] / 60)
        if r["recorded"]:
            add("models in its reports", r["models"])
            add("models trained in this run", r["trained"])
            add("training time of its reports' models (min)", r["train_seconds"] / 60)
        if r["notebook"] in cpu_min:
            add("CPU run's wall time (min)", cpu_min[r["notebook"]])
            add("CPU run / this wall time", 60 * cpu_min[r["notebook"]] / r["seconds"])
    return pd.DataFrame(rows)


def reference_speed(seconds: float = 1.0) -> dict[str, float]:
    """Time a fixed workload on this machine: the float32 GEMM rate on torch's threads and the rate of
    gathering random 400-byte rows from a 128 MB table (what the Table 1 steps wait on). Virtual
    machines of one kind run at speeds that vary by tens of percent from hour to hour."""
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
    table = torch.randn(327680, 100, generator=g)
    idx = torch.randint(0, table.shape[0], (65536,), generator=g)

    def rate(fn, work: float) -> float:
        fn()
        n, t0 = 0, time.perf_counter()
        while n == 0 or time.perf_counter() - t0 < seconds:
            fn()
            n += 1
        return n * work / (time.perf_counter() - t0)

    return {
        "gemm_gflops": round(rate(lambda: a @ b, 2 * 1024**3) / 1e9, 1),
        "gather_gbs": round(rate(lambda: table.index_select(0, idx), idx.numel() * 400) / 1e9, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("executed", nargs="+", type=Path, help="executed notebooks (papermill's output)")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--cuda", action="store_true", help="write bench_reproduce_cuda: the notebooks ran on this GPU")
    args = ap.parse_args(argv)
    import torch

    if args.cuda and not torch.cuda.is_available():
        ap.error("--cuda times notebooks run on a CUDA device, and this machine has none")
    table_id = CUDA_TABLE_ID if args.cuda else TABLE_ID
    tables = run_paths(table_id, args.preset).tables
    runs = sorted((timed(p, tables) for p in args.executed), key=lambda r: r["notebook"])
    wrong = [r["notebook"] for r in runs if r["preset"] not in (args.preset, None)]
    if wrong:
        ap.error(f"{', '.join(wrong)} ran on another preset than {args.preset}")
    here = device_description("cpu")
    if args.cuda:
        here = f"{device_description('cuda')} with {here.split(':', 1)[1]}"
    for r in runs:
        r["device"] = r["device"] or here
    cpu_csv = tables / f"{TABLE_ID}.csv"
    df = bench_table(runs, pd.read_csv(cpu_csv) if args.cuda and cpu_csv.exists() else None)
    reference = reference_speed()
    sources = [repo_root() / "notebooks" / r["notebook"] for r in runs]
    meta = {
        "source": SOURCE,
        "preset": args.preset,
        "seed": "each notebook's own",
        "device": here,
        "data_source": "each notebook's own (see its reports' .meta.json)",
        "data_fingerprint": hashlib.sha256(b"".join(p.read_bytes() for p in sources if p.exists())).hexdigest(),
        "wall_time_s": sum(r["seconds"] for r in runs),
        "notebooks": {
            r["notebook"]: {k: r[k] for k in ("seconds", "started", "longest_cell", "reports", "commit", "device")}
            for r in runs
        },
        "machine_reference": reference,
    }
    machines = sorted({short_device(r["device"]) for r in runs})
    notes = (
        "Wall time of each notebook as papermill recorded it in its executed copy (the kernel's start "
        "aside), from the last run of each (column 'timed at': the commit in the provenance of the reports "
        "it wrote; blank for a notebook that writes only figures). The total sums them: notebooks that ran "
        "side by side took less. 'longest cell': the cell papermill timed longest (its execution count "
        "and seconds in the meta's `notebooks`). 'models trained in this run' counts the models of the "
        "notebook's reports that were not loaded from checkpoints: a notebook whose models were all loaded "
        "times its evaluation only. Machine reference (timings.reference_speed, a fixed workload) when this "
        f"table was written: GEMM {reference['gemm_gflops']:g} GFLOP/s, row gather {reference['gather_gbs']:g} "
        "GB/s; hosts of one kind vary in speed, so compare wall times across runs in proportion to it."
    )
    if len(machines) > 1:
        notes += f" The rows were timed on different machines ({'; '.join(machines)}): compare rows of one machine."
    if args.cuda:
        notes += (
            " 'CPU run' rows: the notebook's wall time in bench_reproduce (its own commit and machine), so "
            "'CPU run / this wall time' compares two machines, not two commits."
        )
    show = df.assign(**{"timed at": df["timed at"].map(lambda c: f"`{c}`" if c else "")})  # not read as numbers
    title = "make reproduce: wall time per notebook" + (" on a GPU" if args.cuda else "")
    write_table(table_id, df, meta, tables, title=title, notes=notes, show=show)
    print(df[df.metric == "wall time (min)"].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
