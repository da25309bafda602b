"""Composition functions, recognisers and the attribute-object metrics."""

import numpy as np
import pytest
import torch

from orderlib.encoders.cnn import ItemCNN
from orderlib.encoders.composition import COMPOSERS, build_composer
from orderlib.eval.compositional import (
    accuracy_at_bias,
    context_dependence,
    generalised_sweep,
    predict_scores,
    sampled_sweep,
    topk_accuracy,
)
from orderlib.training.composition import CompositionConfig, epoch_batches, train_recogniser

N_A, N_O, D = 6, 5, 8


def _words(seed=0):
    return np.random.default_rng(seed).standard_normal((N_A + N_O, D)).astype(np.float32)


@pytest.mark.parametrize("name", list(COMPOSERS))
def test_composers_map_pairs_and_train_their_words(name):
    comp = build_composer(name, _words(), N_A, 12, tensor_dim=4)
    pairs = torch.tensor([[0, 0], [5, 4], [2, 1]])
    out = comp(pairs)
    assert out.shape == (3, 12) and torch.isfinite(out).all()
    out.sum().backward()
    assert comp.words.weight.grad[[0, 5, 2, N_A + 0, N_A + 4, N_A + 1]].abs().sum(1).gt(0).all()
    assert comp.words.weight.grad[3].abs().sum() == 0  # an attribute not in the batch
    if name not in ("mlp_interaction", "tensor", "lstm", "gru"):
        return
    swapped = comp(pairs.flip(0))  # order of pairs in the batch does not matter
    assert torch.allclose(swapped.flip(0), out, atol=1e-6)


def test_tensor_composer_is_eq_4_and_5():
    comp = build_composer("tensor", _words(), N_A, 7, tensor_dim=3)
    x = torch.cat([comp.words.weight[1], comp.words.weight[N_A + 2]])  # [a; o]
    h = torch.stack([x @ comp.V[i] @ x for i in range(3)])
    want = comp.proj(torch.nn.functional.leaky_relu(h + comp.W(x), 0.1))
    assert torch.allclose(comp(torch.tensor([[1, 2]]))[0], want, atol=1e-5)
    pairs = torch.tensor([[1, 2], [3, 0], [0, 4], [1, 2]])  # a batch: each row its own x^T V_i x
    xs = torch.cat([comp.words.weight[pairs[:, 0]], comp.words.weight[N_A + pairs[:, 1]]], 1)
    hs = torch.stack([torch.stack([x @ comp.V[i] @ x for i in range(3)]) for x in xs])
    want = comp.proj(torch.nn.functional.leaky_relu(hs + comp.W(xs), 0.1))
    assert torch.allclose(comp(pairs), want, atol=1e-5)


def test_rnn_composer_encodes_single_words():
    comp = build_composer("lstm", _words(), N_A, 10)
    assert comp.encode_words(torch.arange(N_A + N_O)).shape == (N_A + N_O, 10)


def test_topk_accuracy_counts_ranks():
    scores = torch.tensor([[0.9, 0.5, 0.1], [0.2, 0.3, 0.8], [0.5, 0.5, 0.0]])
    acc = topk_accuracy(scores, torch.tensor([0, 0, 1]), ks=(1, 2))
    # image 0 right at 1; image 1's target is third; image 2 ties at the top: 1/2 expected at top-1
    assert acc["top-1"] == pytest.approx(100 * 1.5 / 3) and acc["top-2"] == pytest.approx(100 * 2 / 3)


