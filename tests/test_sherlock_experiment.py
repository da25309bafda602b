"""Sherlock's tables from distance matrices: an oracle scores 100, chance-level noise does not."""
import numpy as np
import pytest
import torch

from orderlib.data.facts import Fact
from orderlib.experiments import sherlock as exp
from test_facts import fake


@pytest.fixture(scope="module")
def task():
    sources = {"train": fake("train", 60000), "test": fake("test", 10000)}
    mp = pytest.MonkeyPatch()
    mp.setattr(exp, "load_fashion_mnist", lambda split: sources[split])
    rng = np.random.default_rng(0)
    words = {w: rng.standard_normal(6).astype(np.float32) for w in exp.vocabulary()}
    t = exp.fact_task(dict(seed=0, train_images=3000, test_per_fact=2), words)
    mp.undo()
    return t


def test_task_shapes_and_language_views(task):
    n = len(task.facts)
    assert task.language.shape == (n, 3, 6) and len(task.test) == 2 * n
    assert task.notes["unseen facts"] > 0 and task.train_counts.sum() == len(task.train)
    i = task.facts.index(Fact("sandal", "left of", "bag"))
    assert torch.allclose(task.language[i, 1], (task.language[task.facts.index(Fact("bag", "left of", "sandal")), 1]))
    assert task.language[task.facts.index(Fact("sandal")), 1:].abs().sum() == 0  # wild-cards are zeros


def test_oracle_and_noise(task):
    img_fact = torch.as_tensor(task.test.fact)
    rng = torch.Generator().manual_seed(0)
    oracle = torch.rand(len(img_fact), len(task.facts), generator=rng) + 1.0
    oracle[torch.arange(len(img_fact)), img_fact] = 0.0
    rows = {(r["scope"], r["metric"]): r["ours"] for r in exp.retrieval_rows("SEM-A", oracle, task)}
    assert all(v == pytest.approx(100.0) for v in rows.values())
    noise = {(r["scope"], r["metric"]): r["ours"]
             for r in exp.retrieval_rows("x", torch.rand(len(img_fact), len(task.facts), generator=rng), task)}
    assert noise[("all", "K10")] < 5 and noise[("all", "mAP")] < 5
    gen = exp.generalisation_rows("SEM-A", oracle, task)
    k10 = [r for r in gen if r["metric"] == "K10"]
    assert len(k10) == 4 and all(r["ours"] == pytest.approx(100.0) for r in k10)
    assert {r["paper"] for r in k10} == {2.063, 3.022, 3.092, 2.962}
    assert [r["ours"] for r in exp.chance_rows(task)] == pytest.approx([100 / 810, 500 / 810, 1000 / 810])


def test_baselines_learn_from_features_that_carry_the_fact(task):
    """Features = the fact's language view (flattened) projected + noise: both closed-form
    baselines then rank the right fact far above chance, including facts unseen in training."""
    rng = np.random.default_rng(1)
    proj = rng.standard_normal((18, 24))
    feats = lambda fs: task.language[fs].flatten(1).numpy() @ proj + 0.05 * rng.standard_normal((len(fs), 24))
    d = exp.baseline_distances(task, feats(task.train.fact), feats(task.test.fact), dict(cca_dim=18, eszsl_gamma=0.1,
                                                                                          eszsl_lambda=0.1))
    img_fact = torch.as_tensor(task.test.fact)
    unseen = torch.as_tensor(task.train_counts == 0)[img_fact]
    for name, dist in d.items():
        assert dist.shape == (len(img_fact), len(task.facts))
        k = exp.fact_topk(dist, img_fact, ks=(10,))["K10"]
        k_unseen = exp.fact_topk(dist[unseen], img_fact[unseen], ks=(10,))["K10"]
        assert k > 30 and k_unseen > 10, (name, k, k_unseen)  # chance K10 is 1.2%


def test_frozen_features_keep_the_layout():
    from orderlib.encoders.cnn import ItemCNN

    cnn = ItemCNN(10, 4, in_channels=3).eval()
    img = np.zeros((2, 64, 64, 3), np.uint8)
    img[0, :32, :32] = 200  # top left
    img[1, 32:, 32:] = 200  # bottom right
    f = exp.frozen_features(cnn, img)
    assert f.shape == (2, 4 * cnn.channels)
    cells = f.reshape(2, cnn.channels, 4)  # (N, C, cell)
    assert not np.allclose(cells[0], cells[1])
    same = np.abs(cells[0][:, 0] - cells[1][:, 3]).sum()  # the same patch in another cell
    empty = np.abs(cells[0][:, 0] - cells[0][:, 3]).sum()  # the patch vs an empty cell
    assert same < 0.5 * empty
