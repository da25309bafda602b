"""Data-parallel training over processes started by `torchrun` (PyTorch's DistributedDataParallel).

Each rank encodes only its shard of a global batch (`shard`); losses over the whole batch (in-batch
negatives) gather the shards' embeddings with gradient (`gather_rows`), so one step matches one
process's. Rank 0 alone evaluates, checkpoints and reports.
"""

from __future__ import annotations

import contextlib
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def launched() -> bool:
    """Whether torchrun started this process (its rendezvous variables are set)."""
    return all(k in os.environ for k in TORCHRUN_ENV)


def active() -> bool:
    """Whether this process has joined a process group."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def is_main() -> bool:
    """Whether this process is rank 0 (or the only process): the one that writes and reports."""
    return rank() == 0


def require() -> None:
    """Fail with instructions unless a process group is initialised."""
    if not active():
        raise RuntimeError(
            "distributed training needs a process group: start the script with torchrun "
            "(e.g. `torchrun --nproc_per_node=2 workflow/scripts/train_parallel.py ...`) and run the "
            "training inside orderlib.distributed.process_group(device)"
        )


def local_device(kind: str = "auto") -> torch.device:
    """Return this process's device: cuda:LOCAL_RANK for "cuda" (and for "auto" where CUDA is available), else CPU."""
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cpu":
        return torch.device("cpu")
    if kind != "cuda":
        raise ValueError(
            f"unknown device kind {kind!r}; expected 'auto', 'cpu' or 'cuda' (each process takes cuda:LOCAL_RANK)"
        )
    if not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' asked for, but CUDA is not available here; use 'cpu' (gloo backend)")
    local, count = int(os.environ.get("LOCAL_RANK", 0)), torch.cuda.device_count()
    if local >= count:
        raise RuntimeError(
            f"LOCAL_RANK={local} but only {count} CUDA device(s) are visible: start at most "
            f"{count} processes per machine (torchrun --nproc_per_node={count})"
        )
    return torch.device("cuda", local)


@contextlib.contextmanager
def process_group(device: torch.device, timeout_minutes: float = 30):
    """Join torchrun's process group for the block (NCCL for a CUDA `device`, gloo for CPU), then leave it."""
    if not launched():
        raise RuntimeError(
            f"not started by torchrun ({', '.join(TORCHRUN_ENV)} unset): run "
            "`torchrun --nproc_per_node=N ...` (or python -m torch.distributed.run)"
        )
    if active():
        raise RuntimeError("this process has already joined a process group")
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # NCCL and its object collectives use the current device
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo", timeout=datetime.timedelta(minutes=timeout_minutes)
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def shard(n: int, of: tuple[int, int] | None = None) -> tuple[np.ndarray, int]:
    """Return (positions, own): the positions in a global batch of `n` rows that this rank (rank r of w
    ranks for `of` = (r, w)) encodes, and how many of them, the first ones, are its own. Rank r owns
    the block [r*m, (r+1)*m) of m = ceil(n / w) rows, cut at n (so the last ranks may own fewer, or
    none); it is padded to m rows by repeating a row, so that every rank holds m rows and the first n
    rows of the gathered blocks are the batch in order (`gather_rows`)."""
    r, w = (rank(), world_size()) if of is None else of
    if n < 1 or w < 1 or not 0 <= r < w:
        raise ValueError(f"cannot shard a batch of {n} rows for rank {r} of {w}")
    m = -(-n // w)
    own = np.arange(min(r * m, n), min((r + 1) * m, n))
    pad = np.full(m - len(own), own[-1] if len(own) else 0)
    return np.concatenate([own, pad]).astype(np.int64), len(own)


def gather_rows(x: torch.Tensor, n: int) -> torch.Tensor:
    """Return the (n, ...) rows of a global batch from every rank's padded shard `x` (m, ...) of `shard(n)`,
    in batch order, with gradient flowing back to each rank's own rows: the gather's backward sums every
    rank's gradient for them (each rank's loss may use every row)."""
    # torch.distributed.nn.functional.all_gather does the same, but torch 2.14 deprecates it (a
    # FutureWarning on every call) for all_gather_single, whose backward is a reduce-scatter. It
    # returns an AsyncCollectiveTensor wrapper; wait_tensor (identity for autograd) makes it a plain
    # tensor, which the C++ penalty kernel needs.
    from torch.distributed._functional_collectives import all_gather_single, wait_tensor

    require()
    m, w = x.shape[0], world_size()
    if m != -(-n // w):
        raise ValueError(f"a shard of a {n}-row batch over {w} ranks holds {-(-n // w)} rows, got {m}")
    return wait_tensor(all_gather_single(x.contiguous(), 0, dist.group.WORLD))[:n]


def broadcast(obj):
    """Return rank 0's `obj` (anything picklable) on every rank."""
    require()
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def average(value: float) -> float:
    """Return the mean of `value` over ranks."""
    require()
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor(float(value), dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.item() / world_size()


def wrap(module: torch.nn.Module) -> DistributedDataParallel:
    """Return `module` under DistributedDataParallel on its parameters' device: a backward pass through it
    leaves on every rank the gradient averaged over ranks. Hold the wrapper until after backward: its
    gradient hooks go with it (a temporary one silently averages nothing)."""
    require()
    device = next(module.parameters()).device
    return DistributedDataParallel(module, device_ids=[device] if device.type == "cuda" else None)
