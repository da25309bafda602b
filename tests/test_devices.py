"""CUDA paths: skipped without a GPU (CI has none); run them on a machine that has one."""
import pytest
import torch

from orderlib import penalties as P
from orderlib.data.hypernymy import make_splits
from orderlib.train_hypernymy import HypernymyConfig, train_concept_model

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@cuda
def test_penalties_on_cuda_match_cpu():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(37, 16, generator=g), torch.randn(53, 16, generator=g)
    ref = P.order_violation_matrix(x, y, chunk=5)
    got = P.order_violation_matrix(x.cuda(), y.cuda(), chunk=5)
    assert got.device.type == "cuda"
    assert torch.allclose(got.cpu(), ref, atol=1e-5)


@cuda
def test_trainer_runs_on_cuda():
    parents = [[]] + [[0]] * 5 + [[i] for i in range(1, 6)]
    data = make_splits(parents, "clean", n_test=3, n_dev=3, seed=0)
    cfg = HypernymyConfig(model="order-embeddings", dim=4, epochs=2, batch=4, lr=0.05)
    r = train_concept_model(data, cfg, device="cuda", progress=False)
    assert r.model.emb.weight.device.type == "cuda"
    assert 0 <= r.test_accuracy <= 100
