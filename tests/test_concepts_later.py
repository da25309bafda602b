"""The later hypernymy models: boxes, Gumbel boxes, density order embeddings, Poincare embeddings
and hyperbolic entailment cones (energies by hand, constraints, short training runs)."""

import math

import numpy as np
import pytest
import torch
from test_train_hypernymy import chain_forest

from orderlib import losses
from orderlib import penalties as P
from orderlib.concepts import (
    CONCEPT_MODELS,
    HypernymyConfig,
    build_concept_model,
    init_from_poincare,
    train_concept_model,
)
from orderlib.data.hypernymy import make_splits

LATER = [
    "box embeddings",
    "Gumbel box embeddings",
    "density order embeddings",
    "Poincaré embeddings",
    "hyperbolic entailment cones",
]
T = lambda *rows: torch.tensor(rows, dtype=torch.float64)  # noqa: E731


@pytest.fixture(scope="module")
def data():
    return make_splits(chain_forest(), "clean", n_test=30, n_dev=30, seed=0)


def test_registered_under_their_names():
    for name in LATER:
        assert name in CONCEPT_MODELS
        m = build_concept_model(name, 7, dim=3, seed=0)
        assert m.energies(torch.tensor([[1, 0], [0, 1]])).shape == (2,)


# --- boxes ---------------------------------------------------------------------------------------


def test_box_energy_hand_case():
    # u = [.2,.4] x [.2,.4] (volume .04), v = [.3,.9] x [0,1]: meet [.3,.4] x [.2,.4] (volume .02)
    lo_u, hi_u, lo_v, hi_v = T([0.2, 0.2]), T([0.4, 0.4]), T([0.3, 0.0]), T([0.9, 1.0])
    hard = P.box_energy(lo_u, hi_u, lo_v, hi_v, temperature=1e-4)
    assert hard.item() == pytest.approx(math.log(0.04 / 0.02), rel=1e-3)  # -log P(v|u) = log 2
    sp = lambda x: math.log1p(math.exp(x))  # noqa: E731  softplus, temperature 1
    soft = P.box_energy(lo_u, hi_u, lo_v, hi_v, temperature=1.0)
    assert soft.item() == pytest.approx(math.log(sp(0.2) * sp(0.2) / (sp(0.1) * sp(0.2))), rel=1e-9)
    # disjoint boxes: the softplus volume still gives a finite energy and a gradient
    lo_w = T([0.6, 0.6]).requires_grad_()
    e = P.box_energy(lo_u, hi_u, lo_w, T([0.8, 0.8]), temperature=0.1)
    e.backward()
    assert torch.isfinite(e) and e.item() > 0 and lo_w.grad.abs().sum() > 0


def test_gumbel_box_energy_hand_case_and_hard_limit():
    lo_u, hi_u, lo_v, hi_v, beta = 0.2, 0.6, 0.3, 0.9, 0.1
    g = 0.5772156649015329
    lo = beta * math.log(math.exp(lo_u / beta) + math.exp(lo_v / beta))
    hi = -beta * math.log(math.exp(-hi_u / beta) + math.exp(-hi_v / beta))
    vol = lambda s: beta * math.log1p(math.exp(s / beta - 2 * g))  # noqa: E731  Dasgupta et al., Eq. 3
    want = math.log(vol(hi_u - lo_u)) - math.log(vol(hi - lo))
    got = P.gumbel_box_energy(T([lo_u]), T([hi_u]), T([lo_v]), T([hi_v]), beta=beta)
    assert got.item() == pytest.approx(want, rel=1e-9)
    cold = P.gumbel_box_energy(T([lo_u]), T([hi_u]), T([lo_v]), T([hi_v]), beta=1e-4)
    assert cold.item() == pytest.approx(math.log(0.4 / 0.3), rel=1e-2)  # hard boxes as beta -> 0


@pytest.mark.parametrize("name", ["box embeddings", "Gumbel box embeddings"])
def test_nested_boxes_low_energy_reversed_high(name):
    m = build_concept_model(name, 2, dim=3, seed=0).double()
    with torch.no_grad():  # box 0 = [.4,.5]^3 inside box 1 = [.1,.9]^3; lo = sigmoid(a), hi = lo + sigmoid(b)(1 - lo)
        lo, hi = T([0.4] * 3, [0.1] * 3), T([0.5] * 3, [0.9] * 3)
        m.lo.weight.copy_(torch.logit(lo))
        m.side.weight.copy_(torch.logit((hi - lo) / (1 - lo)))
        got_lo, got_hi = m.corners(torch.tensor([0, 1]))
        assert torch.allclose(got_lo, lo) and torch.allclose(got_hi, hi)
        e = m.energies(torch.tensor([[0, 1], [1, 0]]))
    assert e[0] < 0.1 * e[1] and e[0] >= 0
    if name == "box embeddings":  # hard meet: the nested pair's meet is u itself, energy exactly 0
        assert e[0].item() == pytest.approx(0.0, abs=1e-12)


