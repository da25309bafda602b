"""How far from the machine's peak do the notebooks' training steps run? A floor for `make reproduce`.

Issue 14 asks for the speed to come from the implementation, the full presets' hyperparameters kept.
An implementation cannot make a step faster than its matrix products (matmuls and convolutions)
run at the machine's GEMM peak. For each step that fills the GRU and CNN notebooks, this counts the
floating-point operations of those products in one training step (torch.utils.flop_counter:
forward and backward; element-wise work not counted, so the bound is generous), times the step on
one thread (as the notebooks' row workers run it), and times a large float32 GEMM on one thread in
the same rounds. Their ratio is the share of the peak the step reaches; its inverse bounds what any
float32 implementation of that step could gain on this machine. Applied to the notebooks' summed
training time (`bench_reproduce`, the notebook's dominant step), it gives that training's floor.

Workloads (full-preset shapes; real data where the step depends on it):
- Table 3 (notebook 02): the GRU order-embeddings model's step on SNLI pairs, batch 128;
- Table 2 (notebook 03): the GRU caption-image step on Fashion-MNIST Scenes captions, batch 128;
- Sherlock (09): SEM-A's step on 64x64 colour fact canvases, batch 32;
- Utama (08), DeViSE (06, 07), Table 2's CNN: the item CNN's pre-training step (width 32,
  32x32 colour items, batch 128, with its augmentation), in the NCHW layout the trainer uses and
  in channels-last (a lever measured here, not used by the notebooks).
Also the GEMM of the GRU's recurrence alone ((128, 1024) x (1024, 3072)): products this thin reach
less of the peak than a square one. Writes reports/tables/bench_compute_floor.*.

    .venv/bin/python benchmarks/standing/compute_floor.py [--rounds 3] [--seconds 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).parent))

from orderlib.reports import device_description, repo_root, write_table  # noqa: E402
from orderlib.tools.reproduce import carried_runs  # noqa: E402

WORKLOADS = {
    "gru-snli": "Table 3 (02): GRU order-embeddings step, SNLI, batch 128",
    "gru-scenes": "Table 2 (03): GRU caption-image step, Fashion-MNIST Scenes, batch 128",
    "sem-a": "Sherlock (09): SEM-A step, 64x64 colour canvases, batch 32",
    "item-cnn": "Item CNN pre-training step (08, 06, 07, 03), 32x32 colour items, batch 128, NCHW",
    "item-cnn-cl": "Item CNN pre-training step, as above, channels-last (not used by the notebooks)",
    "gemm-gru": "GEMM of the GRU recurrence, (128, 1024) x (1024, 3072)",
}
PEAK = "GEMM (2048, 2048) x (2048, 2048)"
# bench_reproduce's notebooks whose training is (almost) all one workload's steps.
NOTEBOOK_STEP = {"02_oe_table3_snli.ipynb": "gru-snli", "03_oe_table2_retrieval.ipynb": "gru-scenes"}


def make_step(name: str):
    """A function running one training step of workload `name` (batches cycle over a fixed set)."""
    if name.startswith("gru-"):
        from lanes import make_step as lanes_step

        return lanes_step(name)  # the notebooks' step: clipping and Adam as each trainer does
    if name == "sem-a":
        from orderlib.encoders.cnn import ItemCNN
        from orderlib.encoders.sherlock import SEM, structured_loss

        gen = torch.Generator().manual_seed(0)
        model = SEM(ItemCNN(10, 32, 3), 300, 256, branched=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        images = torch.randint(0, 256, (4, 32, 64, 64, 3), dtype=torch.uint8, generator=gen).numpy()
        language, orders = torch.randn(32, 3, 300, generator=gen), torch.randint(1, 4, (32,), generator=gen)
        state = {"b": 0}

        def step():
            loss = structured_loss(model(images[state["b"] % 4]), language, orders)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
            opt.step()
            state["b"] += 1

        return step
    if name.startswith("item-cnn"):
        from orderlib.encoders.cnn import ItemCNN, to_input
        from orderlib.training.item_cnn import augment

        gen = torch.Generator().manual_seed(0)
        model = ItemCNN(10, 32, in_channels=3)
        channels_last = name.endswith("-cl")
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=5e-4)
        images = torch.randint(0, 256, (128, 32, 32, 3), dtype=torch.uint8, generator=gen)
        labels = torch.randint(0, 10, (128,), generator=gen)

        def step():
            x = augment(to_input(images), 2, gen)  # (B, 3, 32, 32), contiguous NCHW
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(model(x), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step
    if name == "gemm-gru":
        a, w = torch.randn(128, 1024), torch.randn(3072, 1024)
        return lambda: torch.mm(a, w.t())
    raise ValueError(f"unknown workload {name!r}; known: {list(WORKLOADS)}")


def peak_step():
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    return lambda: torch.mm(a, b)


def step_flops(step) -> int:
    """Floating-point operations of the matrix products (matmuls, convolutions) in one call of step."""
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return int(counter.get_total_flops())


def seconds_per_call(step, seconds: float) -> float:
    """Mean seconds per call of step over at least `seconds` (and at least 3 calls)."""
    n, t0 = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return (time.perf_counter() - t0) / n


def training_minutes() -> dict[str, float]:
    """Summed training minutes of the notebooks' models from the committed bench_reproduce."""
    runs = carried_runs(repo_root() / "reports" / "tables", timed=set())  # every notebook it timed
    return {r["notebook"]: r["train_seconds"] / 60 for r in runs if r["notebook"] in NOTEBOOK_STEP}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per workload and round")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    a = ap.parse_args()
    names = [w for w in a.workloads.split(",") if w]
    t_start = time.perf_counter()
    torch.set_num_threads(1)  # as the notebooks' row workers run
    steps = {w: make_step(w) for w in names}
    steps[PEAK] = peak_step()
    for s in steps.values():  # warm up: first calls allocate and pick kernels
        s(), s()
    flops = {w: step_flops(s) for w, s in steps.items()}
    got = {w: [] for w in steps}
    for _ in range(a.rounds):  # alternate, so a change in the machine's speed hits all alike
        for w, s in steps.items():
            got[w].append(seconds_per_call(s, a.seconds))
    sec = {w: float(np.median(v)) for w, v in got.items()}
    peak = flops[PEAK] / sec[PEAK] / 1e9  # GFLOP/s
    rows = [dict(method=PEAK, metric="GFLOP/s, one thread", ours=round(peak, 1))]
    share = {}
    for w in names:
        rate = flops[w] / sec[w] / 1e9
        share[w] = rate / peak
        rows += [
            dict(method=WORKLOADS[w], metric="GFLOP of matrix products per step", ours=round(flops[w] / 1e9, 3)),
            dict(method=WORKLOADS[w], metric="seconds per step, one thread", ours=round(sec[w], 4)),
            dict(method=WORKLOADS[w], metric="GFLOP/s, one thread", ours=round(rate, 1)),
            dict(method=WORKLOADS[w], metric="share of the GEMM peak (%)", ours=round(100 * share[w], 1)),
            dict(method=WORKLOADS[w], metric="largest speed-up at the GEMM peak", ours=round(1 / share[w], 2)),
        ]
    if "item-cnn" in sec and "item-cnn-cl" in sec:
        rows.append(
            dict(
                method=WORKLOADS["item-cnn-cl"],
                metric="speed-up over NCHW, same run",
                ours=round(sec["item-cnn"] / sec["item-cnn-cl"], 2),
            )
        )
    trained = training_minutes()
    for nb, w in NOTEBOOK_STEP.items():
        if nb in trained and w in share:
            rows += [
                dict(
                    method=nb,
                    metric="training time of its models, summed over workers (min)",
                    ours=round(trained[nb], 1),
                ),
                dict(
                    method=nb,
                    metric="the same, every product at the GEMM peak (min)",
                    ours=round(trained[nb] * share[w], 1),
                ),
            ]
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    meta = {
        "preset": "full",
        "seed": 0,
        "device": device_description("cpu"),
        "threads": 1,
        "data_source": "SNLI 1.0 and Fashion-MNIST Scenes (gru_step's tasks); random images for the CNNs",
        "data_fingerprint": None,
        "wall_time_s": time.perf_counter() - t_start,
        "rounds": a.rounds,
        "seconds_per_round": a.seconds,
        "seconds_per_call": got,
        "flops_per_call": flops,
        "notebook_step": NOTEBOOK_STEP,
        "matmul": "auto",
    }
    notes = (
        f"One thread. Each time: median over {a.rounds} alternating rounds of at least {a.seconds:g} s each, "
        "after two warm-up calls. FLOP: matrix products only (torch.utils.flop_counter, forward and "
        "backward), so a step's share of the peak is an upper estimate of how well it uses the cores and "
        "'largest speed-up at the GEMM peak' an upper bound on what a float32 implementation could gain. "
        "Matrix products as the notebooks' MATMUL='auto' (bf16 where the CPU has bf16 units: there the peak "
        "row is float32 and the shares are not bounds). Notebook rows: bench_reproduce's summed training "
        "minutes of that notebook's models (worker-minutes; timed at the commit it names) times the share of "
        "its dominant step; two one-thread workers side by side run these steps within about 5% of twice one "
        "alone (bench_lanes), so the workers' minutes ran at about the rate timed here."
    )
    write_table("bench_compute_floor", df, meta, title="Training steps against the GEMM peak", notes=notes)
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
