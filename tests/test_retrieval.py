import numpy as np
import pytest
import torch

from orderlib.eval.retrieval import (
    TIES,
    NonFiniteEmbeddings,
    evaluate_retrieval,
    rank_metrics,
    ranks_of_targets,
    retrieval_ranks,
    topk_hits,
)
from orderlib.penalties import order_violation_matrix

NAN = float("nan")


def _brute_ranks(pen: np.ndarray, targets: list[list[int]], ties: str = "pessimistic") -> np.ndarray:
    """Sort each row by penalty, ties broken by the rule (ground truths after equal non-targets,
    before them, or by index: a stable sort), and take the first target's 1-based position."""
    out = []
    for row, tgt in zip(pen, targets):
        is_tgt = np.zeros(len(row), bool)
        is_tgt[tgt] = True
        second = {"pessimistic": is_tgt, "optimistic": ~is_tgt, "index": np.arange(len(row))}[ties]
        order = np.lexsort((second, row))
        out.append(1 + int(np.flatnonzero(is_tgt[order])[0]))
    return np.array(out)


# A hand-made penalty matrix with ties and NaN; low = better. Hand-computed below.
HAND = torch.tensor(
    [
        [0.5, 0.2, 0.2, 0.2, 0.9, 0.1],  # target 2: 1 ahead, tied with 1 and 3
        [0.3, 0.3, 0.3, 0.3, 0.3, 0.3],  # targets 4, 5: all six tied
        [0.0, NAN, NAN, 0.1, 0.1, 0.2],  # targets 1, 2 are NaN: last
        [0.2, NAN, 0.1, NAN, 0.3, 0.2],
    ]
)  # target 5: 1 ahead, tied with 0; NaNs last
HAND_TARGETS = torch.tensor([[2, 4], [4, 5], [1, 2], [5, 4]])  # second targets of rows 0, 3 score worse
HAND_RANKS = {
    "pessimistic": [4, 5, 5, 3],
    "optimistic": [2, 1, 5, 2],
    "index": [3, 5, 5, 3],
    # expected: the first of t targets among t + u shuffled ties sits at (t + u + 1) / (t + 1)
    "expected": [1 + 4 / 2, 7 / 3, 5.0, 1 + 3 / 2],
}


