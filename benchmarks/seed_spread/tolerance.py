"""How far a report's numbers move between machines and thread counts: one notebook, one commit, one seed.

Reruns notebooks (default: 06, DeViSE Table 1, and 08, Utama's three tables; full preset) from scratch in several variants, each in
a folder of its own (nothing shared, nothing resumed across variants), and compares every number of
its tables with the reference variant's:
- "reference": this machine, all cores (torch's default threads), MATMUL fp32;
- "1 thread": OMP_NUM_THREADS=1: other splits of every reduction across threads;
- "SSE4 kernels": PyTorch's, oneDNN's and MKL's vector kernels capped at SSE4 (ATEN_CPU_CAPABILITY=default,
  ONEDNN_MAX_CPU_ISA=SSE41, MKL_ENABLE_INSTRUCTIONS=SSE4_2): the summation orders of a CPU of another
  kind, emulated on this one;
- "bf16 products": MATMUL bf16, where the probe finds bf16 products on this CPU (orderlib.precision);
  elsewhere recorded as not run.
Writes reports/tables/bench_tolerance.* (every compared number in the CSV, the largest moves in the
Markdown). A variant's run lives under runs/tolerance/<variant>/ and resumes from its checkpoints.

Across CPU kinds (`--across A B`): two folders of report tables made by the same code on the same
data on two machines (their provenance fingerprints must agree, their CPU kinds differ: run the
same commit's notebooks on each, e.g. `make resume` in a checkout of that commit, and copy one
machine's reports/tables to the other). Their numbers are compared table by table and the rows
"<kind of A> vs <kind of B>" replace any earlier rows of that pair in bench_tolerance, beside the
variants above.

    .venv/bin/python benchmarks/seed_spread/tolerance.py [--notebooks notebooks/06_devise_table1.ipynb ...] [--preset full]
    .venv/bin/python benchmarks/seed_spread/tolerance.py --across reports/tables /path/to/other/reports/tables
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from orderlib import freshness, precision
from orderlib.paths import REPORTS_ENV, RUNS_ENV, repo_root, runs_root
from orderlib.reports import cite_round, device_description, git_commit, write_table

SSE4 = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
VARIANTS = {  # name -> (environment, MATMUL)
    "reference": ({}, "fp32"),
    "1 thread": ({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, "fp32"),
    "SSE4 kernels": (SSE4, "fp32"),
    "bf16 products": ({}, "bf16"),
}
NOTEBOOKS = ("06_devise_table1", "08_utama_compositionality")  # the make reproduce rule's; docs/reliability.md
KEYS = ("method", "metric")  # with every other non-number column of a table


def run_variant(name: str, notebook: Path, preset: str, folder: Path) -> float:
    """Execute `notebook` in variant `name` with its runs and reports under `folder`; return wall seconds
    (0 when an earlier run finished it: folder/done.json)."""
    done = folder / f"{notebook.stem}.done.json"
    if done.exists():
        return json.loads(done.read_text())["seconds"]
    env_extra, matmul = VARIANTS[name]
    env = {**os.environ, **env_extra, RUNS_ENV: str(folder / "runs"), REPORTS_ENV: str(folder / "reports")}
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    print(f"[{name}] {notebook.name} ({preset}) ...", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            "-p",
            "PRESET",
            preset,
            "-p",
            "MATMUL",
            matmul,
            str(notebook),
            str(folder / f"{notebook.stem}.executed.ipynb"),
        ],
        env=env,
        cwd=repo_root(),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - t0
    done.write_text(json.dumps({"seconds": seconds}))
    return seconds


def tables_of(folder: Path) -> dict[str, pd.DataFrame]:
    tables = folder / "reports" / "tables"
    if not tables.is_dir():  # small preset: runs/<preset>/reports
        tables = next((folder / "runs").glob("*/reports/tables"))
    return {p.stem: pd.read_csv(p) for p in sorted(tables.glob("*.csv"))}


def compare(reference: dict[str, pd.DataFrame], other: dict[str, pd.DataFrame], variant: str) -> list[dict]:
    """One row per number of the reference tables: its value in both runs and the absolute move."""
    rows = []
    for table, ref in reference.items():
        keys = [c for c in ref.columns if c not in ("paper", "ours") and not pd.api.types.is_numeric_dtype(ref[c])]
        merged = ref.merge(other[table], on=keys, suffixes=("", " (variant)"), how="left")
        for _, r in merged.iterrows():
            a, b = pd.to_numeric(r["ours"], errors="coerce"), pd.to_numeric(r["ours (variant)"], errors="coerce")
            if pd.isna(a):
                continue
            rows.append(
                {
                    "method": variant,
                    "metric": f"{table}: {r['method']} {r['metric']}"
                    + "".join(f" [{r[k]}]" for k in keys if k not in KEYS),
                    "paper": None,
                    "ours": abs(b - a),
                    "table": table,
                    "measure": r["metric"],
                    "reference": a,
                    "variant": b,
                }
            )
    return rows


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """The Markdown's rows: per variant, table and measure, how many numbers, how many moved, the largest move."""
    show = (
        df.groupby(["method", "table", "measure"], sort=False)  # one row per metric: % and fractions apart
        .agg(numbers=("ours", "size"), changed=("ours", lambda d: int((d > 0).sum())), max_move=("ours", "max"))
        .reset_index()
    )
    show.insert(3, "metric", "largest move against the reference")
    show.insert(4, "paper", None)
    show.insert(5, "ours", [f"{cite_round(float(v)):g}" for v in show.pop("max_move")])  # hp@k: 3 digits, not 2
    return show


