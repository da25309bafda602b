"""Run notebooks with papermill one after another (what `make reproduce` / `make resume` do), time
each, publish a full run's executed copies under reports/notebooks/, and write `bench_reproduce`:
per notebook its wall time, its share of the run, the training time of its reports' models and how
many of them this run trained rather than loaded from checkpoints, beside the previous
bench_reproduce's wall time (its commit in the notes) where that run timed the same notebook.
A run of some notebooks keeps the previous table's rows for the others (a full pipeline takes
longer than one sitting): each row names the commit of the run that timed it. A fixed reference
workload timed at the start and end of the run (`reference_speed`) says how fast the machine was.

    .venv/bin/python -m orderlib.tools.reproduce [--preset full] notebooks/00_oe_fig2_toy2d.ipynb ...
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import pandas as pd

from orderlib.checkpoint import atomic_write_text
from orderlib.paths import repo_root
from orderlib.reports import device_description, git_commit, write_table
from orderlib.runs import run_paths

TABLE_ID = "bench_reproduce"


def tables_since(tables: Path, since: float) -> list[Path]:
    """The .meta.json files under `tables` written at or after `since` (a time.time())."""
    return sorted(p for p in tables.glob("*.meta.json") if p.stat().st_mtime >= since and p.name != f"{TABLE_ID}.meta.json")


def model_counts(metas: list[dict]) -> dict:
    """Models of a notebook's reports (the union over its tables' `training` blocks): how many, how
    many this run trained (not loaded from a checkpoint), their summed training time (s)."""
    models = {}
    for m in metas:
        models.update(m.get("training", {}).get("models", {}))
    return {"models": len(models), "trained": sum(not r["loaded_from_checkpoint"] for r in models.values()),
            "train_seconds": sum(r["train_seconds"] or 0.0 for r in models.values()),
            "recorded": all("training" in m for m in metas) and bool(metas)}


def reference_speed(seconds: float = 1.0) -> dict[str, float]:
    """Time a fixed workload on this machine: the float32 GEMM rate on torch's threads and the rate of
    gathering random 400-byte rows from a 128 MB table (what the Table 1 steps wait on). Virtual
    machines of one kind run at speeds that vary by tens of percent from hour to hour; a run's wall
    times compare with another run's only in proportion to these."""
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
    table = torch.randn(327680, 100, generator=g)  # (R, 100) float32 rows, 128 MB
    idx = torch.randint(0, table.shape[0], (65536,), generator=g)

    def rate(fn, work: float) -> float:
        fn()
        n, t0 = 0, time.perf_counter()
        while n == 0 or time.perf_counter() - t0 < seconds:
            fn()
            n += 1
        return n * work / (time.perf_counter() - t0)

    return {"gemm_gflops": round(rate(lambda: a @ b, 2 * 1024 ** 3) / 1e9, 1),
            "gather_gbs": round(rate(lambda: table.index_select(0, idx), idx.numel() * 400) / 1e9, 2)}


def describe_reference(ref: dict | None) -> str:
    """One line for a reference_speed() result (or "not measured")."""
    return f"GEMM {ref['gemm_gflops']:g} GFLOP/s, row gather {ref['gather_gbs']:g} GB/s" if ref else "not measured"


def run_notebook(nb: Path, preset: str, out_dir: Path, tables: Path, kernel: str | None = None,
                 start: float | None = None) -> dict:
    """Execute one notebook on `preset` into out_dir; return its timing and the reports it wrote
    (those under `tables` written since `start`, a time.time(); default: now)."""
    import papermill

    out_dir.mkdir(parents=True, exist_ok=True)
    start, t0 = start or time.time(), time.perf_counter()
    papermill.execute_notebook(str(nb), str(out_dir / nb.name), parameters={"PRESET": preset}, kernel_name=kernel,
                               progress_bar=True)
    seconds = time.perf_counter() - t0
    metas = [json.loads(p.read_text()) for p in tables_since(tables, start)]
    return {"notebook": nb.name, "seconds": seconds, "reports": [m["id"] for m in metas], **model_counts(metas)}


def describe_failure(exc: BaseException) -> str:
    """One line: the exception a notebook cell raised and the cell's execution count."""
    if hasattr(exc, "ename"):  # papermill.PapermillExecutionError
        evalue = str(exc.evalue).strip().splitlines()
        return f"{exc.ename}{': ' + evalue[0] if evalue else ''} (cell [{exc.exec_count}])"
    return f"{type(exc).__name__}: {exc}"


def mark_failed(tables: Path, since: float, notebook: str, error: str, commit: str) -> list[str]:
    """Add `failed_run` to the .meta.json of every report under `tables` written since `since`:
    the notebook that wrote it stopped later (e.g. at its final sanity asserts), so the table must
    not be cited or committed (`report_index` refuses it). Return the report ids marked."""
    marked = []
    for p in tables_since(tables, since):
        meta = json.loads(p.read_text())
        meta["failed_run"] = {"notebook": notebook, "error": error, "commit": commit}
        atomic_write_text(p, json.dumps(meta, indent=2, default=str) + "\n")
        marked.append(meta.get("id", p.name[: -len(".meta.json")]))
    return marked