def test_hand_made_ties_give_the_hand_computed_ranks_under_each_rule():
    r = ranks_of_targets(lambda rows: HAND[rows], 4, 6, HAND_TARGETS, block=3)
    for ties, expected in HAND_RANKS.items():
        assert r.ranks(ties).tolist() == pytest.approx(expected), ties
    # Expected R@K = P(rank <= K): q0 reaches rank 2 w.p. 1/3; q1 rank 1 w.p. 1 - C(4,1)/C(6,1) = 1/3.
    assert r.prob_within(1).tolist() == pytest.approx([0, 1 / 3, 0, 0])
    assert r.prob_within(2).tolist() == pytest.approx([1 / 3, 0.6, 0, 0.5])
    m = rank_metrics(r, ks=(1, 4))
    assert m["R@1"] == pytest.approx(100 / 12) and m["R@4"] == pytest.approx(100 * (2 + 14 / 15) / 4)
    assert m["median rank"] == 2.0  # expected CDF: 2nd and 3rd order statistics are 2 and 3 -> floor(2.5)
    assert m["mean rank"] == pytest.approx((3 + 7 / 3 + 5 + 2.5) / 4)
    assert rank_metrics(r, ks=(1,), ties="pessimistic")["R@1"] == 0.0
    assert rank_metrics(r, ks=(1,), ties="optimistic")["R@1"] == 25.0
    assert [rank_metrics(r, ties=t)["median rank"] for t in ("pessimistic", "optimistic", "index")] == [4.0, 2.0, 4.0]


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "index"])
def test_deterministic_rules_match_a_brute_force_sort(ties):
    g = torch.Generator().manual_seed(4)
    im, cap = ((torch.rand(12, 6, generator=g) * 3).round() / 3, (torch.rand(60, 6, generator=g) * 3).round() / 3)
    i2t, t2i = retrieval_ranks(im, cap, "order", 5, block=5)
    pen = order_violation_matrix(im, cap).numpy()
    assert np.array_equal(
        i2t.ranks(ties).numpy(), _brute_ranks(pen, [list(range(5 * i, 5 * i + 5)) for i in range(12)], ties)
    )
    assert np.array_equal(t2i.ranks(ties).numpy(), _brute_ranks(pen.T, [[j // 5] for j in range(60)], ties))


def test_expected_rule_matches_random_tie_breaking_by_simulation():
    g = torch.Generator().manual_seed(5)
    pen = (torch.rand(40, 30, generator=g) * 4).round()  # heavy ties
    targets = torch.stack([torch.randperm(30, generator=g)[:3] for _ in range(40)])  # distinct per query
    r = ranks_of_targets(lambda rows: pen[rows], 40, 30, targets)
    sims, hits = 4000, torch.zeros(40, 3)
    is_tgt = torch.zeros(40, 30, dtype=torch.bool).scatter_(1, targets, True)
    for _ in range(sims):  # shuffle, then a stable sort by penalty: uniformly random tie-breaking
        perm = torch.randperm(30, generator=g)
        order = torch.sort(pen[:, perm], dim=1, stable=True).indices
        first = is_tgt[:, perm].gather(1, order).float().argmax(1) + 1  # (40,) 1-based rank
        hits += torch.stack([(first <= k).float() for k in (1, 3, 8)], 1)
    for j, k in enumerate((1, 3, 8)):
        assert r.prob_within(k).numpy() == pytest.approx((hits[:, j] / sims).numpy(), abs=0.04)


def test_without_ties_every_rule_agrees():
    g = torch.Generator().manual_seed(6)
    im, cap = torch.rand(20, 8, generator=g), torch.rand(100, 8, generator=g)
    res = evaluate_retrieval(im, cap, "order", folds=2, ties=TIES)
    for rule in TIES[1:]:
        assert res[rule] == res["expected"]


def test_nan_never_looks_like_success():
    """NaN penalties rank last; NaN embeddings are refused with the name of what diverged."""
    n = 10
    pen = torch.full((n, n), NAN)
    r = ranks_of_targets(lambda rows: pen[rows], n, n, torch.arange(n)[:, None])
    assert rank_metrics(r, ties="pessimistic")["R@1"] == 0.0
    assert rank_metrics(r)["R@1"] == pytest.approx(100.0 / n)  # chance, not success
    im = torch.rand(4, 3)
    im[1, 0] = NAN
    with pytest.raises(NonFiniteEmbeddings, match=r"order model, dev split: 1 of 4 images"):
        evaluate_retrieval(im, torch.rand(20, 3), "cosine", name="order model, dev split")


def test_topk_hits_hand_made_ties():
    pen = torch.tensor([[0.1, 0.2, 0.2, 0.2, 0.5], [0.3, 0.3, 0.3, 0.3, 0.3]])
    rel = torch.tensor([[0, 1, 0, 0, 1], [0, 0, 1, 1, 0]], dtype=torch.bool)
    want = {"expected": [1 / 3, 0.8], "pessimistic": [0, 0], "optimistic": [1, 2], "index": [1, 0]}
    for ties, w in want.items():
        assert topk_hits(pen, rel, 2, ties).tolist() == pytest.approx(w), ties
    distinct = torch.rand(3, 9)
    relevant = torch.rand(3, 9) > 0.5
    top = distinct.topk(4, largest=False).indices
    truth = relevant.gather(1, top).sum(1).double()
    for ties in TIES:
        assert torch.equal(topk_hits(distinct, relevant, 4, ties), truth)


@pytest.mark.parametrize("block", [None, 1, 3, 100])
def test_ranks_match_brute_force_sort_both_directions(block):
    g = torch.Generator().manual_seed(0)
    im, cap = torch.rand(12, 6, generator=g), torch.rand(60, 6, generator=g)
    im = (im * 4).round() / 4  # coarse values: many exact ties
    cap = (cap * 4).round() / 4
    i2t, t2i = retrieval_ranks(im, cap, "order", 5, block)
    pen = order_violation_matrix(im, cap).numpy()  # (12, 60)
    assert np.array_equal(i2t.ranks().numpy(), _brute_ranks(pen, [list(range(5 * i, 5 * i + 5)) for i in range(12)]))
    assert np.array_equal(t2i.ranks().numpy(), _brute_ranks(pen.T, [[j // 5] for j in range(60)]))


def test_pessimistic_ties_count_against_the_model():
    pen = torch.zeros(1, 4)  # every candidate ties with the target
    ranks = ranks_of_targets(lambda r: pen[r], 1, 4, torch.tensor([[2]]))
    assert ranks.ranks("pessimistic").tolist() == [4] and ranks.ranks("optimistic").tolist() == [1]
    ranks = ranks_of_targets(lambda r: pen[r], 1, 4, torch.tensor([[0, 1, 2]]))  # several targets
    assert ranks.ranks("pessimistic").tolist() == [2] and ranks.ranks("expected").tolist() == [1.25]


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
    assert max(blocks) * 16 <= budget  # 16 bytes per entry: penalties and comparisons
    assert len(blocks) > 10
    ref_i2t, ref_t2i = retrieval_ranks(im, cap, "order", 5, block=10**6)
    assert i2t == ref_i2t and t2i == ref_t2i


def test_index_rule_is_the_reference_loop_with_a_stable_sort():
    """The authors' evaluation sorts each query's errors (numpy.argsort, ascending) and takes the
    first position of a ground truth; with a stable sort that is the "index" rule, ties and all."""
    g = torch.Generator().manual_seed(11)
    im, cap = (torch.rand(30, 5, generator=g) * 3).round() / 3, (torch.rand(150, 5, generator=g) * 3).round() / 3
    pen = order_violation_matrix(im, cap).numpy()  # (30, 150), many exact ties
    i2t_ref = [
        1 + min(int(np.flatnonzero(np.argsort(pen[i], kind="stable") == j)[0]) for j in range(5 * i, 5 * i + 5))
        for i in range(30)
    ]
    t2i_ref = [1 + int(np.flatnonzero(np.argsort(pen[:, j], kind="stable") == j // 5)[0]) for j in range(150)]
    i2t, t2i = retrieval_ranks(im, cap, "order", 5)
    assert i2t.ranks("index").tolist() == i2t_ref and t2i.ranks("index").tolist() == t2i_ref
    assert (i2t.tied > 0).any()  # the case is not trivial
    # R@K under "index" is the reference code's 100 * mean(rank0 < K)
    m = rank_metrics(i2t, ties="index")
    assert m["R@5"] == pytest.approx(100 * np.mean(np.array(i2t_ref) - 1 < 5))
    assert m["median rank"] == np.floor(np.median(np.array(i2t_ref) - 1)) + 1