def write_tolerance(df: pd.DataFrame, meta: dict, out: Path, notes: str) -> pd.DataFrame:
    """Write bench_tolerance: every compared number in the CSV, `summary` in the Markdown; return the summary."""
    title = "How far the numbers move across thread counts and CPU kernels"
    show = summary(df)
    write_table("bench_tolerance", df, meta, out, title=title, notes=notes, show=show)
    return show


def _metas(folder: Path) -> dict[str, dict]:
    return {p.name.removesuffix(".meta.json"): json.loads(p.read_text()) for p in sorted(folder.glob("*.meta.json"))}


def _sources() -> dict[str, str]:
    """Report id -> the notebook or script that writes it (workflow/reports.yaml)."""
    import yaml

    registry = yaml.safe_load((repo_root() / "workflow" / "reports.yaml").read_text())
    return {rid: info["source"] for rid, info in registry.items()}


# Parts of a data fingerprint that hash what a machine's own training made, not the input files:
# Utama's task holds the frozen item CNN's features, so it differs across CPU kinds by design.
TRAINED_PARTS = ("task",)


def _input_data(data: str | None) -> list[str]:
    """A data fingerprint's parts ("name:hash|...") that hash input files only."""
    return [p for p in (data or "").split("|") if p.split(":")[0] not in TRAINED_PARTS]


def recorded_fingerprints(table: str, meta: dict) -> dict:
    """A table's `fingerprints`, or, for one written without them (a notebook run by papermill alone
    before it named itself), the same block rebuilt from the commit its provenance names: the
    registry's source for the table, that commit's code, and its recorded data fingerprint."""
    if meta.get("fingerprints"):
        return meta["fingerprints"]
    source = _sources().get(table)
    if not source or not meta.get("git_commit"):
        return {}
    code = freshness.fingerprints(source, freshness.commit_reader(meta["git_commit"].removesuffix("-dirty")))
    return {"source": source, "code": code, "data": meta.get("data_fingerprint")}


def across(a: Path, b: Path) -> tuple[list[dict], dict]:
    """Compare the report tables two machines made with the same code and data (folders `a`, `b`):
    one row per number, as `compare`, labelled by the two CPU kinds; and what was compared. Tables
    whose provenance fingerprints differ are refused, naming the table and what differs."""
    metas_a, metas_b = _metas(a), _metas(b)
    shared = [t for t in metas_a if t in metas_b and (a / f"{t}.csv").exists() and (b / f"{t}.csv").exists()]
    shared = [t for t in shared if not t.startswith("bench_")]  # timings differ by design
    if not shared:
        raise ValueError(f"{a} and {b}: no report table in both (each needs <id>.csv and <id>.meta.json)")
    for t in shared:
        fa, fb = recorded_fingerprints(t, metas_a[t]), recorded_fingerprints(t, metas_b[t])
        differs = [k for k in ("source", "code") if fa.get(k) != fb.get(k)]
        differs += ["data"] * (_input_data(fa.get("data")) != _input_data(fb.get("data")))
        if not fa or differs:
            raise ValueError(
                f"{b / (t + '.meta.json')}: its provenance differs from {a / (t + '.meta.json')} in "
                f"{', '.join(differs) or 'fingerprints (missing)'}: compare tables made by the same code on the same data"
            )
    kinds = {metas_a[shared[0]]["device"], metas_b[shared[0]]["device"]}
    if len(kinds) < 2:
        raise ValueError(f"{a} and {b}: both made on {kinds.pop()!r}; across CPU kinds needs two kinds")
    label = f"{metas_b[shared[0]]['device']} vs {metas_a[shared[0]]['device']}"
    rows = compare(
        {t: pd.read_csv(a / f"{t}.csv") for t in shared}, {t: pd.read_csv(b / f"{t}.csv") for t in shared}, label
    )
    return rows, {
        "label": label,
        "tables": shared,
        "commits": sorted({m.get("git_commit", "")[:7] for m in (*metas_a.values(), *metas_b.values())} - {""}),
    }


def add_across(a: Path, b: Path) -> None:
    """Put the comparison of folders `a` and `b` into the committed bench_tolerance, beside its other rows."""
    rows, info = across(a, b)
    out = repo_root() / "reports" / "tables"
    old = pd.read_csv(out / "bench_tolerance.csv") if (out / "bench_tolerance.csv").exists() else pd.DataFrame()
    meta = json.loads((out / "bench_tolerance.meta.json").read_text()) if len(old) else {}
    old = old[old["method"] != info["label"]] if len(old) else old
    df = pd.concat([old, pd.DataFrame(rows)], ignore_index=True)
    meta.setdefault("across", {})[info["label"]] = {"folders": [_shown(a), _shown(b)], **info}
    for key, value in dict(
        preset="full",
        seed=0,
        device=info["label"],
        data_source="the notebooks' own data",
        data_fingerprint="",
        wall_time_s=0.0,
    ).items():
        meta.setdefault(key, value)
    meta.pop("fingerprints", None)
    write_tolerance(df, meta, out, (meta.get("notes") or "").replace(_across_note(info), "") + _across_note(info))