def _timed_on(meta: dict, notebook: str) -> str | None:
    """The machine that timed `notebook` in a bench_reproduce meta: its own record, else the table's."""
    return meta.get("notebooks", {}).get(notebook, {}).get("device") or meta.get("device")


def previous_devices(tables: Path) -> dict[str, str]:
    """The machine that timed each notebook of the last bench_reproduce under `tables` (where recorded)."""
    meta = tables / f"{TABLE_ID}.meta.json"
    if not meta.exists():
        return {}
    m = json.loads(meta.read_text())
    return {nb: _timed_on(m, nb) for nb in m.get("notebooks", {})}


def previous_times(tables: Path) -> tuple[dict[str, float], str]:
    """Wall time (s) per notebook in the last bench_reproduce under `tables`, and its commit."""
    csv, meta = tables / f"{TABLE_ID}.csv", tables / f"{TABLE_ID}.meta.json"
    if not (csv.exists() and meta.exists()):
        return {}, ""
    df = pd.read_csv(csv)
    rows = df[df.metric == "wall time (min)"]
    return {r.method: 60 * float(r.ours) for r in rows.itertuples() if r.method != "total"}, \
        json.loads(meta.read_text()).get("git_commit", "")


METRIC_KEYS = {"models in its reports": "models", "models trained in this run": "trained",
               "training time of its reports' models (min)": "train_seconds"}


def carried_runs(tables: Path, timed: set[str]) -> list[dict]:
    """The notebooks the last bench_reproduce under `tables` timed and this run does not, as run
    records (seconds, model counts, the commit that timed them), to keep beside this run's rows."""
    csv, meta = tables / f"{TABLE_ID}.csv", tables / f"{TABLE_ID}.meta.json"
    if not (csv.exists() and meta.exists()):
        return []
    df, m = pd.read_csv(csv), json.loads(meta.read_text())
    out = []
    for name, g in df[df.method != "total"].groupby("method", sort=False):
        if name in timed:
            continue
        v = dict(zip(g.metric, g.ours))
        info = m.get("notebooks", {}).get(name, {})
        r = {"notebook": name, "seconds": 60 * float(v["wall time (min)"]), "reports": info.get("reports", []),
             "commit": info.get("commit") or m.get("git_commit", ""), "device": _timed_on(m, name),
             "recorded": "models in its reports" in v, "reference": info.get("reference")}
        for metric, key in METRIC_KEYS.items():
            r[key] = float(v.get(metric, 0.0)) * (60 if key == "train_seconds" else 1)
        out.append(r)
    return out


def short_device(description: str | None) -> str:
    """'cpu:Intel(R) Xeon(R) Processor (2 threads)' -> 'Intel Xeon, 2 threads' (empty if unknown)."""
    if not description:
        return ""
    d = description.split(":", 1)[-1].replace("(R)", "").replace("(TM)", "").replace(" Processor", "")
    return " ".join(d.replace("(", ", ").replace(")", "").split()).replace(" ,", ",")


def bench_table(runs: list[dict], before: dict[str, float]) -> pd.DataFrame:
    """Long format: per notebook (and the total) wall time, share, model counts, training time and,
    where the previous run timed it, that time and the ratio previous / now."""
    total = sum(r["seconds"] for r in runs)
    rows = []
    for r in runs + [{"notebook": "total", "seconds": total, "models": sum(x["models"] for x in runs),
                      "trained": sum(x["trained"] for x in runs),
                      "train_seconds": sum(x["train_seconds"] for x in runs), "recorded": True}]:
        def add(metric, value):
            rows.append({"method": r["notebook"], "metric": metric, "paper": None, "ours": value,
                         "timed at": r.get("commit", "")[:7], "timed on": short_device(r.get("device"))})
        add("wall time (min)", r["seconds"] / 60)
        add("share of the run's wall time (%)", 100 * r["seconds"] / total if total else None)
        if r["recorded"]:
            add("models in its reports", r["models"])
            add("models trained in this run", r["trained"])
            add("training time of its reports' models (min)", r["train_seconds"] / 60)
        prev = before.get(r["notebook"]) if r["notebook"] != "total" else (
            sum(before[x["notebook"]] for x in runs) if all(x["notebook"] in before for x in runs) and before else None)
        if prev:
            add("previous run's wall time (min)", prev / 60)
            add("previous / this wall time", prev / r["seconds"])
    return pd.DataFrame(rows)


