import numpy as np
import pytest
import torch

from orderlib.eval.retrieval import evaluate_retrieval, rank_metrics, ranks_of_targets, retrieval_ranks
from orderlib.penalties import order_violation_matrix


def _brute_ranks(pen: np.ndarray, targets: list[list[int]]) -> np.ndarray:
    """Sort each row (stable, ground truths placed after equal non-targets) and take the first
    target's 1-based position."""
    out = []
    for row, tgt in zip(pen, targets):
        is_tgt = np.zeros(len(row), bool)
        is_tgt[tgt] = True
        order = np.lexsort((is_tgt, row))  # by penalty, then non-targets first among ties
        out.append(1 + int(np.flatnonzero(is_tgt[order])[0]))
    return np.array(out)


@pytest.mark.parametrize("block", [None, 1, 3, 100])
def test_ranks_match_brute_force_sort_both_directions(block):
    g = torch.Generator().manual_seed(0)
    im, cap = torch.rand(12, 6, generator=g), torch.rand(60, 6, generator=g)
    im = (im * 4).round() / 4  # coarse values: many exact ties
    cap = (cap * 4).round() / 4
    i2t, t2i = retrieval_ranks(im, cap, "order", 5, block)
    pen = order_violation_matrix(im, cap).numpy()  # (12, 60)
    assert np.array_equal(i2t.numpy(), _brute_ranks(pen, [list(range(5 * i, 5 * i + 5)) for i in range(12)]))
    assert np.array_equal(t2i.numpy(), _brute_ranks(pen.T, [[j // 5] for j in range(60)]))


def test_ties_count_against_the_model():
    pen = torch.zeros(1, 4)  # every candidate ties with the target
    ranks = ranks_of_targets(lambda r: pen[r], 1, 4, torch.tensor([[2]]))
    assert ranks.tolist() == [4]
    ranks = ranks_of_targets(lambda r: pen[r], 1, 4, torch.tensor([[0, 1, 2]]))  # several targets
    assert ranks.tolist() == [2]


def test_perfect_embeddings_score_full_marks():
    # Images exactly at their captions: order violation 0 for the own pair only if others differ.
    g = torch.Generator().manual_seed(1)
    im = torch.rand(20, 8, generator=g) * 10
    cap = im.repeat_interleave(5, 0) - 0.01 * torch.rand(100, 8, generator=g)  # captions just below
    res = evaluate_retrieval(im, cap, "cosine")
    assert res["caption retrieval"]["R@1"] == 100.0 and res["image retrieval"]["R@1"] == 100.0
    assert res["rsum"] == 600.0
    assert res["caption retrieval"]["median rank"] == 1.0


def test_rank_metrics_values():
    m = rank_metrics(torch.tensor([1, 2, 6, 11]))
    assert m["R@1"] == 25.0 and m["R@5"] == 50.0 and m["R@10"] == 75.0
    assert m["median rank"] == 4.0  # floor of 4.0 (median of 2 and 6)
    assert m["mean rank"] == 5.0


def test_folds_average_and_errors():
    g = torch.Generator().manual_seed(2)
    im, cap = torch.rand(10, 4, generator=g), torch.rand(50, 4, generator=g)
    two = evaluate_retrieval(im, cap, "order", folds=2)
    a = evaluate_retrieval(im[:5], cap[:25], "order")
    b = evaluate_retrieval(im[5:], cap[25:], "order")
    for task in ("caption retrieval", "image retrieval"):
        for k, v in two[task].items():
            assert v == pytest.approx((a[task][k] + b[task][k]) / 2)
    with pytest.raises(ValueError, match="equal folds"):
        evaluate_retrieval(im, cap, folds=3)
    with pytest.raises(ValueError, match="captions for"):
        retrieval_ranks(im, cap[:49])


def test_evaluation_holds_one_bounded_block_of_the_penalty_matrix_at_a_time(monkeypatch):
    """The full images x captions matrix never exists: each block of query rows is at most the
    working-set budget (ORDERLIB_CHUNK_BYTES), and block-wise ranks equal one-block ranks."""
    g = torch.Generator().manual_seed(3)
    im, cap = torch.rand(300, 16, generator=g), torch.rand(1500, 16, generator=g)
    budget = 64 * 1024
    monkeypatch.setenv("ORDERLIB_CHUNK_BYTES", str(budget))
    blocks = []

    def recording(x, y):
        out = order_violation_matrix(x, y)
        blocks.append(out.numel())
        return out

    i2t, t2i = retrieval_ranks(im, cap, recording, 5)
    assert max(blocks) * 8 <= budget  # 8 bytes per entry: penalties and comparisons
    assert len(blocks) > 10
    ref_i2t, ref_t2i = retrieval_ranks(im, cap, "order", 5, block=10**6)
    assert torch.equal(i2t, ref_i2t) and torch.equal(t2i, ref_t2i)
