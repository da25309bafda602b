"""Fashion-MNIST Scenes: determinism, captions true of their scene, disjoint pixel sources."""

import itertools

import numpy as np
import pytest

from orderlib.data.fashion_mnist import CLASSES, SYNSETS, FashionMNIST
from orderlib.data.scenes import ITEM, LEVELS, SLOT, SOURCES, Lexicon, caption_tokenize, make_scenes, noun_phrase

# A hand-made lexicon over the 10 classes (no WordNet needed): two branches under "thing".
_LADDERS = tuple((f"c{c}", "top" if c < 5 else "shoe", "thing") for c in range(10))
_WORDS = {
    **{f"c{c}": (f"word{c}", f"alt{c}") for c in range(10)},
    "top": ("top",),
    "shoe": ("shoe",),
    "thing": ("thing",),
}
LEX = Lexicon(_LADDERS, _WORDS)


def fake_split(split: str, n: int) -> FashionMNIST:
    """Images whose pixels encode their own index, so rendering can be checked exactly."""
    rng = np.random.default_rng(0)
    images = rng.integers(1, 256, size=(n, 28, 28), dtype=np.uint8)
    return FashionMNIST(images, np.arange(n) % 10, split)


@pytest.fixture(scope="module")
def sources():
    return {"train": fake_split("train", 60000), "test": fake_split("test", 10000)}


def _scenes(sources, split, n=200, seed=0, lex=LEX):
    return make_scenes(sources["test" if split == "test" else "train"], split, n, lex, seed)


def test_same_seed_same_scenes_other_seed_other_scenes(sources):
    a, b, c = _scenes(sources, "train"), _scenes(sources, "train"), _scenes(sources, "train", seed=1)
    assert a.fingerprint() == b.fingerprint() and a.captions == b.captions
    assert np.array_equal(a.render(), b.render())
    assert a.fingerprint() != c.fingerprint()


def test_items_come_only_from_their_split_range(sources):
    for split, (_fm_split, lo, hi) in SOURCES.items():
        sc = _scenes(sources, split, 500)
        used = sc.items[sc.items >= 0]
        assert used.min() >= lo and used.max() < hi, split
    train_items = set(_scenes(sources, "train", 2000).items.ravel()) - {-1}
    dev_items = set(_scenes(sources, "dev", 2000).items.ravel()) - {-1}
    assert not train_items & dev_items  # both from Fashion-MNIST train, disjoint ranges
    with pytest.raises(ValueError, match="items from Fashion-MNIST test"):
        make_scenes(sources["train"], "test", 5, LEX)


