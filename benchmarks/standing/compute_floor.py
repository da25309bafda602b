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
  32x32 colour items, batch 128, with its augmentation), channels-last as ItemCNN runs it, and the
  same in the NCHW layout for comparison;
- Table 1 (01): order-embeddings' compiled step (lazy Adam over the rows a batch touches). It does
  almost no products: its floor is the bytes it must move at the stream bandwidth measured in the
  same rounds (a 256 MB copy), and the table also gives the rate of gathering random rows, the
  access pattern a row-sparse step cannot avoid.
Also the GEMM of the GRU's recurrence alone ((128, 1024) x (1024, 3072)): products this thin reach
less of the peak than a square one. Writes reports/tables/bench_compute_floor.*.

    .venv/bin/python benchmarks/standing/compute_floor.py [--rounds 3] [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).parent))

from orderlib import precision  # noqa: E402
from orderlib.reports import device_description, repo_root, write_table  # noqa: E402

WORKLOADS = {
    "gru-snli": "Table 3 (02): GRU order-embeddings step, SNLI, batch 128",
    "gru-scenes": "Table 2 (03): GRU caption-image step, Fashion-MNIST Scenes, batch 128",
    "sem-a": "Sherlock (09): SEM-A step, 64x64 colour canvases, batch 32",
    "item-cnn": "Item CNN pre-training step (08, 06, 07, 03), 32x32 colour items, batch 128, channels-last",
    "item-cnn-nchw": "Item CNN pre-training step, as above, in the NCHW layout (for comparison)",
    "gemm-gru": "GEMM of the GRU recurrence, (128, 1024) x (1024, 3072)",
}
# Steps bound by memory traffic rather than products: their floor is bytes at the stream bandwidth.
MEMORY_WORKLOADS = {
    "table1-oe": "Table 1 (01): order-embeddings' compiled step, WordNet, batch 500 + 500 negatives",
    "table1-oe-cached": "Table 1's step, as above, on a 4,096-row table that stays in cache (for comparison)",
}
PEAK = "GEMM (2048, 2048) x (2048, 2048)"
STREAM = "stream copy, 256 MB float32"
GATHER = "random 200-byte rows from a 49 MB table (index_select)"
# bench_reproduce's notebooks and the workload whose steps fill (most of) their training time.
NOTEBOOK_STEP = {
    "01_oe_table1_wordnet.ipynb": "table1-oe",
    "02_oe_table3_snli.ipynb": "gru-snli",
    "03_oe_table2_retrieval.ipynb": "gru-scenes",
    "06_devise_table1.ipynb": "item-cnn",
    "07_devise_zeroshot.ipynb": "item-cnn",
    "08_utama_compositionality.ipynb": "item-cnn",
    "09_sherlock_facts.ipynb": "sem-a",
}


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
        nchw = name.endswith("-nchw")
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=5e-4)
        images = torch.randint(0, 256, (128, 32, 32, 3), dtype=torch.uint8, generator=gen)
        labels = torch.randint(0, 10, (128,), generator=gen)

        def step():
            x = augment(to_input(images), 2, gen)  # (B, 3, 32, 32), contiguous NCHW
            # ItemCNN.forward turns it channels-last; the comparison row bypasses that
            logits = model.head(model.trunk(x).mean((2, 3))) if nchw else model(x)
            loss = F.cross_entropy(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step
    if name == "table1-oe":
        return table1_step()
    if name == "table1-oe-cached":
        return table1_step(4096)
    if name == "gemm-gru":
        a, w = torch.randn(128, 1024), torch.randn(3072, 1024)
        return lambda: torch.mm(a, w.t())
    raise ValueError(f"unknown workload {name!r}; known: {[*WORKLOADS, *MEMORY_WORKLOADS]}")


def table1_step(rows_in_cache: int | None = None):
    """Order-embeddings' training step as notebook 01 runs it (full preset, paper protocol on our
    split, the compiled step), cycling over the first epoch's batches. Sets `.bytes`: the bytes one
    step must move at least, each touched row's parameters and both Adam moments read and written
    once (6 x dim x 4 bytes per distinct row) plus the batch's int64 indices; the energies' reads of
    the same rows are counted as cache hits; and `.rows`: distinct rows per step.
    `rows_in_cache`: train a table of that many rows instead (pairs taken modulo it), small enough
    to stay in cache, so that the step's arithmetic is timed without its memory traffic."""
    from orderlib.concepts.models import build_concept_model
    from orderlib.concepts.train import new_step
    from orderlib.experiments import oe_wordnet as exp

    cfg, _, _ = exp.load_setting("full", "paper", 1)
    data = exp._DATA["paper"]
    c = exp.model_config("order-embeddings", cfg)
    size = rows_in_cache or data.n_nodes
    model = build_concept_model(c.model, size, c.dim, c.seed, **c.model_kwargs)
    step = new_step(model, c, "cpu")
    rng = np.random.default_rng([c.seed, 0])
    pos = data.epoch_positives(rng, c.train_fraction) % size
    neg = data.train_negatives(rng, pos) % size
    batches = [
        (torch.as_tensor(pos[i : i + c.batch]), torch.as_tensor(neg[i : i + c.batch]))
        for i in range(0, 200 * c.batch, c.batch)
    ]
    rows = [len(np.unique(np.r_[p.numpy().ravel(), n.numpy().ravel()])) for p, n in batches]
    state = {"b": 0}

    def run():
        p, n = batches[state["b"] % len(batches)]
        step.step(p, n)
        state["b"] += 1

    run.rows = float(np.mean(rows))
    run.bytes = run.rows * 6 * c.dim * 4 + 2 * 2 * c.batch * 8
    return run


def stream_step():
    a, b = torch.randn(64 * 2**20), torch.empty(64 * 2**20)
    run = lambda: b.copy_(a)
    run.bytes = 2 * a.numel() * 4  # read and write
    return run


def gather_step():
    table = torch.randn(3 * 82115, 50)  # three tables (rows, Adam's two moments) of WordNet's nouns
    idx = torch.randint(0, table.shape[0], (8192,), generator=torch.Generator().manual_seed(0))
    run = lambda: table.index_select(0, idx)
    run.bytes = idx.numel() * 50 * 4
    return run


def peak_step():
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    return lambda: torch.mm(a, b)


def step_flops(step) -> int:
    """Floating-point operations of the matrix products (matmuls, convolutions) in one call of step."""
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return int(counter.get_total_flops())


PRODUCT_OPS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::mkldnn_convolution",
    "aten::convolution_backward",
    "aten::_slow_conv2d_forward",
    "aten::_slow_conv2d_backward",
}


