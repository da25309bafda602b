"""The evaluation against sklearn.metrics, torchmetrics and scipy wherever their conventions coincide.

Where they differ, on purpose: sklearn's AP pools tied scores into one threshold and torchmetrics
breaks ties in an unspecified order, so those comparisons use tie-free scores; torchmetrics (1.9)
counts a relevant item only where its score is > 0, so penalties (low = good) are passed as the
positive scores `_positive(p)`. The tie rules are checked against scipy's rankdata methods and
sklearn's top_k_accuracy_score, whose deterministic rule (higher index first) is ours ("index",
lower index first) with the columns reversed.
"""

import numpy as np
import pytest
import torch
from scipy.stats import rankdata
from sklearn.metrics import accuracy_score, auc, average_precision_score, roc_curve, top_k_accuracy_score
from torchmetrics.functional.retrieval import (
    retrieval_average_precision,
    retrieval_hit_rate,
    retrieval_precision,
    retrieval_reciprocal_rank,
)
from torchmetrics.retrieval import RetrievalHitRate, RetrievalMAP, RetrievalMRR, RetrievalRecall

from orderlib.eval.compositional import generalised_sweep, topk_accuracy
from orderlib.eval.facts import average_precision, fact_map, implied_hits
from orderlib.eval.hierarchy import hit_at_k
from orderlib.eval.retrieval import (
    TIES,
    evaluate_retrieval,
    rank_metrics,
    ranks_of_targets,
    retrieval_ranks,
    topk_hits,
)
from orderlib.eval.threshold import best_threshold, roc_points, threshold_accuracy
from orderlib.penalties import cosine_distance_matrix


def _positive(penalties: torch.Tensor) -> torch.Tensor:
    """Scores for torchmetrics: high = good and > 0 everywhere, in the penalties' order."""
    return 1.0 / (1.0 + penalties - penalties.min())


def _relevant(rng, shape, rate=0.2) -> np.ndarray:
    rel = rng.random(shape) < rate
    rel[np.arange(shape[0]), rng.integers(0, shape[1], shape[0])] = True  # every query has one
    return rel


# --- average precision (orderlib.eval.facts) ---------------------------------------------------


def test_average_precision_is_sklearns_without_ties():
    rng = np.random.default_rng(0)
    dist, rel = rng.random((25, 60)), _relevant(rng, (25, 60))
    ours = average_precision(torch.as_tensor(dist), torch.as_tensor(rel))
    theirs = [average_precision_score(r, -d) for d, r in zip(dist, rel)]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("top", [None, 1, 5, 20])
def test_average_precision_at_top_is_torchmetrics(top):
    """calcAP.m's AP@top (divided by the relevant found in the top) is torchmetrics' top_k AP."""
    rng = np.random.default_rng(1)
    dist, rel = torch.as_tensor(rng.random((25, 60))), torch.as_tensor(_relevant(rng, (25, 60), 0.1))
    ours = average_precision(dist, rel, top)
    theirs = [float(retrieval_average_precision(_positive(d), r, top_k=top)) for d, r in zip(dist, rel)]
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_fact_map_is_torchmetrics_retrieval_map():
    rng = np.random.default_rng(2)
    dist = torch.as_tensor(rng.random((12, 80)))
    image_fact, query_facts = torch.as_tensor(rng.integers(0, 10, 80)), torch.arange(12)
    rel = query_facts[:, None] == image_fact[None, :]  # facts 10 and 11 have no image: both skip them
    assert not rel.any(1).all()
    indexes = torch.arange(12)[:, None].expand(12, 80)
    for top in (None, 10):
        metric = RetrievalMAP(empty_target_action="skip", top_k=top)
        theirs = 100 * float(metric(_positive(dist).flatten(), rel.flatten(), indexes=indexes.flatten()))
        assert fact_map(dist, image_fact, query_facts, top) == pytest.approx(theirs, rel=1e-6)


# --- threshold classification (orderlib.eval.threshold) ----------------------------------------


def test_roc_points_are_sklearns_roc_curve_with_ties():
    rng = np.random.default_rng(3)
    energies = rng.integers(0, 12, 200) / 4.0  # many ties: both cut only between distinct energies
    labels = rng.random(200) < 0.4
    fpr, tpr = roc_points(energies, labels)
    sk_fpr, sk_tpr, _ = roc_curve(labels, -energies, drop_intermediate=False)  # positive iff E <= tau
    np.testing.assert_array_equal(fpr, sk_fpr)
    np.testing.assert_array_equal(tpr, sk_tpr)


def test_best_threshold_is_the_best_accuracy_on_sklearns_roc_curve():
    rng = np.random.default_rng(4)
    for energies in (rng.normal(size=150), rng.integers(0, 8, 150).astype(float)):
        labels = rng.random(150) < 0.5 + 0.2 * np.tanh(-energies)
        tau, acc = best_threshold(energies, labels)
        fpr, tpr, _ = roc_curve(labels, -energies, drop_intermediate=False)
        pos, neg = labels.sum(), (~labels).sum()
        assert acc == pytest.approx(float(np.max(tpr * pos + (1 - fpr) * neg)) / len(labels), abs=1e-12)
        assert acc == threshold_accuracy(energies, labels, tau) == accuracy_score(labels, energies <= tau)


