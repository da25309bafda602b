"""CUDA paths: skipped without a GPU (CI has none); run them on a machine that has one."""

import pytest
import torch

from orderlib import penalties as P
from orderlib.concepts import HypernymyConfig, train_concept_model
from orderlib.data.hypernymy import make_splits

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


@cuda
def test_triton_fused_on_cuda_matches_reference_with_gradients():
    g = torch.Generator().manual_seed(1)
    x, y, w = torch.randn(70, 130, generator=g), torch.randn(65, 130, generator=g), torch.randn(70, 65, generator=g)
    xc, yc = x.cuda().requires_grad_(), y.cuda().requires_grad_()
    e = P.order_violation_matrix(xc, yc, backend="fused")
    assert type(e.grad_fn).__name__.startswith("TritonOrderViolation")
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    r = P.order_violation_matrix_reference(xr, yr)
    assert torch.allclose(e.cpu(), r, rtol=1e-5, atol=1e-4)
    gx, gy = torch.autograd.grad(e, (xc, yc), w.cuda())
    rx, ry = torch.autograd.grad(r, (xr, yr), w)
    assert torch.allclose(gx.cpu(), rx, rtol=1e-5, atol=1e-4)
    assert torch.allclose(gy.cpu(), ry, rtol=1e-5, atol=1e-4)


@cuda
def test_every_triton_tile_config_matches_reference():
    """Each tile the autotuner may choose, forced in turn: values and both gradients as the reference."""
    from orderlib import kernels_triton as K

    g = torch.Generator().manual_seed(2)
    x, y, w = torch.randn(150, 70, generator=g), torch.randn(97, 70, generator=g), torch.randn(150, 97, generator=g)
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    r = P.order_violation_matrix_reference(xr, yr)
    rx, ry = torch.autograd.grad(r, (xr, yr), w)
    xc, yc, wc = x.cuda(), y.cuda(), w.cuda()
    for c in K.FORWARD_CONFIGS:
        e = K.forward(xc, yc, K.forward_kernel, **K.meta(c, ("BN", "BM")))
        assert torch.allclose(e.cpu(), r.detach(), rtol=1e-5, atol=1e-4), c
    for c in K.BACKWARD_CONFIGS:
        for split in (1, 3):  # the walk over b whole, and cut in three parts summed afterwards
            gx, gy = K.backward(wc, xc, yc, K.weighted_max_kernel, split=split, **K.meta(c, ("BA", "BK")))
            assert torch.allclose(gx.cpu(), rx, rtol=1e-5, atol=1e-4), (c, split)
            assert torch.allclose(gy.cpu(), ry, rtol=1e-5, atol=1e-4), (c, split)
    e = P.order_violation_matrix(xc, yc, backend="fused")
    assert torch.allclose(e.cpu(), r.detach(), rtol=1e-5, atol=1e-4) and K.tuned()["forward"] != "None"


@cuda
def test_triton_gradients_keep_nan_rules_and_precision_far_from_zero():
    """The backward's max form on the GPU: NaN in x or y masked as the reference masks it, and
    embeddings offset by 100 keep float32's precision (the kernel centres them first)."""
    g = torch.Generator().manual_seed(3)
    w = torch.randn(70, 65, generator=g)
    for offset, nan in ((0.0, True), (100.0, False)):
        x, y = torch.rand(70, 40, generator=g) + offset, torch.rand(65, 40, generator=g) + offset
        if nan:
            x[1, 2] = y[3, 30] = float("nan")
        xr, yr = x.double().requires_grad_(), y.double().requires_grad_()
        xc, yc = x.cuda().requires_grad_(), y.cuda().requires_grad_()
        got = torch.autograd.grad(P.order_violation_matrix(xc, yc, backend="fused"), (xc, yc), w.cuda())
        ref = torch.autograd.grad(P.order_violation_matrix_reference(xr, yr), (xr, yr), w.double())
        for a, b in zip(got, ref):
            assert torch.equal(a.cpu().isnan(), b.isnan()), offset
            assert torch.allclose(a.cpu().double(), b, rtol=0, atol=2e-5, equal_nan=True), offset


@cuda
def test_triton_backward_replayed_from_cuda_graph_equals_eager():
    """After GRAPH_AFTER eager calls a shape's backward is captured and replayed: every later call,
    on new values (and a stride-0 upstream gradient), returns the eager backward's exact bits, and
    fresh tensors that the next replay does not overwrite."""
    from orderlib import kernels_triton as K

    g = torch.Generator().manual_seed(4)
    shape = (90, 300, 70)  # a shape no other test captures
    got, want = [], []
    for call in range(K.GRAPH_AFTER + 3):
        x, y = torch.randn(shape[0], shape[2], generator=g).cuda(), torch.randn(shape[1], shape[2], generator=g).cuda()
        w = torch.randn(shape[0], shape[1], generator=g).cuda()
        if call == K.GRAPH_AFTER + 2:
            w = torch.ones(1, 1, device="cuda").expand(shape[0], shape[1])  # what e.sum().backward() passes
        got.append(K.graphed_backward(w, x, y))
        want.append(K.backward(w, x, y))
    assert K.captured(w, x, y), K.status()
    for (gx, gy), (rx, ry) in zip(got, want):
        assert torch.equal(gx, rx) and torch.equal(gy, ry)
    assert not torch.equal(got[-1][0], got[-2][0])  # earlier results were not overwritten by later replays
    with K.cuda_graphs(False):
        assert torch.equal(K.graphed_backward(w, x, y)[0], want[-1][0]) and "off" in K.status()
    assert "off" not in K.status()
