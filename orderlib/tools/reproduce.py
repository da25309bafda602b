"""Run notebooks with papermill (what `make reproduce` and `make resume` do), time each, publish a
full run's executed copies under reports/notebooks/, and write the `bench_reproduce` table
(`bench_reproduce_cuda` on a machine with a CUDA device).

    .venv/bin/python -m orderlib.tools.reproduce [--preset full] notebooks/00_oe_fig2_toy2d.ipynb ...

A run of some notebooks keeps the previous table's rows for the others, each naming the commit
that timed it. A fixed workload timed at the run's start and end (`reference_speed`) says how fast
the machine was.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from orderlib import threadshare
from orderlib.atomic import atomic_write_text
from orderlib.paths import runs_root
from orderlib.reports import device_description, git_commit, write_table
from orderlib.runs import run_paths

TABLE_ID = "bench_reproduce"
CUDA_TABLE_ID = "bench_reproduce_cuda"


def run_device() -> str:
    """The machine the notebooks run on: the CUDA device where there is one (device="auto" picks
    it), with the CPU beside it, else the CPU."""
    import torch

    cpu = device_description("cpu")
    return f"{device_description('cuda')} with {cpu.split(':', 1)[1]}" if torch.cuda.is_available() else cpu


def bench_id(device: str) -> str:
    """bench_reproduce for runs on the CPU, bench_reproduce_cuda for runs on a GPU: one table per kind."""
    return CUDA_TABLE_ID if device.startswith("cuda:") else TABLE_ID


def tables_since(tables: Path, since: float) -> list[Path]:
    """The .meta.json files under `tables` written at or after `since` (a time.time())."""
    benches = {f"{TABLE_ID}.meta.json", f"{CUDA_TABLE_ID}.meta.json"}
    return sorted(p for p in tables.glob("*.meta.json") if p.stat().st_mtime >= since and p.name not in benches)


def model_counts(metas: list[dict]) -> dict:
    """Models of a notebook's reports (the union over its tables' `training` blocks): how many, how
    many this run trained (not loaded from a checkpoint), their summed training time (s)."""
    models = {}
    for m in metas:
        models.update(m.get("training", {}).get("models", {}))
    return {
        "models": len(models),
        "trained": sum(not r["loaded_from_checkpoint"] for r in models.values()),
        "train_seconds": sum(r["train_seconds"] or 0.0 for r in models.values()),
        "recorded": all("training" in m for m in metas) and bool(metas),
    }


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

    return {
        "gemm_gflops": round(rate(lambda: a @ b, 2 * 1024**3) / 1e9, 1),
        "gather_gbs": round(rate(lambda: table.index_select(0, idx), idx.numel() * 400) / 1e9, 2),
    }


def describe_reference(ref: dict | None) -> str:
    """One line for a reference_speed() result (or "not measured")."""
    return f"GEMM {ref['gemm_gflops']:g} GFLOP/s, row gather {ref['gather_gbs']:g} GB/s" if ref else "not measured"


def launch(
    nb: Path,
    preset: str,
    out_dir: Path,
    kernel: str | None = None,
    threads: int | None = None,
    log=None,
    share: Path | None = None,
) -> subprocess.Popen:
    """Start papermill on `nb` (PRESET=preset) in a child process that writes out_dir/<name>. Its
    kernel names `nb` in the reports it writes (ORDERLIB_NOTEBOOK, see reports.write_table) and runs
    torch on `threads` threads (None: torch's default, all cores), then on the count written to the
    file `share` (orderlib.threadshare). Output goes to `log` (a file) or here."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ORDERLIB_NOTEBOOK": nb.name}
    env.pop(threadshare.ENV, None)
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if share:
        atomic_write_text(share, f"{threads}\n")
        env[threadshare.ENV] = str(share)
    cmd = [
        sys.executable,
        "-m",
        "papermill",
        str(nb),
        str(out_dir / nb.name),
        "-p",
        "PRESET",
        preset,
        "--progress-bar",
        *(["-k", kernel] if kernel else []),
    ]
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT if log else None)


