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
