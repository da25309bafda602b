"""Fashion-MNIST Facts: fact structure, true relations in the pixels, long tail, Table 5 cases, loader."""

import numpy as np
import pytest
import torch

from orderlib.data.attributes import CANVAS, OBJECTS
from orderlib.data.facts import (
    CASES,
    RELATIONS,
    Fact,
    all_facts,
    generalisation_cases,
    long_tail_counts,
    make_fact_images,
    read_fact_annotations,
)
from orderlib.data.fashion_mnist import FashionMNIST
from orderlib.paths import DataError


def fake(split: str, n: int) -> FashionMNIST:
    labels = np.arange(n) % 10
    images = np.zeros((n, 28, 28), np.uint8)
    for c in range(10):  # each class its own shape: a block of class-dependent height and width
        images[labels == c, 4 : 10 + 2 * c, 14 - c : 14 + c + 2] = 40 + 20 * c
    return FashionMNIST(images, labels, split)


@pytest.fixture(scope="module")
def train():
    return fake("train", 60000)


def test_facts_and_phrases():
    facts = all_facts()
    assert len(facts) == 10 + 200 + 600 == len(set(facts))
    assert [f.order for f in (facts[0], facts[10], facts[-1])] == [1, 2, 3]
    assert (
        Fact("sandal", "red").phrase() == "red sandal"
        and str(Fact("sandal", "left of", "bag")) == "<sandal, left of, bag>"
    )


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
            ink = lambda c: (
                canvases[k, CANVAS * (c // 2) : CANVAS * (c // 2 + 1), CANVAS * (c % 2) : CANVAS * (c % 2 + 1)] > 0
            ).sum()
            assert (ink(s_cell) > ink(o_cell)) == (rel == "bigger than")
        assert train.labels[imgs.items[k, 0]] == OBJECTS.index("sandal") and train.labels[
            imgs.items[k, 1]
        ] == OBJECTS.index("bag")


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
    assert got == [
        ("img/1.jpg", Fact("boy", "riding", "horse")),
        ("img/2.jpg", Fact("dog")),
        ("img/3.jpg", Fact("baby", "smiling")),
    ]
    p.write_text("img/1.jpg\t<*, riding, horse>\n")
    with pytest.raises(DataError, match=r"facts\.tsv:1: not a fact"):
        read_fact_annotations(p)
    p.write_text("img/1.jpg <boy>\n")
    with pytest.raises(DataError, match=r"facts\.tsv:1: expected an image path, a tab"):
        read_fact_annotations(p)
    with pytest.raises(DataError, match="no such file"):
        read_fact_annotations(tmp_path / "missing.tsv")


def test_average_precision_by_hand():
    from orderlib.eval.facts import average_precision, fact_map, fact_topk

    dist = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    rel = torch.tensor([[True, False, True, False], [False, False, False, False]])
    ap = average_precision(dist, rel)
    assert ap[0] == pytest.approx((1 / 1 + 2 / 3) / 2) and np.isnan(ap[1])
    # one of 2 relevant in the top 2: calcAP.m divides by the 1 found there; min(R, top) by 2
    assert average_precision(dist, rel, top=2)[0] == pytest.approx(1 / 1)
    assert average_precision(dist, rel, top=2, normalise="min(R,top)")[0] == pytest.approx((1 / 1) / 2)
    assert average_precision(dist, rel, top=1)[0] == pytest.approx(1.0)
    # mAP over queries: image facts [0, 1, 0, 2]; query 0 as above, query 2 finds its image at rank 1
    d = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.0]])
    assert fact_map(d, [0, 1, 0, 2], [0, 2]) == pytest.approx(100 * ((1 + 2 / 3) / 2 + 1) / 2)
    k = fact_topk(torch.tensor([[0.1, 0.5, 0.9], [0.3, 0.2, 0.1]]), [0, 0], ks=(1, 2))
    assert k == {"K1": 50.0, "K2": 50.0}