# --- ranks, Recall@K, median and mean rank (orderlib.eval.retrieval) ---------------------------


def _tied_penalties(rng, q, m):
    return torch.as_tensor(rng.integers(0, 6, (q, m)).astype(np.float64))  # ties at every place


@pytest.mark.parametrize("targets_per_query", [1, 3])
def test_ranks_under_each_tie_rule_are_scipys_rankdata(targets_per_query):
    """optimistic = rankdata "min", index = "ordinal" (always); with one target per query also
    pessimistic = "max" and expected = "average" (with several tied targets those count the
    other targets as ahead, ours do not)."""
    rng = np.random.default_rng(5)
    q, m = 300, 40
    p = _tied_penalties(rng, q, m)
    targets = torch.as_tensor(np.stack([rng.choice(m, targets_per_query, replace=False) for _ in range(q)]))
    counted = ranks_of_targets(lambda rows: p[rows], q, m, targets)
    methods = {"optimistic": "min", "index": "ordinal"}
    if targets_per_query == 1:
        methods.update(pessimistic="max", expected="average")
    for rule, method in methods.items():
        scipy_ranks = np.array([rankdata(p[i].numpy(), method=method)[targets[i].numpy()].min() for i in range(q)])
        np.testing.assert_allclose(counted.ranks(rule).numpy(), scipy_ranks, err_msg=rule)
        metrics = rank_metrics(counted, ks=(1, 5, 10), ties=rule)
        assert metrics["mean rank"] == pytest.approx(scipy_ranks.mean(), rel=1e-12), rule
        if rule != "expected":  # the expected rule's median is that of the rank distribution
            assert metrics["median rank"] == np.floor(np.median(scipy_ranks)), rule
            for k in (1, 5, 10):
                assert metrics[f"R@{k}"] == pytest.approx(100 * np.mean(scipy_ranks <= k), abs=1e-9), (rule, k)


def test_recall_at_k_and_reciprocal_rank_are_torchmetrics():
    """Both retrieval directions of image-caption embeddings (tie-free): caption retrieval's R@K is
    torchmetrics' hit rate (any of the 5 captions), image retrieval's its recall (one image)."""
    gen = torch.Generator().manual_seed(6)
    n, k = 30, 5
    images = torch.randn(n, 8, generator=gen, dtype=torch.float64)
    captions = images.repeat_interleave(k, 0) + torch.randn(n * k, 8, generator=gen, dtype=torch.float64)
    p = cosine_distance_matrix(images, captions)  # (N, 5N)
    relevant = torch.arange(n)[:, None] == torch.arange(n * k)[None, :] // k
    found = evaluate_retrieval(images, captions, "cosine", ties=TIES)
    i2t, t2i = retrieval_ranks(images, captions, "cosine")
    sides = {
        "caption retrieval": (p, relevant, RetrievalHitRate, i2t),
        "image retrieval": (p.T, relevant.T, RetrievalRecall, t2i),
    }
    for side, (pen, rel, metric, counted) in sides.items():
        indexes = torch.arange(pen.shape[0])[:, None].expand_as(pen).flatten()
        preds, target = _positive(pen).flatten(), rel.flatten()
        for top in (1, 5, 10):
            theirs = 100 * float(metric(top_k=top)(preds, target, indexes=indexes))
            for rule in TIES:  # no ties: every rule gives the same
                assert found[rule][side][f"R@{top}"] == pytest.approx(theirs, rel=1e-6), (side, rule, top)
        mrr = float(RetrievalMRR()(preds, target, indexes=indexes))
        assert float((1.0 / counted.ranks("pessimistic").double()).mean()) == pytest.approx(mrr, rel=1e-6), side


def test_topk_hits_is_torchmetrics_precision_and_hit_rate():
    rng = np.random.default_rng(7)
    pen, rel = torch.as_tensor(rng.random((40, 50))), torch.as_tensor(_relevant(rng, (40, 50), 0.15))
    for k in (1, 3, 10):
        hits = topk_hits(pen, rel, k)
        precision = [float(retrieval_precision(_positive(p), r, top_k=k)) for p, r in zip(pen, rel)]
        np.testing.assert_allclose(hits.numpy() / k, precision, rtol=1e-6)
        hit_rate = [float(retrieval_hit_rate(_positive(p), r, top_k=k)) for p, r in zip(pen, rel)]
        np.testing.assert_array_equal((hits > 0).double().numpy(), hit_rate)
    mrr = [float(retrieval_reciprocal_rank(_positive(p), r)) for p, r in zip(pen, rel)]
    targets = [torch.nonzero(r).flatten() for r in rel]
    ranks = [int((pen[i] < pen[i, t].min()).sum()) + 1 for i, t in enumerate(targets)]
    np.testing.assert_allclose(1.0 / np.array(ranks), mrr, rtol=1e-6)


# --- top-k accuracy (compositional, hierarchy, facts) with ties: sklearn's top_k_accuracy_score ----


