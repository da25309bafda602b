"""Where a notebook runs: one meaning of DEVICE="auto" for every notebook."""

import torch

from orderlib.runs import resolve_device


def test_auto_is_the_preferred_device_where_present_else_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device().type == resolve_device("auto").type == "cuda"
    assert resolve_device("auto", prefer="cpu").type == "cpu"  # an experiment whose CPU path is faster
    assert resolve_device("cpu").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    assert resolve_device("auto", prefer="cuda:1").type == "cpu"
    assert resolve_device("cuda:1") == torch.device("cuda:1")  # as named: params.device checks it exists