# --- density order embeddings ----------------------------------------------------------------------


def test_density_order_violation_hand_case():
    # KL(N(0, 1) || N(1, 2)) = 0.5 (1/2 + 1/2 - 1 + log 2) = 0.5 log 2
    args = T([0.0]), T([1.0]), T([1.0]), T([2.0])
    assert P.density_order_violation(*args).item() == pytest.approx(0.5 * math.log(2))
    assert P.density_order_violation(*args, gamma=0.1).item() == pytest.approx(0.5 * math.log(2) - 0.1)
    assert P.density_order_violation(*args, gamma=1.0).item() == 0.0


def test_density_order_embeddings_nested_and_reversed():
    m = build_concept_model("density order embeddings", 2, dim=2, seed=0, gamma=5.0).double()
    with torch.no_grad():  # narrow u and broad v around nearby unit means
        m.mu.weight.copy_(T([1.0, 0.1], [1.0, 0.0]))
        m.log_var.weight.copy_(torch.log(T([0.01, 0.01], [1.0, 1.0])))
        e = m.energies(torch.tensor([[0, 1], [1, 0]]))
    mu = torch.nn.functional.normalize(m.mu.weight, dim=-1)  # the model normalises means
    kl = P.gaussian_kl(mu[0], T(0.01, 0.01), mu[1], T(1.0, 1.0))
    assert 0 < kl.item() < 5 and e[0].item() == 0.0
    assert e[0] == 0 and e[1] > 10


# --- Poincare embeddings ----------------------------------------------------------------------------


def test_poincare_distance_closed_form():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(50, 4, generator=g, dtype=torch.float64) - 0.5
    y = torch.rand(50, 4, generator=g, dtype=torch.float64) - 0.5
    x, y = x * (0.95 / x.norm(dim=-1, keepdim=True).clamp(min=1)), y * 0.9
    closed = torch.acosh(1 + 2 * (x - y).pow(2).sum(-1) / ((1 - x.pow(2).sum(-1)) * (1 - y.pow(2).sum(-1))))
    assert torch.allclose(P.poincare_distance(x, y), closed, atol=1e-9)
    assert P.poincare_distance(T([0.5, 0.0]), T([0.0, 0.0])).item() == pytest.approx(math.log(3))  # 2 artanh(1/2)


def test_poincare_isa_energy_orders_nested_pair_below_reversed():
    child, parent = T([0.8, 0.1]), T([0.2, 0.0])  # general concepts near the origin
    d = P.poincare_distance(child, parent)
    e = P.poincare_isa_energy(child, parent, alpha=10.0)
    assert e.item() == pytest.approx((1 + 10 * (0.2 - child.norm().item())) * d.item())
    assert P.poincare_isa_energy(parent, child, alpha=10.0) > e
    assert P.poincare_isa_energy(child, parent, alpha=0.0).item() == pytest.approx(d.item())


# --- hyperbolic entailment cones --------------------------------------------------------------------


def test_cone_aperture_and_angle_hand_cases():
    assert P.cone_aperture(T([0.5, 0.0]), K=0.1).item() == pytest.approx(math.asin(0.1 * 0.75 / 0.5))
    x = T([0.5, 0.0])
    assert P.cone_angle(x, T([0.8, 0.0])).item() == pytest.approx(0.0, abs=2e-3)  # further out on the ray
    assert P.cone_angle(x, T([0.0, 0.0])).item() == pytest.approx(math.pi, abs=2e-3)  # towards the origin


def test_cone_angle_is_the_angle_of_the_geodesic_at_x():
    """Xi(x, y) against geoopt: the angle at x between log_x(y) and the outward radius (the ball
    is conformal, so Euclidean angles of tangent vectors are the hyperbolic ones)."""
    import geoopt

    g = torch.Generator().manual_seed(3)
    x = (torch.rand(40, 3, generator=g, dtype=torch.float64) - 0.5) * 1.1
    y = (torch.rand(40, 3, generator=g, dtype=torch.float64) - 0.5) * 1.1
    log = geoopt.PoincareBall().logmap(x, y)
    want = torch.acos(torch.nn.functional.cosine_similarity(log, x, dim=-1))
    assert torch.allclose(P.cone_angle(x, y), want, atol=1e-5)


