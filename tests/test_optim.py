import torch

from orderlib.optim import RowAdam


def test_row_adam_matches_sparse_adam():
    g = torch.Generator().manual_seed(0)
    w0 = torch.randn(20, 4, generator=g)
    ref = torch.nn.Embedding(20, 4, sparse=True)
    ref.weight.data.copy_(w0)
    opt = torch.optim.SparseAdam(ref.parameters(), lr=0.05)
    mine = w0.clone()
    row_adam = RowAdam({"w": mine}, lr=0.05)
    for _ in range(30):
        idx = torch.randint(0, 20, (6,), generator=g)
        target = torch.randn(6, 4, generator=g)
        opt.zero_grad()
        ((ref(idx) - target) ** 2).sum().backward()
        opt.step()
        rows, inv = idx.unique(return_inverse=True)
        leaf = mine[rows].clone().requires_grad_()
        ((leaf[inv] - target) ** 2).sum().backward()
        row_adam.step(rows, {"w": leaf.grad})
    assert torch.allclose(mine, ref.weight.data, atol=1e-5)


def test_row_adam_constrain_and_state_roundtrip():
    w = torch.randn(5, 3)
    opt = RowAdam({"w": w}, lr=1.0)
    opt.step(torch.tensor([1, 3]), {"w": -torch.ones(2, 3)}, constrain=lambda k, b: b.clamp(max=0.5))
    assert (w[[1, 3]] <= 0.5).all()
    state = opt.state_dict()
    opt2 = RowAdam({"w": w.clone()}, lr=1.0)
    opt2.load_state_dict(state)
    assert opt2.t == 1 and torch.equal(opt2.moments["w"], opt.moments["w"])