@pytest.mark.parametrize("branched", [True, False])
def test_sem_heads_and_wildcards(branched):
    from orderlib.encoders.cnn import ItemCNN
    from orderlib.encoders.sherlock import SEM, structured_distance, structured_loss

    torch.manual_seed(0)
    sem = SEM(ItemCNN(10, 4, in_channels=3), dim=5, hidden=8, branched=branched)
    assert (sem.po_branch is not None) == branched
    v = sem(np.random.default_rng(0).integers(0, 255, (3, 64, 64, 3)).astype(np.uint8))
    assert v.shape == (3, 3, 5)
    l = torch.randn(3, 3, 5)
    orders = torch.tensor([1, 2, 3])
    moved = l.clone()
    moved[0, 1:] += 10.0  # wild-card slots of the first-order fact
    moved[1, 2] += 10.0  # and of the second-order one
    assert torch.allclose(structured_loss(v, l, orders), structured_loss(v, moved, orders))
    want = (
        0.5 * ((v[0, 0] - l[0, 0]).pow(2).sum() + (v[1, :2] - l[1, :2]).pow(2).sum() + (v[2] - l[2]).pow(2).sum()) / 3
    )
    assert structured_loss(v, l, orders).item() == pytest.approx(want.item(), rel=1e-5)
    d = structured_distance(v, l, orders)  # (images, facts)
    assert d.shape == (3, 3)
    assert d[2, 1].item() == pytest.approx((v[2, :2] - l[1, :2]).pow(2).sum().item(), rel=1e-4)
    assert torch.allclose(structured_distance(v, moved, orders), d)
    avg = structured_distance(v, l, orders, average=True)
    assert avg[0, 2].item() == pytest.approx((v[0].mean(0) - l[2].mean(0)).pow(2).sum().item(), rel=1e-4)
    assert avg[0, 1].item() == pytest.approx((v[0, :2].mean(0) - l[1, :2].mean(0)).pow(2).sum().item(), rel=1e-4)


def _zero_shot_world(seed=0):
    """Classes with signatures S (Z, A); features = S[label] @ M + noise; classes 0..14 seen."""
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((20, 6))
    M = rng.standard_normal((6, 12))
    labels = rng.integers(0, 20, 1000)
    x = S[labels] @ M + 0.1 * rng.standard_normal((1000, 12))
    return S, x, labels


def test_eszsl_and_cca_recover_a_linear_world():
    from orderlib.encoders.multiview import ESZSL, MultiviewCCA

    S, x, labels = _zero_shot_world()
    seen = labels < 15
    ez = ESZSL.fit(x[seen], labels[seen], S[:15], gamma=1e-2, lam=1e-2)
    unseen_pred = ez.distance(x[~seen], S[15:]).argmin(1).numpy() + 15
    assert (unseen_pred == labels[~seen]).mean() > 0.8  # zero-shot on the 5 held-out classes (chance 0.2)
    cca = MultiviewCCA.fit(x[seen], S[labels[seen]], k=6)
    assert cca.corr[0] > 0.99 and (np.diff(cca.corr) <= 1e-12).all()
    pred = cca.distance(x[~seen], S[15:]).argmin(1).numpy() + 15
    assert (pred == labels[~seen]).mean() > 0.8


