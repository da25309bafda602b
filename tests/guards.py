"""Shared guards: test data never chooses, and a checkpoint is reused only for the same inputs.

`assert_test_blind` trains twice, on the data and on the data with its test split corrupted, and
asserts that everything chosen or measured before test (the training history, the chosen epoch,
threshold, bias or grid point, every dev score) is identical, while the test metrics move: the
corruption reached the test split, so the guard is not vacuous.

`assert_key_covers` trains once with a checkpoint, then once per changed input (each must train
anew) and once with nothing changed (which must load).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def _same(a: Any, b: Any, what: str) -> None:
    assert a == b, f"{what} changed when only the test split did:\n  {a!r}\n  {b!r}"


def assert_test_blind(
    train: Callable[[Any], Any],
    data: Any,
    corrupt: Callable[[Any], Any],
    *,
    history: Callable[[Any], Any],
    chosen: Callable[[Any], Any],
    dev: Callable[[Any], Any],
    test: Callable[[Any], Any],
) -> tuple[Any, Any]:
    """Train on `data` and on `corrupt(data)` (the same data with its test split corrupted or
    permuted); assert equal `history`, `chosen` and `dev` (functions of a run's result) and a
    different `test`. Returns both results."""
    a, b = train(data), train(corrupt(data))
    _same(history(a), history(b), "the training history")
    _same(chosen(a), chosen(b), "the choice (epoch, threshold, bias or grid point)")
    _same(dev(a), dev(b), "the dev scores")
    assert test(a) != test(b), "the test metrics did not move: the corruption never reached the test split"
    return a, b


def assert_key_covers(
    train: Callable[[Any, Path], Any],
    base: Any,
    changes: dict[str, Callable[[Any], Any]],
    checkpoint: Path,
    resumed: Callable[[Any], bool],
) -> None:
    """`train(inputs, checkpoint)` once on `base`; then for each named change, train on
    `change(base)` with the same checkpoint path and assert it did not load (`resumed` is False);
    finally train on `base` again and assert it loaded. Each change is checked from a checkpoint
    of `base`, so one change cannot mask another."""
    train(base, checkpoint)
    for name, change in changes.items():
        train(base, checkpoint)  # the checkpoint holds `base` again
        assert not resumed(train(change(base), checkpoint)), f"changing {name} reused the checkpoint"
    train(base, checkpoint)
    assert resumed(train(base, checkpoint)), "the same inputs did not load the checkpoint"
