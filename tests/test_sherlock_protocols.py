"""The two evaluation protocols of Sherlock's authors (eval/metrics of mhelhoseiny/sherlock) on
hand-made cases: `strict` (GetSherlockResults.m) and `implied` (GetSherlockResults_notharsh_v2.m),
and AP@100 as calcAP.m computes it."""

import types

import numpy as np
import pytest
import torch

from orderlib.data.facts import Fact, implies
from orderlib.encoders.sherlock import structured_distance
from orderlib.eval.facts import (
    ALL,
    average_precision,
    fact_map,
    fact_scores,
    flexible_relevance,
    implied_chance,
    implied_hits,
    implied_topk,
    implied_truth,
    retrieval_rows,
    slot_scores,
)
from orderlib.experiments import sherlock as exp

FACTS = [Fact("a"), Fact("a", "on"), Fact("a", "on", "b"), Fact("b"), Fact("b", "red"), Fact("a", "red")]


def small_task(image_fact):
    return exp.FactTask(
        FACTS,
        np.ones(len(FACTS), np.int64),
        None,
        types.SimpleNamespace(fact=np.asarray(image_fact)),
        None,
        None,
        torch.tensor([f.order for f in FACTS]),
        {},
    )


def test_ap_at_100_divides_by_the_relevant_images_found_there():
    """3 relevant images at ranks 1, 50 and 120 of 150: calcAP.m's AP@100 is (1/1 + 2/50) / 2."""
    dist = torch.arange(150, dtype=torch.float64)[None]  # rank r+1 for image r
    rel = torch.zeros(1, 150, dtype=torch.bool)
    rel[0, [0, 49, 119]] = True
    assert average_precision(dist, rel, top=100)[0] == pytest.approx((1 + 2 / 50) / 2)
    assert average_precision(dist, rel, top=100, normalise="min(R,top)")[0] == pytest.approx((1 + 2 / 50) / 3)
    assert average_precision(dist, rel)[0] == pytest.approx((1 + 2 / 50 + 3 / 120) / 3)
    none = torch.zeros(1, 150, dtype=torch.bool)
    none[0, 140] = True  # relevant, but not in the top 100: calcAP.m returns 0 (and the fact stays in the mean)
    assert average_precision(dist, none, top=100)[0] == 0.0
    assert fact_map(torch.cat([dist, dist]), None, None, 100, relevant=torch.cat([rel, none])) == pytest.approx(
        100 * (1 + 2 / 50) / 2 / 2
    )


def test_own_subject_ranked_first_misses_strict_k1_but_hits_implied():
    """An <a, on, b> image whose <a> is nearest: no K1 under strict (its own fact is its only
    answer), K1 under implied (its true facts <a>, <a, on> and itself are each found within 1 + 3 - 1)."""
    img = [2, 0, 4]  # images of <a, on, b>, <a> and <b, red>
    dist = torch.tensor(
        [
            [0.1, 0.2, 0.3, 0.9, 0.9, 0.9],  # <a>, then <a, on>, then its own fact
            [0.1, 0.5, 0.5, 0.9, 0.9, 0.9],
            [0.9, 0.9, 0.9, 0.2, 0.1, 0.9],
        ]
    )
    task = small_task(img)
    rows = {
        (r["protocol"], r["metric"]): r["ours"]
        for r in retrieval_rows("m", dist, task)
        if r["scope"] == "order 3" and r["candidates"] == ALL
    }
    assert rows[("strict", "K1")] == 0.0
    truth = implied_truth(implies(FACTS), img[:1])
    assert truth[0].tolist() == [True, True, True, False, False, False]
    assert implied_topk(-dist[:1], truth, ks=(1,))["K1"] == 100.0
    assert implied_topk(-dist[:1], torch.eye(6, dtype=torch.bool)[img[:1]], ks=(1,))["K1"] == 0.0  # own fact only
    assert rows[("implied", "K1")] == 100.0  # per-fact euc here: <a, on>, <a, on, b>, then <a> (tied) first


def test_rank_offset_with_several_true_facts():
    """Three true facts at ranks 1, 4 and 7: rank minus the true facts above is 1, 3 and 5; the v2
    rule finds a fact within k when that is <= k + 3 - 1."""
    scores = -torch.arange(1, 10, dtype=torch.float64)[None]  # candidate j at rank j + 1
    truth = torch.zeros(1, 9, dtype=torch.bool)
    truth[0, [0, 3, 6]] = True
    hits = implied_hits(scores, truth, ks=(1, 2, 3))
    assert [float(hits[k][0]) for k in (1, 2, 3)] == pytest.approx([2 / 3, 2 / 3, 1.0])
    one = torch.zeros(1, 9, dtype=torch.bool)
    one[0, 1] = True  # a single true fact: plain top-k
    assert [float(implied_hits(scores, one, ks=(1, 2))[k][0]) for k in (1, 2)] == [0.0, 1.0]
    # ties: equal scores rank in index order (MATLAB's stable sort)
    tied = torch.zeros(1, 9, dtype=torch.float64)
    assert float(implied_hits(tied, one, ks=(1,))[1][0]) == 0.0


