"""The compiled word2gauss loop: same updates as a plain Python transcription of word2gauss's rule,
learns a toy hierarchy, resumes, and refuses bad input."""

import math

import pytest
import torch
from test_train_hypernymy import chain_forest

from orderlib.concepts.compiled import word2gauss_kernel
from orderlib.concepts.word2gauss import Word2GaussConfig, train_word2gauss
from orderlib.data.hypernymy import make_splits

pytestmark = pytest.mark.skipif(word2gauss_kernel() is None, reason="no C++ compiler to build the word2gauss loop")


def kl(mu, var, u, v):
    return 0.5 * sum(
        var[u][d] / var[v][d] + (mu[v][d] - mu[u][d]) ** 2 / var[v][d] - 1 + math.log(var[v][d]) - math.log(var[u][d])
        for d in range(len(mu[u]))
    )


def reference_epoch(mu, var, am, av, pos, neg, eta, margin, mu_max, lo, hi, clip):
    """word2gauss's train_batch + _accumulate_update, one pair at a time, in Python floats."""

    def update(k, g_mu, g_var, sign):
        for d in range(len(mu[k])):
            g = max(-clip, min(clip, sign * g_mu[d]))
            am[k][d] += g * g
            mu[k][d] -= eta / (math.sqrt(am[k][d]) + 1) * g
        n = math.sqrt(sum(x * x for x in mu[k]))
        if n > mu_max:
            mu[k] = [x * mu_max / n for x in mu[k]]
        for d in range(len(var[k])):
            g = max(-clip, min(clip, sign * g_var[d]))
            av[k][d] += g * g
            var[k][d] = min(hi, max(lo, var[k][d] - eta / (math.sqrt(av[k][d]) + 1) * g))

    def step(u, v, sign):
        diff = [mu[v][d] - mu[u][d] for d in range(len(mu[u]))]
        g_mu_u = [-diff[d] / var[v][d] for d in range(len(diff))]
        g_mu_v = [diff[d] / var[v][d] for d in range(len(diff))]
        g_var_u = [0.5 * (1 / var[v][d] - 1 / var[u][d]) for d in range(len(diff))]
        g_var_v = [0.5 * (1 / var[v][d] - (var[u][d] + diff[d] ** 2) / var[v][d] ** 2) for d in range(len(diff))]
        update(u, g_mu_u, g_var_u, sign)
        if v != u:
            update(v, g_mu_v, g_var_v, sign)

    total = 0.0
    for (pu, pv), (nu, nv) in zip(pos, neg):
        loss = margin + kl(mu, var, pu, pv) - kl(mu, var, nu, nv)
        if loss <= 1e-14:
            continue
        total += loss
        step(pu, pv, +1.0)
        step(nu, nv, -1.0)
    return total / len(pos)


def test_compiled_epoch_matches_word2gauss_rule():
    g = torch.Generator().manual_seed(0)
    n, d = 6, 3
    mu = torch.randn(n, d, generator=g) * 0.5
    var = torch.rand(n, d, generator=g) * 2 + 0.1
    pos = torch.tensor([[0, 1], [2, 3], [1, 4], [5, 0], [3, 3]])
    neg = torch.tensor([[0, 5], [4, 3], [2, 4], [5, 1], [0, 3]])
    args = (0.3, 2.0, 1.0, 0.1, 2.5, 0.4)  # eta, margin, mu_max, var_min, var_max, clip (clipping bites)
    ref = [mu.double().tolist(), var.double().tolist(), [[0.0] * d for _ in range(n)], [[0.0] * d for _ in range(n)]]
    am, av = torch.zeros(n, d), torch.zeros(n, d)
    for _ in range(3):  # epochs: accumulators carry over
        loss = word2gauss_kernel().train_epoch(mu, var, am, av, pos, neg, args[0], args[0], *args[1:])
        ref_loss = reference_epoch(*ref, pos.tolist(), neg.tolist(), *args)
        assert loss == pytest.approx(ref_loss, rel=1e-5, abs=1e-6)
    assert torch.allclose(mu, torch.tensor(ref[0], dtype=torch.float32), atol=1e-5)
    assert torch.allclose(var, torch.tensor(ref[1], dtype=torch.float32), atol=1e-5)
    assert (mu.norm(dim=1) <= 1.0 + 1e-6).all() and ((var >= 0.1) & (var <= 2.5)).all()


def test_compiled_epoch_rejects_bad_input():
    k = word2gauss_kernel()
    mu, var = torch.zeros(3, 2), torch.ones(3, 2)
    with pytest.raises(RuntimeError, match="out of range"):
        k.train_epoch(
            mu,
            var,
            mu.clone(),
            mu.clone(),
            torch.tensor([[0, 3]]),
            torch.tensor([[0, 1]]),
            0.1,
            0.1,
            1.0,
            2.0,
            0.1,
            5.0,
            10.0,
        )
    with pytest.raises(RuntimeError, match="float32"):
        k.train_epoch(
            mu.double(), var, mu, mu, torch.tensor([[0, 1]]), torch.tensor([[0, 1]]), 0.1, 0.1, 1.0, 2.0, 0.1, 5.0, 10.0
        )


@pytest.fixture(scope="module")
def data():
    return make_splits(chain_forest(), "clean", n_test=30, n_dev=30, seed=0)


def test_word2gauss_learns_a_hierarchy_and_resumes(data, tmp_path):
    cfg = Word2GaussConfig(dim=8, epochs=30, patience=30, margin=2.0, eta=0.5)
    full = train_word2gauss(data, cfg, progress=False)
    assert full.dev_accuracy > 80 and full.test_accuracy > 75
    assert full.history[-1]["loss"] < full.history[0]["loss"]
    ckpt = tmp_path / "w2g.pt"
    train_word2gauss(data, Word2GaussConfig(**{**cfg.__dict__, "epochs": 30}), ckpt, progress=False)
    again = train_word2gauss(data, cfg, ckpt, progress=False)  # a finished run loads at once
    assert again.resumed and again.test_accuracy == full.test_accuracy
    assert torch.equal(again.model.mu.weight, full.model.mu.weight)
