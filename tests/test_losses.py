import pytest
import torch

from orderlib.losses import max_margin, ranking_hinge


def test_max_margin_hand_case():
    e_pos = torch.tensor([0.0, 0.5])
    e_neg = torch.tensor([0.2, 3.0])  # only the first negative is inside the margin: 1 - 0.2
    assert max_margin(e_pos, e_neg, 1.0).item() == pytest.approx(0.25 + 0.4)


def test_ranking_hinge_hand_case():
    e_pos = torch.tensor([1.0, 0.0])
    e_neg = torch.tensor([1.5, 5.0])  # first: 1 + 1 - 1.5 = 0.5; second: 1 + 0 - 5 < 0
    assert ranking_hinge(e_pos, e_neg, 1.0).item() == pytest.approx(0.25)


def test_max_margin_zero_when_satisfied():
    assert max_margin(torch.zeros(3), torch.full((3,), 2.0), 1.0).item() == 0.0


def _contrastive_loop(e, margin, max_violation):
    b, total = len(e), 0.0
    for i in range(b):
        caps = [max(0.0, margin + e[i, i] - e[i, j]) for j in range(b) if j != i]
        ims = [max(0.0, margin + e[i, i] - e[j, i]) for j in range(b) if j != i]
        total += (max(caps) + max(ims)) if max_violation else (sum(caps) + sum(ims))
    return total


@pytest.mark.parametrize("max_violation", [False, True])
def test_contrastive_matches_explicit_loops(max_violation):
    from orderlib.losses import contrastive

    e = torch.rand(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ref = _contrastive_loop(e.numpy(), 0.3, max_violation)
    assert contrastive(e, 0.3, max_violation).item() == pytest.approx(ref)


def test_contrastive_zero_when_positives_win_by_margin_and_trains_through_fused_penalty():
    from orderlib.losses import contrastive
    from orderlib.penalties import order_violation_matrix

    e = torch.full((4, 4), 2.0).fill_diagonal_(0.0)
    assert contrastive(e, 1.0).item() == 0.0 and contrastive(e, 1.0, True).item() == 0.0
    with pytest.raises(ValueError, match="square"):
        contrastive(torch.zeros(2, 3), 1.0)
    g = torch.Generator().manual_seed(1)
    im = torch.rand(8, 5, generator=g).requires_grad_()
    cap = torch.rand(8, 5, generator=g).requires_grad_()
    opt = torch.optim.SGD([im, cap], lr=0.05)
    losses = []
    for _ in range(50):
        loss = contrastive(order_violation_matrix(im, cap), 0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]


def test_info_nce_hand_case_and_direction_average():
    import math

    from orderlib.losses import in_batch_loss, info_nce

    e = torch.tensor([[0.0, 1.0], [2.0, 0.5]], dtype=torch.float64)
    t = 0.5  # logits = -e / t = [[0, -2], [-4, -1]]
    rows = -math.log(1 / (1 + math.exp(-2))) - math.log(math.exp(-1) / (math.exp(-4) + math.exp(-1)))
    cols = -math.log(1 / (1 + math.exp(-4))) - math.log(math.exp(-1) / (math.exp(-2) + math.exp(-1)))
    assert info_nce(e, t).item() == pytest.approx(0.5 * (rows / 2 + cols / 2))
    assert in_batch_loss(e, "infonce", 0.1, t).item() == pytest.approx(info_nce(e, t).item())
    assert in_batch_loss(e, "max", 0.1, t).item() == pytest.approx(_contrastive_loop(e.numpy(), 0.1, True))
    with pytest.raises(ValueError, match="unknown in-batch loss"):
        in_batch_loss(e, "triplet", 0.1, t)