def product_time_share(step, calls: int = 3) -> float:
    """Share of a step's own CPU time (torch.profiler, self times) spent in matrix products."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    return sum(e.self_cpu_time_total for e in events if e.key in PRODUCT_OPS) / total


def seconds_per_call(step, seconds: float) -> float:
    """Mean seconds per call of step over at least `seconds` (and at least 3 calls)."""
    n, t0 = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return (time.perf_counter() - t0) / n


def reproduce_runs() -> list[dict]:
    """The committed bench_reproduce's notebooks: wall seconds, training seconds (0 where its reports
    record none), commit (workflow/scripts/timings.py writes it)."""
    tables = repo_root() / "reports" / "tables"
    df, meta = (
        pd.read_csv(tables / "bench_reproduce.csv"),
        json.loads((tables / "bench_reproduce.meta.json").read_text()),
    )
    runs = []
    for name, g in df[df.method != "total"].groupby("method", sort=False):
        v = dict(zip(g.metric, g.ours))
        runs.append(
            {
                "notebook": name,
                "seconds": 60 * float(v["wall time (min)"]),
                "train_seconds": 60 * float(v.get("training time of its reports' models (min)", 0.0)),
                "commit": meta.get("notebooks", {}).get(name, {}).get("commit") or meta.get("git_commit", ""),
            }
        )
    return runs


def training_minutes(runs: list[dict] | None = None, cores: int | None = None) -> dict[str, tuple[float, bool]]:
    """Each training notebook's summed training minutes (worker-minutes) from bench_reproduce, and
    whether its reports recorded them; where they do not (Table 1's reports record the table's models,
    not its dev grids), its wall time times the cores its workers ran on, an upper bound."""
    runs = reproduce_runs() if runs is None else runs
    cores = cores or os.cpu_count() or 1
    out = {}
    for r in runs:
        if r["notebook"] not in NOTEBOOK_STEP:
            continue
        if r.get("train_seconds"):
            out[r["notebook"]] = (r["train_seconds"] / 60, True)
        elif r.get("seconds"):
            out[r["notebook"]] = (r["seconds"] * cores / 60, False)
    return out


def rows_of(method: str, measures: list[tuple[str, float]]) -> list[dict]:
    """The table's rows of one method: one per (metric, value)."""
    return [dict(method=method, metric=metric, ours=value) for metric, value in measures]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per workload and round")
    ap.add_argument("--workloads", default=",".join([*WORKLOADS, *MEMORY_WORKLOADS]), help="comma-separated subset")
    a = ap.parse_args()
    names = [w for w in a.workloads.split(",") if w]
    t_start = time.perf_counter()
    torch.set_num_threads(1)  # as the notebooks' row workers run
    precision.use("fp32", "cpu")  # as the notebooks' default MATMUL, which bench_reproduce timed
    steps = {w: make_step(w) for w in names}
    steps[PEAK], steps[STREAM], steps[GATHER] = peak_step(), stream_step(), gather_step()
    for s in steps.values():  # warm up: first calls allocate and pick kernels
        s(), s()
    flops = {w: step_flops(s) for w, s in steps.items() if w not in MEMORY_WORKLOADS}
    moved = {w: s.bytes for w, s in steps.items() if hasattr(s, "bytes")}
    in_products = {w: product_time_share(steps[w]) for w in names if w in WORKLOADS}
    got = {w: [] for w in steps}
    for _ in range(a.rounds):  # alternate, so a change in the machine's speed hits all alike
        for w, s in steps.items():
            got[w].append(seconds_per_call(s, a.seconds))
    sec = {w: float(np.median(v)) for w, v in got.items()}
    peak = flops[PEAK] / sec[PEAK] / 1e9  # GFLOP/s
    stream, gather = (moved[k] / sec[k] / 1e9 for k in (STREAM, GATHER))  # GB/s
    rows = rows_of(PEAK, [("GFLOP/s, one thread", round(peak, 1))])
    rows += rows_of(STREAM, [("GB/s, one thread", round(stream, 2))])
    rows += rows_of(
        GATHER,
        [
            ("GB/s, one thread", round(gather, 2)),
            ("share of the stream bandwidth (%)", round(100 * gather / stream, 1)),
        ],
    )
    share = {}
    for w in names:
        if w in MEMORY_WORKLOADS:
            rate = moved[w] / sec[w] / 1e9
            share[w] = rate / stream
            rows += rows_of(
                MEMORY_WORKLOADS[w],
                [
                    ("MB moved per step, at least", round(moved[w] / 1e6, 3)),
                    ("seconds per step, one thread", round(sec[w], 5)),
                    ("GB/s, one thread", round(rate, 2)),
                    ("share of the stream bandwidth (%)", round(100 * share[w], 1)),
                    ("share of the row-gather bandwidth (%)", round(100 * rate / gather, 1)),
                    ("microseconds per distinct row", round(1e6 * sec[w] / steps[w].rows, 3)),
                ],
            )
            continue
        rate = flops[w] / sec[w] / 1e9
        share[w] = rate / peak
        rows += rows_of(
            WORKLOADS[w],
            [
                ("GFLOP of matrix products per step", round(flops[w] / 1e9, 3)),
                ("seconds per step, one thread", round(sec[w], 4)),
                ("GFLOP/s, one thread", round(rate, 1)),
                ("share of the GEMM peak (%)", round(100 * share[w], 1)),
                ("largest speed-up at the GEMM peak", round(1 / share[w], 2)),
                ("share of its time in matrix products (%)", round(100 * in_products[w], 1)),
                (
                    "its matrix products' own rate, share of the GEMM peak (%)",
                    round(100 * share[w] / in_products[w], 1),
                ),
            ],
        )
    if "item-cnn" in sec and "item-cnn-nchw" in sec:
        rows += rows_of(
            WORKLOADS["item-cnn"], [("speed-up over NCHW, same run", round(sec["item-cnn-nchw"] / sec["item-cnn"], 2))]
        )
    runs = reproduce_runs()
    cores = os.cpu_count() or 1
    trained = training_minutes(runs, cores)
    floors = {}
    for nb, w in NOTEBOOK_STEP.items():
        if nb in trained and w in share:
            minutes, recorded = trained[nb]
            floors[nb] = minutes * share[w]
            training = (
                "training time of its models, summed over workers (min)"
                if recorded
                else f"its wall time x {cores} cores, an upper bound on its training (min)"
            )
            rows += rows_of(
                nb, [(training, round(minutes, 1)), ("the same, every step at its floor (min)", round(floors[nb], 1))]
            )
    if floors:
        floor, wall = sum(floors.values()), sum(r["seconds"] for r in runs) / 60
        rows += rows_of(
            "total",
            [
                ("the same, every step at its floor (min)", round(floor, 1)),
                ("make reproduce wall time (min)", round(wall, 1)),
                (f"floor of make reproduce on {cores} cores: the floors / {cores} (min)", round(floor / cores, 1)),
                ("make reproduce wall time / its floor", round(wall / (floor / cores), 2)),
            ],
        )
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
        "product_time_share": in_products,
        "flops_per_call": flops,
        "bytes_per_call": moved,
        "notebook_step": NOTEBOOK_STEP,
        "reproduce_commits": sorted({r.get("commit", "")[:7] for r in runs}),
        "matmul": "fp32",
    }
    notes = (
        f"One thread. Each time: median over {a.rounds} alternating rounds of at least {a.seconds:g} s each, "
        "after two warm-up calls. FLOP: matrix products only (torch.utils.flop_counter, forward and "
        "backward), so a step's share of the peak is an upper estimate of how well it uses the cores and "
        "'largest speed-up at the GEMM peak' an upper bound on what a float32 implementation could gain. "
        "Matrix products in float32, as the notebooks' default MATMUL='fp32' that made the reports "
        "and bench_reproduce's times. Notebook rows: bench_reproduce's summed training "
        "minutes of that notebook's models (worker-minutes; timed at the commit it names) times the share of "
        "its dominant step (Table 1: bytes at the stream bandwidth; its reports do not record every model's "
        "training time, so its wall time times the cores stands for it); two one-thread workers side by side "
        "run these steps within about 5% of twice one alone (bench_lanes), so the workers' minutes ran at "
        "about the rate timed here. 'share of its time in matrix products': self CPU time of mm, addmm, bmm "
        "and the convolutions under torch.profiler (3 steps); the step's share of the peak is that share "
        "times the products' own rate. Floor of make reproduce: the "
        "notebooks' floors shared over the machine's cores, evaluation, data preparation and the notebooks "
        "that only load models counted as free; the wall time is bench_reproduce's total, timed at the "
        "commit(s) its meta and this meta's reproduce_commits name."
    )
    write_table("bench_compute_floor", df, meta, title="Training steps against the GEMM peak", notes=notes)
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
