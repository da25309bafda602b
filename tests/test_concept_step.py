"""The compiled table-model step (orderlib/csrc/concept_step.cpp) against the PyTorch step it replaces."""

import os

import numpy as np
import pytest
import torch

from orderlib.concepts import build_concept_model
from orderlib.concepts import compiled as concept_step
from orderlib.concepts.row_adam import RowAdam
from orderlib.concepts.step import CompiledStep, DenseStep, RowStep, build_step


@pytest.fixture(scope="module", autouse=True)
def kernel():
    if concept_step.concept_step_kernel() is None:
        if os.environ.get("ORDERLIB_REQUIRE_FUSED") == "1":
            pytest.fail(f"ORDERLIB_REQUIRE_FUSED=1 but {concept_step.concept_step_status()}")
        pytest.skip(concept_step.concept_step_status())


def _stepper(name, fused, n, dim=6, loss=None, optimizer="lazy_adam", margin=1.0, **kw):
    model = build_concept_model(name, n, dim, 0, **kw).double()
    with torch.no_grad():  # break the init's ties (equal variances): Adam turns a zero gradient's rounding
        g = torch.Generator().manual_seed(1)  # noise into whole steps, which no two implementations share
        for p in model.parameters():
            if p.requires_grad:  # not the Poincare ball's fixed curvature
                p.mul_(1 + 0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    model.constrain_all_()
    return model, build_step(model, optimizer, loss or model.loss, margin, 0.01, "cpu", fused)


def _train(name, fused, steps=4, n=60, b=8, k=1, idle_from=None, **kw):
    """Steps on random pairs; rows >= n // 2 sit idle between the steps listed in idle_from (catch-up)."""
    model, st = _stepper(name, fused, n, **kw)
    model.init = {k: v.detach().clone() for k, v in model.named_parameters()}
    rng = np.random.default_rng(3)
    losses = []
    for s in range(steps):
        hi = n if idle_from is None or s in idle_from else n // 2
        pos = torch.as_tensor(rng.integers(0, hi, (b, 2)))
        neg = torch.as_tensor(rng.integers(0, hi, (k * b, 2)))
        losses.append(st.step(pos, neg))
    return model, st, losses


CASES = [
    ("order-embeddings", {}),
    ("order-embeddings", {"loss": "ranking_hinge"}),
    ("order-embeddings (symmetric)", {}),
    ("density order embeddings", {"gamma": 2.0, "margin": 5.0}),
    ("density order embeddings", {"gamma": 2.0, "margin": 5.0, "var_min": 1e-3, "var_max": 1e-1}),
    ("density order embeddings", {"gamma": 0.5, "margin": 5.0, "normalize": False, "var_init": 0.5}),
    ("box embeddings", {"temperature": 1.0}),
    ("box embeddings", {"temperature": 0.3, "loss": "max_margin", "margin": 3.0}),
    ("Gumbel box embeddings", {"beta": 0.01, "temperature": 1.0}),
    ("Gumbel box embeddings", {"beta": 0.1}),
    ("order-embeddings (bilinear)", {}),  # dense W and b: gradient from the kernel, torch Adam's step
    ("order-embeddings (bilinear)", {"loss": "max_margin", "margin": 0.5}),
    ("order-embeddings (bilinear)", {"linear": True}),  # a constant column, reset with its moments each step
    ("Poincaré embeddings", {"init_range": 0.3}),  # Riemannian Adam on the ball, softmax ranking loss
    ("hyperbolic entailment cones", {"margin": 0.01}),
    ("hyperbolic entailment cones", {"K": 0.3, "margin": 0.5}),
]


@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("optimizer", ["lazy_adam", "sparse_adam"])
def test_fused_step_matches_pytorch_step(name, kw, k, optimizer):
    # steps 0 and 4 touch every row, the others half of them: the catch-up rule moves the rest
    ref, st_ref, l_ref = _train(name, False, steps=5, k=k, idle_from={0, 4}, optimizer=optimizer, **kw)
    out, st_out, l_out = _train(name, True, steps=5, k=k, idle_from={0, 4}, optimizer=optimizer, **kw)
    assert isinstance(st_ref, RowStep) and isinstance(st_out, CompiledStep)
    np.testing.assert_allclose(l_out, l_ref, rtol=1e-7)  # boxes: E = log vol(u) - log vol(meet) cancels
    for (n1, p1), p2 in zip(ref.named_parameters(), out.parameters()):
        torch.testing.assert_close(p2, p1, rtol=0, atol=1e-6, msg=n1)
        fixed = not p1.requires_grad or (n1 == "b" and (kw.get("loss") or ref.loss) == "ranking_hinge")
        if not fixed:  # (the ball's curvature is fixed; bilinear's b cancels in the hinge)
            assert (p1 - ref.init[n1]).abs().max() > 1e-3, n1  # it moved
    assert st_out.rows.t == st_ref.rows.t == 5
    assert torch.equal(st_out.rows.last, st_ref.rows.last)
    for name_ in st_ref.rows.moments:
        torch.testing.assert_close(st_out.rows.moments[name_], st_ref.rows.moments[name_], rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name,kw", CASES)
def test_compiled_flush_matches_rowadam_flush(name, kw):
    """Epoch end: the kernel's catch-up of every idle row (concept_flush) against RowAdam.flush."""
    (out, st_out, _), (ref, st_ref, _) = (_train(name, True, steps=5, idle_from={0}, **kw) for _ in range(2))
    before = {n: p.detach().clone() for n, p in out.named_parameters()}
    st_out.flush()  # the compiled pass
    st_ref.rows.flush(ref.constrain)  # RowAdam's, over blocks of rows in ATen
    assert torch.equal(st_out.rows.last, st_ref.rows.last) and (st_out.rows.last == 5).all()
    balls = set(out.manifolds())
    for (n1, p1), p2 in zip(ref.named_parameters(), out.parameters()):
        torch.testing.assert_close(p2, p1, rtol=0, atol=1e-12, msg=n1)
        if n1 in out.tables() and n1 not in balls:  # rows idle since step 0 moved (ball rows never catch up)
            assert (p2[30:] - before[n1][30:]).abs().max() > 1e-6, n1
    for name_ in st_ref.rows.moments:
        torch.testing.assert_close(st_out.rows.moments[name_], st_ref.rows.moments[name_], rtol=1e-12, atol=1e-15)


def test_fused_step_keeps_constraints():
    model, _, _ = _train("order-embeddings", True, steps=20, idle_from=set(range(0, 20, 3)))
    assert (model.emb.weight >= 0).all()
    model, _, _ = _train(
        "density order embeddings",
        True,
        steps=20,
        gamma=0.0,
        margin=50.0,
        var_min=1e-3,
        var_max=1e-2,
        idle_from=set(range(0, 20, 3)),
    )
    lv = model.log_var.weight
    assert (lv >= np.log(1e-3) - 1e-12).all() and (lv <= np.log(1e-2) + 1e-12).all()
    assert lv.min() < lv.max()  # it moved within the box


@pytest.mark.parametrize("exact_until", [2000, 30])
def test_fused_catch_up_over_long_idle_spans(exact_until, monkeypatch):
    """Rows idle for more than the 128-step window, before and after the exact branch ends."""
    monkeypatch.setattr(RowAdam, "EXACT_UNTIL", exact_until)  # before the compiled step binds it

    def run(fused):
        model, st = _stepper("order-embeddings", fused, n=40)
        rng = np.random.default_rng(0)
        for s in range(330):
            hi = 40 if s in (0, 150, 329) else 10  # rows >= 10 idle for 150 and 179 steps
            pos, neg = torch.as_tensor(rng.integers(0, hi, (4, 2))), torch.as_tensor(rng.integers(0, hi, (4, 2)))
            st.step(pos, neg)
        st.flush()
        return model.emb.weight.detach()

    torch.testing.assert_close(run(True), run(False), rtol=0, atol=1e-6)


def test_fused_step_chosen_where_it_applies():
    _, st = _stepper("order-embeddings", None, 10)
    assert isinstance(st, CompiledStep)  # the default where it applies
    _, st = _stepper("order-embeddings", False, 10)
    assert isinstance(st, RowStep)
    _, st = _stepper("order-embeddings", None, 10, optimizer="adam")
    assert isinstance(st, DenseStep)  # dense Adam: the PyTorch step
    _, st = _stepper("Poincaré embeddings", None, 10, optimizer="adam")
    assert isinstance(st, RowStep) and st.touched.all_rows  # dense Riemannian Adam: every row every step
    with pytest.raises(RuntimeError, match="does not apply"):
        _stepper("order-embeddings (bilinear)", True, 10, optimizer="adam")
    with pytest.raises(ValueError, match="unknown optimizer"):
        _stepper("order-embeddings", None, 10, optimizer="sgd")
    _, st = _stepper("order-embeddings (bilinear)", None, 10)
    assert isinstance(st, CompiledStep) and st.dense is not None  # rows in the kernel, W and b by torch's Adam
    model = build_concept_model("order-embeddings (bilinear)", 10, 4)
    model.extra = torch.nn.Parameter(torch.zeros(3))  # a dense parameter the energy does not name
    assert not concept_step.applies(model, "lazy_adam", "ranking_hinge", "cpu")
    poincare = build_concept_model("Poincaré embeddings", 10, 4)
    assert concept_step.applies(poincare, "lazy_adam", "logistic_ranking", "cpu")  # Riemannian Adam in the kernel
    assert not concept_step.applies(poincare, "adam", "logistic_ranking", "cpu")
    with torch.no_grad():
        poincare.ball.isp_c.add_(0.5)  # another curvature: the kernel's ball is the unit one
    assert not concept_step.applies(poincare, "lazy_adam", "logistic_ranking", "cpu")
    assert not concept_step.applies(build_concept_model("box embeddings", 10, 4), "lazy_adam", "squared_hinge", "cpu")


def test_fused_step_rejects_bad_pairs():
    _, st = _stepper("order-embeddings", True, 10)
    with pytest.raises(RuntimeError, match="out of range"):
        st.kernel(torch.tensor([[0, 1], [3, 10]]), 1)
    with pytest.raises(RuntimeError, match="B true"):
        st.kernel(torch.tensor([[0, 1], [3, 4], [5, 6]]), 2)
