"""Fashion-MNIST Facts: fact structure, true relations in the pixels, long tail, Table 5 cases, loader."""
import numpy as np
import pytest

from orderlib.data.attributes import CANVAS, OBJECTS
from orderlib.data.facts import (CASES, RELATIONS, Fact, all_facts, generalisation_cases, long_tail_counts,
                                 make_fact_images, parse_fact, read_fact_annotations)
from orderlib.data.fashion_mnist import FashionMNIST
from orderlib.paths import DataError


def fake(split: str, n: int) -> FashionMNIST:
    images = np.zeros((n, 28, 28), np.uint8)
    images[:, 6:22, 8:20] = 200
    return FashionMNIST(images, np.arange(n) % 10, split)


@pytest.fixture(scope="module")
def train():
    return fake("train", 60000)


def test_facts_and_phrases():
    facts = all_facts()
    assert len(facts) == 10 + 200 + 600 == len(set(facts))
    assert [f.order for f in (facts[0], facts[10], facts[-1])] == [1, 2, 3]
    assert Fact("sandal", "red").phrase() == "red sandal" and str(Fact("sandal", "left of", "bag")) == "<sandal, left of, bag>"


def _centre(img):
    """Centre of mass (y, x) of the non-black pixels."""
    ys, xs = np.nonzero(img.max(-1))
    return ys.mean(), xs.mean()


def test_third_order_images_show_their_relation(train):
    facts = [Fact("sandal", r, "bag") for r in RELATIONS]
    imgs = make_fact_images(train, "train", facts, np.full(len(facts), 8), seed=0)
    canvases = imgs.render()
    assert canvases.shape == (48, 2 * CANVAS, 2 * CANVAS, 3)
    for k in range(len(imgs)):
        rel = facts[imgs.fact[k]].p
        s_cell, o_cell = imgs.cells[k]
        (sy, sx), (oy, ox) = [divmod(int(c), 2) for c in (s_cell, o_cell)]
        if rel == "left of":
            assert sy == oy and sx < ox
        elif rel == "right of":
            assert sy == oy and sx > ox
        elif rel == "above":
            assert sx == ox and sy < oy
        elif rel == "below":
            assert sx == ox and sy > oy
        else:  # bigger / smaller: compare the ink in each cell
            ink = lambda c: (canvases[k, CANVAS * (c // 2):CANVAS * (c // 2 + 1), CANVAS * (c % 2):CANVAS * (c % 2 + 1)] > 0).sum()
            assert (ink(s_cell) > ink(o_cell)) == (rel == "bigger than")
        assert train.labels[imgs.items[k, 0]] == OBJECTS.index("sandal") and train.labels[imgs.items[k, 1]] == OBJECTS.index("bag")


def test_items_come_from_their_split_and_runs_repeat(train):
    facts = all_facts()[:30]
    counts = np.arange(30) % 4
    a = make_fact_images(train, "train", facts, counts, seed=1)
    assert len(a) == counts.sum() and np.bincount(a.fact, minlength=30).tolist() == counts.tolist()
    assert a.items[:, 0].max() < 50000
    b = make_fact_images(train, "train", facts, counts, seed=1)
    assert a.fingerprint() == b.fingerprint() and np.array_equal(a.render([0, 5]), b.render([0, 5]))
    with pytest.raises(ValueError, match="take items from Fashion-MNIST test"):
        make_fact_images(train, "test", facts, counts)


def test_long_tail_and_generalisation_cases():
    facts = all_facts()
    counts = long_tail_counts(facts, 20000, seed=0)
    assert (counts == 0).mean() == pytest.approx(0.1, abs=0.01)
    top = np.sort(counts)[::-1]
    assert top[0] > 50 * np.median(counts[counts > 0]) and (counts[counts > 0] <= 5).mean() > 0.3  # long tail
    cases = generalisation_cases(facts, counts)
    assert set(cases) == set(CASES) and all(len(v) > 0 for v in cases.values())
    assert len({tuple(v) for v in cases.values()}) > 1  # the cases are not all the same facts
    spo = {(f.s, f.p, f.o): i for i, f in enumerate(facts) if f.order == 3}
    for i in cases["SP, O"]:  # recount one case by brute force
        f = facts[i]
        sp = sum(counts[j] for (s, p, o), j in spo.items() if (s, p) == (f.s, f.p) and j != i)
        o = sum(counts[j] for (s, p, oo), j in spo.items() if oo == f.o and j != i)
        assert counts[i] <= 5 and sp >= 15 and o >= 15


def test_annotation_reader(tmp_path):
    p = tmp_path / "facts.tsv"
    p.write_text("# image\tfact\nimg/1.jpg\t<boy, riding, horse>\n\nimg/2.jpg\tdog\t*\t*\nimg/3.jpg\t<baby, smiling>\n")
    got = read_fact_annotations(p)
    assert got == [("img/1.jpg", Fact("boy", "riding", "horse")), ("img/2.jpg", Fact("dog")),
                   ("img/3.jpg", Fact("baby", "smiling"))]
    p.write_text("img/1.jpg\t<*, riding, horse>\n")
    with pytest.raises(DataError, match=r"facts\.tsv:1: not a fact"):
        read_fact_annotations(p)
    p.write_text("img/1.jpg <boy>\n")
    with pytest.raises(DataError, match=r"facts\.tsv:1: expected an image path, a tab"):
        read_fact_annotations(p)
    with pytest.raises(DataError, match="no such file"):
        read_fact_annotations(tmp_path / "missing.tsv")