def write_bench(runs: list[dict], tables: Path, preset: str, notebooks: list[Path], commit: str,
                before: dict[str, float], before_commit: str, reference: dict | None = None) -> pd.DataFrame:
    """Write bench_reproduce from this run's timed notebooks and the previous table's other rows;
    `reference`: reference_speed() at the start and end of this run ({"start": ..., "end": ...})."""
    here = device_description("cpu")
    reference = reference or {}
    for r in runs:
        r["commit"], r["device"], r["reference"] = commit, here, reference.get("start")
    timed = {r["notebook"] for r in runs}
    carried = carried_runs(tables, timed)
    # Compare only what this run timed (a carried row's previous time is its own), and only with a
    # previous time taken on this machine: another machine's time is no baseline.
    then = previous_devices(tables)
    other_machine = sorted(k for k in before if k in timed and then.get(k) != here)
    comparable = {k: v for k, v in before.items() if k in timed and k not in other_machine}
    runs = sorted(carried + runs, key=lambda r: r["notebook"])
    df = bench_table(runs, comparable)
    fp = hashlib.sha256(b"".join(Path(nb).read_bytes() for nb in notebooks)).hexdigest()
    meta = {"preset": preset, "seed": "each notebook's own", "device": here,
            "git_commit": commit, "data_source": "each notebook's own (see its reports' .meta.json)",
            "data_fingerprint": fp, "wall_time_s": sum(r["seconds"] for r in runs if r["notebook"] in timed),
            "notebooks": {r["notebook"]: {"reports": r["reports"], "seconds": round(r["seconds"], 1),
                                          "commit": r["commit"], "device": r["device"],
                                          "reference": r.get("reference")} for r in runs},
            "machine_reference": reference or None, "previous_run_commit": before_commit or None}
    notes = ("Wall time of each notebook executed by papermill in this run, one after another on the machine "
             "in the provenance. 'models trained in this run' counts the models of the notebook's reports that "
             "were not loaded from checkpoints: a notebook whose models were all loaded times its evaluation "
             "only. ")
    notes += (f"'previous run' is the bench_reproduce this run replaced (commit {before_commit[:7]})."
              if before_commit else "No previous bench_reproduce to compare with.")
    if other_machine:
        notes += (f" {', '.join(other_machine)}: the previous run timed {'it' if len(other_machine) == 1 else 'them'} "
                  f"on another machine ({'; '.join(sorted({short_device(then.get(k)) or 'unknown' for k in other_machine}))}), "
                  "so no previous time or ratio is given.")
    if carried:
        notes += (f" Rows of {', '.join(r['notebook'] for r in carried)} were timed by an earlier run and kept "
                  "(column 'timed at'); the total adds runs made at different commits.")
    if reference:
        notes += (f" Machine reference (reproduce.reference_speed, a fixed workload) at the start of this run: "
                  f"{describe_reference(reference.get('start'))}; at its end: {describe_reference(reference.get('end'))}. "
                  "Hosts of one kind vary in speed: compare wall times across runs in proportion to these "
                  "(per notebook in the meta).")
    machines = sorted({short_device(r.get("device")) for r in runs} - {""})
    if len(machines) > 1:
        notes += (f" The rows were timed on different machines ({'; '.join(machines)}; column 'timed on'): "
                  "compare a row with another only on the same machine.")
    write_table(TABLE_ID, df, meta, tables, title="make reproduce: wall time per notebook", notes=notes)
    return df


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--preset", default="full")
    ap.add_argument("--out", type=Path, default=None, help="executed notebooks (default runs/executed/)")
    ap.add_argument("--kernel", default=None)
    args = ap.parse_args(argv)
    root = repo_root()
    out_dir = args.out or root / "runs" / "executed"
    tables = run_paths(TABLE_ID, args.preset).tables
    before, before_commit = previous_times(tables)
    commit, runs = git_commit(), []
    reference = {"start": reference_speed()}
    for nb in args.notebooks:
        print(f"== {nb} (PRESET={args.preset})", flush=True)
        start = time.time()
        try:
            runs.append(run_notebook(nb, args.preset, out_dir, tables, args.kernel, start=start))
        except Exception as exc:  # noqa: BLE001 - reported below, then the run stops
            error = describe_failure(exc)
            marked = mark_failed(tables, start, nb.name, error, commit)
            if runs:  # the notebooks that finished keep their timings
                write_bench(runs, tables, args.preset, args.notebooks[: len(runs)], commit, before,
                            before_commit, {**reference, "end": reference_speed()})
            print(f"FAILED: {nb} stopped: {error}\n  executed copy: {out_dir / nb.name}\n  reports it wrote, "
                  f"marked failed_run in their .meta.json (do not cite or commit them): {', '.join(marked) or 'none'}"
                  + (f"\n  bench_reproduce written for the {len(runs)} notebook(s) that finished" if runs else ""),
                  flush=True)
            return 1
        if args.preset == "full":
            from orderlib.tools.publish_notebook import publish

            print(f"published {publish(out_dir / nb.name)}", flush=True)
    reference["end"] = reference_speed()
    df = write_bench(runs, tables, args.preset, args.notebooks, commit, before, before_commit, reference)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
