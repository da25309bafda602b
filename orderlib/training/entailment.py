"""Train and evaluate sentence-pair entailment models (Section 5.3 of Vendrov et al.): Adam,
batches of sentence pairs, gradient-norm clipping, early stopping on held-out accuracy, and a
threshold on the energy chosen on held-out data only (never on test)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from orderlib import distributed as ddp
from orderlib import precision
from orderlib.checkpoint import code_version, fingerprint
from orderlib.data.entailment import PairSet, tokenize
from orderlib.encoders.entailment import build_entailment_model, entailment_loss
from orderlib.encoders.sentence import Vocab
from orderlib.eval.threshold import best_threshold, threshold_accuracy
from orderlib.training import ThresholdResult, fit


@dataclass
class EntailmentConfig:
    model: str = "order-embeddings"
    word_dim: int = 300
    dim: int = 1024
    epochs: int = 10
    batch: int = 128
    lr: float = 1e-3
    margin: float = 0.2  # alpha of Eq. (7) (the authors' code: 0.2)
    clip: float = 2.0  # global gradient-norm clip
    patience: int = 3  # epochs without a better held-out accuracy before stopping
    seed: int = 0
    matmul: str = "fp32"  # precision of training's matrix products (orderlib.precision): "fp32", "bf16", "auto"


@dataclass
class EncodedPairs:
    p: torch.Tensor  # (n, Tp) premise tokens
    pl: torch.Tensor  # (n,) premise lengths
    h: torch.Tensor  # (n, Th) hypothesis tokens
    hl: torch.Tensor  # (n,)
    positive: torch.Tensor  # (n,) bool, entailment

    @classmethod
    def from_pairs(cls, pairs: PairSet, vocab: Vocab, max_len: int = 60) -> EncodedPairs:
        p, pl = vocab.encode([tokenize(s) for s in pairs.premises], max_len)
        h, hl = vocab.encode([tokenize(s) for s in pairs.hypotheses], max_len)
        return cls(p, pl, h, hl, torch.as_tensor(pairs.positive))

    def __len__(self) -> int:
        return len(self.positive)

    def batch(self, idx, device) -> tuple:
        """Return (p, pl, h, hl) for rows idx, trimmed to the batch's longest sentence."""
        idx = torch.as_tensor(idx)
        pl, hl = self.pl[idx], self.hl[idx]
        p, h = self.p[idx, : int(pl.max())], self.h[idx, : int(hl.max())]
        return p.to(device), pl, h.to(device), hl


@dataclass
class EntailmentData:
    train: EncodedPairs
    holdout: EncodedPairs  # early stopping and the threshold
    test: EncodedPairs
    vocab: Vocab


def prepare(train: PairSet, holdout: PairSet, test: PairSet, min_count: int = 1) -> EntailmentData:
    """Encode three splits with a vocabulary built from the training sentences only."""
    vocab = Vocab.build((tokenize(s) for s in train.premises + train.hypotheses), min_count)
    return EntailmentData(*(EncodedPairs.from_pairs(s, vocab) for s in (train, holdout, test)), vocab)


@torch.no_grad()
def energies(model, pairs: EncodedPairs, device, batch: int = 512) -> np.ndarray:
    """Return (n,) energies, low = entailment."""
    model.eval()
    out = [
        model(*pairs.batch(torch.arange(i, min(i + batch, len(pairs))), device)).float().cpu()
        for i in range(0, len(pairs), batch)
    ]
    return torch.cat(out).numpy()


def held_out(model, data: EntailmentData, device) -> dict:
    """Choose the threshold on held-out pairs: the score early stopping reads after every epoch
    (test is scored once, at the chosen epoch: it was a fifth of each epoch's time)."""
    tau, dev_acc = best_threshold(energies(model, data.holdout, device), data.holdout.positive.numpy())
    return {"tau": tau, "dev_accuracy": 100 * dev_acc}


def entailment_accuracy(model, data: EntailmentData, device) -> dict:
    """Choose the threshold on held-out pairs, then apply it to test (whose labels it never sees)."""
    ev = held_out(model, data, device)
    test_acc = threshold_accuracy(energies(model, data.test, device), data.test.positive.numpy(), ev["tau"])
    return {**ev, "test_accuracy": 100 * test_acc}


