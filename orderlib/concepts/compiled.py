"""Table 1's compiled code: the fused training step of the table models (csrc/concept_step.cpp) and
word2gauss's loop (csrc/word2gauss.cpp), built on first use like the penalty kernel.

The step does energy, loss, a hand-written gradient, lazy Adam and the constraint in one pass over
the touched rows, where the PyTorch step makes about 50 small ATen calls: 2.3-6.1x faster per epoch
(benchmarks/standing/concept_step.py). It is bound once per run (`BoundKernel`), reads every table's
constraint from the model's `TableSpec`s, and keeps its optimiser state in the `RowAdam` it is given,
so checkpoints are the same either way. ORDERLIB_FUSED=0 never builds or uses it.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from orderlib.checkpoint import fingerprint
from orderlib.concepts.row_adam import RowAdam
from orderlib.freshness import cpp_code
from orderlib.kernels import build_flags, built
from orderlib.penalties import ENERGIES

CSRC = Path(__file__).resolve().parent.parent / "csrc"
STEP_SOURCE = CSRC / "concept_step.cpp"
W2G_SOURCE = CSRC / "word2gauss.cpp"

# The kernel's energy codes and parameters are orderlib.penalties.ENERGIES' `kernel` and `kernel_params`
# (a model's compiled_energy() names its energy there and gives those parameters, in order).
LOSS_CODES = {"max_margin": 0, "ranking_hinge": 1, "binary_cross_entropy": 2, "logistic_ranking": 3}

_step: dict = {}
_w2g: dict = {}


def source_key(source: Path) -> str:
    """Checkpoint key of a compiled source: its code without comments, and the flags it is built with."""
    return fingerprint(cpp_code(source.read_text()), build_flags(source))


def concept_step_kernel():
    """Return the compiled step's module, or None when ORDERLIB_FUSED=0 or it cannot be built (then
    the PyTorch step is used); the reason is in `concept_step_status()`."""
    if os.environ.get("ORDERLIB_FUSED", "1") == "0":
        return None
    return built(_step, STEP_SOURCE)


def concept_step_status() -> str:
    """Say whether the compiled table-model step is in use, and if not, why."""
    if os.environ.get("ORDERLIB_FUSED", "1") == "0":
        return "disabled by ORDERLIB_FUSED=0"
    if concept_step_kernel():
        return "compiled C++ (" + " ".join(build_flags(STEP_SOURCE)) + ")"
    return "unavailable: " + _step["error"]


def word2gauss_kernel():
    """Return the compiled word2gauss loop, or None with the reason in `word2gauss_status()`."""
    return built(_w2g, W2G_SOURCE)


def word2gauss_status() -> str:
    """Say whether the compiled word2gauss trainer is available, and if not, why."""
    if word2gauss_kernel():
        return "compiled C++ (" + " ".join(build_flags(W2G_SOURCE)) + ")"
    return "unavailable: " + _w2g["error"]


def _dense_names(model) -> list[str]:
    tables = model.tables()
    return [n for n, p in model.named_parameters() if n not in tables and p.requires_grad]


def applies(model, optimizer: str, loss: str, device) -> bool:
    """True where the compiled step computes what the PyTorch step would."""
    energy = model.compiled_energy()
    return (
        energy is not None
        and optimizer in ("lazy_adam", "sparse_adam")
        and _dense_names(model) == energy.get("dense", [])
        and loss in LOSS_CODES
        and torch.device(device).type == "cpu"
        and all(t.dtype in (torch.float32, torch.float64) for t in model.tables().values())
    )


class BoundKernel:
    """The compiled kernel bound to one model and its RowAdam: `(pairs ((1 + K) B, 2), B) -> loss`
    steps the rows; the energy's dense parameters (if any) are left with their gradient in `.grad`."""

    def __init__(self, model, rows: RowAdam, loss: str, margin: float):
        kernel = concept_step_kernel()
        if kernel is None:
            raise RuntimeError(f"the compiled table-model step is unavailable ({concept_step_status()})")
        energy, specs = model.compiled_energy(), model.table_specs()
        registered = ENERGIES[energy["energy"]]
        code, names = registered.kernel, list(registered.kernel_params)
        if len(energy["params"]) != len(names):
            raise ValueError(f"{energy['energy']} takes parameters {names}, got {energy['params']}")
        self.rows = rows
        self.dense = [model.get_parameter(name) for name in energy.get("dense", [])]
        self.grads = [torch.zeros_like(p, memory_format=torch.contiguous_format) for p in self.dense]
        self.kernel = kernel.ConceptStep(
            values=[rows.tables[k] for k in specs],
            moments=[rows.moments[k] for k in specs],
            last=rows.last,
            lower=[float(s.lower) for s in specs.values()],
            upper=[float(s.upper) for s in specs.values()],
            ball=[s.ball for s in specs.values()],
            norm_lo=[float(s.norm[0]) for s in specs.values()],
            norm_hi=[float(s.norm[1]) for s in specs.values()],
            lr=rows.lr,
            b1=rows.betas[0],
            b2=rows.betas[1],
            eps=rows.eps,
            window=rows.window,
            exact_until=rows.EXACT_UNTIL,
            catch_up=rows.catch_up,
            energy=code,
            energy_params=[float(x) for x in energy["params"]],
            loss=LOSS_CODES[loss],
            margin=float(margin),
            dense=[p.data for p in self.dense],
            dense_grad=self.grads,
        )

    def __call__(self, pairs: torch.Tensor, b: int) -> float:
        loss = self.kernel.step(pairs.contiguous(), b, self.rows.t)
        self.rows.advance()
        for p, g in zip(self.dense, self.grads):  # for the caller's optimizer
            p.grad = g
        return loss

    def flush(self) -> None:
        """Bring every row up to the current step (RowAdam.flush's catch-up rule, in one compiled pass)."""
        self.kernel.flush(self.rows.t)