def test_cone_violation_zero_inside_positive_outside():
    parent = T([0.5, 0.0])
    psi = P.cone_aperture(parent).item()
    inside = T([0.9, 0.01])  # just off the ray through the parent, further out
    assert P.cone_angle(parent, inside).item() < psi / 2
    outside = T([0.6, 0.5])
    assert P.cone_violation(inside, parent).item() == 0.0
    e_out = P.cone_violation(outside, parent).item()
    assert e_out == pytest.approx(P.cone_angle(parent, outside).item() - psi) and e_out > 0.5
    assert P.cone_violation(parent, inside).item() > 1.0  # the reversed pair violates


# --- training --------------------------------------------------------------------------------------

SETTINGS = {  # a short run on the chain forest per model
    "box embeddings": dict(lr=0.05),
    "Gumbel box embeddings": dict(lr=0.05),
    "density order embeddings": dict(lr=0.05, margin=1000.0),
    "Poincaré embeddings": dict(lr=0.1, negatives=("random", "random"), model_kwargs={"alpha": 1.0}),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_short_run_separates_pairs_and_keeps_constraints(data, name):
    cfg = HypernymyConfig(model=name, dim=10, epochs=30, batch=32, patience=30, **SETTINGS[name])
    r = train_concept_model(data, cfg, progress=False)
    assert r.dev_accuracy > 80 and r.test_accuracy > 75, (r.dev_accuracy, r.test_accuracy)
    assert r.history[-1]["loss"] < r.history[0]["loss"]
    m = r.model
    if "box" in name:
        lo, hi = m.corners(torch.arange(data.n_nodes))
        assert (lo >= 0).all() and (hi >= lo).all() and (hi <= 1).all()
    if name == "Poincaré embeddings":
        assert (m.emb.weight.norm(dim=-1) < 1).all()


def test_cones_from_poincare_init_separate_pairs_and_stay_in_annulus(data):
    pe = train_concept_model(
        data,
        HypernymyConfig(
            model="Poincaré embeddings", dim=10, epochs=30, batch=32, patience=30, **SETTINGS["Poincaré embeddings"]
        ),
        progress=False,
    )
    init = init_from_poincare(pe.model)
    cfg = HypernymyConfig(
        model="hyperbolic entailment cones", dim=10, epochs=20, batch=32, patience=20, lr=0.01, margin=0.01
    )
    r = train_concept_model(data, cfg, progress=False, init=init)
    assert r.dev_accuracy > 80 and r.test_accuracy > 75, (r.dev_accuracy, r.test_accuracy)
    norms = r.model.emb.weight.norm(dim=-1)
    assert (norms >= r.model.r_min - 1e-6).all() and (norms <= r.model.r_max + 1e-6).all()
    assert r.model.r_min == pytest.approx(2 * 0.1 / (1 + math.sqrt(1.04)) + 1e-5)


def test_one_step_keeps_constraints_even_with_a_huge_rate(data):
    for name in ["Poincaré embeddings", "hyperbolic entailment cones", "box embeddings"]:
        for opt in ["lazy_adam", "adam"]:
            cfg = HypernymyConfig(
                model=name, dim=5, epochs=1, batch=64, lr=5.0, patience=1, optimizer=opt, train_fraction=0.3
            )
            m = train_concept_model(data, cfg, progress=False).model
            assert all(torch.isfinite(t).all() for t in m.tables().values())
            if name == "Poincaré embeddings":
                assert (m.emb.weight.norm(dim=-1) < 1).all()
            elif name == "hyperbolic entailment cones":
                n = m.emb.weight.norm(dim=-1)
                assert (n >= m.r_min - 1e-6).all() and (n <= m.r_max + 1e-6).all()


def test_losses_by_hand():
    e_pos, e_neg = torch.tensor([0.5, 1.0]), torch.tensor([2.0, 0.1])
    want = 0.75 - (math.log(1 - math.exp(-2.0)) + math.log(1 - math.exp(-0.1))) / 2
    assert losses.binary_cross_entropy(e_pos, e_neg).item() == pytest.approx(want, rel=1e-6)
    want = (math.log1p(math.exp(0.5 - 2.0)) + math.log1p(math.exp(1.0 - 0.1))) / 2
    assert losses.logistic_ranking(e_pos, e_neg).item() == pytest.approx(want, rel=1e-6)
    assert {"binary_cross_entropy", "logistic_ranking"} <= set(losses.LOSSES)
    assert np.isfinite(losses.binary_cross_entropy(e_pos, torch.zeros(2)).item())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", LATER)
def test_later_models_train_on_cuda(data, name):
    cfg = HypernymyConfig(model=name, dim=4, epochs=2, batch=16, lr=0.05, patience=2, negatives=("swap",))
    r = train_concept_model(data, cfg, device="cuda", progress=False)
    assert all(t.device.type == "cuda" for t in r.model.tables().values())
    assert 0 <= r.test_accuracy <= 100