def _sklearn_index_rule(scores: np.ndarray, target: np.ndarray, k: int) -> float:
    """sklearn's top-k accuracy under our "index" tie rule: it puts the higher index first among
    equal scores, so reverse the columns (class c becomes m - 1 - c)."""
    m = scores.shape[1]
    return 100 * top_k_accuracy_score(m - 1 - target, scores[:, ::-1], k=k, labels=np.arange(m))


def test_topk_accuracy_hit_at_k_and_implied_hits_are_sklearns_with_ties():
    rng = np.random.default_rng(8)
    scores = rng.integers(0, 5, (400, 12)).astype(np.float64)  # ties at every place
    target = rng.integers(0, 12, 400)
    ours = topk_accuracy(torch.as_tensor(scores), torch.as_tensor(target), ks=(1, 2, 3, 5), ties="index")
    ranked = np.argsort(-scores, axis=1, kind="stable")  # best first, lower index first among ties
    hits = hit_at_k(ranked, target, ks=(1, 2, 3, 5))
    truth = torch.zeros(400, 12, dtype=torch.bool)
    truth[torch.arange(400), torch.as_tensor(target)] = True  # one true fact each: plain top-k
    implied = implied_hits(torch.as_tensor(scores), truth, ks=(1, 2, 3, 5))
    for k in (1, 2, 3, 5):
        theirs = _sklearn_index_rule(scores, target, k)
        assert ours[f"top-{k}"] == pytest.approx(theirs, abs=1e-9), k
        assert hits[f"hit@{k}"] == pytest.approx(theirs, abs=1e-9), k
        assert 100 * float(implied[k].mean()) == pytest.approx(theirs, abs=1e-9), k
    assert topk_accuracy(torch.as_tensor(scores), torch.as_tensor(target), ks=(1,))["top-1"] != pytest.approx(
        _sklearn_index_rule(scores, target, 1)
    )  # the default ("expected") rule differs where ties matter


def _brute_force_sweep(scores: np.ndarray, target: np.ndarray, unseen: np.ndarray):
    """The generalised sweep computed without the library: every bias at which some image's
    prediction changes group (its best seen score minus its best unseen score) bounds an interval;
    at one bias inside each interval (and beyond both ends) add the bias to the unseen candidates,
    take each image's argmax and score it with sklearn's accuracy_score over the seen-pair and the
    unseen-pair images. Returns (biases, seen %, unseen %) in rising-bias order."""
    switch = np.unique(scores[:, ~unseen].max(1) - scores[:, unseen].max(1))
    biases = np.r_[switch[0] - 1.0, (switch[:-1] + switch[1:]) / 2, switch[-1] + 1.0]
    of_seen = ~unseen[target]
    seen_acc, unseen_acc = [], []
    for b in biases:
        pred = (scores + b * unseen).argmax(1)
        seen_acc.append(100 * accuracy_score(target[of_seen], pred[of_seen]))
        unseen_acc.append(100 * accuracy_score(target[~of_seen], pred[~of_seen]))
    return biases, np.array(seen_acc), np.array(unseen_acc)


def test_generalised_sweep_auc_is_sklearns_auc_along_the_curve():
    """The exact sweep against a brute-force one (argmax at every bias between two switch points,
    sklearn's accuracy_score, sklearn's trapezoidal `auc`): the same points on the seen-unseen
    curve, the same best seen, unseen and harmonic mean, the same area."""
    rng = np.random.default_rng(9)
    scores, target = rng.normal(size=(300, 20)), rng.integers(0, 20, 300)
    unseen = np.arange(20) >= 12
    exact = generalised_sweep(torch.as_tensor(scores), torch.as_tensor(target), torch.as_tensor(unseen))
    _, seen_ref, unseen_ref = _brute_force_sweep(scores, target, unseen)
    assert (np.diff(seen_ref) <= 0).all() and (np.diff(unseen_ref) >= 0).all()  # a monotone path
    seen_acc, unseen_acc = exact["curve"]
    assert len(seen_acc) > 10 and len(set(zip(seen_ref, unseen_ref))) > 10
    points = lambda s, u: sorted({(round(float(a), 9), round(float(b), 9)) for a, b in zip(s, u)})
    assert points(seen_acc, unseen_acc) == points(seen_ref, unseen_ref)
    hm = 2 * seen_ref * unseen_ref / np.maximum(seen_ref + unseen_ref, 1e-12)
    assert exact["best seen"] == pytest.approx(seen_ref.max())
    assert exact["best unseen"] == pytest.approx(unseen_ref.max())
    assert exact["best hm"] == pytest.approx(hm.max())
    assert exact["auc"] == pytest.approx(auc(seen_ref, unseen_ref) / 100, rel=1e-12)
    at_best = (scores + exact["bias"] * unseen).argmax(1)  # the reported bias gives the best harmonic mean
    s = 100 * accuracy_score(target[~unseen[target]], at_best[~unseen[target]])
    u = 100 * accuracy_score(target[unseen[target]], at_best[unseen[target]])
    assert 2 * s * u / (s + u) == pytest.approx(hm.max())
