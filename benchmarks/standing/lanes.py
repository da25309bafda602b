"""Two notebooks side by side on one core each, or one after the other on two threads: which trains faster?

For the training steps that dominate the notebooks `make reproduce` runs (side by side where
config/config.yaml's `threads` gives each notebook fewer than all cores):
steps per second of one process on all threads (T threads, the machine's), of one process on T/2
threads, and of two processes on T/2 threads each side by side; the ratio of the pair's summed rate
to the single process's is what running two notebooks side by side buys on this machine. Every
configuration alternates over ROUNDS rounds in one run, so a change in the machine's speed hits all
alike. Workloads (full-preset shapes, real data where the step depends on it):
- Table 3 (notebook 02): the GRU order-embeddings model's step on SNLI pairs;
- Table 2 (notebook 03): the GRU caption model's step on Fashion-MNIST Scenes captions;
- Sherlock (09) and Utama (08): an item CNN's step on 64x64 colour canvases, batch 32 (SEM's trunk).
Writes reports/tables/bench_lanes.*.

    .venv/bin/python benchmarks/standing/lanes.py [--rounds 3] [--seconds 15]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

WORKLOADS = {
    "gru-snli": "Table 3 (notebook 02): GRU order-embeddings step, SNLI, batch 128",
    "gru-scenes": "Table 2 (notebook 03): GRU caption-image step, Fashion-MNIST Scenes, batch 128",
    "cnn-facts": "Sherlock (09), Utama (08): item CNN step (width 32), 64x64 colour canvases, batch 32",
}


def make_step(name: str):
    """A function running one training step of workload `name` (batches cycle over a fixed set)."""
    import torch

    from orderlib import precision

    if name.startswith("gru"):
        sys.path.insert(0, str(Path(__file__).parent))
        import gru_step as g

        model, loss, cfg, _ = (g.table3_task if name == "gru-snli" else g.table2_task)(8)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        mode = precision.resolve("fp32", "cpu")  # the notebooks' default MATMUL, which made the reports
        state = {"b": 0}

        per_tensor = name == "gru-scenes"  # clipping as each trainer does: Table 2 per tensor, Table 3 globally

        def step():
            with precision.matmul_precision(mode, "cpu"):
                opt.zero_grad()
                loss(state["b"] % 8).backward()
                for group in [[p] for p in model.parameters()] if per_tensor else [list(model.parameters())]:
                    torch.nn.utils.clip_grad_norm_(group, cfg.clip)
                opt.step()
            state["b"] += 1

        return step
    from orderlib.encoders.cnn import ItemCNN

    g = torch.Generator().manual_seed(0)
    model = ItemCNN(10, 32, in_channels=3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.rand(32, 3, 64, 64, generator=g), torch.randint(0, 10, (32,), generator=g)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def worker(name: str, seconds: float) -> None:
    """Print this process's steps per second of `name` over `seconds`: after two warm-up steps it
    says "ready" and waits for a line on stdin, so that processes side by side measure together."""
    step = make_step(name)
    step(), step()
    print("ready", flush=True)
    sys.stdin.readline()
    n, t0 = 0, time.perf_counter()
    while n == 0 or time.perf_counter() - t0 < seconds:
        step()
        n += 1
    print(json.dumps({"rate": n / (time.perf_counter() - t0)}), flush=True)


def rates(name: str, threads: int, copies: int, seconds: float) -> list[float]:
    """Steps per second of each of `copies` worker processes on `threads` threads, run side by side."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", name, "--seconds", str(seconds)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(copies)
    ]
    if not all([p.stdout.readline().strip() == "ready" for p in procs]):  # all set up and warm before any measures
        for p in procs:
            p.kill()
        raise RuntimeError(f"a {name} worker stopped before it was ready (its error is above)")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    out = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a {name} worker failed: {out}")
    return [json.loads(o.strip().splitlines()[-1])["rate"] for o in out]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15.0, help="measured seconds per worker")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.seconds)
    import torch

    from orderlib.reports import device_description, write_table

    t_start, cores = time.perf_counter(), torch.get_num_threads()
    half = max(1, cores // 2)
    configs = {
        f"one process, {cores} threads": (cores, 1),
        f"one process, {half} thread(s)": (half, 1),
        f"two processes side by side, {half} thread(s) each": (half, 2),
    }
    got = {(w, c): [] for w in WORKLOADS for c in configs}
    for _ in range(a.rounds):
        for w in WORKLOADS:
            for c, (threads, copies) in configs.items():
                got[(w, c)].append(sum(rates(w, threads, copies, a.seconds)))
    rows = []
    alone, pair = list(configs)[0], list(configs)[2]
    for w, desc in WORKLOADS.items():
        for c in configs:
            rows.append(
                dict(
                    method=f"{desc}: {c}",
                    metric="training steps per second (summed over processes)",
                    ours=round(float(np.median(got[(w, c)])), 3),
                )
            )
        ratio = np.array(got[(w, pair)]) / np.array(got[(w, alone)])
        rows.append(
            dict(
                method=f"{desc}: {pair}",
                metric=f"throughput over one process on {cores} threads",
                ours=round(float(np.median(ratio)), 2),
            )
        )
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    meta = {
        "preset": "full",
        "seed": 0,
        "device": device_description("cpu"),
        "threads": cores,
        "data_source": "SNLI 1.0 and Fashion-MNIST Scenes (gru_step's tasks); random canvases for the CNN",
        "data_fingerprint": None,
        "wall_time_s": time.perf_counter() - t_start,
        "rounds": a.rounds,
        "seconds_per_worker": a.seconds,
        "rates": {f"{w} | {c}": v for (w, c), v in got.items()},
        "matmul": "fp32",
    }
    notes = (
        f"Each cell: median over {a.rounds} alternating rounds of the steps per second of worker processes "
        f"measured for {a.seconds:g} s each after two warm-up steps, side by side over the same seconds (two processes: summed). Matrix products "
        "in float32, as the notebooks' default MATMUL='fp32' that made the reports. The ratio is what "
        "running notebooks side by side (config/config.yaml: threads) gains on notebooks made of these steps."
    )
    write_table("bench_lanes", df, meta, title="Notebooks side by side: training steps per second", notes=notes)
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
