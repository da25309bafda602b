"""`make test`: ruff (lint, format check), the import-layers contract (lint-imports), the report index
check, the library tests and every notebook on its small preset.

    python workflow/scripts/run_tests.py [--keep-runs] [--tests PATH ...] [--notebooks NB ...] [--no-notebooks]

Every step runs even when an earlier one fails; the exit status is non-zero if any failed. What the
run writes goes to a fresh `runs/test-*` folder, removed at the end unless --keep-runs.

The library tests and the notebooks each run on pytest-xdist workers, one file (a notebook) to a
worker, each worker on one thread (`workers`: every core, at most one per 3 GiB of available memory).
Measured on an idle 2-core AMD EPYC: a small CNN trains nearly as fast on one thread as on two (3.3-4.2 s
against 3.1-3.4 s), so two one-thread workers do close to twice the work of one two-thread process;
on two one-thread workers the library tests take 5.5 min and the notebooks 5.8 min (from a fresh clone).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from orderlib.paths import RUNS_ENV, data_root, repo_root

SNLI_NOTEBOOK = "02_oe_table3_snli.ipynb"


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (0 if it is missing); links are not followed."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def junit_counts(path: Path) -> dict[str, int]:
    """passed / failed / skipped counts of a pytest junit-xml file (errors count as failed)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return counts
    for case in root.iter("testcase"):
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            counts["failed"] += 1
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def available_memory() -> int | None:
    """Bytes of memory available now (Linux's MemAvailable: free plus reclaimable cache), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def workers() -> int:
    """How many pytest-xdist workers: every core this process may use, at most one per 3 GiB of the
    memory available now (the largest test process peaks at about 2 GiB)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    free = available_memory()
    return cores if free is None else max(1, min(cores, free // (3 * 2**30)))


def parallel(n: int) -> list[str]:
    """pytest arguments for n workers, a file (notebook) to each: nbval runs a notebook's cells in
    order in one kernel."""
    return ["-n", str(n), "--dist", "loadfile"] if n > 1 else []


def entailment_available() -> bool:
    from orderlib.data.entailment import available

    return available("snli") and available("sick")


def step(name: str, cmd: list[str], env: dict, junit: Path | None = None) -> dict:
    """Run one step; return its name, exit status, wall seconds and test counts."""
    print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, env=env, cwd=repo_root()).returncode
    counts = junit_counts(junit) if junit else {"passed": int(rc == 0), "failed": int(rc != 0), "skipped": 0}
    if rc not in (0, 5) and not counts["failed"]:  # the runner itself failed (collection, a crash)
        counts["failed"] += 1
    return {"name": name, "rc": rc, "seconds": time.perf_counter() - t0, **counts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep-runs", action="store_true", help="keep the run folder (runs/test-*) for inspection")
    ap.add_argument("--notebooks", nargs="*", default=None, help="notebooks to execute (default: notebooks/NN_*)")
    ap.add_argument("--no-notebooks", action="store_true", help="the library tests only")
    ap.add_argument("--tests", nargs="*", default=["tests"], help="test files or folders for pytest (default: tests)")
    args = ap.parse_args(argv)
    root = repo_root()
    (root / "runs").mkdir(exist_ok=True)
    runs = Path(tempfile.mkdtemp(prefix="test-", dir=root / "runs"))
    scratch = Path(tempfile.mkdtemp(prefix="orderlib-pytest-"))  # tmp_path outside the checkout: not in its git
    n = workers()
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if n > 1 else {}  # a worker per core
    env = {**os.environ, RUNS_ENV: str(runs), **threads}
    py = sys.executable
    wall0, data0 = time.perf_counter(), folder_bytes(data_root())
    notebooks = [
        Path(n)
        for n in (
            args.notebooks
            if args.notebooks is not None
            else sorted(str(p.relative_to(root)) for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
        )
    ]
    skipped_notebooks = []
    if any(n.name == SNLI_NOTEBOOK for n in notebooks) and not entailment_available():
        from orderlib.data.entailment import how_to_get

        skipped_notebooks.append(f"{SNLI_NOTEBOOK}: SNLI 1.0 and SICK not found. {how_to_get('snli', 'sick')}")
        notebooks = [n for n in notebooks if n.name != SNLI_NOTEBOOK]
    results = [
        step("lint (ruff check)", [py, "-m", "ruff", "check", "."], env),
        step("format (ruff format --check)", [py, "-m", "ruff", "format", "--check", "."], env),
        step("import layers (lint-imports)", [str(Path(py).parent / "lint-imports"), "--no-cache"], env),
        # --check --strict: fails when reports/README.md is out of date or a report or executed copy is
        # stale against this tree (a GPU-only report excepted; docs/reliability.md#freshness).
        step("report index", [py, str(Path(__file__).with_name("report_index.py")), "--check", "--strict"], env),
        step(
            "library tests",
            [
                py,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                *parallel(n),
                f"--basetemp={scratch / 'library'}",
                f"--junit-xml={runs / 'library.xml'}",
                *args.tests,
            ],
            env,
            runs / "library.xml",
        ),
    ]
    if notebooks and not args.no_notebooks:
        results.append(
            step(
                "notebooks (small preset)",
                [
                    py,
                    "-m",
                    "pytest",
                    "-q",
                    "--nbval-lax",
                    "-p",
                    "no:cacheprovider",
                    *parallel(min(n, len(notebooks))),
                    f"--basetemp={scratch / 'notebooks'}",
                    f"--junit-xml={runs / 'notebooks.xml'}",
                    *map(str, notebooks),
                ],
                env,
                runs / "notebooks.xml",
            )
        )
    used, data_used = folder_bytes(runs) + folder_bytes(scratch), folder_bytes(data_root()) - data0
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("\n=== summary")
    for r in results:
        print(
            f"  {r['name']:30s} {'ok    ' if r['rc'] in (0, 5) else 'FAILED'} {r['passed']:4d} passed, "
            f"{r['failed']:3d} failed, {r['skipped']:3d} skipped  ({r['seconds'] / 60:.1f} min)"
        )
    for line in skipped_notebooks:
        print(f"  skipped {line}")
    print(
        f"  {n} pytest worker{'s' * (n > 1)}; wall {(time.perf_counter() - wall0) / 60:.1f} min, CPU {(child.ru_utime + child.ru_stime) / 60:.1f} min "
        f"(user + system of the steps), peak memory of one process {child.ru_maxrss / 2**20:.1f} GiB"
    )
    print(
        f"  disk: {used / 2**20:,.0f} MiB written under {runs.relative_to(root)} and pytest's {scratch} "
        f"({'kept' if args.keep_runs else 'removed'})"
        + (f"; data/ grew by {data_used / 2**20:,.0f} MiB" if data_used > 0 else "")
    )
    if not args.keep_runs:
        shutil.rmtree(runs, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    total = {k: sum(r[k] for r in results) for k in ("passed", "failed", "skipped")}
    failed = [r["name"] for r in results if r["rc"] not in (0, 5)]
    if failed:
        print(f"  failed steps: {', '.join(failed)}")
    print(f"total: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
