"""Run by tests/test_distributed.py under torchrun, 2 CPU processes on gloo:

    python -m torch.distributed.run --nproc_per_node=2 tests/ddp_worker.py OUT

Each rank checks gather_rows's rows and gradient, one global batch's loss and gradients against one process's (and against two
wrong ways of sharding, which must differ), trains the tiny retrieval and entailment models below
data-parallel (rank 0 checkpointing into OUT), and writes what it found to OUT/rank<r>.pt.
"""

import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from toys import toy_pairs, toy_split

from orderlib import distributed as ddp
from orderlib.encoders.entailment import entailment_loss
from orderlib.losses import in_batch_loss
from orderlib.training.entailment import (
    EntailmentConfig,
    entailment_accuracy,
    seeded_model,
    shard_loss,
    train_entailment_model,
)
from orderlib.training.entailment import prepare as prepare_entailment
from orderlib.training.retrieval import (
    Encoders,
    RetrievalConfig,
    build_model,
    prepare,
    retrieval_metrics_of_model,
    sharded_penalties,
    train_retrieval_model,
)

# 21 training images in batches of 8: the last batch (5) splits 3 + 2, the second rank's shard padded.
RETRIEVAL = RetrievalConfig(word_dim=8, dim=16, batch=8, lr=1e-2, epochs=3, patience=3)
# 33 training pairs in batches of 8: the last batch (1) leaves the second rank no pair of its own.
ENTAILMENT = EntailmentConfig(word_dim=8, dim=16, batch=8, lr=1e-2, epochs=3, patience=3)
BATCHES = (8, 5, 1)  # global batch sizes of the gradient checks: even, uneven, one rank empty


def retrieval_data():
    return prepare({"train": toy_split(21, 0), "dev": toy_split(40, 1), "test": toy_split(40, 2)})


def entailment_data():
    return prepare_entailment(toy_pairs(33, 0), toy_pairs(40, 1), toy_pairs(40, 2))


def _grads(model) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def _relative(model, ref) -> float:
    """Max |grad - ref grad| over all parameters, relative to max |ref grad| (absolute where that is ~0:
    a one-image batch has no negatives)."""
    return float((_grads(model) - _grads(ref)).abs().max() / _grads(ref).abs().max().clamp_min(1e-6))


def _relative_loss(value: float, ref: torch.Tensor) -> float:
    return abs(value - ref.item()) / max(abs(ref.item()), 1e-6)


def _gather_without_gradient(x: torch.Tensor, n: int) -> torch.Tensor:
    """The other ranks' rows as constants, this rank's with gradient: a wrong way to gather."""
    blocks = [torch.empty_like(x) for _ in range(ddp.world_size())]
    dist.all_gather(blocks, x.detach())
    blocks[ddp.rank()] = x
    return torch.cat(blocks)[:n]


def gather_rows_check(n: int) -> dict:
    """gather_rows on known rows: row i of the global batch holds i, and rank r's loss weighs it by
    (i + 1) * (r + 1), so the gradient of an own row i is (i + 1) * sum over ranks of (r + 1) and that of
    a padding row 0. Returns whether the forward is the batch in order and the gradient's max error."""
    rows, own = ddp.shard(n)
    x = torch.tensor(rows, dtype=torch.float64)[:, None].repeat(1, 3).requires_grad_()
    y = ddp.gather_rows(x, n)
    ((y * torch.arange(1.0, n + 1, dtype=torch.float64)[:, None]) * (ddp.rank() + 1)).sum().backward()
    w = ddp.world_size()
    expected = torch.zeros_like(x)
    expected[:own] = torch.tensor(rows[:own] + 1.0, dtype=torch.float64)[:, None] * (w * (w + 1) / 2)
    forward = torch.equal(y.detach(), torch.arange(n, dtype=torch.float64)[:, None].repeat(1, 3))
    return {"forward": forward, "gradient": float((x.grad - expected).abs().max())}


