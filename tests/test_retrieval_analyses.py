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


def _toy_scenes():
    """Three 2x2 scenes of Fashion-MNIST's classes (-1: an empty slot), a lexicon of the classes' first lemmas."""
    from types import SimpleNamespace

    from orderlib.data.fashion_mnist import SYNSETS
    from orderlib.data.scenes import Lexicon, Scenes

    words = {s: (s.split(".")[0].replace("_", " "),) for s in (*SYNSETS, "artifact.n.01")}
    lex = Lexicon(tuple((s, "artifact.n.01") for s in SYNSETS), words)
    labels = np.array([[-1, 7, 8, -1], [0, 1, 7, 8], [1, -1, -1, -1]])  # 0 t-shirt, 1 trousers, 7 sneaker, 8 bag
    items = np.where(labels >= 0, np.arange(12).reshape(3, 4), -1)
    offsets = np.zeros((3, 4, 2), np.int64) + np.array([[0, 0], [0, 30], [30, 0], [30, 30]])
    source = SimpleNamespace(images=np.full((12, 28, 28), 200, np.uint8))
    return Scenes("test", 0, items, labels, offsets, [], [], source), lex


def test_scene_classes_names_the_items_in_reading_order_and_wraps():
    scenes, lex = _toy_scenes()
    assert oe_regularities.scene_classes(scenes, lex, 0) == "sneaker, bag"
    assert oe_regularities.scene_classes(scenes, lex, 2) == "trousers"
    assert oe_regularities.scene_classes(scenes, lex, 1) == "t-shirt, trousers,\nsneaker, bag"


def test_figure_names_the_classes_under_every_shown_scene():
    import matplotlib

    matplotlib.use("Agg")
    scenes, lex = _toy_scenes()
    comp = [dict(a=7, b=8, top=np.array([0, 1, 2, 0]))]  # one of FIGURE_PAIRS: 4 retrieved scenes
    abst = [dict(i=2, j=0, caption="an artifact", common=True), dict(i=0, j=2, caption="a bag", common=False)]
    fig = oe_regularities.figure(scenes, lex, (comp, abst))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    names = {"sneaker, bag", "t-shirt, trousers,\nsneaker, bag", "trousers"}
    assert sum(t in names for t in texts) == 4 + 2 * 2  # under the 4 retrieved scenes and the 2 mins' 4 images
    labels = [t for ax in fig.axes for t in ax.texts if t.get_text() in names]
    assert all(t.get_position()[1] < 0 and t.get_va() == "top" for t in labels)  # below the image, not on it
    matplotlib.pyplot.close(fig)
