"""DeViSE on the 200 attribute-object labels (orderlib/experiments/devise_pairs.py): the label
hierarchy behind hp@k and the label vectors."""

import numpy as np

from orderlib.data.attributes import ATTRS, OBJECTS, all_pairs
from orderlib.eval.hierarchy import hierarchical_precision, ring_set
from orderlib.experiments import devise_pairs as dp


def test_every_pair_is_a_label_once():
    pairs = all_pairs()
    assert len(pairs) == len(ATTRS) * len(OBJECTS) == 200
    assert len({tuple(p) for p in pairs.tolist()}) == 200


def test_first_ring_is_the_pairs_sharing_a_part():
    pairs = all_pairs()
    adj = dp.pair_graph(pairs)
    labels = set(range(len(pairs)))
    for t in (0, 57, 199):
        kept = ring_set(t, labels, 2, adj)
        shares = {i for i, (a, o) in enumerate(pairs.tolist()) if a == pairs[t, 0] or o == pairs[t, 1]}
        assert kept == shares  # the pair itself and the 19 + 9 that share its object or its attribute
        assert len(kept) == 1 + (len(ATTRS) - 1) + (len(OBJECTS) - 1)


def test_hp_credits_a_shared_part_and_nothing_else():
    pairs = all_pairs()
    adj = dp.pair_graph(pairs)
    t = 0  # (attribute 0, object 0)
    share = int(np.flatnonzero((pairs[:, 0] == 0) & (pairs[:, 1] == 1))[0])  # same attribute
    unrelated = int(np.flatnonzero((pairs[:, 0] == 1) & (pairs[:, 1] == 1))[0])
    ranked = np.array([[share, unrelated]])
    assert hierarchical_precision(ranked, np.array([t]), range(len(pairs)), adj, (2,))["hp@2"] == 0.5


def test_pair_vectors_average_the_parts():
    words = np.eye(len(ATTRS) + len(OBJECTS), dtype=np.float32) * 3.0  # orthogonal, not unit
    pairs = all_pairs()
    v = dp.pair_vectors(words, pairs)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-6)
    i, j, k = 0, 1, len(OBJECTS) + 1  # (0, 0), (0, 1): same attribute; (1, 1): shares nothing with (0, 0)
    assert np.isclose(v[i] @ v[j], 0.5) and np.isclose(v[i] @ v[k], 0.0)


def test_random_labels_share_nothing_and_random_words_compose():
    rng = np.random.default_rng(0)
    words = rng.standard_normal((len(ATTRS) + len(OBJECTS), 8)).astype(np.float32)
    pairs = all_pairs()
    a = dp.label_vectors(words, words, pairs, seed=3)
    b = dp.label_vectors(words, words, pairs, seed=3)
    assert a.keys() == b.keys()
    for row in a:
        np.testing.assert_array_equal(a[row], b[row])  # a seed gives one set
    composed, per_label = a["devise (random word vectors)"], a["random embeddings"]
    assert not np.allclose(composed, per_label[: len(composed)])  # not the word table's first rows
    same_attr = [i for i, p in enumerate(pairs.tolist()) if p[0] == 0]
    others = [i for i, p in enumerate(pairs.tolist()) if p[0] != 0 and p[1] != 0]
    # composed pairs that share a part lie closer than unrelated ones; per-label vectors do not care
    assert (composed[same_attr[1:]] @ composed[0]).mean() > (composed[others] @ composed[0]).mean() + 0.2
    assert abs((per_label[same_attr[1:]] @ per_label[0]).mean()) < 0.3