def test_generalised_sweep_is_exact():
    rng = np.random.default_rng(0)
    n, p = 300, 12
    unseen = np.r_[np.zeros(7, bool), np.ones(5, bool)]
    target = np.r_[rng.integers(0, 7, 150), rng.integers(7, 12, 150)]
    scores = torch.as_tensor(rng.standard_normal((n, p)))
    scores[np.arange(n), target] += 1.0
    scores[:, unseen] -= 0.7  # a seen bias, as trained models have
    exact = generalised_sweep(scores, target, unseen)
    grid = [accuracy_at_bias(scores, target, unseen, b) for b in np.linspace(-6, 6, 4001)]
    assert exact["best hm"] == pytest.approx(max(g["hm"] for g in grid), abs=0.35)
    assert exact["best hm"] >= max(g["hm"] for g in grid) - 1e-9
    assert exact["best seen"] == pytest.approx(grid[0]["seen"]) and exact["best unseen"] == pytest.approx(
        grid[-1]["unseen"]
    )
    # reference area along the grid's own path (rising bias: seen falls, unseen rises), by trapezoids
    s, u = np.array([g["seen"] for g in grid]), np.array([g["unseen"] for g in grid])
    area = sum((s[i] - s[i + 1]) * (u[i] + u[i + 1]) / 2 for i in range(len(grid) - 1)) + s[-1] * u[-1]
    assert exact["auc"] == pytest.approx(area / 100, abs=0.3)
    sampled = sampled_sweep(scores, target, unseen)
    assert sampled["best hm"] <= exact["best hm"] + 1e-9 and sampled["auc"] <= exact["auc"] + 1e-9
    at = accuracy_at_bias(scores, target, unseen, exact["bias"])
    assert at["hm"] == pytest.approx(exact["best hm"])
    with pytest.raises(ValueError, match="both seen and unseen"):
        generalised_sweep(scores[:150], target[:150], unseen)


# Four images, pair 0 seen, pair 1 unseen. Thresholds: A 1, B 3 (seen: right below them),
# C -2, D 2 (unseen: right above them). In rising bias the curve visits (seen, unseen) =
# (100, 0), (100, 50), (50, 50), (50, 100), (0, 100): its area is 50 x 100 + 50 x 50 = 75% of the
# square. Ordering by seen accuracy alone would walk (50, 50) before (50, 100) and give 62.5.
HAND_SCORES = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
HAND_TARGET = torch.tensor([0, 0, 1, 1])
HAND_UNSEEN = torch.tensor([False, True])


def test_generalised_auc_follows_the_bias_path():
    exact = generalised_sweep(HAND_SCORES, HAND_TARGET, HAND_UNSEEN)
    assert exact["auc"] == pytest.approx(75.0)
    assert exact["best hm"] == pytest.approx(200 / 3) and exact["best seen"] == 100 and exact["best unseen"] == 100
    seen, unseen = exact["curve"]
    assert seen.tolist() == [100, 100, 50, 50, 0] and unseen.tolist() == [0, 50, 50, 100, 100]


def test_sampled_sweep_takes_the_field_evaluators_points():
    # czsl: biases at the unseen thresholds less 1e-4 (-2.0001, 1.9999), then a very large bias:
    # points (100, 0), (50, 50), (0, 100); area 50% of the square, best harmonic mean 50.
    got = sampled_sweep(HAND_SCORES, HAND_TARGET, HAND_UNSEEN)
    assert got["auc"] == pytest.approx(50.0) and got["best hm"] == pytest.approx(50.0)
    assert got["best seen"] == 100 and got["best unseen"] == 100


def test_ties_count_as_in_the_closed_world():
    # image 0 (seen target 0) ties with seen pair 1: half a hit while it beats the unseen pair;
    # image 1 (unseen target 2) is right for bias > 0 and, at bias 0, tied: half a hit there.
    scores = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    target, unseen = torch.tensor([0, 2]), torch.tensor([False, False, True])
    assert accuracy_at_bias(scores, target, unseen, -0.5) == {"seen": 50.0, "unseen": 0.0, "hm": 0.0}
    assert accuracy_at_bias(scores, target, unseen, 0.0)["unseen"] == 50.0
    assert accuracy_at_bias(scores, target, unseen, 0.5)["unseen"] == 100.0
    assert generalised_sweep(scores, target, unseen)["best seen"] == 50.0
    closed = topk_accuracy(scores[:1, :2], target[:1], ks=(1,))
    assert closed["top-1"] == 50.0


def test_context_dependence_bounds():
    same = np.tile(np.array([1.0, 2.0, 0.5]), (2, 4, 1))
    assert np.allclose(context_dependence(same), 0)
    ortho = np.stack([np.eye(4)])  # one attribute, 4 objects, orthogonal shifts
    assert np.allclose(context_dependence(ortho), 1)


def test_distinct_pair_batches():
    labels = np.array([(a, o) for a in range(4) for o in range(3) for _ in range(5)])
    for b in epoch_batches(labels, 8, True, np.random.default_rng(0)):
        assert len({tuple(x) for x in labels[b].tolist()}) == len(b) == 8
    plain = np.concatenate(epoch_batches(labels, 8, False, np.random.default_rng(0)))
    assert sorted(plain.tolist()) == list(range(len(labels)))


