"""Checkpoint selection rules, applied after the fact to a run's evaluation records."""

from __future__ import annotations


def choose_checkpoint(
    records: list[dict],
    by: str = "dev",
    epoch_ends_only: bool = False,
    patience: int | None = None,
    epochs: int | None = None,
) -> dict:
    """Return the record a selection rule keeps from `records` (dicts with `epoch`, `epoch_end`
    and the score `by`, in training order): the first with the highest `by`.

    `epoch_ends_only` looks at the evaluations after each epoch only; `epochs` at the first
    `epochs` epochs only; `patience` stops, as orderlib.training.fit does, once that many epochs
    pass after the best epoch-end evaluation without a higher one (epoch ends only).
    """
    if patience is not None and not epoch_ends_only:
        raise ValueError("patience counts epochs: use it with epoch_ends_only=True")
    best = None
    for r in records:
        if epochs is not None and r["epoch"] >= epochs:
            break
        if epoch_ends_only and not r["epoch_end"]:
            continue
        if best is None or r[by] > best[by]:
            best = r
        if patience is not None and r["epoch"] - best["epoch"] >= patience:
            break
    if best is None:
        raise ValueError(f"no evaluation records to choose from (epochs={epochs}, epoch_ends_only={epoch_ends_only})")
    return best