def _shown(folder: Path) -> str:
    """A folder as the provenance names it: relative to the repository where it can be."""
    return os.path.relpath(folder.resolve(), repo_root())


def _across_note(info: dict) -> str:
    return (
        f" '{info['label']}': the tables {', '.join(info['tables'])} as two machines made them "
        f"(commits {', '.join(info['commits'])}; same code and data fingerprints)."
    )


def kept_across(out: Path) -> tuple[pd.DataFrame, dict]:
    """The rows and provenance that `--across` put into the committed bench_tolerance: a rerun of the
    variants keeps them, since they compare two machines' committed tables, not this machine's runs."""
    if not (out / "bench_tolerance.csv").exists():
        return pd.DataFrame(), {}
    across = json.loads((out / "bench_tolerance.meta.json").read_text()).get("across", {})
    for info in across.values():
        info["folders"] = [f if not os.path.isabs(f) else _shown(Path(f)) for f in info["folders"]]
    old = pd.read_csv(out / "bench_tolerance.csv")
    return old[old["method"].isin(list(across))], across


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notebooks", nargs="+", type=Path, default=[Path(f"notebooks/{nb}.ipynb") for nb in NOTEBOOKS])
    ap.add_argument("--preset", default="full")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--across", nargs=2, type=Path, metavar=("A", "B"), help="two machines' report tables")
    args = ap.parse_args()
    if args.across:
        add_across(*args.across)
        return
    commit, t0 = git_commit(), time.perf_counter()
    base = runs_root() / "tolerance" / args.preset
    has_bf16 = precision.bf16_products()
    ran, seconds = [], {}
    for name in args.variants:
        if VARIANTS[name][1] == "bf16" and not has_bf16:
            continue
        for nb in args.notebooks:  # in order: a later notebook may load an earlier one's models
            seconds[f"{name}: {nb.name}"] = round(run_variant(name, nb, args.preset, base / name.replace(" ", "_")), 1)
        ran.append(name)
    reference = tables_of(base / "reference")
    rows = [
        row
        for name in ran
        if name != "reference"
        for row in compare(reference, tables_of(base / name.replace(" ", "_")), f"{name} vs reference")
    ]
    out = repo_root() / "reports" / "tables" if args.preset == "full" else base / "tables"
    kept, across = kept_across(out) if args.preset == "full" else (pd.DataFrame(), {})
    df = pd.DataFrame(rows)
    trained_at = sorted(
        {
            json.loads(p.read_text()).get("git_commit", "")
            for name in ran
            for p in (base / name.replace(" ", "_")).glob("**/tables/*.meta.json")
        }
    )
    largest = df.sort_values("ours", ascending=False).groupby("method", sort=False).head(3)
    notes = (
        f"Notebooks {', '.join(n.name for n in args.notebooks)} ({args.preset} preset, seed as in the preset) "
        f"rerun from scratch in each variant on {device_description('cpu')} "
        f"(models trained at {', '.join(c[:7] for c in trained_at)}); "
        "'ours' is the largest absolute move of that metric over the table's rows against the reference run "
        "(same machine, all cores, float32 products). 'SSE4 kernels' caps PyTorch's, oneDNN's and MKL's vector "
        "kernels at SSE4, as a CPU of another kind would sum in other orders. "
        + (
            ""
            if has_bf16
            else "bf16 products: not run, this CPU keeps float32 products under oneDNN's bf16 "
            "flag (orderlib.precision probe). "
        )
        + "Largest single moves: "
        + "; ".join(f"{r.method}: {r.metric} {r.reference:g} -> {r.variant:g}" for r in largest.itertuples())
        + "."
    )
    meta = dict(
        across=across,
        preset=args.preset,
        seed=0,
        device=device_description("cpu"),
        data_source="the notebooks' own data (see their reports)",
        data_fingerprint="",
        wall_time_s=round(time.perf_counter() - t0, 1),
        git_commit=commit,
        matmul="fp32 and bf16 (one variant each)" if "bf16 products" in ran else "fp32",
        variants={n: {"environment": VARIANTS[n][0], "MATMUL": VARIANTS[n][1]} for n in ran},
        notebooks=[str(n) for n in args.notebooks],
        bf16_products=has_bf16,
        seconds=seconds,
        trained_at=trained_at,
        notes=notes,  # kept when --across adds its rows
    )
    out.mkdir(parents=True, exist_ok=True)
    notes += "".join(_across_note(info) for info in across.values())
    df = pd.concat([df, kept], ignore_index=True)
    print(write_tolerance(df, meta, out, notes).to_string(index=False))


if __name__ == "__main__":
    main()
