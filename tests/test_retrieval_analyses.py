"""Section 4.6 (caption detail) and Figure 4 (max/min regularities) analyses on hand-made cases."""

import numpy as np
import torch

from orderlib.encoders.joint import JointEmbedding
from orderlib.experiments import oe_detail, oe_regularities


def test_length_different_pairs_hand_case():
    # image 0: lengths 1 2 3 4 9; image 1: 5 5 5 5 6
    lengths = torch.tensor([1, 2, 3, 4, 9, 5, 5, 5, 5, 6])
    pairs = oe_detail.length_different_pairs(lengths, 3)
    assert pairs.tolist() == [[0, 4], [1, 4], [2, 4]]  # differences 8, 7, 6; shorter first
    pairs = oe_detail.length_different_pairs(torch.tensor([3, 1, 1, 1, 1]), 2)
    assert pairs.tolist() == [[1, 0], [2, 0]]  # ties broken by caption order; the shorter comes first


class _Fixed(torch.nn.Module):
    """A stand-in with the order penalty and fixed embeddings."""

    penalty = "order"

    def penalty_matrix(self, images, captions):
        return JointEmbedding.penalty_matrix(self, images, captions)

    _matrix = staticmethod(lambda x, y: torch.clamp(y[None] - x[:, None], min=0).pow(2).sum(-1))


def test_ranks_of_images_and_of_the_longer_caption():
    model = _Fixed()
    ims = torch.tensor([[1.0, 1.0], [0.0, 0.0]])  # image 0 is above-right (specific) of everything
    caps = torch.tensor(
        [
            [0.5, 0.5],
            [0.9, 0.1],
            [0.2, 0.2],
            [0.1, 0.1],
            [0.0, 0.0],  # image 0
            [0.4, 0.4],
            [0.3, 0.0],
            [0.0, 0.3],
            [0.6, 0.6],
            [0.0, 0.0],
        ]
    )  # image 1
    ranks = oe_detail.image_ranks(model, ims, caps, [0, 5, 9])
    # caption 0: E(im0)=0 < E(im1) -> 1; caption 5 (image 1): E(im0)=0 < E(im1) -> 2;
    # caption 9 = origin: E = 0 for both images, a tie counted against the model -> 2
    assert ranks.ranks("pessimistic").tolist() == [1, 2, 2]
    assert ranks.ranks("expected").tolist() == [1, 2, 1.5] and ranks.ranks("optimistic").tolist() == [1, 2, 1]
    # shorter caption 4 (origin, the most general) as query: every caption is below it (E = 0), so
    # the longer caption 0 ties with all 8 other candidates; the query itself is excluded
    r = oe_detail.caption_ranks(model, caps, np.array([[4, 0]]))
    assert r.ranks("pessimistic").tolist() == [9] and r.ranks("expected").tolist() == [5.0]
    # query 3 = (.1, .1): E = 0 for the longer caption 0 and for captions 1, 2, 5, 8 (all >= the
    # query), E > 0 for 4, 6, 7, 9 -> rank 1 + 4
    r = oe_detail.caption_ranks(model, caps, np.array([[3, 0]]))
    assert r.ranks("pessimistic").tolist() == [5] and r.ranks("optimistic").tolist() == [1]


def test_max_composes_and_min_abstracts_for_order_models_sum_for_cosine():
    a, b = torch.tensor([[0.2, 0.9]]), torch.tensor([[0.7, 0.1]])
    order = JointEmbedding("order", 5, 3, 2, 2)
    assert torch.equal(oe_regularities.combine(order, a, b, "compose"), torch.tensor([[0.7, 0.9]]))
    assert torch.equal(oe_regularities.combine(order, a, b, "abstract"), torch.tensor([[0.2, 0.1]]))
    cos = JointEmbedding("cosine", 5, 3, 2, 2)
    s = oe_regularities.combine(cos, a, b, "compose")
    assert torch.allclose(s, torch.nn.functional.normalize(a + b, dim=-1))
    assert torch.equal(s, oe_regularities.combine(cos, a, b, "abstract"))
