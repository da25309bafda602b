"""Train a concept model on WordNet hypernym pairs (Sec. 3.3 of Vendrov et al.).

A batch holds true pairs, one corrupted pair per true pair, and one more negative per true pair
for each kind in `cfg.negatives`. Training negatives are redrawn each epoch from an RNG seeded by
(seed, epoch), so a resumed run is the run it continues. Early stopping and the threshold use dev
only. The step (orderlib/concepts/step.py) is chosen once, when training starts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from orderlib.checkpoint import code_version, fingerprint
from orderlib.concepts.base import ConceptModel
from orderlib.concepts.compiled import STEP_SOURCE, source_key
from orderlib.concepts.models import build_concept_model
from orderlib.concepts.negatives import NEGATIVE_KINDS, Siblings, extra_negatives
from orderlib.concepts.step import CompiledStep, Step, build_step
from orderlib.data.hypernymy import HypernymyData
from orderlib.eval.threshold import best_threshold, threshold_accuracy
from orderlib.training import ThresholdResult, fit


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


def new_step(model: ConceptModel, cfg: HypernymyConfig, device, fused: bool | None = None) -> Step:
    """The step `cfg` asks for (step.build_step), with the model's own loss unless cfg names one."""
    return build_step(model, cfg.optimizer, cfg.loss or model.loss, cfg.margin, cfg.lr, device, fused)


def hypernymy_accuracy(model: ConceptModel, data: HypernymyData, device) -> dict:
    """Choose tau on dev, report dev and test accuracy (%)."""
    e_dev = model.energies(torch.as_tensor(data.dev, device=device)).cpu().numpy()
    e_test = model.energies(torch.as_tensor(data.test, device=device)).cpu().numpy()
    tau, dev_acc = best_threshold(e_dev, data.dev_labels)
    return {
        "tau": tau,
        "dev_accuracy": 100 * dev_acc,
        "test_accuracy": 100 * threshold_accuracy(e_test, data.test_labels, tau),
    }


def train_epoch(
    step: Step,
    data: HypernymyData,
    cfg: HypernymyConfig,
    epoch: int,
    device,
    progress: bool,
    siblings: Siblings | None = None,
    after_step=None,
) -> float:
    """Run one epoch of steps; return the mean batch loss. `after_step()`, if given, runs after each step."""
    rng = np.random.default_rng([cfg.seed, epoch])
    pos = data.epoch_positives(rng, cfg.train_fraction)  # (P, 2)
    negs = [data.train_negatives(rng, pos)]
    negs += [extra_negatives(kind, data, pos, rng, siblings) for kind in cfg.negatives]
    pos_t = torch.as_tensor(pos, device=device)  # (P, 2)
    neg_t = torch.as_tensor(np.stack(negs), device=device)  # (K, P, 2)
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
        total += step.step(pos_t[i : i + cfg.batch], neg)
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
    step = new_step(model, cfg, device, fused)
    siblings = Siblings(data) if "sibling" in cfg.negatives else None

    def one_epoch(epoch: int) -> float:
        model.train()
        loss = train_epoch(step, data, cfg, epoch, device, progress, siblings)
        step.flush()
        model.eval()
        return loss

    key = {
        **asdict(cfg),
        "code": code_version(__name__),
        "data": data.key(),
    }
    if init:
        key["init"] = fingerprint(init)
    if isinstance(step, CompiledStep):
        key["step"] = source_key(STEP_SOURCE)
    fitted = fit(
        model,
        step,
        key,
        one_epoch,
        lambda: hypernymy_accuracy(model, data, device),
        "dev_accuracy",
        cfg.epochs,
        cfg.patience,
        checkpoint,
        progress,
        cfg.model,
    )
    model.eval()
    ev = hypernymy_accuracy(model, data, device)
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
    stepper = new_step(model, cfg, device, fused)
    siblings = Siblings(data) if "sibling" in cfg.negatives else None
    records, step, epoch = [], 0, 0

    def record(epoch_end: bool) -> None:
        if epoch_end and records and records[-1]["step"] == step:  # evaluated at this very step already
            records[-1]["epoch_end"] = True
            return
        stepper.flush()
        model.eval()
        ev = hypernymy_accuracy(model, data, device)
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
