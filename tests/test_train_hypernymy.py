import numpy as np
import pytest
import torch

from orderlib.data.hypernymy import make_splits
from orderlib.train_hypernymy import HypernymyConfig, train_concept_model


def chain_forest(depth=6, width=12):
    """`width` chains of length `depth` under one root: a clear partial order to learn."""
    parents = [[]]
    for _ in range(width):
        prev = 0
        for _ in range(depth):
            parents.append([prev])
            prev = len(parents) - 1
    return parents


@pytest.fixture(scope="module")
def data():
    return make_splits(chain_forest(), "clean", n_test=30, n_dev=30, seed=0)


def test_order_embedding_learns_and_is_nonnegative(data):
    cfg = HypernymyConfig(model="order-embeddings", dim=10, epochs=40, batch=32, lr=0.05, patience=40)
    r = train_concept_model(data, cfg, progress=False)
    assert (r.model.emb.weight >= 0).all()
    assert r.dev_accuracy > 80 and r.test_accuracy > 75
    assert r.history[-1]["loss"] < r.history[0]["loss"]


@pytest.mark.parametrize("name", ["order-embeddings (symmetric)", "order-embeddings (bilinear)", "word2gauss"])
def test_other_rows_train(data, name):
    cfg = HypernymyConfig(model=name, dim=10, epochs=5, batch=32, lr=0.05, patience=5)
    r = train_concept_model(data, cfg, progress=False)
    assert np.isfinite(r.history[-1]["loss"]) and 0 <= r.test_accuracy <= 100


def test_lazy_adam_follows_dense_adam_and_sparse_adam_does_not(data):
    res = {}
    for opt in ("adam", "lazy_adam", "sparse_adam"):
        cfg = HypernymyConfig(model="order-embeddings", dim=6, epochs=3, batch=8, lr=0.05,
                              optimizer=opt, patience=3)
        res[opt] = train_concept_model(data, cfg, progress=False).model.emb.weight.detach()
    assert torch.allclose(res["lazy_adam"], res["adam"], atol=1e-3)
    assert not torch.allclose(res["sparse_adam"], res["adam"], atol=1e-2)
    with pytest.raises(ValueError, match="unknown optimizer"):
        train_concept_model(data, HypernymyConfig(optimizer="sgd"), progress=False)


def test_resume_reproduces_uninterrupted_run(data, tmp_path):
    cfg = HypernymyConfig(model="order-embeddings", dim=8, epochs=6, batch=32, lr=0.05, patience=6)
    full = train_concept_model(data, cfg, progress=False)
    ckpt = tmp_path / "run.pt"
    short = HypernymyConfig(**{**cfg.__dict__, "epochs": 3})
    train_concept_model(data, short, checkpoint=ckpt, progress=False)
    # "interrupt" after 3 epochs: rewrite the checkpoint as if the 6-epoch run had stopped there
    state = torch.load(ckpt, weights_only=False)
    state["cfg"]["epochs"], state["done"] = 6, False
    torch.save(state, ckpt)
    resumed = train_concept_model(data, cfg, checkpoint=ckpt, progress=False)
    assert resumed.resumed
    assert [h["loss"] for h in resumed.history] == pytest.approx([h["loss"] for h in full.history])
    assert resumed.test_accuracy == full.test_accuracy
