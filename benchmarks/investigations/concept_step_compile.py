"""Can torch.compile replace Table 1's compiled C++ step? One run, three steps on the same batches.

The question (issue 56): the C++ step (csrc/concept_step.cpp) repeats the PyTorch step's rules by
hand; if `torch.compile` of the PyTorch step (`concepts.step.RowStep`: gather the touched rows,
energy, loss, backward, lazy Adam) came within 1.5x of it, the C++ could go. Each variant trains
order-embeddings (lazy Adam, the paper's lr, margin and batch of 500 true pairs + 500 corrupted)
on Table 1's scale (82,115 concepts, 50-d) from the same initial table, on the same random batches,
in rounds that alternate the variants, one thread. Reported: milliseconds per step (median over
rounds, after warm-up steps that include compilation) and each variant's ratio to the C++ step.

    .venv/bin/python benchmarks/investigations/concept_step_compile.py [--steps 200] [--rounds 5]

Writes reports/tables/bench_concept_step_compile.* (full preset; a measurement, no paper column).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd
import torch

from orderlib.checkpoint import fingerprint
from orderlib.concepts import build_concept_model
from orderlib.concepts.compiled import concept_step_status
from orderlib.concepts.step import CompiledStep, RowStep, build_step
from orderlib.losses import max_margin
from orderlib.penalties import order_violation
from orderlib.reports import device_description, git_commit, write_table
from orderlib.runs import run_paths

N, DIM, BATCH = 82115, 50, 500  # WordNet 3.1's noun synsets; Vendrov et al.'s dim and batch


def _loss_and_grad(x: torch.Tensor, inv: torch.Tensor, b: int, margin: float):
    """Order-violation energies of the gathered rows x (R, D) at local pairs inv (P, 2), the max-margin
    loss (Eq. 4) and its gradient w.r.t. x: the part of RowStep.step that autograd does."""

    def loss(x):
        e = order_violation(x[inv[:, 0]], x[inv[:, 1]])
        return max_margin(e[:b].repeat(len(e) // b - 1), e[b:], margin)

    return torch.func.grad_and_value(loss)(x)


class CompiledMathStep(RowStep):
    """RowStep with its energy, loss and gradient in one torch.compile'd graph (dynamic row count);
    the gather with lazy Adam's catch-up and the Adam step stay eager."""

    compiled = staticmethod(torch.compile(_loss_and_grad, dynamic=True))

    def step(self, pos, neg) -> float:
        pairs = torch.cat([pos, neg])
        rows, inv = self.touched(pairs.flatten())
        current = self.rows.prepare(rows, self.model.constrain)
        grad, loss = self.compiled(current["emb.weight"], inv.view(-1, 2), len(pos), 1.0)
        self.rows.step(rows, {"emb.weight": grad}, self.model.constrain)
        return float(loss)


def make_step(kind: str):
    model = build_concept_model("order-embeddings", N, DIM, 0)
    step = build_step(model, "lazy_adam", model.loss, 1.0, 0.01, "cpu", fused=kind == "C++")
    assert isinstance(step, CompiledStep if kind == "C++" else RowStep)
    step.rows.t = 10_000  # mid-training (a later epoch): lazy Adam's catch-up past its exact window
    step.rows.last.fill_(10_000)
    if kind == "torch.compile (whole step)":
        step.step = torch.compile(step.step, dynamic=True)
    if kind == "torch.compile (energy, loss, gradient)":
        step.__class__ = CompiledMathStep
    return step


def batches(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    rng = np.random.default_rng(seed)
    return [
        (torch.as_tensor(rng.integers(0, N, (BATCH, 2))), torch.as_tensor(rng.integers(0, N, (BATCH, 2))))
        for _ in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--preset", default="full", help="full writes reports/; others runs/<preset>/reports/")
    args = ap.parse_args()
    commit, t_start = git_commit(), time.perf_counter()
    torch.set_num_threads(1)
    kinds = ["C++", "PyTorch (eager)", "torch.compile (whole step)", "torch.compile (energy, loss, gradient)"]
    steps = {k: make_step(k) for k in kinds}
    compile_s = {}
    for k, st in steps.items():  # warm-up: the kernel build and torch.compile's compilations
        t0 = time.perf_counter()
        for pos, neg in batches(args.warmup, 1):
            st.step(pos, neg)
        compile_s[k] = time.perf_counter() - t0
    times = {k: [] for k in kinds}
    for r in range(args.rounds):
        work = batches(args.steps, 100 + r)
        for k in kinds if r % 2 == 0 else kinds[::-1]:
            t0 = time.perf_counter()
            for pos, neg in work:
                steps[k].step(pos, neg)
            steps[k].flush()
            times[k].append(1e3 * (time.perf_counter() - t0) / args.steps)
    cpp = statistics.median(times["C++"])
    rows = []
    for k in kinds:
        ms = statistics.median(times[k])
        rows += [
            dict(method=k, metric="ms per step (median over rounds)", paper=None, ours=ms),
            dict(method=k, metric="ratio to the C++ step", paper=None, ours=ms / cpp),
            dict(method=k, metric="warm-up seconds (compilation included)", paper=None, ours=compile_s[k]),
        ]
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    meta = {
        "preset": args.preset,
        "seed": 0,
        "device": device_description("cpu"),
        "git_commit": commit,
        "compiled_step": concept_step_status(),
        "setting": f"order-embeddings, lazy Adam, {N} concepts x {DIM}, batches of {BATCH} + {BATCH}, one thread",
        "steps_per_round": args.steps,
        "rounds": args.rounds,
        "data_source": "random pairs over Table 1's number of concepts (a timing, not an accuracy)",
        "data_fingerprint": fingerprint(N, DIM, BATCH, args.steps, args.rounds),
        "wall_time_s": time.perf_counter() - t_start,
    }
    notes = (
        "The same batches through each step, in rounds alternating the order of the variants; "
        "`torch.compile` compiles either the whole `RowStep.step` or its energy, loss and gradient "
        "(torch.func.grad_and_value), the gather with lazy Adam's catch-up and the Adam step staying eager; "
        "both with dynamic shapes (the number of touched rows varies from batch to batch). "
        "The C++ step could go if `torch.compile` came within 1.5x of it."
    )
    out = write_table(
        "bench_concept_step_compile",
        df,
        meta,
        run_paths("bench_concept_step_compile", args.preset).tables,
        title="Table 1's training step: C++ against torch.compile of the PyTorch step",
        notes=notes,
    )
    print("wrote", out["csv"])


if __name__ == "__main__":
    main()
