"""Table 1's compiled step built with and without -fno-trapping-math, in one run (d51742f).

Without it GCC does not if-convert the box energies' branch selections (they divide), so those loops
and the order violation's sum ran scalar, calling libm's exp / log / log1p one value at a time. Each
row trains `--epochs` epochs at seed 0 on the paper setting (our split), once per build, one process
at a time on one thread; prints seconds per epoch (evaluation included), the ratio, and the test
accuracy each build reaches (the vector transcendentals differ by a few ulp: the box rows' trajectories
move at float rounding, the others' stay to the printed digit).

    ORDERLIB_DATA=<data root> .venv/bin/python benchmarks/concept_step_flags.py [--epochs 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

from concept_step import SETTING, chosen_overrides  # benchmarks/concept_step.py: notebook 01's dev choices

from orderlib.kernels import EXTRA_FLAGS

FLAGS = EXTRA_FLAGS["concept_step.cpp"]  # the project's build: the vectorised one
BUILDS = {
    "scalar (without -fno-trapping-math)": [f for f in FLAGS if f != "-fno-trapping-math"],
    "vectorised (the project's flags)": FLAGS,
}
ROWS = ["order-embeddings", "box embeddings", "Gumbel box embeddings", "density order embeddings"]


def train(flags: list[str], method: str, epochs: int) -> tuple[float, float, str]:
    """Train one row with the step built with `flags`: (seconds per epoch, test accuracy, status)."""
    import torch

    from orderlib import kernels

    kernels.EXTRA_FLAGS["concept_step.cpp"] = flags  # before the first build in this process
    torch.set_num_threads(1)
    from orderlib.experiments import oe_wordnet as exp

    cfg, _, _ = exp.load_setting("full", SETTING, 1)
    c = exp.model_config(method, cfg, 0, epochs=epochs, **chosen_overrides(method))
    r = exp.train_row(exp._DATA[SETTING], c, "cpu", None, False)
    return r.history[-1]["seconds"] / len(r.history), r.test_accuracy, kernels.concept_step_status()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")  # a fresh process per build: the kernel is built once per process
    print(f"{'row':28s} {'build':36s} {'s/epoch':>8s} {'test %':>7s}")
    for method in ROWS:
        times = {}
        for name, flags in BUILDS.items():
            with ctx.Pool(1) as pool:
                sec, acc, status = pool.apply(train, (flags, method, a.epochs))
            if not status.startswith("compiled"):
                raise SystemExit(f"the compiled step did not build: {status}")
            times[name] = sec
            print(f"{method:28s} {name:36s} {sec:8.2f} {acc:7.2f}", flush=True)
        old, new = times.values()
        print(f"{method:28s} {'speed-up':36s} {old / new:8.2f}x", flush=True)


if __name__ == "__main__":
    main()
