"""Fashion-MNIST Attributes: renderer, pair split, disjoint item sources, determinism."""

import numpy as np
import pytest

from orderlib.data.attributes import (
    ATTRIBUTES,
    ATTRS,
    CANVAS,
    GROUP,
    ITEM,
    OBJECTS,
    make_attribute_images,
    plain_images,
    render_item,
    split_pairs,
)
from orderlib.data.fashion_mnist import CLASSES, FashionMNIST


def _blob(h0=6, h1=22, w0=8, w1=20) -> np.ndarray:
    """An asymmetric item: a bright block with a brighter top-left corner."""
    x = np.zeros((ITEM, ITEM), np.uint8)
    x[h0:h1, w0:w1] = 180
    x[h0 : h0 + 4, w0 : w0 + 4] = 250
    return x


def fake(split: str, n: int) -> FashionMNIST:
    images = np.zeros((n, ITEM, ITEM), np.uint8)
    images[:, 6:22, 8:20] = (np.arange(n) % 200 + 40)[:, None, None]
    return FashionMNIST(images, np.arange(n) % 10, split)


@pytest.fixture(scope="module")
def sources():
    return {"train": fake("train", 60000), "test": fake("test", 10000)}


def test_attribute_words_are_wordnet_adjectives(real_wordnet):
    from orderlib.data.wordnet import open_wordnet

    wn = open_wordnet("3.0")
    assert len(ATTRS) >= 15 and len(OBJECTS) == len(CLASSES) == 10
    for word, (synset, _) in ATTRIBUTES.items():
        s = wn.synset(synset)
        assert s.pos() in ("a", "s"), (word, synset)
        assert word in [l.lower() for l in s.lemma_names()], (word, s.lemma_names())


def test_render_is_deterministic_and_every_attribute_changes_the_item():
    item = _blob()
    plain = render_item(item, None, 0)
    assert plain.shape == (CANVAS, CANVAS, 3) and plain.dtype == np.uint8
    seen = {plain.tobytes()}
    for a in ATTRS:
        img = render_item(item, a, 0, seed=3)
        assert np.array_equal(img, render_item(item, a, 0, seed=3)), a
        assert img.tobytes() not in seen, f"{a} looks like another attribute or like the plain item"
        seen.add(img.tobytes())


def test_geometry_and_colour_do_what_their_words_say():
    item = _blob()
    plain = render_item(item, None, 0)
    assert np.array_equal(render_item(item, "inverted", 0), plain[::-1])  # item centred: canvas flip
    red = render_item(item, "red", 0).astype(int)
    assert red[..., 0].sum() > 3 * red[..., 1].sum() and red[..., 0].sum() > 3 * red[..., 2].sum()
    assert (render_item(item, "small", 0) > 0).sum() < (plain > 0).sum() < (render_item(item, "large", 0) > 0).sum()
    assert render_item(item, "dark", 0).sum() < 0.5 * plain.sum()


def test_patterns_stay_inside_the_silhouette():
    item = _blob()
    outside = render_item(item, None, 0).max(-1) == 0
    for a in ("striped", "dotted", "checkered"):
        img = render_item(item, a, 0)
        assert img[outside].max() == 0, a
        assert len(np.unique(img[~outside])) > 1, a


def test_context_dependent_attributes_look_different_on_different_objects():
    item = _blob()
    objs = {g: next(o for o, gg in GROUP.items() if gg == g) for g in set(GROUP.values())}
    hue = lambda img: tuple(np.round(img.reshape(-1, 3).sum(0) / img.sum(), 2))
    assert len({hue(render_item(item, "bright", o)) for o in objs.values()}) == len(objs)
    assert len({hue(render_item(item, "red", o)) for o in objs.values()}) == 1  # a plain colour does not
    stripes = {g: render_item(item, "striped", o) for g, o in objs.items()}
    assert not np.array_equal(stripes["top"], stripes["long"])


def test_split_pairs_is_misra_like_and_seeded():
    s = split_pairs(30, 50, seed=0)
    assert [len(s[k]) for k in ("seen", "val_unseen", "test_unseen")] == [120, 30, 50]
    keys = {k: {tuple(p) for p in v.tolist()} for k, v in s.items()}
    assert not keys["seen"] & keys["val_unseen"] and not keys["seen"] & keys["test_unseen"]
    assert not keys["val_unseen"] & keys["test_unseen"]
    assert len(set.union(*keys.values())) == len(ATTRS) * len(OBJECTS)
    assert set(s["seen"][:, 0]) == set(range(len(ATTRS))) and set(s["seen"][:, 1]) == set(range(len(OBJECTS)))
    assert all(np.array_equal(s[k], split_pairs(30, 50, seed=0)[k]) for k in s)
    assert not np.array_equal(s["test_unseen"], split_pairs(30, 50, seed=1)["test_unseen"])
    with pytest.raises(ValueError, match="nothing to train"):
        split_pairs(100, 100)


def test_images_take_items_from_disjoint_ranges(sources):
    pairs = split_pairs(30, 50, 0)
    tr = make_attribute_images(sources["train"], "train", pairs["seen"], 5)
    dev = make_attribute_images(sources["train"], "dev", pairs["val_unseen"], 5)
    te = make_attribute_images(sources["test"], "test", pairs["test_unseen"], 5)
    assert tr.items.max() < 50000 and dev.items.min() >= 50000 and te.source.split == "test"
    for d in (tr, dev, te):
        assert np.array_equal(d.source.labels[d.items], d.objs)  # each image's item is of its object
    assert len(tr) == 600 and {tuple(p) for p in tr.labels.tolist()} == {tuple(p) for p in pairs["seen"].tolist()}
    again = make_attribute_images(sources["train"], "train", pairs["seen"], 5)
    assert again.fingerprint() == tr.fingerprint() and np.array_equal(again.render([0, 7]), tr.render([0, 7]))
    assert make_attribute_images(sources["train"], "train", pairs["seen"], 5, seed=1).fingerprint() != tr.fingerprint()
    with pytest.raises(ValueError, match="take items from Fashion-MNIST test"):
        make_attribute_images(sources["train"], "test", pairs["seen"], 5)


def test_plain_images_are_tinted_items(sources):
    x = plain_images(sources["train"], np.arange(20), seed=0, tint=True)
    assert x.shape == (20, CANVAS, CANVAS, 3)
    assert np.array_equal(x, plain_images(sources["train"], np.arange(20), seed=0, tint=True))
    grey = plain_images(sources["train"], np.arange(20), seed=0, tint=False)
    assert (grey[..., 0] == grey[..., 1]).all() and not (x[..., 0] == x[..., 1]).all()