def seeded_model(cfg: EntailmentConfig, vocab_size: int, device):
    """The untrained model of `cfg` on `device`, initialised from cfg.seed (the global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):  # seeded init without touching the global RNG
        torch.manual_seed(cfg.seed)
        model = build_entailment_model(cfg.model, vocab_size, cfg.word_dim, cfg.dim)
    return model.to(device)


def shard_loss(
    model, replica: torch.nn.Module, pairs: EncodedPairs, idx: np.ndarray, cfg: EntailmentConfig, device
) -> torch.Tensor:
    """Return this rank's share of the loss of a global batch of pairs idx: the loss of its shard
    (orderlib.distributed.shard) through `replica` (the model under orderlib.distributed.wrap),
    weighted by (its pairs / the batch's) x ranks, so that the gradient averaged over ranks is the
    whole batch's; a rank that owns no pair of a short last batch runs one with weight 0."""
    rows, own = ddp.shard(len(idx))
    rows = idx[rows[: max(own, 1)]]
    e = replica(*pairs.batch(rows, device))  # (max(own, 1),)
    loss = entailment_loss(model, e, pairs.positive[rows].to(device), cfg.margin)
    return loss * (own * ddp.world_size() / len(idx))


def train_epoch(
    model,
    opt,
    data: EntailmentData,
    cfg: EntailmentConfig,
    epoch: int,
    device,
    progress: bool = False,
    replica: torch.nn.Module | None = None,
) -> float:
    """One pass over the training pairs in batches of `cfg.batch`; returns the mean batch loss. With
    `replica` (see `shard_loss`), this rank trains on its shard of each batch and every rank takes
    the step one process would take."""
    model.train()
    order = np.random.default_rng([cfg.seed, epoch]).permutation(len(data.train))
    total, steps = 0.0, range(0, len(order), cfg.batch)
    for i in tqdm(steps, desc=f"epoch {epoch}", leave=False, disable=not progress):
        idx = order[i : i + cfg.batch]
        if replica is None:
            e = model(*data.train.batch(idx, device))  # (B,)
            loss = entailment_loss(model, e, data.train.positive[idx].to(device), cfg.margin)
        else:
            loss = shard_loss(model, replica, data.train, idx, cfg, device)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        total += loss.item()
    mean = total / max(1, len(steps))
    return mean if replica is None else ddp.average(mean)  # the shares' mean: the batches' mean loss


def train_entailment_model(
    data: EntailmentData,
    cfg: EntailmentConfig,
    device="cpu",
    checkpoint: Path | None = None,
    progress: bool = True,
    distributed: bool = False,
) -> ThresholdResult:
    """Train `cfg.model` with early stopping on held-out accuracy; resume from `checkpoint`. With
    `distributed`, every rank of a torchrun process group calls this alike (its own `device`) and
    trains its shard of each global batch of `cfg.batch` (orderlib.distributed); the checkpoint has
    the key a single-process run of `cfg` has."""
    device = torch.device(device)
    model = seeded_model(cfg, len(data.vocab), device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    replica = ddp.wrap(model) if distributed else None
    matmul = precision.resolve(cfg.matmul, device)
    key = {
        **asdict(cfg),
        "matmul": matmul,
        "code": code_version(__name__),
        "data": fingerprint(
            data.vocab.words,
            *(getattr(s, f) for s in (data.train, data.holdout, data.test) for f in ("p", "pl", "h", "hl", "positive")),
        ),
    }
    with precision.matmul_precision(matmul, device):  # training and its held-out checks; test in fp32
        fitted = fit(
            model,
            opt,
            key,
            lambda epoch: train_epoch(model, opt, data, cfg, epoch, device, progress and ddp.is_main(), replica),
            lambda: held_out(model, data, device),
            "dev_accuracy",
            cfg.epochs,
            cfg.patience,
            checkpoint,
            progress,
            cfg.model,
            distributed,
        )
    ev = entailment_accuracy(model, data, device)
    return ThresholdResult.of(model, fitted, ev)