def retrieval_gradients(data, loss: str, n: int) -> dict[str, float]:
    """One global batch of n images: relative loss and gradient differences from one process, of the
    sharded path and (n >= 4) of local negatives only and of a gather without gradient."""
    cfg = RetrievalConfig(**{**vars(RETRIEVAL), "loss": loss})
    split, idx = data.train, np.arange(n)
    caps = idx * 5 + idx % 5

    def fresh():
        return build_model(cfg, len(data.vocab), data.feature_dim, torch.device("cpu"))

    ref = fresh()
    ref_loss = in_batch_loss(ref(split.features[idx], *split.captions(caps, "cpu")), loss, cfg.margin, cfg.temperature)
    ref_loss.backward()
    model = fresh()
    encoders = ddp.wrap(Encoders(model))  # held through backward: its gradient hooks die with it
    e = sharded_penalties(model, encoders, split, idx, caps)  # (n, n)
    sharded_loss = in_batch_loss(e, loss, cfg.margin, cfg.temperature)
    sharded_loss.backward()
    out = {"loss": _relative_loss(sharded_loss.item(), ref_loss), "gradient": _relative(model, ref)}
    if n >= 4:
        rows, own = ddp.shard(n)
        for wrong in ("local negatives", "gathered without gradient"):
            model = fresh()
            encoders = ddp.wrap(Encoders(model))
            ims, cs = encoders(split.features[idx[rows]], *split.captions(caps[rows], "cpu"))
            if wrong == "gathered without gradient":
                ims, cs = _gather_without_gradient(ims, n), _gather_without_gradient(cs, n)
            in_batch_loss(model.penalty_matrix(ims, cs), loss, cfg.margin, cfg.temperature).backward()
            out[wrong] = _relative(model, ref)
    return out


def entailment_gradients(data, n: int) -> dict[str, float]:
    """One global batch of n pairs: relative loss and gradient differences from one process."""
    idx, device = np.arange(n), torch.device("cpu")
    ref = seeded_model(ENTAILMENT, len(data.vocab), device)
    ref_loss = entailment_loss(ref, ref(*data.train.batch(idx, device)), data.train.positive[idx], ENTAILMENT.margin)
    ref_loss.backward()
    model = seeded_model(ENTAILMENT, len(data.vocab), device)
    replica = ddp.wrap(model)  # held through backward: its gradient hooks die with it
    share = shard_loss(model, replica, data.train, idx, ENTAILMENT, device)
    share.backward()
    return {"loss": _relative_loss(ddp.average(share.item()), ref_loss), "gradient": _relative(model, ref)}


def main(out: Path) -> None:
    device = ddp.local_device("cpu")
    with ddp.process_group(device):
        rdata, edata = retrieval_data(), entailment_data()
        found = {
            "world_size": ddp.world_size(),
            "gather_rows": {n: gather_rows_check(n) for n in BATCHES},
            "gradients": {
                **{
                    f"retrieval {loss}, batch {n}": retrieval_gradients(rdata, loss, n)
                    for loss in ("sum", "max", "infonce")
                    for n in BATCHES
                },
                **{f"entailment, batch {n}": entailment_gradients(edata, n) for n in BATCHES},
            },
        }
        r = train_retrieval_model(rdata, RETRIEVAL, device, out / "retrieval.pt", progress=False, distributed=True)
        e = train_entailment_model(edata, ENTAILMENT, device, out / "entailment.pt", progress=False, distributed=True)
        found["retrieval"] = {
            "history": r.history,
            "best_epoch": r.best_epoch,
            "state": r.model.state_dict(),
            "test": retrieval_metrics_of_model(r.model, rdata.test),
        }
        found["entailment"] = {
            "history": e.history,
            "best_epoch": e.best_epoch,
            "state": e.model.state_dict(),
            "test": entailment_accuracy(e.model, edata, device),
        }
        torch.save(found, out / f"rank{ddp.rank()}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