def test_scene_layout_and_rendering(sources):
    sc = _scenes(sources, "dev", 300)
    counts = (sc.items >= 0).sum(1)
    assert set(counts.tolist()) == {1, 2, 3, 4}
    canvases = sc.render()
    assert canvases.shape == (300, 60, 60)
    for k in range(30):
        for s in range(4):
            if sc.items[k, s] < 0:
                continue
            y, x = sc.offsets[k, s]
            assert SLOT * (s // 2) <= y <= SLOT * (s // 2) + SLOT - ITEM  # inside its slot
            assert SLOT * (s % 2) <= x <= SLOT * (s % 2) + SLOT - ITEM
            assert np.array_equal(canvases[k, y : y + ITEM, x : x + ITEM], sources["train"].images[sc.items[k, s]])
            assert sc.labels[k, s] == sources["train"].labels[sc.items[k, s]]


def _under(label: int, synset: str, lex: Lexicon) -> bool:
    return synset in lex.ladders[label]


def _check_claim(claim, labels, offsets, lex):
    kind = claim[0]
    present = [int(l) for l in labels if l >= 0]
    if kind == "all":
        return all(_under(l, claim[1], lex) for l in present)
    if kind == "some":
        return any(_under(l, claim[1], lex) for l in present)
    if kind == "inventory":  # a one-to-one naming of every item by a synset above it
        named = claim[1]
        return len(named) == len(present) and any(
            all(_under(l, s, lex) for l, s in zip(perm, named)) for perm in itertools.permutations(present)
        )
    if kind == "is":
        return lex.ladders[int(labels[claim[1]])][0] == claim[2]
    if kind == "at":
        y, x = offsets[claim[1]]
        return claim[2] == ("top" if y < SLOT else "bottom") + " " + ("left" if x < SLOT else "right")
    if kind == "rel":
        (ya, xa), (yb, xb) = offsets[claim[1]], offsets[claim[2]]
        return {
            "to the left of": xa + ITEM <= xb,
            "to the right of": xb + ITEM <= xa,
            "above": ya + ITEM <= yb,
            "below": yb + ITEM <= ya,
        }[claim[3]]
    raise AssertionError(f"unknown claim {claim}")


def test_every_caption_claim_is_true_of_its_scene_and_named_in_the_text(sources):
    sc = _scenes(sources, "train", 400)
    for k in range(len(sc)):
        for level in range(len(LEVELS)):
            text, claims = sc.captions[5 * k + level], sc.claims[5 * k + level]
            assert claims, (k, level)
            for claim in claims:
                assert _check_claim(claim, sc.labels[k], sc.offsets[k], LEX), (text, claim)
                for synset in [c for c in claim[1:] if isinstance(c, str) and c in LEX.words] + (
                    claim[1] if claim[0] == "inventory" else []
                ):
                    assert any(w in text for w in LEX.words[synset]), (text, synset)


def test_claim_checker_catches_false_captions(sources):
    sc = _scenes(sources, "train", 50)
    k = int(np.flatnonzero((sc.items >= 0).sum(1) >= 2)[0])
    labels, offsets = sc.labels[k], sc.offsets[k]
    slots = np.flatnonzero(labels >= 0)
    a, b = int(slots[0]), int(slots[1])
    wrong_class = next(c for c in range(10) if c != labels[a])
    assert not _check_claim(("is", a, LEX.ladders[wrong_class][0]), labels, offsets, LEX)
    assert not _check_claim(("rel", b, a, "to the left of"), labels, offsets, LEX) or not _check_claim(
        ("rel", a, b, "to the left of"), labels, offsets, LEX
    )
    assert not _check_claim(("inventory", [LEX.ladders[int(labels[a])][0]]), labels, offsets, LEX)


def test_short_abstract_and_long_detailed_captions_both_occur(sources):
    sc = _scenes(sources, "test", 500)
    lengths = np.array([len(caption_tokenize(c)) for c in sc.captions]).reshape(-1, 5)
    assert lengths[:, 0].mean() < 2.5  # gist: one or two words
    assert lengths[:, 4].max() >= 12  # layout captions of four items are long
    assert (lengths[:, 4] >= lengths[:, 1]).all()


def test_noun_phrases():
    assert noun_phrase("sneaker", 1) == "a sneaker"
    assert noun_phrase("artifact", 1) == "an artifact"
    assert noun_phrase("dress", 2) == "two dresses"
    assert noun_phrase("instrumentality", None) == "instrumentalities"
    assert noun_phrase("trouser", 1) == "a pair of trousers"
    assert noun_phrase("trouser", 3) == "three pairs of trousers"
    assert noun_phrase("clothing", 2, mass=True) == "clothing"
    assert caption_tokenize("A T-shirt, a woman's clothing.") == ["a", "t-shirt", "a", "woman's", "clothing"]


def test_class_synsets_are_real_wordnet_nouns_with_the_expected_ancestors(real_wordnet):
    from orderlib.data.wordnet import open_wordnet

    lex = Lexicon.from_wordnet(open_wordnet("3.0"))
    assert len(lex.ladders) == len(CLASSES) == len(SYNSETS)
    assert lex.ladders[0][:4] == ("jersey.n.03", "shirt.n.01", "garment.n.01", "clothing.n.01")
    assert "t-shirt" in lex.words["jersey.n.03"] and "sneaker" in lex.words["gym_shoe.n.01"]
    assert all(ladder[-1] == "artifact.n.01" for ladder in lex.ladders)
    assert lex.lowest_common([7, 5]) == "shoe.n.01"  # sneaker, sandal
    assert lex.lowest_common([0, 6]) == "shirt.n.01"  # T-shirt, shirt: shirt is a hypernym of T-shirt
    assert lex.lowest_common([8, 1]) == "artifact.n.01"  # bag, trouser