def _factorised(n_per_pair=20, seed=0):
    """Features = attribute code + object code + noise: a world where composition is possible.
    Returns features, labels, seen pairs, unseen pairs."""
    rng = np.random.default_rng(seed)
    codes_a, codes_o = rng.standard_normal((N_A, 16)), rng.standard_normal((N_O, 16))
    pairs = np.array([(a, o) for a in range(N_A) for o in range(N_O)])
    unseen = pairs[(pairs[:, 0] + pairs[:, 1]) % 4 == 0]  # every attr and obj still seen elsewhere
    seen = pairs[(pairs[:, 0] + pairs[:, 1]) % 4 != 0]

    def draw(ps):
        lab = np.repeat(ps, n_per_pair, 0)
        x = codes_a[lab[:, 0]] + codes_o[lab[:, 1]] + 0.3 * rng.standard_normal((len(lab), 16))
        return torch.as_tensor(x, dtype=torch.float32), lab

    return draw(seen), draw(unseen), seen, unseen


def _unseen_top1(model, test, unseen):
    x, lab = test
    target = torch.as_tensor([np.flatnonzero((unseen == l).all(1))[0] for l in lab])
    return topk_accuracy(predict_scores(model, x, unseen), target, ks=(1,))["top-1"]


@pytest.mark.parametrize(
    "kind,factor",
    [
        (dict(model="vse", composer="mlp"), 3),
        (dict(model="visual_product"), 3),
        (dict(model="order", composer="mlp", margin=0.05, lr=1e-2), 2),
    ],
)
def test_recognisers_compose_unseen_pairs_and_the_crf_does_not(kind, factor):
    (x, lab), test, seen, unseen = _factorised()
    chance = 100 / len(unseen)
    evaluate = lambda m: {"score": 0.0}
    base = dict(epochs=6, lr=3e-3, dim=16, hidden=16, batch=16, decay_every=100)
    model, _ = train_recogniser(
        CompositionConfig(**{**base, **kind}), _words(), N_A, x, lab, seen, evaluate, "score", progress=False
    )
    crf, _ = train_recogniser(
        CompositionConfig(**base, model="crf"), _words(), N_A, x, lab, seen, evaluate, "score", progress=False
    )
    assert _unseen_top1(model, test, unseen) > factor * chance
    crf_top1 = _unseen_top1(crf, test, unseen)  # per-object attribute heads do not transfer
    assert crf_top1 < 2 * chance and crf_top1 < _unseen_top1(model, test, unseen)


def test_training_resumes_and_finetunes_the_cnn(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (40, 12, 12, 3)).astype(np.uint8)
    lab = np.array([(a % 2, a % 3) for a in range(40)])
    seen = np.unique(lab, axis=0)
    cnn = ItemCNN(3, 4, in_channels=3).eval().requires_grad_(False)
    from orderlib.encoders.cnn import item_features

    feats = item_features(cnn, images)
    before = {k: v.clone() for k, v in cnn.state_dict().items()}
    cfg = CompositionConfig(model="vse", composer="gru", epochs=2, dim=8, batch=6, finetune_epochs=1, finetune_lr=1e-2)
    calls = []
    evaluate = lambda m: calls.append(m.cnn is not None) or {"score": float(len(calls))}
    model, fits = train_recogniser(
        cfg, _words(), N_A, feats, lab, seen, evaluate, "score", tmp_path / "m.pt", False, cnn=cnn, images=images
    )
    assert calls == [False, False, True] and [len(f.history) for f in fits] == [2, 1]
    assert not torch.equal(model.cnn.trunk[0].weight, before["trunk.0.weight"])  # the CNN was trained
    assert torch.equal(model.cnn.trunk[1].running_mean, before["trunk.1.running_mean"])  # BN statistics kept
    again, fits2 = train_recogniser(
        cfg,
        _words(),
        N_A,
        feats,
        lab,
        seen,
        evaluate,
        "score",
        tmp_path / "m.pt",
        False,
        cnn=ItemCNN(3, 4, in_channels=3),
        images=images,
    )
    assert all(f.resumed for f in fits2) and len(calls) == 3  # nothing retrained
    assert torch.allclose(predict_scores(again, images, seen), predict_scores(model, images, seen))
