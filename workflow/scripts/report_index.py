"""Write (or check) reports/README.md: one row per report id, what it reproduces, its files and its
provenance (from the table's `.meta.json`).

    python workflow/scripts/report_index.py            # regenerate reports/README.md
    python workflow/scripts/report_index.py --check    # fail if it is out of date or a report is unlisted
    python workflow/scripts/report_index.py --stale    # the notebooks to rerun: stale reports or executed copies
    python workflow/scripts/report_index.py --strict   # with --check: also fail on a stale report or copy
                                                       # (but for reports only a GPU reruns: needs_device)

The reports are listed in workflow/reports.yaml (`REPORTS`): a report on disk that it lacks, or an
entry whose files are missing, is an error. Each report is current or stale against the code in
this tree (orderlib.freshness), and so is each executed copy under reports/notebooks/ (its code
cells against its notebook's).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from publish_notebook import relink

from orderlib import freshness
from orderlib.atomic import atomic_write_files
from orderlib.paths import repo_root

REGISTRY = Path(__file__).resolve().parents[1] / "reports.yaml"


def load_registry(path: Path = REGISTRY) -> dict[str, dict]:
    """The report registry (workflow/reports.yaml): {id: {paper, reproduces, source, figures, data, ...}}."""
    import yaml

    return yaml.safe_load(Path(path).read_text())


_REGISTRY = load_registry()
# id -> (paper, what it reproduces, notebook or script, figures, data: "real ..." or "stand-in: ...")
REPORTS = {
    rid: (e["paper"], e["reproduces"], e["source"], e.get("figures", []), e["data"]) for rid, e in _REGISTRY.items()
}
# Reports that only a machine with a device reruns: stale ones are listed apart, and `--strict`
# does not fail on them, since CI and most machines here have no GPU (they still show as stale).
NEEDS_DEVICE = {rid: e["needs_device"] for rid, e in _REGISTRY.items() if e.get("needs_device")}


def reports_dir(root: Path | None = None) -> Path:
    return Path(root or repo_root()) / "reports"


def trained_at(meta: dict) -> str:
    """Say where a table's models were trained, from its .meta.json: "this commit", the older
    commits some were trained at (loaded from checkpoints), "not recorded", or "no models"."""
    if "training" in meta:  # orderlib.reports.training_provenance
        t = meta["training"]
        commits = sorted({str(t["models"][m]["trained_at"])[:7] for m in t["trained_at_other_commit"]})
        if not t["models"]:
            return "no models"
        return (
            "this commit"
            if not commits
            else (f"{len(t['trained_at_other_commit'])} of {len(t['models'])} at " + ", ".join(commits))
        )
    old = meta.get(
        "trained_at", {m.get("trained_at") for m in meta.get("models", {}).values() if isinstance(m, dict)} or None
    )  # before the `training` block
    if not old:
        return "not recorded"
    commits = set(old.values() if isinstance(old, dict) else old)
    other = sorted(str(c)[:7] for c in commits if c != meta.get("git_commit"))
    return "this commit" if not other else "at " + ", ".join(other)


def _largest_moves(t) -> str:
    """A table's largest move in points (percentages, counts) and, where it has any, in fractions
    (hp@k, correlations: numbers within [-1, 1] in the reference run), each with its measure."""
    import pandas as pd

    fraction = pd.Series(False, index=t.index)
    if {"measure", "reference"} <= set(t):
        fraction = t.groupby("measure")["reference"].transform(lambda r: r.abs().max() <= 1)
    out = []
    for part in (t[~fraction], t[fraction]):
        if len(part) and part.ours.max() > 0:
            top = part.loc[part.ours.idxmax()]
            out.append(f"{top.ours:g} ({top.get('measure', top.metric)})")
    return "; ".join(out) or "no move"


def tolerance_line(rep: Path) -> str:
    """A short table of how far numbers move across thread counts and CPU kernels, one row per
    report table and one column per variant, read off the bench_tolerance report where there is
    one (benchmarks/seed_spread/tolerance.py)."""
    import pandas as pd

    path = rep / "tables" / "bench_tolerance.csv"
    if not path.exists():
        return ""
    df = pd.read_csv(path)
    if "table" not in df:
        df = df.assign(table="all")
    meta = json.loads(path.with_name("bench_tolerance.meta.json").read_text())
    variants = list(dict.fromkeys(df.method))
    head = [v.replace(" vs reference", "") for v in variants]
    rows = ["| table | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for table in dict.fromkeys(df.table):
        cells = [_largest_moves(df[(df.table == table) & (df.method == v)]) for v in variants]
        rows.append(f"| `{table}` | " + " | ".join(cells) + " |")
    moved = [f"{int((df[df.method == v].ours > 0).sum())} of {int((df.method == v).sum())}" for v in variants]
    rows.append("| numbers moved | " + " | ".join(moved) + " |")
    return (
        "**How far numbers move.** Each notebook below was rerun from scratch at the same commit and "
        "seed, on one CPU kind, and compared with its first run: the largest move per table, in points "
        "and, after the semicolon, in fractions ([hp@k](../docs/glossary.md#hpk), correlations). Notebooks: "
        + ", ".join(Path(n).name for n in meta.get("notebooks", []))
        + "; every measure is in [bench_tolerance](tables/bench_tolerance.md).\n\n"
        + "\n".join(rows)
        + "\n\nA second CPU kind is measured only where a row of bench_tolerance names two kinds "
        "(`tolerance.py --across`): compare the papers' claims across machines through the "
        "[seed-spread](../docs/glossary.md#seed-spread) reports' [verdicts](../docs/glossary.md#verdicts) "
        "([tolerance](../docs/glossary.md#tolerance)).\n\n"
    )


def report_freshness(meta: dict, source: str, read: freshness.Reader) -> list[str]:
    """Why a report (its provenance `meta`, its registered `source`) is stale against the tree `read` reads: the files whose code changed since
    its run, or why that cannot be told; [] when it is current."""
    record = meta.get("fingerprints")
    if not record:
        return ["its provenance records no fingerprints"]
    if record["source"] != source:
        return [f"written by {record['source']}, not {source}"]
    return freshness.changed(record, read)


SHOWS = re.compile(r"\b(?:verdicts|seed_rows)\(\s*\"(\w+)\"")  # viz.verdicts, devise_walkthrough.seed_rows
MADE = re.compile(r"\b(\w+), commit ([0-9a-f]{7}|unknown), (\d{4}-\d\d-\d\d)\b")  # viz.made


def shown_reports(nb: dict) -> list[str]:
    """The reports of reports/tables/ a notebook displays as written by their own script (a seed
    spread's verdicts): the workflow runs it after them."""
    code = ["".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    return list(dict.fromkeys(SHOWS.findall("\n".join(code))))


def shown_changed(ran: dict, tables: Path) -> list[str]:
    """Where the executed copy `ran` shows a report (viz.made's "<id>, commit <c>, <date>" in its
    outputs) other than the run of it under `tables` now: [] when it shows the current ones."""
    from orderlib.viz import made

    text = "\n".join(
        "".join(v) if isinstance(v, list) else str(v)
        for c in ran.get("cells", [])
        for o in c.get("outputs", [])
        for v in [o.get("text", ""), *o.get("data", {}).values()]
    )
    why = []
    for rid, commit, date in dict.fromkeys(MADE.findall(text)):
        now = made(Path(tables) / f"{rid}.csv")
        if (Path(tables) / f"{rid}.meta.json").exists() and now != f"{rid}, commit {commit}, {date}":
            why.append(f"shows {rid} of {commit}, {date}; reports/tables holds {now.split(', ', 1)[1]}")
    return why


def copy_changed(ran: dict, nb: dict, shown: Path | None = None) -> list[str]:
    """Why the executed copy `ran` is no run of its notebook `nb` now: its code cells differ (papermill's
    injected parameters aside), or it shows reports other than those under `shown`; [] when neither."""
    why = []
    if _code(ran) != _code(nb) and freshness.notebook_code(ran) != freshness.notebook_code(nb):
        why.append("its code cells differ from the notebook's")
    return why + (shown_changed(ran, shown) if shown else [])


def _code(nb: dict) -> list[str]:
    """A notebook's code cells as written, papermill's injected parameters aside: where a copy's equal
    its notebook's, so is their code (notebook_code, which parses every cell, decides otherwise)."""
    return ["".join(c.get("source", "")) for c in _own_cells(nb) if c.get("cell_type") == "code"]


def _own_cells(nb: dict) -> list[dict]:
    """A notebook's cells, papermill's injected parameters aside."""
    return [c for c in nb.get("cells", []) if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]


def copy_freshness(source: str, root: Path) -> str:
    """An executed copy's state: "current" when its code cells equal its notebook's (papermill's
    injected parameters aside), so do its Markdown cells, and the reports it shows (`shown_changed`)
    are those under reports/tables; "text" when only the Markdown differs (`report_index.py --text`
    brings it over, no rerun needed); "stale"; or "" where the source has no copy."""
    executed = reports_dir(root) / "notebooks" / Path(source).name
    if not source.endswith(".ipynb") or not executed.exists() or not (Path(root) / source).exists():
        return ""
    ran, nb = json.loads(executed.read_text()), json.loads((Path(root) / source).read_text())
    if copy_changed(ran, nb, reports_dir(root) / "tables"):
        return "stale"
    return "current" if notebook_markdown(ran) == [relink(m) for m in notebook_markdown(nb)] else "text"


def notebook_markdown(nb: dict) -> list[str]:
    """A notebook's Markdown cells, as written (what a reader of its executed copy reads)."""
    return ["".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == "markdown"]


def _kinds(nb: dict) -> list[str]:
    """The cell types in order, papermill's injected parameters aside."""
    return [c["cell_type"] for c in _own_cells(nb)]


def sync_text(executed: Path, source: Path) -> bool:
    """Give the executed copy `executed` the Markdown cells of its notebook `source`, links relinked
    for reports/notebooks/ (Markdown has no outputs, so the copy then reads as a run of the notebook
    would, once published); return whether anything changed.
    Raises ValueError naming the file when their code or cell order differ: only a rerun helps there."""
    ran, nb = json.loads(Path(executed).read_text()), json.loads(Path(source).read_text())
    if freshness.notebook_code(ran) != freshness.notebook_code(nb) or _kinds(ran) != _kinds(nb):
        raise ValueError(f"{executed}: its code cells or cell order differ from {source}; rerun the notebook instead")
    text = iter(relink("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown")
    changed = False
    for cell in ran["cells"]:
        if cell["cell_type"] == "markdown":
            new = next(text)
            changed |= "".join(cell["source"]) != new
            cell["source"] = new.splitlines(keepends=True)
    if changed:
        atomic_write_files({Path(executed): (json.dumps(ran, indent=1, ensure_ascii=False) + "\n").encode()})
    return changed


def freshness_of(root: Path | None = None) -> tuple[dict[str, list[str]], dict[str, str]]:
    """({report id: why it is stale, [] if current}, {notebook: its executed copy's state}) for the
    reports present under `root`."""
    root = Path(root or repo_root())
    read = freshness.tree_reader(root)
    reports = {}
    for rid, (_, _, source, _, _) in REPORTS.items():
        meta_path = reports_dir(root) / "tables" / f"{rid}.meta.json"
        if meta_path.exists():
            reports[rid] = report_freshness(json.loads(meta_path.read_text()), source, read)
    states = {source: copy_freshness(source, root) for source in dict.fromkeys(v[2] for v in REPORTS.values())}
    return reports, {source: state for source, state in states.items() if state}


def stale_sources(root: Path | None = None) -> list[str]:
    """The notebooks and scripts to rerun: sources of stale reports, and notebooks whose executed
    copy is stale; notebooks first, in order."""
    reports, copies = freshness_of(root)
    out = {REPORTS[rid][2] for rid, why in reports.items() if why}
    out |= {nb for nb, state in copies.items() if state == "stale"}
    return sorted(out, key=lambda s: (not s.endswith(".ipynb"), s))


def freshness_section(reports: dict[str, list[str]], copies: dict[str, str]) -> str:
    """The index's "Freshness" section, from `freshness_of`'s ({report id: why it is stale, [] if
    current}, {notebook: its executed copy's state})."""
    stale = {rid: why for rid, why in reports.items() if why}
    lines = [
        "## Freshness\n",
        f"{len(reports) - len(stale)} of {len(reports)} reports with provenance are current against the code in "
        "this tree (a figure-only report is as current as its notebook's executed copy), and "
        f"{sum(s == 'current' for s in copies.values())} of {len(copies)} executed notebooks match their "
        "notebook's code ([fresh and stale](../docs/glossary.md#fresh-and-stale)). A report is current when "
        "every file of code that produced it (its notebook or script, and each `orderlib/` file that imports "
        "reach from it) is unchanged, comments, docstrings and layout aside. `make refresh` reruns the "
        "notebooks of stale reports and stale executed copies, loading every model whose checkpoint key "
        "still matches; a stale benchmark or seed-spread report is rerun by its script.\n",
    ]
    waiting = [rid for rid in stale if rid in NEEDS_DEVICE]
    if waiting:
        lines.append(
            f"{len(waiting)} of the stale reports ({', '.join(f'`{r}`' for r in waiting)}) only a machine with "
            "a device reruns; `--strict` does not fail on them.\n"
        )
    if stale:
        lines.append("| id | stale: the code changed since its run in |\n|---|---|")
        for rid, why in stale.items():
            shown = ", ".join(f"`{w}`" if "/" in w and " " not in w else w for w in why[:6])
            needs = f" (rerun on {NEEDS_DEVICE[rid]})" if rid in NEEDS_DEVICE else ""
            lines.append(f"| `{rid}` | {shown}{f' and {len(why) - 6} more' if len(why) > 6 else ''}{needs} |")
        lines.append("")
    for state, what in (
        (
            "stale",
            "Executed copies whose code cells differ from their notebook's, or that show an older run of a report",
        ),
        ("text", "Executed copies whose code is current but whose text (Markdown cells) is not"),
    ):
        bad = sorted(nb for nb, s in copies.items() if s == state)
        if bad:
            lines.append(what + ": " + ", ".join(f"[{Path(nb).name}](notebooks/{Path(nb).name})" for nb in bad) + ".\n")
    return "\n".join(lines)


def render(root: Path | None = None, fresh: tuple | None = None) -> str:
    """Return the index's Markdown for the reports under `root`/reports (`fresh`: their
    `freshness_of`, computed here when not given); raise on any mismatch."""
    rep = reports_dir(root)
    tables = {p.name[: -len(".meta.json")] for p in (rep / "tables").glob("*.meta.json")}
    figures = {p.stem for p in (rep / "figures").glob("*.png")}
    listed_figures = {f for v in REPORTS.values() for f in v[3]}
    problems = [f"reports/tables/{t}.meta.json has no entry in REPORTS" for t in sorted(tables - set(REPORTS))]
    problems += [
        f"reports/figures/{f}.png has no entry in REPORTS" for f in sorted(figures - listed_figures - set(REPORTS))
    ]
    rows = []
    fresh, copies = fresh or freshness_of(root)
    for rid, (paper, what, source, figs, data) in REPORTS.items():
        has_table = rid in tables
        if not has_table and rid not in figures:
            continue  # not produced yet (e.g. a benchmark never run here)
        problems += [f"{rid}: figure reports/figures/{f}.png is missing" for f in figs if f not in figures]
        links = [f"[csv](tables/{rid}.csv)", f"[md](tables/{rid}.md)"] if has_table else []
        links += [f"[{f}](figures/{f}.png)" for f in figs] or ([f"[png](figures/{rid}.png)"] if rid in figures else [])
        meta = json.loads((rep / "tables" / f"{rid}.meta.json").read_text()) if has_table else {}
        if "failed_run" in meta:  # a notebook run that failed after writing it
            f = meta["failed_run"]
            problems.append(
                f"reports/tables/{rid}: written by a run of {f['notebook']} that then failed "
                f"({f['error']}); fix and rerun it"
            )
        commit = str(meta.get("git_commit", ""))[:7] + (
            "-dirty" if str(meta.get("git_commit", "")).endswith("-dirty") else ""
        )
        if meta.get("cuda_run"):  # rows measured on a GPU by another run (benchmarks/standing/penalty.py --cuda-only)
            commit += f" (CUDA rows {str(meta['cuda_run'].get('git_commit', ''))[:7]})"
        executed = rep / "notebooks" / Path(source).name
        if executed.exists():  # the notebook as executed on the full preset, outputs included
            links.append(f"[executed notebook](notebooks/{executed.name})")
        models = trained_at(meta) if has_table else ""
        if has_table and "matmul" not in meta:
            problems.append(
                f"reports/tables/{rid}.meta.json does not say which matrix-product precision ran "
                "(`matmul`, orderlib.precision)"
            )
        state = ("stale" if fresh[rid] else "current") if has_table else copies.get(source, "")
        rows.append(
            f"| `{rid}` | {paper} | {what} | {meta.get('preset', 'full')} | {meta.get('matmul', '')} | "
            f"{commit} | {models} | {state} | "
            f"{str(meta.get('created', ''))[:10]} | {data} | {' · '.join(links)} | [{Path(source).name}](../{source}) |"
        )
    if problems:
        raise ValueError("report index out of date:\n  " + "\n  ".join(problems))
    first = next((r for r in rows if "| fp32 | " in r or "| tf32 | " in r), None)  # a table with provenance
    example = '"orderlib `<id>` at <commit>"'
    if first:
        cells = [c.strip() for c in first.split("|")]
        example = f'"orderlib {cells[1]} at {cells[6]}"'
    head = (
        "# Reports\n\nGenerated by `make index` (workflow/scripts/report_index.py; run by `make reproduce`, checked by "
        "`make test`); do not edit by hand. Cite a table by its id and the commit in its provenance "
        f"(`tables/<id>.meta.json`), e.g. {example}. Commit and date are "
        'those of the run that wrote the table; "models trained at" says whether its models were trained at that '
        "commit or loaded from checkpoints trained at an older one (per model, with training times, in the "
        '`training` block of the .meta.json); "products" is the matrix-product precision that ran '
        "(`-p MATMUL`; fp32 unless stated). Figure-only reports carry no provenance file.\n\n"
        + tolerance_line(rep)
        + "| id | paper | reproduces | preset | products | commit | models trained at | fresh | date | data | files "
        "| source |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n\n" + freshness_section(fresh, copies)


def backfill(root: Path | None = None) -> list[str]:
    """Give each report whose provenance has no `fingerprints` the ones of its source at the commit
    it names (for reports written before they were recorded); return the ids filled. A report run
    from a modified tree ("-dirty"), from a commit this clone lacks, or whose source had another path
    at that commit is left without."""
    root = Path(root or repo_root())
    filled = []
    for rid, (_, _, source, _, _) in REPORTS.items():
        path = reports_dir(root) / "tables" / f"{rid}.meta.json"
        meta = json.loads(path.read_text()) if path.exists() else None
        commit = str((meta or {}).get("git_commit", ""))
        if not meta or meta.get("fingerprints") or commit.endswith("-dirty") or len(commit) != 40:
            continue
        try:
            read = freshness.commit_reader(commit, root)
        except ValueError:
            continue
        if read(source) is None:  # the source had another path at that commit (benchmarks/ was regrouped)
            continue
        meta["fingerprints"] = {
            "source": source,
            "code": freshness.fingerprints(source, read),
            "data": meta.get("data_fingerprint"),
            "recorded": f"after the run, from the files of commit {commit[:7]} that its provenance names",
        }
        atomic_write_files({path: (json.dumps(meta, indent=2, default=str) + "\n").encode()})
        filled.append(rid)
    return filled


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if reports/README.md is out of date")
    ap.add_argument("--strict", action="store_true", help="with --check: fail on a stale report or executed copy")
    ap.add_argument("--stale", action="store_true", help="print the notebooks and scripts to rerun, one a line")
    ap.add_argument("--backfill", action="store_true", help="record fingerprints of reports written without them")
    ap.add_argument(
        "--text", action="store_true", help="give executed copies whose code is current their notebooks' Markdown"
    )
    args = ap.parse_args(argv)
    if args.text:
        root = repo_root()
        for source, state in freshness_of(root)[1].items():
            if state == "text":
                sync_text(reports_dir(root) / "notebooks" / Path(source).name, root / source)
                print(f"{source}: its executed copy now has its Markdown")
    if args.backfill:
        for rid in backfill():
            print(f"fingerprints recorded for {rid}")
    if args.stale:
        print("\n".join(stale_sources()))
        return 0
    path = reports_dir() / "README.md"
    reports, copies = freshness_of()
    try:
        text = render(fresh=(reports, copies))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is out of date: run `make index`", file=sys.stderr)
            return 1
        stale = sorted(rid for rid, why in reports.items() if why and rid not in NEEDS_DEVICE)
        waiting = sorted(rid for rid, why in reports.items() if why and rid in NEEDS_DEVICE)
        copies_stale = sorted(nb for nb, state in copies.items() if state != "current")
        for rid in waiting:
            print(f"{rid} is stale; it reruns on {NEEDS_DEVICE[rid]}", file=sys.stderr)
        if stale or copies_stale:
            print(
                f"{len(stale)} of {len(reports)} reports and {len(copies_stale)} of {len(copies)} executed notebooks "
                "are stale against this tree (reports/README.md says why; `make refresh` reruns them)",
                file=sys.stderr,
            )
            return 1 if args.strict else 0
        return 0
    atomic_write_files({path: text.encode()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
