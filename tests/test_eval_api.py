"""orderlib.eval's public protocols against references: brute force, sklearn and torchmetrics,
the CLI-independent rules (the matrix and embedding routes agree, each protocol's folds), and bad
input as InputError."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score
from torchmetrics.retrieval import RetrievalHitRate, RetrievalRecall

from orderlib.concepts import CONCEPT_MODELS, build_concept_model
from orderlib.data.facts import Fact
from orderlib.encoders.joint import JointEmbedding
from orderlib.errors import InputError
from orderlib.eval import (
    TIES,
    closed_world_topk,
    fact_retrieval,
    hypernymy_metrics,
    pair_energies,
    rank_metrics,
    retrieval_metrics,
    retrieval_metrics_of_embeddings,
)
from orderlib.eval.facts import retrieval_rows
from orderlib.penalties import ENERGIES, MATRIX_ENERGIES

SIDES = ("caption retrieval", "image retrieval")


def brute_ranks(d: np.ndarray, per: int) -> tuple[np.ndarray, np.ndarray]:
    """Ranks of the best target by a stable argsort (ties by index), both directions."""
    n = d.shape[0]
    rank = lambda row, targets: min(np.argsort(row, kind="stable").tolist().index(t) for t in targets) + 1
    i2t = np.array([rank(d[i], range(per * i, per * i + per)) for i in range(n)])
    t2i = np.array([rank(d[:, j], [j // per]) for j in range(per * n)])
    return i2t, t2i


@pytest.mark.parametrize("protocol, fold_size", [("all", 6), ("1k", 2), ("5k", 2)])
def test_retrieval_index_rule_is_a_stable_argsort(protocol, fold_size):
    rng = np.random.default_rng(1)
    n, per = 10, 5
    d = np.round(rng.random((n, n * per)), 1)  # many ties
    r = retrieval_metrics(d, "distance", per, protocol, fold_size if protocol != "all" else 6)
    folds = n // fold_size if protocol == "1k" else 1
    size = n // folds
    want = {side: {k: [] for k in ("R@1", "R@5", "R@10", "mean rank")} for side in SIDES}
    for f in range(folds):
        sub = d[f * size : (f + 1) * size, f * size * per : (f + 1) * size * per]
        for side, ranks in zip(SIDES, brute_ranks(sub, per)):
            for k in (1, 5, 10):
                want[side][f"R@{k}"].append(100 * np.mean(ranks <= k))
            want[side]["mean rank"].append(ranks.mean())
    got = r.metrics("index")
    for side in SIDES:
        for m, values in want[side].items():
            assert got[side][m] == pytest.approx(np.mean(values)), (side, m)
    assert len(r.folds) == folds
    assert got["rsum"] == pytest.approx(sum(got[s][f"R@{k}"] for s in SIDES for k in (1, 5, 10)))


def test_retrieval_rules_bound_each_other_and_kinds_agree():
    rng = np.random.default_rng(2)
    d = np.round(rng.random((8, 16)), 1)
    r = retrieval_metrics(d, captions_per_image=2)
    lo, mid, hi = (r.metrics(t)["rsum"] for t in ("pessimistic", "expected", "optimistic"))
    assert lo <= mid <= hi and lo < hi  # ties: the bounds differ
    assert retrieval_metrics(-d, "similarity", 2).mean == r.mean


@pytest.mark.parametrize("penalty", MATRIX_ENERGIES)
def test_embedding_route_equals_the_matrix_route(penalty):
    gen = torch.Generator().manual_seed(3)
    images, captions = torch.rand(12, 6, generator=gen), torch.rand(60, 6, generator=gen)
    d = ENERGIES[penalty].matrix(images, captions)
    for protocol, fold_size in (("1k", 4), ("all", 12)):
        a = retrieval_metrics_of_embeddings(images, captions, penalty, 5, protocol, fold_size, block=5)
        b = retrieval_metrics(d, "distance", 5, protocol, fold_size)
        assert a.mean == b.mean and a.folds == b.folds and a.rows("m") == b.rows("m")


def test_retrieval_is_torchmetrics_without_ties():
    gen = torch.Generator().manual_seed(6)
    n, k = 30, 5
    images = torch.randn(n, 8, generator=gen, dtype=torch.float64)
    captions = images.repeat_interleave(k, 0) + torch.randn(n * k, 8, generator=gen, dtype=torch.float64)
    p = ENERGIES["cosine"].matrix(images, captions)
    relevant = torch.arange(n)[:, None] == torch.arange(n * k)[None, :] // k
    found = retrieval_metrics(p, "distance", k)
    for side, pen, rel, metric in (
        ("caption retrieval", p, relevant, RetrievalHitRate),
        ("image retrieval", p.T, relevant.T, RetrievalRecall),
    ):
        indexes = torch.arange(pen.shape[0])[:, None].expand_as(pen).flatten()
        preds = (1.0 / (1.0 + pen - pen.min())).flatten()
        for top in (1, 5, 10):
            theirs = 100 * float(metric(top_k=top)(preds, rel.flatten(), indexes=indexes))
            for rule in TIES:
                assert found.metrics(rule)[side][f"R@{top}"] == pytest.approx(theirs, rel=1e-6)


def test_retrieval_bad_input_is_input_error():
    d = np.zeros((10, 50))
    for kwargs, where in (
        (dict(protocol="1k", fold_size=3), "fold_size"),
        (dict(protocol="5k", fold_size=3), "fold_size"),
        (dict(protocol="2k"), "protocol"),
        (dict(kind="score"), "kind"),
        (dict(captions_per_image=4), "scores"),
    ):
        with pytest.raises(InputError) as e:
            retrieval_metrics(d, **kwargs)
        assert e.value.path == where
    with pytest.raises(InputError, match="no all-pairs form"):
        retrieval_metrics_of_embeddings(torch.zeros(2, 3), torch.zeros(10, 3), "cone")
    with pytest.raises(InputError) as e:
        rank_metrics(torch.tensor([1, 2]), ties="best")
    assert e.value.path == "ties"
    with pytest.raises(InputError, match="NaN or inf"):  # NonFiniteEmbeddings is an InputError
        retrieval_metrics_of_embeddings(torch.full((2, 3), float("nan")), torch.zeros(10, 3))
    ints = np.arange(20).reshape(2, 10) % 7  # integers (and numpy embeddings) are read as they come
    assert retrieval_metrics(ints).mean == retrieval_metrics(ints.astype(float)).mean
    x = np.random.default_rng(0).random((2, 3))
    assert retrieval_metrics_of_embeddings(x, np.repeat(x, 5, 0)).metrics()["rsum"] == 600.0


def test_hypernymy_is_sklearn_and_the_best_dev_cut():
    rng = np.random.default_rng(4)
    e_dev, e_test = np.round(rng.random(200), 2), np.round(rng.random(150), 2)
    y_dev = rng.random(200) < 0.3 + 0.4 * (e_dev < 0.5)
    y_test = rng.random(150) < 0.3 + 0.4 * (e_test < 0.5)
    r = hypernymy_metrics(e_dev, y_dev, e_test, y_test)
    for split, (e, y) in (("dev", (e_dev, y_dev)), ("test", (e_test, y_test))):
        assert r.splits[split]["AP (%)"] == pytest.approx(100 * average_precision_score(y, -e))
        assert r.splits[split]["ROC AUC (%)"] == pytest.approx(100 * roc_auc_score(y, -e))
    cuts = np.r_[-1.0, np.unique(e_dev) + 1e-9]  # every cut that does not split a tie
    best = max(((e_dev <= c) == y_dev).mean() for c in cuts)
    assert r.splits["dev"]["accuracy (%)"] == pytest.approx(100 * best)
    assert r.splits["test"]["accuracy (%)"] == pytest.approx(100 * ((e_test <= r.threshold) == y_test).mean())
    assert set(r.roc.split) == {"dev", "test"}
    with pytest.raises(InputError, match="all 3 pairs are positive"):
        hypernymy_metrics([0.0, 1.0, 2.0], [1, 1, 1], e_test, y_test)
    with pytest.raises(InputError) as e:
        hypernymy_metrics(e_dev, y_dev, np.r_[e_test[:-1], np.nan], y_test)
    assert e.value.path == "test_energies"
    with pytest.raises(InputError) as e:
        hypernymy_metrics(e_dev, y_dev * 0.9, e_test, y_test)  # probabilities are not labels
    assert e.value.path == "dev_labels"


def test_pair_energies_read_the_registry():
    x = torch.rand(5, 4, dtype=torch.float64)
    pairs = np.array([[0, 1], [2, 3], [4, 0]])
    for name in ("order", "cosine", "poincare", "cone"):
        want = ENERGIES[name].pairs(x[pairs[:, 0]] * 0.5, x[pairs[:, 1]] * 0.5).numpy()
        np.testing.assert_allclose(pair_energies(x * 0.5, pairs, name), want)
    with pytest.raises(InputError, match="NaN or inf"):
        pair_energies(torch.full((2, 3), float("nan")), [[0, 1]], "order")
    with pytest.raises(InputError, match="not an energy of two embeddings"):
        pair_energies(x, pairs, "box")
    with pytest.raises(InputError) as e:
        pair_energies(x, [[0, 5]], "order")
    assert e.value.path == "pairs"


def test_closed_world_is_brute_force_top_k_among_unseen_pairs():
    rng = np.random.default_rng(5)
    scores = rng.random((40, 9))  # no ties
    unseen = np.array([True, False, True, True, False, True, False, True, False])
    labels = rng.integers(0, 9, 40)
    r = closed_world_topk(scores, labels, unseen, ks=(1, 2, 3, 20))
    cols = np.flatnonzero(unseen)
    rows = np.flatnonzero(unseen[labels])
    place = [int((scores[i, cols] > scores[i, labels[i]]).sum()) + 1 for i in rows]
    for k in (1, 2, 3, 20):
        assert r[f"top-{k}"] == pytest.approx(100 * np.mean(np.array(place) <= k))
    assert r["chance"]["top-1"] == pytest.approx(100 / 5) and r["chance"]["top-20"] == 100.0  # k clipped to P
    with pytest.raises(InputError) as e:
        closed_world_topk(scores, np.r_[labels[:-1], 9], unseen)
    assert e.value.path == "labels"
    with pytest.raises(InputError) as e:
        closed_world_topk(scores, labels, unseen[:-1])
    assert e.value.path == "scores"


def test_fact_retrieval_is_retrieval_rows_with_an_explicit_scoring():
    facts = [Fact("dog"), Fact("dog", "runs"), Fact("dog", "runs", "park"), Fact("cat"), Fact("cat", "sits")]
    rng = np.random.default_rng(7)
    image_fact = rng.integers(0, len(facts), 30)
    d = rng.random((30, len(facts)))
    task = SimpleNamespace(
        facts=facts, orders=torch.tensor([f.order for f in facts]), test=SimpleNamespace(fact=image_fact)
    )
    for scoring in ("euc", "dot"):
        want = retrieval_rows("", torch.as_tensor(d), task, paper={}, scoring=scoring)
        assert fact_retrieval(d, facts, image_fact, scoring=scoring).table == want
    a, b = (fact_retrieval(d, facts, image_fact, scoring=s) for s in ("euc", "dot"))
    assert a.metric("K1", "strict") == b.metric("K1", "strict")  # strict reads the distances as they are
    nearest = d.argmin(1)
    assert a.metric("K1", "strict") == pytest.approx(100 * np.mean(nearest == image_fact))
    assert fact_retrieval(-d, facts, image_fact, "similarity", scoring="dot").table == b.table
    with pytest.raises(InputError, match="negative distances"):
        fact_retrieval(d - 0.5, facts, image_fact, scoring="euc")
    with pytest.raises(InputError) as e:
        fact_retrieval(d, facts, image_fact, scoring="cos")
    assert e.value.path == "scoring"
    strict = fact_retrieval(d, facts, image_fact, scoring="euc", names="strict").table
    assert {r["protocol"] for r in strict} == {"strict"}
    with pytest.raises(InputError, match="expected some of strict, implied"):
        fact_retrieval(d, facts, image_fact, scoring="euc", names=("Strict",))
    ints = (d * 100).astype(int)  # integers are read as floats
    assert (
        fact_retrieval(ints, facts, image_fact, scoring="dot").table
        == fact_retrieval(ints.astype(float), facts, image_fact, scoring="dot").table
    )


def test_one_registry_feeds_the_joint_model_and_the_compiled_step():
    x, y = torch.rand(4, 3, dtype=torch.float64), torch.rand(6, 3, dtype=torch.float64)
    for name in MATRIX_ENERGIES:
        e = ENERGIES[name]
        want = torch.stack([e.pairs(x[i].expand(6, 3), y) for i in range(4)])
        torch.testing.assert_close(e.matrix(x, y), want)
        model = JointEmbedding(name, vocab_size=5, feature_dim=3, word_dim=4, dim=3)
        assert model.images.absolute == e.nonnegative
    codes = [e.kernel for e in ENERGIES.values() if e.kernel is not None]
    assert len(codes) == len(set(codes))
    for name in CONCEPT_MODELS:
        energy = build_concept_model(name, 5, 4).compiled_energy()
        if energy is not None:  # every compiled energy is registered with its parameters
            registered = ENERGIES[energy["energy"]]
            assert registered.kernel is not None and len(registered.kernel_params) == len(energy["params"])
