"""The frozen CNN (features, test-time augmentation), the image projection and the joint model."""

import numpy as np
import pytest
import torch

from orderlib.encoders.cnn import CNNConfig, ItemCNN, item_features, predict, scene_features
from orderlib.encoders.image import ImageProjection
from orderlib.encoders.joint import JointEmbedding
from orderlib.penalties import cosine_distance_matrix, order_violation_matrix
from orderlib.training.item_cnn import train_item_cnn


def test_cnn_learns_toy_classes_and_skips_held_out_classes(toy_items):
    x, y = toy_items(1000)
    hx, hy = toy_items(200, seed=1)
    model, hist = train_item_cnn(x, y, hx, hy, CNNConfig(epochs=3, batch=64, width=4), progress=False)
    assert hist[-1]["held_out_accuracy"] > 90
    assert not any(p.requires_grad for p in model.parameters())  # frozen
    zs, _ = train_item_cnn(x, y, hx, hy, CNNConfig(epochs=3, batch=64, width=4, classes=(2, 0)), progress=False)
    assert zs.classes == (2, 0) and zs.head[-1].out_features == 2  # class 1 never seen
    pred = predict(zs, hx[hy == 2])
    assert (pred == 0).mean() > 0.5  # class 2 is renumbered 0
    assert item_features(zs, hx[:5]).shape == (5, zs.channels)


def test_scene_features_shapes_centre_crop_and_mirror_alignment():
    torch.manual_seed(0)
    model = ItemCNN(10, width=4).eval()
    canvases = np.random.default_rng(0).integers(0, 255, size=(3, 60, 60)).astype(np.uint8)
    ten, one = scene_features(model, canvases, grid=2, pad=2, batch=2)
    assert ten.shape == one.shape == (3, model.channels * 4)
    from orderlib.encoders.cnn import to_input

    with torch.no_grad():
        fmap = model.feature_map(to_input(canvases))
        centre = torch.nn.functional.adaptive_avg_pool2d(fmap, 2).flatten(1)
    assert torch.allclose(one, centre, atol=1e-5)  # 1-crop = the canvas itself
    # Mirrored views are flipped back: a left/right mirrored canvas gets the mirrored 2x2 grid.
    ten_m, _ = scene_features(model, canvases[:, :, ::-1].copy(), grid=2, pad=2)
    grid = ten.view(3, model.channels, 2, 2)
    grid_m = ten_m.view(3, model.channels, 2, 2)
    assert torch.allclose(grid_m, grid.flip(-1), atol=1e-4)


def test_image_projection_normalised_and_non_negative():
    proj = ImageProjection(7, 5)
    out = proj(torch.randn(4, 7))
    assert (out >= 0).all() and torch.allclose(out.norm(dim=1), torch.ones(4))
    signed = ImageProjection(7, 5, absolute=False)(torch.randn(4, 7))
    assert (signed < 0).any()


@pytest.mark.parametrize("penalty", ["order", "order-reversed", "cosine"])
def test_joint_model_penalty_matrices(penalty):
    torch.manual_seed(0)
    model = JointEmbedding(penalty, vocab_size=20, feature_dim=7, word_dim=4, dim=5)
    im, cap = model.images(torch.randn(3, 7)), model.captions(torch.randint(2, 20, (4, 6)), torch.tensor([6, 3, 1, 2]))
    e = model.penalty_matrix(im, cap)  # (3 images, 4 captions)
    expected = {
        "order": order_violation_matrix(im, cap),
        "order-reversed": order_violation_matrix(cap, im).T,
        "cosine": cosine_distance_matrix(im, cap),
    }[penalty]
    assert e.shape == (3, 4) and torch.allclose(e, expected)
    assert ((im >= 0).all() and (cap >= 0).all()) == (penalty != "cosine")
    if penalty == "order":  # captions above images: E(image, caption) = ||max(0, caption - image)||^2
        assert torch.allclose(e[1, 2], torch.clamp(cap[2] - im[1], min=0).pow(2).sum())
    with pytest.raises(ValueError, match="unknown penalty"):
        JointEmbedding("dot", 20, 7)


def test_cnn_training_repeats_whatever_the_global_generator(toy_items):
    """Dropout draws come from the run's seed, not from torch's global generator (issue 10)."""
    x, y = toy_items(300)
    hx, hy = toy_items(60, seed=1)
    cfg = CNNConfig(epochs=2, batch=64, width=4)
    runs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        model, hist = train_item_cnn(x, y, hx, hy, cfg, progress=False)
        runs.append((model.state_dict(), hist))
    (a, ha), (b, hb) = runs
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [h["loss"] for h in ha] == [h["loss"] for h in hb]
