import numpy as np
import pytest

from orderlib.data import hypernymy as H


def as_set(pairs):
    return {tuple(p) for p in np.asarray(pairs).tolist()}


def test_listed_pairs_one_per_path(tiny_parents):
    listed = H.listed_pairs(tiny_parents)
    # dog reaches animal and entity by two paths (via pet and via canine)
    assert sum(1 for p in listed.tolist() if p == [4, 1]) == 2
    assert sum(1 for p in listed.tolist() if p == [4, 0]) == 2
    assert len(listed) == 15
    assert len(as_set(listed)) == 13
    assert as_set(H.closure_pairs(tiny_parents)) == as_set(listed)
    assert not any(u == v for u, v in listed.tolist())


def test_closure_is_transitive(tiny_parents):
    c = as_set(H.closure_pairs(tiny_parents))
    for a, b in c:
        for b2, d in c:
            if b == b2:
                assert (a, d) in c


def test_corrupt_unchecked_and_verified(tiny_parents):
    n = len(tiny_parents)
    closure = np.unique(H.pair_codes(H.closure_pairs(tiny_parents), n))
    pos = H.closure_pairs(tiny_parents)
    rng = np.random.default_rng(0)
    neg = H.corrupt(np.repeat(pos, 50, 0), n, rng, closure)
    assert not H.in_set(neg, closure, n).any()
    assert (neg[:, 0] != neg[:, 1]).all()
    # exactly one side replaced (or kept by chance): the other side is the original
    src = np.repeat(pos, 50, 0)
    assert ((neg[:, 0] == src[:, 0]) | (neg[:, 1] == src[:, 1])).all()
    unchecked = H.corrupt(np.repeat(pos, 50, 0), n, rng)
    assert H.in_set(unchecked, closure, n).any()  # the paper's protocol keeps true "negatives"


def test_clean_split_has_no_leak(tiny_parents):
    d = H.make_splits(tiny_parents, "clean", n_test=3, n_dev=2, seed=1)
    test_pos = as_set(d.test[d.test_labels])
    assert not test_pos & as_set(d.train)
    assert not as_set(d.dev[d.dev_labels]) & as_set(d.train)
    assert len(d.train) == 13 - 5
    assert d.stats["test negatives that are true pairs"] == 0
    assert d.stats["direct edges"] == 7 and d.stats["distinct pairs"] == 13
    assert not H.in_set(d.test[~d.test_labels], d.closure, d.n_nodes).any()
    rng = np.random.default_rng(0)
    assert not H.in_set(d.train_negatives(rng), d.closure, d.n_nodes).any()


def test_paper_split_keeps_duplicates(tiny_parents):
    d = H.make_splits(tiny_parents, "paper", n_test=4, n_dev=2, seed=0)
    assert len(d.train) == 15 - 6
    assert len(d.test) == 8 and d.test_labels.sum() == 4
    with pytest.raises(ValueError):
        H.make_splits(tiny_parents, "paper", n_test=10, n_dev=6)
    with pytest.raises(ValueError):
        H.make_splits(tiny_parents, "bogus")


def test_transitive_closure_baseline(tiny_parents):
    n = len(tiny_parents)
    known = np.array([[4, 2], [2, 1], [1, 0], [5, 2]])
    queries = np.array([[4, 0], [5, 1], [4, 3], [3, 0], [6, 1], [0, 4]])
    pred = H.transitive_closure_predict(known, queries, n)
    assert pred.tolist() == [True, True, False, False, False, False]


def test_real_wordnet_counts_match_the_authors(real_wordnet):
    from orderlib.data.wordnet import load_noun_graph

    expected = {"3.1": (82192, 84505, 838073, 743746), "3.0": (82115, 84427, 837888, 743241)}
    for version, (syn, edges, listed, distinct) in expected.items():
        g = load_noun_graph(version)
        pairs = H.listed_pairs(g.parents)
        assert (len(g.names), g.n_edges, len(pairs), len(H.unique_pairs(pairs, len(g.names)))) == \
            (syn, edges, listed, distinct)
