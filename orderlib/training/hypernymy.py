"""Train a concept model on WordNet hypernym pairs (Sec. 3.3 of Vendrov et al.).

A batch holds true pairs, one corrupted pair per true pair, and one more negative per true pair
for each kind in `cfg.negatives`. Training negatives are redrawn each epoch from an RNG seeded by
(seed, epoch), so a resumed run is the run it continues. Early stopping and the threshold use dev
only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.func import functional_call
from tqdm.auto import tqdm

from orderlib.checkpoint import code_version, fingerprint
from orderlib.data.hypernymy import HypernymyData, in_set, pair_codes
from orderlib.encoders.concepts import ConceptModel, build_concept_model
from orderlib.eval.threshold import best_threshold, threshold_accuracy
from orderlib.kernels import STEP_SOURCE, concept_step_kernel, concept_step_status
from orderlib.losses import LOSSES
from orderlib.optim import RowAdam
from orderlib.training import ThresholdResult, concept_step, fit

TRAINER_CODE = (
    "orderlib.training.hypernymy",
    "orderlib.training.loop",
    "orderlib.encoders.concepts",
    "orderlib.optim",
    "orderlib.training.concept_step",
    "orderlib.losses",
    "orderlib.penalties",
    "orderlib.data.hypernymy",
    "orderlib.eval.threshold",
    "orderlib.encoders.boxes",
    "orderlib.encoders.hyperbolic",
)


OPTIMIZERS = {
    "adam": "dense Adam over every row every step (what the authors' Torch7 optim.adam did)",
    "lazy_adam": "dense Adam's trajectory computed on touched rows only (RowAdam with catch-up)",
    "sparse_adam": "SparseAdam's rule: rows absent from a batch do not move",
}
# Riemannian tables (a model's `manifolds()`) take Riemannian Adam steps under each of these:
# every row every step under "adam", touched rows only (SparseRiemannianAdam's rule) otherwise.

NEGATIVE_KINDS = {  # extra negatives, one per true pair (u, v) each (Athiwaratkun & Wilson's kinds)
    "random": "another corruption of one side by a uniformly random concept (their S1)",
    "swap": "the reversed pair (v, u) (their S2)",
    "sibling": "(w, u) for w another known hyponym of v that is not below u (their S4, drawn per pair)",
}


@dataclass
class HypernymyConfig:
    model: str = "order-embeddings"
    dim: int = 50
    epochs: int = 50
    batch: int = 500  # true pairs per batch, plus as many corrupted ones
    lr: float = 0.01
    margin: float = 1.0
    patience: int = 5  # epochs without a better dev accuracy before stopping
    optimizer: str = "lazy_adam"  # one of OPTIMIZERS
    train_fraction: float = 1.0  # fraction of train positives seen per epoch (small presets)
    seed: int = 0
    negatives: tuple[str, ...] = ()  # extra negative kinds (NEGATIVE_KINDS), one per true pair each
    loss: str | None = None  # a name in orderlib.losses.LOSSES; None: the model's own
    model_kwargs: dict = field(default_factory=dict)  # constructor settings (gamma, beta, K, alpha, ...)


class _Stepper:
    """One optimisation step: row-wise Adam on the tables + Adam on any dense parameters,
    or plain dense Adam on everything. Where the compiled step applies (training.concept_step)
    and `fused` is not False, one C++ call does the row-wise step."""

    def __init__(self, model: ConceptModel, cfg: HypernymyConfig, device="cpu", fused: bool | None = None):
        if cfg.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {cfg.optimizer!r}; expected one of {sorted(OPTIMIZERS)}")
        self.model = model
        manifolds = model.manifolds()
        # dense Adam on a Riemannian model: RowAdam on every row every step (dense Riemannian Adam)
        self.all_rows = cfg.optimizer == "adam" and bool(manifolds)
        self.tables = model.tables() if cfg.optimizer != "adam" or self.all_rows else {}
        dense = [p for n, p in model.named_parameters() if n not in self.tables and p.requires_grad]
        self.rows = (
            RowAdam(
                {k: t.data for k, t in self.tables.items()},
                lr=cfg.lr,
                catch_up=cfg.optimizer == "lazy_adam",
                manifolds=manifolds,
            )
            if self.tables
            else None
        )
        # fused: one kernel per step instead of ~10 ATen calls (bilinear's W: 220 -> ~20 us a step)
        fused_adam = torch.device(device).type in ("cpu", "cuda")
        self.dense = torch.optim.Adam(dense, lr=cfg.lr, fused=fused_adam) if dense else None
        self._pos: torch.Tensor | None = None
        loss = cfg.loss or model.loss
        usable = concept_step.applies(model, cfg.optimizer, loss, device) and concept_step_kernel() is not None
        if fused and not usable:
            raise RuntimeError(
                f"the compiled step does not apply to {cfg.model!r} with optimizer {cfg.optimizer!r}, "
                f"loss {loss!r} on {device} ({concept_step_status()})"
            )
        self.fused = (
            concept_step.FusedStep(model, self.rows, loss, cfg.margin) if usable and fused is not False else None
        )
        self.constant = model.constant_columns() if self.rows is not None else {}  # dense Adam: constrain does it

    def _hold_constants(self, rows: torch.Tensor) -> None:
        """Reset the model's constant columns on `rows` to 1 and their moments to 0, so that no
        catch-up moves them (the same on both steps)."""
        for name, k in self.constant.items():
            self.rows.tables[name][rows, -k:] = 1.0
            self.rows.moments[name][rows, :, -k:] = 0.0

    def _touched(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (rows, inverse) for idx without a sort: a marker over all concepts."""
        n = next(iter(self.tables.values())).shape[0]
        if self.all_rows:
            return torch.arange(n, device=idx.device), idx
        if self._pos is None or self._pos.device != idx.device:
            self._pos = torch.zeros(n, dtype=torch.long, device=idx.device)
        mark = torch.zeros(n, dtype=torch.bool, device=idx.device)
        mark[idx] = True
        rows = mark.nonzero().squeeze(1)
        self._pos[rows] = torch.arange(len(rows), device=idx.device)
        return rows, self._pos[idx]

    def step(self, loss_fn, pos: torch.Tensor, neg: torch.Tensor) -> float:
        """One step on true pairs pos (B, 2) and negatives neg (K * B, 2), K blocks of B aligned
        with pos; the loss sees E(pos) repeated K times beside E(neg)."""
        b = len(pos)
        pairs = torch.cat([pos, neg])  # ((1 + K) B, 2): one energy call for both halves
        if self.fused is not None:
            loss = self.fused(pairs, b)  # rows stepped; dense parameters left with their gradient
            if self.constant:
                self._hold_constants(self._touched(pairs.flatten())[0])
            if self.dense is not None:
                self.dense.step()
            return loss
        if self.rows is not None:  # gather touched rows into small leaves, index them locally
            rows, inv = self._touched(pairs.flatten())
            current = self.rows.prepare(rows, self.model.constrain)  # with pending momentum moves
            local = {k: v.requires_grad_() for k, v in current.items()}
            inv = inv.view(-1, 2)
            e = functional_call(self.model, local, (inv[:, 0], inv[:, 1]))  # (2B,)
        else:
            e = self.model(pairs[:, 0], pairs[:, 1])
        loss = loss_fn(e[:b].repeat(len(neg) // b), e[b:])
        if self.dense is not None:
            self.dense.zero_grad(set_to_none=True)
        loss.backward()
        if self.rows is not None:
            self.rows.step(rows, {k: v.grad for k, v in local.items()}, self.model.constrain)
            if self.constant:
                self._hold_constants(rows)
        if self.dense is not None:
            self.dense.step()
        if self.rows is None:
            self.model.constrain_all_()
        return float(loss.detach())

    def flush(self) -> None:
        """Apply every pending row update (before evaluating or saving)."""
        if self.fused is not None:
            self.fused.flush()
        elif self.rows is not None:
            self.rows.flush(self.model.constrain)

    def state_dict(self) -> dict:
        return {
            "rows": self.rows.state_dict() if self.rows else None,
            "dense": self.dense.state_dict() if self.dense else None,
        }

    def load_state_dict(self, state: dict) -> None:
        if self.rows:
            self.rows.load_state_dict(state["rows"])
        if self.dense:
            self.dense.load_state_dict(state["dense"])


def evaluate(model: ConceptModel, data: HypernymyData, device) -> dict:
    """Choose tau on dev, report dev and test accuracy (%)."""
    e_dev = model.energies(torch.as_tensor(data.dev, device=device)).cpu().numpy()
    e_test = model.energies(torch.as_tensor(data.test, device=device)).cpu().numpy()
    tau, dev_acc = best_threshold(e_dev, data.dev_labels)
    return {
        "tau": tau,
        "dev_accuracy": 100 * dev_acc,
        "test_accuracy": 100 * threshold_accuracy(e_test, data.test_labels, tau),
    }


class _Siblings:
    """Train positives grouped by hypernym, for the "sibling" negatives."""

    def __init__(self, data: HypernymyData):
        train = data.train[np.argsort(data.train[:, 1], kind="stable")]
        self.hyponyms = train[:, 0]  # grouped by hypernym
        self.start = np.searchsorted(train[:, 1], np.arange(data.n_nodes + 1))  # (N + 1,)
        self.known = data.closure if data.protocol == "clean" else np.unique(pair_codes(data.train, data.n_nodes))

    def draw(self, data: HypernymyData, pos: np.ndarray, rng: np.random.Generator, tries: int = 10) -> np.ndarray:
        """Return (w, u) per (u, v): w a random known hyponym of v with (w, u) not a known pair;
        pairs with none found in `tries` draws get a random corruption instead."""
        u, v = pos[:, 0], pos[:, 1]
        lo, count = self.start[v], self.start[v + 1] - self.start[v]  # count >= 1: (u, v) itself
        out = data.train_negatives(rng, pos)  # the fallback
        todo = np.arange(len(pos))
        for _ in range(tries):
            w = self.hyponyms[lo[todo] + (rng.random(len(todo)) * count[todo]).astype(np.int64)]
            cand = np.stack([w, u[todo]], axis=1)
            ok = (w != u[todo]) & ~in_set(cand, self.known, data.n_nodes)
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
            if len(todo) == 0:
                break
        return out


def extra_negatives(
    kind: str, data: HypernymyData, pos: np.ndarray, rng: np.random.Generator, siblings: _Siblings | None = None
) -> np.ndarray:
    """Return one negative of `kind` (NEGATIVE_KINDS) per true pair of pos (P, 2), shape (P, 2)."""
    if kind == "random":
        return data.train_negatives(rng, pos)
    if kind == "swap":
        return np.ascontiguousarray(pos[:, ::-1])
    if kind == "sibling":
        return (siblings or _Siblings(data)).draw(data, pos, rng)
    raise ValueError(f"unknown negative kind {kind!r}; expected one of {sorted(NEGATIVE_KINDS)}")


def train_epoch(
    stepper: _Stepper,
    data: HypernymyData,
    cfg: HypernymyConfig,
    epoch: int,
    device,
    progress: bool,
    siblings: _Siblings | None = None,
    after_step=None,
) -> float:
    """Run one epoch of steps; return the mean batch loss. `after_step()`, if given, runs after each step."""
    rng = np.random.default_rng([cfg.seed, epoch])
    pos = data.epoch_positives(rng, cfg.train_fraction)  # (P, 2)
    negs = [data.train_negatives(rng, pos)]
    negs += [extra_negatives(kind, data, pos, rng, siblings) for kind in cfg.negatives]
    pos_t = torch.as_tensor(pos, device=device)  # (P, 2)
    neg_t = torch.as_tensor(np.stack(negs), device=device)  # (K, P, 2)
    base = LOSSES[cfg.loss or stepper.model.loss]
    loss_fn = lambda e_pos, e_neg: base(e_pos, e_neg, cfg.margin)  # noqa: E731
    total, steps = 0.0, 0
    bar = tqdm(
        range(0, len(pos), cfg.batch),
        desc=f"{cfg.model} epoch {epoch}",
        leave=False,
        disable=not progress,
        mininterval=2.0,
    )
    for i in bar:
        neg = neg_t[:, i : i + cfg.batch].reshape(-1, 2)  # (K * B, 2), kind-major
        total += stepper.step(loss_fn, pos_t[i : i + cfg.batch], neg)
        steps += 1
        if after_step is not None:
            after_step()
    return total / max(1, steps)


def train_concept_model(
    data: HypernymyData,
    cfg: HypernymyConfig,
    device="cpu",
    checkpoint: Path | None = None,
    progress: bool = True,
    init: dict[str, torch.Tensor] | None = None,
    fused: bool | None = None,
) -> ThresholdResult:
    """Train `cfg.model` with early stopping on dev accuracy; resume from `checkpoint` if present.

    `init` maps parameter names (e.g. "emb.weight") to starting values, copied in after the
    seeded init and then constrained (hyperbolic cones start from Poincare embeddings); it is
    part of the checkpoint key. `fused`: None takes the compiled step where it applies, False
    never, True insists (an error where it does not apply). Which step ran is part of the
    checkpoint key (the two agree within float rounding, not bit for bit).
    """
    device = torch.device(device)
    for kind in cfg.negatives:
        if kind not in NEGATIVE_KINDS:
            raise ValueError(f"unknown negative kind {kind!r}; expected one of {sorted(NEGATIVE_KINDS)}")
    model = build_concept_model(cfg.model, data.n_nodes, cfg.dim, cfg.seed, **cfg.model_kwargs).to(device)
    if init:
        with torch.no_grad():
            for name, value in init.items():
                model.get_parameter(name).copy_(value)
        model.constrain_all_()
    stepper = _Stepper(model, cfg, device, fused)
    siblings = _Siblings(data) if "sibling" in cfg.negatives else None

    def one_epoch(epoch: int) -> float:
        model.train()
        loss = train_epoch(stepper, data, cfg, epoch, device, progress, siblings)
        stepper.flush()
        model.eval()
        return loss

    key = {
        **asdict(cfg),
        "code": code_version(*TRAINER_CODE),
        "data": fingerprint(
            data.protocol,
            data.n_nodes,
            data.train,
            data.dev,
            data.dev_labels,
            data.test,
            data.test_labels,
            data.closure,
        ),
    }
    if init:
        key["init"] = fingerprint(init)
    if stepper.fused is not None:
        key["step"] = fingerprint(STEP_SOURCE.read_text())
    fitted = fit(
        model,
        stepper,
        key,
        one_epoch,
        lambda: evaluate(model, data, device),
        "dev_accuracy",
        cfg.epochs,
        cfg.patience,
        checkpoint,
        progress,
        cfg.model,
    )
    model.eval()
    ev = evaluate(model, data, device)
    return ThresholdResult.of(model, fitted, ev)


def evaluation_trace(
    data: HypernymyData,
    cfg: HypernymyConfig,
    every: int,
    device="cpu",
    progress: bool = True,
    fused: bool | None = None,
) -> list[dict]:
    """Train `cfg` for all `cfg.epochs` epochs (no early stopping) and evaluate every `every` steps
    and after each epoch, as Athiwaratkun & Wilson's main.lua did (eval_freq 100: tau chosen on dev,
    test accuracy at that tau). Return one record per evaluation: step, epoch, epoch_end, dev, test.

    Initialisation and negatives are train_concept_model's for the same cfg; the mid-epoch flushes
    move the trajectory at float rounding (lazy Adam's catch-up is exact up to summation order), which
    over many epochs changes a run's test accuracy by up to about a tenth of a point.
    """
    if every < 1:
        raise ValueError(f"every must be a positive number of steps, got {every}")
    device = torch.device(device)
    model = build_concept_model(cfg.model, data.n_nodes, cfg.dim, cfg.seed, **cfg.model_kwargs).to(device)
    stepper = _Stepper(model, cfg, device, fused)
    siblings = _Siblings(data) if "sibling" in cfg.negatives else None
    records, step, epoch = [], 0, 0

    def record(epoch_end: bool) -> None:
        if epoch_end and records and records[-1]["step"] == step:  # evaluated at this very step already
            records[-1]["epoch_end"] = True
            return
        stepper.flush()
        model.eval()
        ev = evaluate(model, data, device)
        model.train()
        records.append(
            {
                "step": step,
                "epoch": epoch,
                "epoch_end": epoch_end,
                "dev": ev["dev_accuracy"],
                "test": ev["test_accuracy"],
            }
        )

    def after_step() -> None:
        nonlocal step
        step += 1
        if step % every == 0:
            record(False)

    bar = tqdm(range(cfg.epochs), desc=f"{cfg.model} (evaluated every {every} steps)", disable=not progress)
    for epoch in bar:
        model.train()
        train_epoch(stepper, data, cfg, epoch, device, False, siblings, after_step)
        record(True)
    model.eval()
    return records