def test_flexible_relevance_of_an_s_query():
    """<a> is relevant to every image whose subject is a; <a, on> to its <a, on, b> images; <a, on, b> to its own."""
    img = [0, 1, 2, 3, 4, 5]  # one image of each fact
    rel = flexible_relevance(implies(FACTS), img, [0, 1, 2, 3])
    assert rel.tolist() == [
        [True, True, True, False, False, True],
        [False, True, True, False, False, False],
        [False, False, True, False, False, False],
        [False, False, False, True, True, False],
    ]
    dist = torch.tensor([[0.5, 0.1, 0.9, 0.2, 0.3, 0.4]]).T.repeat(1, 6)  # every fact ranks the images alike
    task = small_task(img)
    ap = {
        r["protocol"]: r["ours"]
        for r in retrieval_rows("m", dist.T.T, task)
        if r["scope"] == "order 1" and r["metric"] == "mAP"
    }
    # <a>'s images rank 5th (strict: its own only), and 1st, 4th, 5th, 6th among a's subject images (implied);
    # <b>'s own ranks 2nd, its <b, red> image 3rd
    strict = (1 / 5 + 1 / 2) / 2
    implied = ((1 + 2 / 4 + 3 / 5 + 4 / 6) / 4 + (1 / 2 + 2 / 3) / 2) / 2
    assert ap["strict"] == pytest.approx(100 * strict) and ap["implied"] == pytest.approx(100 * implied)


def test_per_fact_euc_score_changes_the_ranking():
    """Image 0 is nearer to fact A (d^2 1) than to B (d^2 2), but A's median distance is 0.5 and B's
    4: exp(-1 / 0.5) < exp(-2 / 32), so B ranks first under the per-fact `euc` score."""
    d2 = torch.tensor([[1.0, 2.0], [0.25, 16.0], [0.25, 16.0]])
    s = fact_scores(d2)
    assert torch.exp(s[0]).tolist() == pytest.approx([np.exp(-2.0), np.exp(-1 / 16)])
    assert int(d2[0].argmin()) == 0 and int(s[0].argmax()) == 1
    # the median of an even count averages the middle two, as MATLAB's
    assert torch.exp(fact_scores(torch.tensor([[1.0], [9.0]]))).flatten().tolist() == pytest.approx(
        [np.exp(-1 / 8), np.exp(-9 / 8)]
    )


def test_slot_scores_compare_on_the_facts_own_slots_in_blocks():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(7, 3, 4, generator=g)
    orders = torch.tensor([1, 2, 3, 3])
    l = torch.randn(4, 3, 4, generator=g) * (torch.arange(3)[None] < orders[:, None])[..., None]  # wild-cards zero
    euc = slot_scores(v, l, orders, "euc", block=3)
    assert torch.allclose(euc, fact_scores(structured_distance(v, l, orders).double()), atol=1e-6)
    cos = slot_scores(v, l, orders, "cos", block=2)
    first = torch.nn.functional.cosine_similarity(v[:, 0].double(), l[0, 0].double()[None], dim=1)  # <S>: S only
    full = torch.nn.functional.cosine_similarity(v.flatten(1).double(), l[3].flatten().double()[None], dim=1)
    assert torch.allclose(cos[:, 0], first) and torch.allclose(cos[:, 3], full)
    dot = slot_scores(v, l, orders, "dot", block=5)
    assert torch.allclose(dot, (v.flatten(1) @ l.flatten(1).T).double(), atol=1e-5)  # wild-cards are zero in l


def test_implied_chance_matches_random_scores():
    n_true, f, k = np.array([1, 2, 3]), 12, 2
    assert implied_chance([1], f, k) == pytest.approx(100 * k / f)
    g = torch.Generator().manual_seed(0)
    truth = torch.zeros(3, f, dtype=torch.bool)
    for i, n in enumerate(n_true):
        truth[i, :n] = True
    runs = [implied_hits(torch.rand(3, f, generator=g), truth, ks=(k,))[k] for _ in range(4000)]
    assert 100 * float(torch.stack(runs).mean()) == pytest.approx(implied_chance(n_true, f, k), abs=1.0)
