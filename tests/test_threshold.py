import numpy as np
import pytest

from orderlib.eval.threshold import best_threshold, threshold_accuracy


def brute_force(e, y):
    cands = np.r_[e.min() - 1, np.unique(e)]
    return max(((e <= t) == y).mean() for t in cands)


@pytest.mark.parametrize("seed", range(20))
def test_best_threshold_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    e = rng.integers(0, 8, size=n).astype(float)  # many ties
    y = rng.random(n) < 0.5
    tau, acc = best_threshold(e, y)
    assert acc == pytest.approx(brute_force(e, y))
    assert threshold_accuracy(e, y, tau) == pytest.approx(acc)


def test_ties_are_never_split():
    e = np.array([1.0, 1.0, 1.0, 2.0])
    y = np.array([True, False, True, False])
    tau, acc = best_threshold(e, y)
    assert acc == pytest.approx(0.75) and 1.0 <= tau < 2.0


def test_bad_input():
    with pytest.raises(ValueError):
        best_threshold(np.array([1.0, np.nan]), np.array([True, False]))
    with pytest.raises(ValueError):
        best_threshold(np.array([1.0]), np.array([True, False]))


def test_roc_points_hand_case_and_ties():
    from orderlib.eval.threshold import roc_points

    fpr, tpr = roc_points([0.1, 0.2, 0.2, 0.9], [True, True, False, False])
    # cuts: none positive; after 0.1; after both 0.2s (a tie is never split); all positive
    assert fpr.tolist() == [0.0, 0.0, 0.5, 1.0] and tpr.tolist() == [0.0, 0.5, 1.0, 1.0]