def test_sem_learns_facts_and_resumes(tmp_path, train):
    """SEM-A on a few facts of fake items: language vectors are random per word; after training,
    each training image is nearer its own fact than chance would put it."""
    from orderlib.encoders.cnn import ItemCNN
    from orderlib.eval.facts import fact_topk
    from orderlib.training.sherlock import SEMConfig, distances, train_sem

    facts = [
        Fact("sandal"),
        Fact("bag"),
        Fact("sandal", "red"),
        Fact("bag", "red"),
        Fact("sandal", "left of", "bag"),
        Fact("bag", "above", "sandal"),
    ]
    imgs = make_fact_images(train, "train", facts, np.full(len(facts), 4), seed=0)
    words = {
        w: v
        for w, v in zip(["sandal", "bag", "red", "left of", "above"], np.random.default_rng(0).standard_normal((5, 4)))
    }
    lang = torch.tensor(
        np.stack([[words[f.s], words.get(f.p, np.zeros(4)), words.get(f.o, np.zeros(4))] for f in facts]),
        dtype=torch.float32,
    )  # (F, 3, 4)
    orders = torch.tensor([f.order for f in facts])
    x = imgs.render()
    cfg = SEMConfig(hidden=16, epochs=16, lr=1e-2, batch=8)
    cnn = ItemCNN(10, 4, in_channels=3)  # the pre-trained CNN, the same for both runs (it is in the key)
    calls = []
    own = lambda m: distances(m, x, lang, orders)[torch.arange(len(x)), torch.as_tensor(imgs.fact)]
    evaluate = lambda m: calls.append(1) or {"fit": -float(own(m).mean())}  # nearness to the own fact
    model, res = train_sem(
        cfg,
        cnn,
        x,
        lang[imgs.fact],
        orders[imgs.fact],
        evaluate,
        "fit",
        tmp_path / "sem.pt",
        progress=False,
    )
    summed = distances(model, x, lang, orders)
    assert (summed.argmin(1) < 2).float().mean() > 0.5  # summed over slots, first-order facts win
    k = fact_topk(distances(model, x, lang, orders, per_slot=True), imgs.fact, ks=(1,))
    assert k["K1"] > 1.5 * 100 / len(facts)
    again, res2 = train_sem(
        cfg,
        cnn,
        x,
        lang[imgs.fact],
        orders[imgs.fact],
        evaluate,
        "fit",
        tmp_path / "sem.pt",
        progress=False,
    )
    assert res2.resumed and len(calls) == cfg.epochs
    assert torch.allclose(distances(again, x, lang, orders), distances(model, x, lang, orders))


def test_implies_and_structured_order_embedding():
    """A wild-card block is zero, so <S> sits above <S, P> and its images (no violation); the loss
    never pushes away a fact that is true of the image; a wrong fact inside the margin costs."""
    from orderlib.data.facts import implies
    from orderlib.encoders.cnn import ItemCNN
    from orderlib.encoders.sherlock import StructuredOrder, order_energy, structured_order_loss

    facts = [Fact("sandal"), Fact("sandal", "red"), Fact("sandal", "left of", "bag"), Fact("bag"), Fact("bag", "red")]
    imp = implies(facts)
    assert imp[1, 0] and imp[2, 0] and imp[1, 1] and not imp[0, 1] and not imp[4, 0] and not imp[2, 3]
    torch.manual_seed(0)
    model = StructuredOrder(ItemCNN(10, 4, in_channels=3), word_dim=4, dim=6, hidden=8)
    l = torch.randn(5, 3, 4)
    l[1:3, 0], l[4, 0], l[4, 1] = l[0, 0], l[3, 0], l[1, 1]  # one vector per word: sandal, bag, red
    orders = torch.tensor([f.order for f in facts])
    f = model.facts(l, orders)  # (5, 3, 6)
    assert (f >= 0).all() and f[0, 1:].abs().sum() == 0 and f[1, 2].abs().sum() == 0
    v = f[[1]] + 0.1  # an image just below <sandal, red>: every block at least the fact's
    e = order_energy(v, f)[0]
    assert e[0] == 0 and e[1] == 0  # <sandal> and <sandal, red> are true of it
    two = torch.stack([f[1] + 0.1, f[4] + 0.1])  # images of <sandal, red> and <bag, red>
    fb = f[[1, 4]]
    loss_masked = structured_order_loss(two, fb, torch.tensor(imp[[1, 4]][:, [1, 4]]), margin=1e6)
    loss_all = structured_order_loss(two, fb, torch.zeros(2, 2, dtype=torch.bool), margin=1e6)
    assert loss_all > loss_masked > 0  # negatives cost; masking the diagonal removes the positives' hinges
    same = torch.stack([f[1] + 0.1, f[1] + 0.2])  # two images of one fact: no negative pair at all
    assert structured_order_loss(same, f[[1, 1]], torch.tensor(imp[[1, 1]][:, [1, 1]]), margin=1.0) == 0
