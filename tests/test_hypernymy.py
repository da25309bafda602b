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
        assert (len(g.names), g.n_edges, len(pairs), len(H.unique_pairs(pairs, len(g.names)))) == (
            syn,
            edges,
            listed,
            distinct,
        )


def test_listed_pairs_follows_start_and_parent_order(tiny_parents):
    parents = [list(p) for p in tiny_parents]
    parents[4] = [3, 2]  # dog: canine before pet
    listed = H.listed_pairs(parents, order=[4, 6]).tolist()
    assert listed == [[4, 3], [4, 1], [4, 0], [4, 2], [4, 1], [4, 0], [6, 0]]
    assert H.listed_pairs(parents, order=[]).shape == (0, 2)


def tiny_authors_graph():
    """Names sorted: 0 animal, 1 canine, 2 dog, 3 entity, 4 pet, 5 rex. rex has hypernym pet and
    instance hypernym dog, so the authors list pet first; the file order is entity, animal, pet,
    dog, canine, rex (1-based ids 1..6 in Lua)."""
    from orderlib.data.wordnet import NounGraph

    names = ["animal", "canine", "dog", "entity", "pet", "rex"]
    parents = [[3], [0], [1, 4], [], [0], [2, 4]]
    authors = [[3], [0], [1, 4], [], [0], [4, 2]]
    return NounGraph(names, parents, "toy", "fp", "toy", [3, 0, 4, 2, 1, 5], authors)


# animal; pet; dog (via canine, then via pet); canine; rex (via pet, then via dog -> canine, pet)
TINY_AUTHORS_LISTING = [
    [0, 3],
    [4, 0],
    [4, 3],
    [2, 1],
    [2, 0],
    [2, 3],
    [2, 4],
    [2, 0],
    [2, 3],
    [1, 0],
    [1, 3],
    [5, 4],
    [5, 0],
    [5, 3],
    [5, 2],
    [5, 1],
    [5, 0],
    [5, 3],
    [5, 4],
    [5, 0],
    [5, 3],
]


def test_authors_listing_order_on_a_tiny_graph():
    g = tiny_authors_graph()
    assert H.authors_listing(g).tolist() == TINY_AUTHORS_LISTING
    assert H.n_entities_of(g) == 6


def _hand_negatives(pos, ent_draws, side_draws, n_entities, nltk_order):
    """Dataset.lua's contrastive negatives in integer arithmetic: ceil(d * N / 2**32), at least 1."""
    out = pos.copy()
    for k, (d, s) in enumerate(zip(ent_draws.tolist(), side_draws.tolist())):
        entity = max(-(-d * n_entities // 2**32), 1)  # 1-based id in file order
        side = 0 if s <= 2**31 else 1  # max(ceil(u * 2), 1) == 1  <=>  draw <= 2**31
        out[k, side] = nltk_order[entity - 1]
    return out


@pytest.mark.parametrize("set_order", [("train", "test", "val"), ("val", "test", "train")])
def test_authors_split_draws_as_create_datasets(set_order):
    from orderlib.data.torch7 import Torch7Generator

    g = tiny_authors_graph()
    d = H.authors_split(g, n_test=3, n_dev=2, set_order=set_order)
    listing = np.array(TINY_AUTHORS_LISTING)
    gen = Torch7Generator(1)
    pool = listing[gen.randperm(len(listing))]
    sizes = {"test": 3, "val": 2, "train": 16}
    starts = {"test": 0, "val": 3, "train": 5}
    expected = {}
    for name in set_order:  # each Dataset draws its entities, then its sides
        pos = pool[starts[name] : starts[name] + sizes[name]]
        expected[name] = _hand_negatives(pos, gen.random(sizes[name]), gen.random(sizes[name]), 6, g.nltk_order)
    assert (d.split, d.protocol, d.n_nodes) == ("authors", "paper", 6)
    assert np.array_equal(d.train, pool[5:])
    assert np.array_equal(d.test, np.r_[pool[:3], expected["test"]])
    assert np.array_equal(d.dev, np.r_[pool[3:5], expected["val"]])
    assert d.test_labels.tolist() == [True] * 3 + [False] * 3 and d.dev_labels.sum() == 2
    assert d.stats["listed pairs"] == 21 and d.stats["train positives"] == 16
    assert d.stats["distinct pairs"] == len(as_set(TINY_AUTHORS_LISTING))


def test_authors_split_rejects_what_it_cannot_reproduce(tiny_parents):
    from orderlib.data.wordnet import NounGraph

    g = tiny_authors_graph()
    with pytest.raises(ValueError, match="set_order"):
        H.authors_split(g, 3, 2, set_order=("test", "val", "dev"))
    with pytest.raises(ValueError, match="no training pairs"):
        H.authors_split(g, 15, 6)
    with pytest.raises(ValueError, match="load_noun_graph"):
        H.authors_split(NounGraph([str(i) for i in range(7)], tiny_parents, "toy", "fp", "toy"))
    two_roots = NounGraph(
        [str(i) for i in range(7)],
        tiny_parents,
        "toy",
        "fp",
        "toy",
        [0, 6, 1, 2, 3, 4, 5],
        [[], [0], [1], [1], [2, 3], [2], []],
    )
    with pytest.raises(ValueError, match="single root"):
        H.authors_split(two_roots)


def test_make_splits_is_ours(tiny_parents):
    assert H.make_splits(tiny_parents, "paper", n_test=4, n_dev=2, seed=0).split == "ours"


def test_real_wordnet_authors_split_gives_the_papers_baseline(real_wordnet):
    from orderlib.data.wordnet import load_noun_graph

    g = load_noun_graph("3.1")
    listing = H.authors_listing(g)
    assert len(listing) == 838073
    assert np.array_equal(
        H.sorted_unique(H.pair_codes(listing, len(g.names))),
        H.sorted_unique(H.pair_codes(H.listed_pairs(g.parents), len(g.names))),
    )
    d = H.authors_split(g)
    pred = H.transitive_closure_predict(np.r_[d.train, d.dev[d.dev_labels]], d.test, d.n_nodes)
    acc = 100 * (pred == d.test_labels).mean()
    assert round(acc, 1) == 88.2  # Table 1 of Vendrov et al.: transitive closure 88.2
    assert d.stats["listed pairs"] == 838073 and d.stats["train positives"] == 838073 - 8000
    assert d.stats["test positives also in train"] == 848
    assert d.stats["test negatives that are true pairs"] == 574


def test_epoch_positives_are_one_shared_draw_for_both_trainers(tiny_parents):
    from orderlib.concepts.word2gauss import Word2GaussConfig, epoch_pairs

    d = H.make_splits(tiny_parents, "paper", n_test=4, n_dev=2, seed=0)
    half = d.epoch_positives(np.random.default_rng(3), 0.5)
    assert len(half) == round(0.5 * len(d.train)) and as_set(half) <= as_set(d.train)
    full = d.epoch_positives(np.random.default_rng(3))
    assert sorted(map(tuple, full.tolist())) == sorted(map(tuple, d.train.tolist()))  # a permutation
    assert (full[: len(half)] == half).all()  # the fraction cuts the same shuffle
    assert len(d.epoch_positives(np.random.default_rng(3), 0.0)) == 1
    # word2gauss's epoch is the positives then the negatives drawn from one generator seeded (seed, epoch)
    cfg = Word2GaussConfig(seed=5, train_fraction=0.5)
    pos, neg = epoch_pairs(d, cfg, 2)
    rng = np.random.default_rng([5, 2])
    assert (pos == d.epoch_positives(rng, 0.5)).all() and (neg == d.train_negatives(rng, pos)).all()
