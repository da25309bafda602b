"""The epoch loop shared by the trainers: early stopping on a held-out score, the best state
kept, atomic checkpoints as it goes (at most one per CHECKPOINT_EVERY_S, and always the last
epoch's), and resume from them."""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from orderlib import distributed as ddp
from orderlib import precision
from orderlib.checkpoint import load_checkpoint, locked, save_checkpoint
from orderlib.reports import git_commit

# Seconds between checkpoints. Epochs of seconds (Table 1's tables, word2gauss) would otherwise spend
# a fifth of their time writing 60-130 MB each; an interrupted run redoes at most this much work
# (epochs are seeded by their index, so the redone epochs are the same). Longer epochs save every time.
CHECKPOINT_EVERY_S = 30.0


@contextlib.contextmanager
def seeded_rng(seed: int, device=None):
    """Run the block with torch's global generator (and `device`'s, if CUDA) seeded to `seed`,
    restoring the callers' generator state afterwards: dropout and other draws from the global
    generator then follow the run's seed without seeding anything globally."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


class TrainingDiverged(RuntimeError):
    """The training loss or the held-out score became NaN or infinite."""


def _check_finite(desc: str, epoch: int, what: str, value, checkpoint: Path | None) -> None:
    if isinstance(value, (int, float)) and not math.isfinite(value):
        kept = f" The checkpoint {checkpoint} still holds the last finite epoch." if checkpoint else ""
        raise TrainingDiverged(
            f"{desc or 'training'}: {what} became {value} in epoch {epoch}; the run has "
            f"diverged (lower the learning rate or the gradient clip, or check the inputs).{kept}"
        )


@dataclass
class FitResult:
    history: list[dict] = field(default_factory=list)  # per epoch: loss, held-out metrics, seconds
    best_epoch: int = -1
    best_score: float = float("-inf")
    seconds: float = 0.0  # training + held-out evaluation time, summed over epochs (resumes included)
    resumed: bool = False
    trained_at: str | None = None  # git commit of the code that trained the first epoch (None: unknown)
    matmul: str = "fp32"  # the precision its matrix products ran in (orderlib.precision)


@dataclass
class ThresholdResult:
    """A model trained by `fit` and scored by a threshold chosen on dev: what the hypernymy,
    word2gauss and entailment trainers return."""

    model: torch.nn.Module
    history: list[dict] = field(default_factory=list)
    best_epoch: int = -1
    tau: float = float("nan")
    dev_accuracy: float = float("nan")
    test_accuracy: float = float("nan")
    seconds: float = 0.0
    resumed: bool = False
    trained_at: str | None = None  # git commit whose code trained it (None: unknown, an older checkpoint)

    @classmethod
    def of(cls, model: torch.nn.Module, fitted: FitResult, ev: dict) -> ThresholdResult:
        """Combine `fit`'s record with a final evaluation {tau, dev_accuracy, test_accuracy}."""
        return cls(
            model,
            fitted.history,
            fitted.best_epoch,
            ev["tau"],
            ev["dev_accuracy"],
            ev["test_accuracy"],
            fitted.seconds,
            fitted.resumed,
            fitted.trained_at,
        )


def fit(
    model: torch.nn.Module,
    opt,
    cfg: dict,
    train_epoch: Callable[[int], float],
    evaluate: Callable[[], dict],
    score: str,
    epochs: int,
    patience: int,
    checkpoint: Path | None = None,
    progress: bool = True,
    desc: str = "",
    distributed: bool = False,
) -> FitResult:
    """Run `train_epoch(epoch)` then `evaluate()` for up to `epochs` epochs; stop once `patience`
    epochs pass without a higher `evaluate()[score]`; leave the best epoch's weights in `model`.
    A NaN or infinite loss or score stops the run with TrainingDiverged (nothing of that epoch saved).

    With `checkpoint`, state is saved after an epoch once CHECKPOINT_EVERY_S have passed since the
    last save, and after the last epoch; a run with the same `cfg` resumes from it (a finished run
    returns at once, and its checkpoint holds the best weights only: no last weights, no optimizer
    state, a quarter of the size for Adam); a checkpoint of another cfg is trained over. `cfg`
    must therefore hold everything that determines the model: settings, a fingerprint of the
    data, the trainer's code version (orderlib.checkpoint). The checkpoint is locked while this
    runs: a concurrent run of the same checkpoint waits, then resumes or loads what this one left.

    With `distributed` (a torchrun process group, orderlib.distributed), every rank calls this with
    the same arguments and `train_epoch` trains its part of each batch; rank 0 alone locks, loads
    and writes the checkpoint and runs `evaluate`, and broadcasts the resumed state, the loss and
    the held-out metrics, so that every rank takes the same early-stopping decisions.
    """
    if distributed:
        ddp.require()
    main = not distributed or ddp.is_main()  # the process that locks, evaluates and writes
    param = next(model.parameters(), None)
    matmul = precision.in_effect(param.device if param is not None else "cpu")
    cfg = {**cfg, "matmul": matmul}  # models trained with other products are other models
    processes = ddp.world_size() if distributed else 1
    with locked(checkpoint) if checkpoint and main else contextlib.nullcontext():
        state = load_checkpoint(checkpoint) if checkpoint and main else None
        if state is not None and state["cfg"] != cfg:
            state = None  # a different run: start over
        if distributed:
            state = ddp.broadcast(state)
        start, history, best, best_state, done, seconds = 0, [], (float("-inf"), -1), None, False, 0.0
        trained_at = git_commit() if state is None else None
        if state is not None and "model" in state:  # a finished run keeps its best state only
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
        if state is not None:
            start, history, best = state["epoch"] + 1, state["history"], tuple(state["best"])
            best_state, done, seconds = state["best_state"], state["done"], state["seconds"]
            trained_at = state.get("trained_at")
        bar = tqdm(range(start, epochs), desc=desc, disable=not progress or done or not main)
        saved = time.perf_counter()
        for epoch in bar:
            if done:
                break
            t0 = time.perf_counter()
            loss = train_epoch(epoch)
            loss = ddp.broadcast(loss) if distributed else loss
            _check_finite(desc, epoch, "the training loss", loss, checkpoint)
            ev = evaluate() if main else None
            ev = ddp.broadcast(ev) if distributed else ev
            _check_finite(desc, epoch, f"the held-out {score}", ev[score], checkpoint)
            seconds += time.perf_counter() - t0
            history.append({"epoch": epoch, "loss": loss, **ev, "seconds": seconds})
            bar.set_postfix(loss=f"{loss:.4f}", **{score: f"{ev[score]:.2f}"})
            if ev[score] > best[0]:
                best, best_state = (ev[score], epoch), copy.deepcopy(model.state_dict())
            done = epoch - best[1] >= patience or epoch == epochs - 1
            if checkpoint and main and (done or time.perf_counter() - saved >= CHECKPOINT_EVERY_S):
                weights = {} if done else {"model": model.state_dict(), "opt": opt.state_dict()}
                save_checkpoint(
                    checkpoint,
                    {
                        "cfg": cfg,
                        **weights,
                        "epoch": epoch,
                        "history": history,
                        "best": list(best),
                        "best_state": best_state,
                        "done": done,
                        "seconds": seconds,
                        "trained_at": trained_at,
                        "processes": processes,
                    },
                )
                saved = time.perf_counter()
        if best_state is not None:
            model.load_state_dict(best_state)
        return FitResult(history, best[1], best[0], seconds, state is not None, trained_at, matmul)
