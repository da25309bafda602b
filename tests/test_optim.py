import pytest
import torch

from orderlib.concepts.row_adam import RowAdam


def test_row_adam_matches_sparse_adam():
    g = torch.Generator().manual_seed(0)
    w0 = torch.randn(20, 4, generator=g)
    ref = torch.nn.Embedding(20, 4, sparse=True)
    ref.weight.data.copy_(w0)
    opt = torch.optim.SparseAdam(ref.parameters(), lr=0.05)
    mine = w0.clone()
    row_adam = RowAdam({"w": mine}, lr=0.05)
    for _ in range(30):
        idx = torch.randint(0, 20, (6,), generator=g)
        target = torch.randn(6, 4, generator=g)
        opt.zero_grad()
        ((ref(idx) - target) ** 2).sum().backward()
        opt.step()
        rows, inv = idx.unique(return_inverse=True)
        leaf = mine[rows].clone().requires_grad_()
        ((leaf[inv] - target) ** 2).sum().backward()
        row_adam.step(rows, {"w": leaf.grad})
    assert torch.allclose(mine, ref.weight.data, atol=1e-5)


def test_row_adam_constrain_and_state_roundtrip():
    w = torch.randn(5, 3)
    opt = RowAdam({"w": w}, lr=1.0)
    opt.step(torch.tensor([1, 3]), {"w": -torch.ones(2, 3)}, constrain=lambda k, b: b.clamp(max=0.5))
    assert (w[[1, 3]] <= 0.5).all()
    state = opt.state_dict()
    opt2 = RowAdam({"w": w.clone()}, lr=1.0)
    opt2.load_state_dict(state)
    assert opt2.t == 1 and torch.equal(opt2.moments["w"], opt.moments["w"])


def test_catch_up_row_adam_follows_dense_adam():
    g = torch.Generator().manual_seed(1)
    w0 = torch.rand(30, 5, generator=g)
    dense = w0.clone().requires_grad_()
    opt = torch.optim.Adam([dense], lr=0.02)
    lazy, plain = w0.clone(), w0.clone()
    row_adam = RowAdam({"w": lazy}, lr=0.02, catch_up=True)
    sparse_rule = RowAdam({"w": plain}, lr=0.02)
    clamp = lambda k, b: b.clamp(min=0)  # noqa: E731
    for _ in range(60):
        idx = torch.randint(0, 30, (4,), generator=g)
        target = torch.rand(4, 5, generator=g)
        opt.zero_grad()
        ((dense[idx] - target) ** 2).sum().backward()
        opt.step()
        with torch.no_grad():
            dense.clamp_(min=0)
        rows, inv = idx.unique(return_inverse=True)
        leaf = row_adam.prepare(rows, constrain=clamp)["w"].requires_grad_()
        ((leaf[inv] - target) ** 2).sum().backward()
        row_adam.step(rows, {"w": leaf.grad}, constrain=clamp)
        leaf = plain[rows].clone().requires_grad_()
        ((leaf[inv] - target) ** 2).sum().backward()
        sparse_rule.step(rows, {"w": leaf.grad}, constrain=clamp)
    row_adam.flush(constrain=clamp)
    # without catch-up (SparseAdam's rule) idle rows lag behind dense Adam
    assert torch.allclose(lazy, dense.detach(), atol=2e-4), (lazy - dense).abs().max()
    assert not torch.allclose(plain, dense.detach(), atol=1e-2)


def test_skipped_factor_closed_form_matches_exact_grid():
    opt = RowAdam({"w": torch.zeros(3, 2)}, lr=0.1, catch_up=True)
    s = torch.tensor([2500, 4000, 30000, 2100])
    k = torch.tensor([1, 7, 40, 500])
    closed = opt.skipped_factor(s, k)
    opt.EXACT_UNTIL = 10**9  # force the exact grid
    exact = opt.skipped_factor(s, k)
    assert torch.allclose(closed, exact, rtol=1e-3)
    assert closed[0] == pytest.approx(0.9 / 0.999**0.5 * (1 - 0.999**2501) ** 0.5 / (1 - 0.9**2501), rel=1e-3)


def _ball():
    import geoopt

    return geoopt.PoincareBall()


def test_riemannian_row_adam_matches_geoopt_sparse_riemannian_adam():
    import geoopt

    ball = _ball()
    g = torch.Generator().manual_seed(2)
    w0 = ball.projx((torch.rand(20, 4, generator=g, dtype=torch.float64) - 0.5) * 1.6)
    ref = torch.nn.Embedding(20, 4, sparse=True).double()
    ref.weight = geoopt.ManifoldParameter(w0.clone(), manifold=ball)
    opt = geoopt.optim.SparseRiemannianAdam(ref.parameters(), lr=0.05)
    mine = w0.clone()
    row_adam = RowAdam({"w": mine}, lr=0.05, manifolds={"w": ball}, catch_up=True)  # no catch-up on a manifold
    for _ in range(30):
        idx = torch.randint(0, 20, (6,), generator=g)
        target = ball.projx((torch.rand(6, 4, generator=g, dtype=torch.float64) - 0.5) * 1.6)
        opt.zero_grad()
        ball.dist(ref(idx), target).sum().backward()
        opt.step()
        rows, inv = idx.unique(return_inverse=True)
        leaf = row_adam.prepare(rows)["w"].requires_grad_()
        ball.dist(leaf[inv], target).sum().backward()
        row_adam.step(rows, {"w": leaf.grad})
    row_adam.flush()
    assert torch.allclose(mine, ref.weight.data, atol=1e-10)
    assert not torch.allclose(mine, w0, atol=1e-2)


def test_riemannian_row_adam_on_every_row_is_dense_riemannian_adam():
    import geoopt

    ball = _ball()
    g = torch.Generator().manual_seed(4)
    w0 = ball.projx((torch.rand(8, 3, generator=g, dtype=torch.float64) - 0.5) * 1.8)
    dense = geoopt.ManifoldParameter(w0.clone(), manifold=ball)
    opt = geoopt.optim.RiemannianAdam([dense], lr=0.1)
    mine = w0.clone()
    row_adam = RowAdam({"w": mine}, lr=0.1, manifolds={"w": ball})
    rows = torch.arange(8)
    for _ in range(25):
        target = ball.projx((torch.rand(8, 3, generator=g, dtype=torch.float64) - 0.5) * 1.8)
        opt.zero_grad()
        ball.dist(dense, target).pow(2).sum().backward()
        opt.step()
        leaf = mine.clone().requires_grad_()
        ball.dist(leaf, target).pow(2).sum().backward()
        row_adam.step(rows, {"w": leaf.grad})
    assert torch.allclose(mine, dense.data, atol=1e-10)
    with pytest.raises(ValueError, match="unknown tables"):
        RowAdam({"w": mine}, manifolds={"v": ball})
