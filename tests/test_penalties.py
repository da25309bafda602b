import pytest
import torch

from orderlib import penalties as P


def test_order_violation_zero_iff_reversed_product_order():
    g = torch.Generator().manual_seed(0)
    y = torch.rand(1000, 5, generator=g)
    x_above = y + torch.rand(1000, 5, generator=g)  # x_i >= y_i everywhere: x ⪯ y
    assert torch.equal(P.order_violation(x_above, y), torch.zeros(1000))
    x_bad = x_above.clone()
    x_bad[:, 2] = y[:, 2] - 0.1  # one coordinate violated by 0.1
    assert torch.allclose(P.order_violation(x_bad, y), torch.full((1000,), 0.01), atol=1e-6)
    a, b = torch.rand(2000, 3, generator=g), torch.rand(2000, 3, generator=g)
    ordered = (a >= b).all(-1)  # a ⪯ b in the reversed product order
    assert ordered.any() and (~ordered).any()
    assert torch.equal(P.order_violation(a, b) == 0, ordered)


def test_order_violation_hand_case_and_asymmetry():
    x, y = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.5, 1.0, 4.0])
    assert P.order_violation(x, y).item() == pytest.approx(1.0 + 4.0)
    assert P.order_violation(y, x).item() == pytest.approx(0.25)


@pytest.mark.parametrize("chunk", [None, 1, 3, 7, 100])
def test_matrix_matches_aligned_for_every_pair(chunk):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(11, 6, generator=g), torch.randn(13, 6, generator=g)
    m = P.order_violation_matrix(x, y, chunk=chunk)
    assert m.shape == (11, 13)
    ref = torch.stack([torch.stack([P.order_violation(x[i], y[j]) for j in range(13)]) for i in range(11)])
    assert torch.allclose(m, ref, atol=1e-6)


def test_matrix_shape_errors_and_empty():
    with pytest.raises(ValueError, match="expected x"):
        P.order_violation_matrix(torch.zeros(3, 4), torch.zeros(5, 3))
    assert P.order_violation_matrix(torch.zeros(0, 4), torch.zeros(5, 4)).shape == (0, 5)


def test_cosine_matrix_matches_aligned():
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(4, 8, generator=g), torch.randn(5, 8, generator=g)
    m = P.cosine_distance_matrix(x, y)
    ref = P.cosine_distance(x[:, None, :], y[None, :, :])
    assert torch.allclose(m, ref, atol=1e-6)
    assert torch.allclose(P.cosine_distance(x, x), torch.zeros(4), atol=1e-6)


def test_gaussian_kl_matches_torch_distributions():
    from torch.distributions import Independent, Normal, kl_divergence

    g = torch.Generator().manual_seed(3)
    mx, my = torch.randn(7, 4, generator=g), torch.randn(7, 4, generator=g)
    vx, vy = torch.rand(7, 4, generator=g) + 0.1, torch.rand(7, 4, generator=g) + 0.1
    ref = kl_divergence(Independent(Normal(mx, vx.sqrt()), 1), Independent(Normal(my, vy.sqrt()), 1))
    assert torch.allclose(P.gaussian_kl(mx, vx, my, vy), ref, atol=1e-5)
    assert torch.allclose(P.gaussian_kl(mx, vx, mx, vx), torch.zeros(7), atol=1e-6)


def test_bilinear_score_hand_case():
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    w = torch.tensor([[1.0, 0.5], [0.0, 2.0]])
    assert P.bilinear_score(x, w, y).item() == pytest.approx(1 * 3 + 1 * 0.5 * 4 + 2 * 2 * 4)


def test_gradients_float64():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    y = torch.randn(5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(3, 3, dtype=torch.float64, generator=g, requires_grad=True)
    v1 = (torch.rand(5, 3, dtype=torch.float64, generator=g) + 0.5).requires_grad_()
    v2 = (torch.rand(5, 3, dtype=torch.float64, generator=g) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(P.order_violation, (x, y))
    assert torch.autograd.gradcheck(lambda a, b: P.order_violation_matrix(a, b, chunk=2), (x, y))
    assert torch.autograd.gradcheck(P.cosine_distance, (x, y))
    assert torch.autograd.gradcheck(P.bilinear_score, (x, w, y))
    assert torch.autograd.gradcheck(P.gaussian_kl, (x, v1, y, v2))