def notebook_error(executed: Path) -> str:
    """One line: the first error an executed notebook's cells raised, and the cell's execution count."""
    try:
        nb = json.loads(executed.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return f"no executed notebook to read ({e})"
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                evalue = str(out.get("evalue", "")).strip().splitlines()
                return f"{out.get('ename')}{': ' + evalue[0] if evalue else ''} (cell [{cell.get('execution_count')}])"
    return "papermill failed before any cell raised (see its output)"


def finished(nb: Path, seconds: float, tables: Path, start: float) -> dict:
    """The timing record of a notebook that finished: its wall time and the reports it wrote
    (those under `tables` written since `start`, a time.time(), that name it or no notebook)."""
    metas = [
        m
        for m in (json.loads(p.read_text()) for p in tables_since(tables, start))
        if m.get("notebook", nb.name) == nb.name
    ]
    return {"notebook": nb.name, "seconds": seconds, "reports": [m["id"] for m in metas], **model_counts(metas)}


def mark_failed(tables: Path, since: float, notebook: str, error: str, commit: str) -> list[str]:
    """Add `failed_run` to the .meta.json of every report under `tables` written since `since`:
    the notebook that wrote it stopped later (e.g. at its final sanity asserts), so the table must
    not be cited or committed (`report_index` refuses it). Reports that name another notebook (one
    run beside it) are left alone. Return the report ids marked."""
    marked = []
    for p in tables_since(tables, since):
        meta = json.loads(p.read_text())
        if meta.get("notebook", notebook) != notebook:
            continue
        meta["failed_run"] = {"notebook": notebook, "error": error, "commit": commit}
        atomic_write_text(p, json.dumps(meta, indent=2, default=str) + "\n")
        marked.append(meta.get("id", p.name[: -len(".meta.json")]))
    return marked


def _timed_on(meta: dict, notebook: str) -> str | None:
    """The machine that timed `notebook` in a bench_reproduce meta: its own record, else the table's."""
    return meta.get("notebooks", {}).get(notebook, {}).get("device") or meta.get("device")


def previous_devices(tables: Path, table_id: str = TABLE_ID) -> dict[str, str]:
    """The machine that timed each notebook of the last bench_reproduce under `tables` (where recorded)."""
    meta = tables / f"{table_id}.meta.json"
    if not meta.exists():
        return {}
    m = json.loads(meta.read_text())
    return {nb: _timed_on(m, nb) for nb in m.get("notebooks", {})}


def previous_times(tables: Path, table_id: str = TABLE_ID) -> tuple[dict[str, float], str]:
    """Wall time (s) per notebook in the last bench_reproduce under `tables`, and its commit."""
    csv, meta = tables / f"{table_id}.csv", tables / f"{table_id}.meta.json"
    if not (csv.exists() and meta.exists()):
        return {}, ""
    df = pd.read_csv(csv)
    rows = df[df.metric == "wall time (min)"]
    return {r.method: 60 * float(r.ours) for r in rows.itertuples() if r.method != "total"}, json.loads(
        meta.read_text()
    ).get("git_commit", "")


METRIC_KEYS = {
    "models in its reports": "models",
    "models trained in this run": "trained",
    "training time of its reports' models (min)": "train_seconds",
}


def carried_runs(tables: Path, timed: set[str], table_id: str = TABLE_ID) -> list[dict]:
    """The notebooks the last bench_reproduce under `tables` timed and this run does not, as run
    records (seconds, model counts, the commit that timed them), to keep beside this run's rows."""
    csv, meta = tables / f"{table_id}.csv", tables / f"{table_id}.meta.json"
    if not (csv.exists() and meta.exists()):
        return []
    df, m = pd.read_csv(csv), json.loads(meta.read_text())
    out = []
    for name, g in df[df.method != "total"].groupby("method", sort=False):
        if name in timed:
            continue
        v = dict(zip(g.metric, g.ours))
        info = m.get("notebooks", {}).get(name, {})
        r = {
            "notebook": name,
            "seconds": 60 * float(v["wall time (min)"]),
            "reports": info.get("reports", []),
            "commit": info.get("commit") or m.get("git_commit", ""),
            "device": _timed_on(m, name),
            "recorded": "models in its reports" in v,
            "reference": info.get("reference"),
        }
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


def bench_table(runs: list[dict], before: dict[str, float], wall: float | None = None) -> pd.DataFrame:
    """Long format: per notebook (and the total) wall time, share of the notebooks' summed time,
    model counts, training time, where recorded the torch threads it ran on and when it started,
    and, where the previous run timed it, that time and the ratio previous / now. `wall`: the
    total's wall time where notebooks ran side by side (default: their sum)."""
    summed = sum(r["seconds"] for r in runs)
    total = summed if wall is None else wall
    rows = []
    for r in runs + [
        {
            "notebook": "total",
            "seconds": total,
            "models": sum(x["models"] for x in runs),
            "trained": sum(x["trained"] for x in runs),
            "train_seconds": sum(x["train_seconds"] for x in runs),
            "recorded": True,
        }
    ]:

        def add(metric, value):
            rows.append(
                {
                    "method": r["notebook"],
                    "metric": metric,
                    "paper": None,
                    "ours": value,
                    "timed at": r.get("commit", "")[:7],
                    "timed on": short_device(r.get("device")),
                }
            )

        add("wall time (min)", r["seconds"] / 60)
        add(
            "share of the run's wall time (%)",
            (100.0 if r["notebook"] == "total" else 100 * r["seconds"] / summed) if summed else None,
        )
        if r["notebook"] == "total" and wall is not None:
            add("notebooks' wall times summed (min)", summed / 60)
        if r.get("threads"):
            add("torch threads at its start", r["threads"])
        for at, n in r.get("raised") or []:
            add(f"torch threads raised to {n} (min into it)", at / 60)
        if r.get("started") is not None:
            add("started (min into the run)", r["started"] / 60)
        if r["recorded"]:
            add("models in its reports", r["models"])
            add("models trained in this run", r["trained"])
            add("training time of its reports' models (min)", r["train_seconds"] / 60)
        prev = (
            before.get(r["notebook"])
            if r["notebook"] != "total"
            else (
                sum(before[x["notebook"]] for x in runs)
                if all(x["notebook"] in before for x in runs) and before
                else None
            )
        )
        if prev:
            add("previous run's wall time (min)", prev / 60)
            add("previous / this wall time", prev / r["seconds"])
    return pd.DataFrame(rows)


def write_bench(
    runs: list[dict],
    tables: Path,
    preset: str,
    notebooks: list[Path],
    commit: str,
    before: dict[str, float],
    before_commit: str,
    reference: dict | None = None,
    wall: float | None = None,
    lanes: int = 1,
    device: str | None = None,
) -> pd.DataFrame:
    """Write bench_reproduce from this run's timed notebooks and the previous table's other rows;
    `reference`: reference_speed() at the start and end of this run ({"start": ..., "end": ...});
    `wall`: this run's wall time where `lanes` > 1 ran notebooks side by side; `device`: where the
    notebooks ran (run_device(); default the CPU). A GPU run writes bench_reproduce_cuda, with each
    notebook's wall time in bench_reproduce (the CPU run) beside its own."""
    here = device or device_description("cpu")
    table_id = bench_id(here)
    reference = reference or {}
    for r in runs:
        r["commit"], r["device"], r["reference"] = commit, here, reference.get("start")
    timed = {r["notebook"] for r in runs}
    carried = carried_runs(tables, timed, table_id)
    # Compare only what this run timed (a carried row's previous time is its own), and only with a
    # previous time taken on this machine: another machine's time is no baseline.
    then = previous_devices(tables, table_id)
    other_machine = sorted(k for k in before if k in timed and then.get(k) != here)
    comparable = {k: v for k, v in before.items() if k in timed and k not in other_machine}
    runs = sorted(carried + runs, key=lambda r: r["notebook"])
    side_by_side = lanes > 1 and wall is not None
    df = bench_table(runs, comparable, wall + sum(r["seconds"] for r in carried) if side_by_side else None)
    if table_id == CUDA_TABLE_ID:
        df = pd.concat([df, cpu_rows(runs, tables)], ignore_index=True)
    fp = hashlib.sha256(b"".join(Path(nb).read_bytes() for nb in notebooks)).hexdigest()
    meta = {
        "preset": preset,
        "seed": "each notebook's own",
        "device": here,
        "git_commit": commit,
        "data_source": "each notebook's own (see its reports' .meta.json)",
        "data_fingerprint": fp,
        "lanes": lanes,
        "wall_time_s": wall if side_by_side else sum(r["seconds"] for r in runs if r["notebook"] in timed),
        "notebooks": {
            r["notebook"]: {
                "reports": r["reports"],
                "seconds": round(r["seconds"], 1),
                "commit": r["commit"],
                "device": r["device"],
                "reference": r.get("reference"),
                "threads": r.get("threads"),
                "threads_raised": r.get("raised"),
                "started_s": r.get("started"),
            }
            for r in runs
        },
        "machine_reference": reference or None,
        "previous_run_commit": before_commit or None,
    }
    if side_by_side:
        notes = (
            f"Wall time of each notebook executed by papermill in this run, up to {lanes} side by side on the "
            "machine in the provenance (orderlib.tools.lanes: a notebook that reads another's checkpoints "
            "starts after it; Table 1 runs alone on every core), the others each on its share of the cores, the "
            "torch threads given (raised where given: reproduce --elastic). The total is the run's wall time, less than the "
            "notebooks' times summed; shares are of that sum. "
        )
    else:
        notes = "Wall time of each notebook executed by papermill in this run, one after another on the machine in the provenance. "
    notes += (
        "'models trained in this run' counts the models of the notebook's reports that "
        "were not loaded from checkpoints: a notebook whose models were all loaded times its evaluation "
        "only. "
    )
    notes += (
        f"'previous run' is the bench_reproduce this run replaced (commit {before_commit[:7]})."
        if before_commit
        else "No previous bench_reproduce to compare with."
    )
    if other_machine:
        notes += (
            f" {', '.join(other_machine)}: the previous run timed {'it' if len(other_machine) == 1 else 'them'} "
            f"on another machine ({'; '.join(sorted({short_device(then.get(k)) or 'unknown' for k in other_machine}))}), "
            "so no previous time or ratio is given."
        )
    if carried:
        notes += (
            f" Rows of {', '.join(r['notebook'] for r in carried)} were timed by an earlier run and kept "
            "(column 'timed at'); the total adds runs made at different commits."
        )
    if reference:
        notes += (
            f" Machine reference (reproduce.reference_speed, a fixed workload) at the start of this run: "
            f"{describe_reference(reference.get('start'))}; at its end: {describe_reference(reference.get('end'))}. "
            "Hosts of one kind vary in speed: compare wall times across runs in proportion to these "
            "(per notebook in the meta)."
        )
    machines = sorted({short_device(r.get("device")) for r in runs} - {""})
    if len(machines) > 1:
        notes += (
            f" The rows were timed on different machines ({'; '.join(machines)}; column 'timed on'): "
            "compare a row with another only on the same machine."
        )
    # commits as code: Markdown tables would read 2762204 or 61017e4 as numbers (2.7622e+06, 6.1017e+08)
    show = df.assign(**{"timed at": df["timed at"].map(lambda c: f"`{c}`" if c else "")})
    if table_id == CUDA_TABLE_ID:
        notes += (
            " 'CPU run' rows: the notebook's wall time in bench_reproduce (its commit and machine in columns "
            "'timed at' and 'timed on'), so 'CPU run / this wall time' compares two machines, not two commits."
        )
    write_table(
        table_id,
        df,
        meta,
        tables,
        title="make reproduce: wall time per notebook" + (" on a GPU" if table_id == CUDA_TABLE_ID else ""),
        notes=notes,
        show=show,
    )
    return df


def cpu_rows(runs: list[dict], tables: Path) -> pd.DataFrame:
    """For a GPU run's notebooks: each one's wall time in bench_reproduce (the CPU run) and the ratio."""
    cpu = {c["notebook"]: c for c in carried_runs(tables, set(), TABLE_ID)}  # every notebook the CPU table timed
    rows = []
    for r in runs:
        if r["notebook"] not in cpu:
            continue
        c = cpu[r["notebook"]]
        for metric, value in (
            ("CPU run's wall time (min)", c["seconds"] / 60),
            ("CPU run / this wall time", c["seconds"] / r["seconds"]),
        ):
            rows.append(
                {
                    "method": r["notebook"],
                    "metric": metric,
                    "paper": None,
                    "ours": value,
                    "timed at": c["commit"][:7],
                    "timed on": short_device(c["device"]),
                }
            )
    return pd.DataFrame(rows, columns=["method", "metric", "paper", "ours", "timed at", "timed on"])


def resolve_lanes(value: str | int) -> int:
    """'auto': two notebooks side by side where there are two cores or more, else one; or a count."""
    if value == "auto":
        return 2 if (os.cpu_count() or 1) >= 2 else 1
    n = int(value)
    if n < 1:
        raise ValueError(f"--lanes must be 'auto' or a positive int, got {value!r}")
    return n


def rebalance(running: dict, shares: dict, out_dir: Path, cores: int, t_run: float) -> None:
    """Give the notebooks running beside each other (those started on a share of the cores) an even
    share of the cores now: more once the one beside them has finished and nothing can take its place."""
    each = max(1, cores // max(1, len(running)))
    for name in running:
        now = shares[name][0]
        if now is not None and now != each:
            atomic_write_text(out_dir / f"{name}.threads", f"{each}\n")
            shares[name][0] = each
            shares[name][1].append((time.perf_counter() - t_run, each))


def run_lanes(
    notebooks: list[Path],
    preset: str,
    out_dir: Path,
    tables: Path,
    kernel: str | None = None,
    lanes: int = 1,
    estimate: dict[str, float] | None = None,
    on_finish=None,
    poll: float = 0.5,
    elastic: bool = False,
) -> tuple[list[dict], list[tuple[Path, str, float]], float]:
    """Execute `notebooks` up to `lanes` at a time (orderlib.tools.lanes decides which starts next and
    on how many threads; with one lane, in the order given). Return the finished notebooks' records
    (with lanes > 1 also their torch threads at the start, the start, s into the run, and when their
    share of the cores was raised, s into the notebook), the failures as (notebook,
    error, start time.time()), and the run's wall time (s). After a failure no notebook starts; those
    running finish. `estimate`: seconds per notebook stem (the previous run's), to order the lanes;
    `on_finish(nb)`: called for each notebook that finished. `elastic`: raise a notebook's threads
    to an even share of the cores whenever fewer notebooks run (rebalance; faster, but its results
    then depend on when the others ended, so a run no longer repeats its tables exactly)."""
    import torch

    from orderlib.tools import lanes as L

    by_stem = {L.stem(nb): nb for nb in notebooks}
    pending = list(by_stem)
    priority = L.critical_path(pending, estimate or {}) if lanes > 1 else {}
    running: dict[str, tuple] = {}  # stem -> (process, time.time() at start, perf_counter at start, threads, log)
    shares: dict[str, list] = {}  # stem -> [its threads now (None: all), [(s into the run, threads), ...] raised]
    runs, failures, t_run = [], [], time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        while pending or running:
            while not failures:
                name = (
                    L.next_to_start(pending, set(running), lanes, priority)
                    if lanes > 1
                    else (pending[0] if pending and not running else None)
                )
                if name is None:
                    break
                pending.remove(name)
                threads = L.threads_for(name, lanes, os.cpu_count() or 1)
                log = open(out_dir / f"{name}.log", "w") if lanes > 1 else None  # noqa: SIM115 - closed below
                print(
                    f"== {by_stem[name]} (PRESET={preset}"
                    + (f", {threads} torch thread(s)" if threads else "")
                    + (f"; output in {log.name}" if log else "")
                    + ")",
                    flush=True,
                )
                share = out_dir / f"{name}.threads" if threads and elastic else None
                running[name] = (
                    launch(by_stem[name], preset, out_dir, kernel, threads, log, share),
                    time.time(),
                    time.perf_counter(),
                    threads,
                    log,
                )
                shares[name] = [threads, []]
            if elastic:
                rebalance(running, shares, out_dir, os.cpu_count() or 1, t_run)
            if not running:
                if pending and not failures:
                    raise RuntimeError(f"no notebook can start: {pending} wait on each other (lanes.AFTER)")
                break
            time.sleep(poll)
            for name, (proc, start, t0, threads, log) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[name]
                if log:
                    log.close()
                nb = by_stem[name]
                if proc.returncode != 0:
                    failures.append((nb, notebook_error(out_dir / nb.name), start))
                    continue
                r = finished(nb, time.perf_counter() - t0, tables, start)
                if lanes > 1:
                    r.update(
                        threads=threads or torch.get_num_threads(),
                        started=t0 - t_run,
                        raised=[[round(at - (t0 - t_run), 1), n] for at, n in shares[name][1]],
                    )
                    print(f"== {nb.name} finished in {r['seconds'] / 60:.1f} min", flush=True)
                runs.append(r)
                if on_finish:
                    on_finish(nb)
    except BaseException:
        for proc, *_ in running.values():
            proc.terminate()
        for proc, *_ in running.values():
            proc.wait()
        raise
    return runs, failures, time.perf_counter() - t_run


def run_notebook(nb: Path, preset: str, out_dir: Path, tables: Path, kernel: str | None = None) -> dict:
    """Execute one notebook on `preset` into out_dir (run_lanes with it alone); return its timing
    and the reports it wrote. Raise RuntimeError with notebook_error's line if it failed."""
    runs, failures, _ = run_lanes([nb], preset, out_dir, tables, kernel)
    if failures:
        raise RuntimeError(failures[0][1])
    return runs[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--preset", default="full")
    ap.add_argument("--out", type=Path, default=None, help="executed notebooks (default runs/executed/)")
    ap.add_argument("--kernel", default=None)
    ap.add_argument(
        "--lanes",
        default="1",
        help="notebooks run side by side: a count or 'auto' "
        "(2 on two cores or more; orderlib.tools.lanes); default 1, one after another",
    )
    ap.add_argument(
        "--elastic",
        action="store_true",
        help="with lanes: give a notebook more threads once "
        "the one beside it has ended (faster; its tables then depend on that timing)",
    )
    args = ap.parse_args(argv)
    lanes = resolve_lanes(args.lanes)
    out_dir = args.out or runs_root() / "executed"
    tables = run_paths(TABLE_ID, args.preset).tables
    device = run_device()
    before, before_commit = previous_times(tables, bench_id(device))
    commit = git_commit()
    reference = {"start": reference_speed()}

    def publish_it(nb: Path) -> None:
        if args.preset == "full":
            from orderlib.tools.publish_notebook import publish

            print(f"published {publish(out_dir / nb.name)}", flush=True)

    estimate = {Path(k).stem: v for k, v in before.items()}
    runs, failures, wall = run_lanes(
        args.notebooks, args.preset, out_dir, tables, args.kernel, lanes, estimate, publish_it, elastic=args.elastic
    )
    reference["end"] = reference_speed()
    done = {r["notebook"] for r in runs}
    timed = [nb for nb in args.notebooks if nb.name in done]
    if runs:  # the notebooks that finished keep their timings, failures or not
        df = write_bench(
            runs, tables, args.preset, timed, commit, before, before_commit, reference, wall, lanes, device
        )
    for nb, error, start in failures:
        marked = mark_failed(tables, start, nb.name, error, commit)
        print(
            f"FAILED: {nb} stopped: {error}\n  executed copy: {out_dir / nb.name}\n  reports it wrote, "
            f"marked failed_run in their .meta.json (do not cite or commit them): {', '.join(marked) or 'none'}",
            flush=True,
        )
    if failures:
        left = [nb.name for nb in args.notebooks if nb.name not in done and nb not in [f[0] for f in failures]]
        print(
            (f"  not run: {', '.join(left)}\n" if left else "")
            + (f"  bench_reproduce written for the {len(runs)} notebook(s) that finished" if runs else ""),
            flush=True,
        )
        return 1
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
