"""Retrieval through the Python API against the `orderlib eval retrieval` command, COCO-sized.

5,000 images and 25,000 captions (1,024-d, seeded Gaussian, made non-negative as the order model's
embeddings are), the order penalty, the 1k and 5k protocols together: the command from .npy files,
and `retrieval_metrics_of_embeddings` on the same arrays, each in its own process so that its peak
memory is its own. Both rank the queries a block at a time, so neither holds the 5,000 x 25,000
matrix. Reported: wall time, peak resident memory, and the API's ratio to the command in this run;
the two must give the same numbers (checked). Writes reports/tables/bench_eval_api.*.

    .venv/bin/python benchmarks/standing/eval_api.py [--images 5000] [--dim 1024] [--repeats 2] [--before DIR]

--before DIR: also time the command of another checkout (e.g. `git worktree add DIR <commit>`), run
from DIR's `orderlib/`, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from orderlib.eval import retrieval_metrics_of_embeddings
from orderlib.reports import git_commit, report_meta, write_table
from orderlib.runs import run_paths

# The child runs the function measured (named here, so that orderlib.eval is in this script's import
# closure and the report reads stale when the code it times changes).
API = f"""
import json, sys, time, resource
import numpy as np, torch
from orderlib.eval import {retrieval_metrics_of_embeddings.__name__}
folder = sys.argv[1]
t0 = time.perf_counter()
images = torch.as_tensor(np.load(folder + "/images.npy"))
captions = torch.as_tensor(np.load(folder + "/captions.npy"))
out = {{}}
for protocol in ("1k", "5k"):
    r = retrieval_metrics_of_embeddings(images, captions, "order", 5, protocol, len(images) // 5)
    out[protocol] = r.metrics()["rsum"]
print(json.dumps({{"seconds": time.perf_counter() - t0, "rsum": out}}))
"""
# The command as `orderlib` runs it, then the process's own peak resident memory on the last line.
COMMAND = """
import resource, runpy, sys
sys.argv = ["orderlib", *sys.argv[1:]]
try:
    runpy.run_module("orderlib.cli", run_name="__main__")
except SystemExit as exit:
    assert not exit.code, exit.code
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
PEAK = "\nimport resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"


def embeddings(n: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, dim) and 5 captions each near their image, all >= 0 (float32)."""
    rng = np.random.default_rng(seed)
    images = np.abs(rng.standard_normal((n, dim), dtype=np.float32))
    captions = np.abs(np.repeat(images, 5, 0) + rng.standard_normal((5 * n, dim), dtype=np.float32))
    return images, captions


def run(cmd: list[str], env: dict | None = None) -> tuple[float, float, list[str]]:
    """(wall seconds, the child's peak resident GiB (its last line), its other stdout lines)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    wall = time.perf_counter() - t0
    lines = done.stdout.strip().splitlines()
    return wall, int(lines[-1]) / 2**20, lines[:-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--before", help="a checkout of another commit whose command is timed too")
    args = ap.parse_args()
    t_start = time.perf_counter()
    rows, rsums = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        images, captions = embeddings(args.images, args.dim)
        np.save(f"{tmp}/images.npy", images)
        np.save(f"{tmp}/captions.npy", captions)
        cli = [sys.executable, "-c", COMMAND, "eval", "retrieval", "--images", f"{tmp}/images.npy"]
        cli += ["--captions", f"{tmp}/captions.npy", "--score", "order", "--protocol", "1k", "5k"]
        cli += ["--fold-size", str(args.images // 5)]
        api = [sys.executable, "-c", API + PEAK, tmp]
        names = {"API (retrieval_metrics_of_embeddings)": api, "command (orderlib eval retrieval)": cli}
        envs = {}
        if args.before:
            before = f"command at {git_commit(Path(args.before))[:7]}"
            names[before] = cli
            envs[before] = {**os.environ, "PYTHONPATH": str(Path(args.before).resolve())}
        times, peaks = {name: [] for name in names}, {name: 0.0 for name in names}
        for i in range(args.repeats):  # alternated, so that a drift of the machine falls on each
            for j, (name, cmd) in enumerate(names.items()):
                wall, peak, out = run([*cmd, "--out", f"{tmp}/out{j}-{i}"] if cmd is cli else cmd, envs.get(name))
                times[name].append(wall)
                peaks[name] = max(peaks[name], peak)
                if cmd is api:
                    rsums["api"] = json.loads(out[-1])["rsum"]
        table = pd.read_csv(f"{tmp}/out1-0/retrieval.csv")  # the command's first run
        for protocol, fold in (("1k", "mean"), ("5k", "all")):
            got = table[(table.protocol == protocol) & (table.fold == fold) & (table.metric == "rsum")].ours.item()
            if abs(got - round(rsums["api"][protocol], 2)) > 0.006:
                raise SystemExit(f"{protocol}: the command's rsum {got} is not the API's {rsums['api'][protocol]}")
    for name, t in times.items():
        rows += [
            dict(method=name, metric="wall time, 1k + 5k (s, best of repeats)", ours=min(t)),
            dict(method=name, metric="peak resident memory (GiB)", ours=peaks[name]),
        ]
    cmd_best = min(times["command (orderlib eval retrieval)"])
    rows.append(
        dict(
            method="API / command",
            metric="wall time ratio",
            ours=min(times["API (retrieval_metrics_of_embeddings)"]) / cmd_best,
        )
    )
    if args.before:
        rows.append(dict(method=f"command / {before}", metric="wall time ratio", ours=cmd_best / min(times[before])))
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    print(df.to_string(index=False))
    notes = (
        f"{args.images:,} images, {5 * args.images:,} captions, {args.dim}-d float32 (seeded, >= 0), order penalty, "
        "the 1k (5 folds) and 5k protocols together; each run in its own process (wall time includes starting "
        "Python and importing torch, and for the command reading the files and writing the report). Peak memory: "
        "each process's own maximum resident set. Both gave the same rsum under every protocol (checked)."
    )
    meta = report_meta(
        preset="full",
        seed=0,
        device="cpu",
        commit=git_commit(),
        data_source="seeded Gaussian embeddings of COCO's 5k test size",
        data_fingerprint="seeded",
        wall_time_s=time.perf_counter() - t_start,
        trained={},
        config=vars(args),
    )
    written = write_table(
        "bench_eval_api",
        df,
        meta,
        run_paths("eval_api", "full").tables,
        title="Retrieval at COCO size: the Python API against the command",
        notes=notes,
    )
    print("wrote", written["csv"])


if __name__ == "__main__":
    main()
