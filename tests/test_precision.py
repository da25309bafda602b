"""Matrix-product precision modes (orderlib.precision): the probe and what "auto" resolves to, modes
a device lacks refused, the flag set and restored, bf16 products that are rounded yet close, workers
that inherit the mode, and checkpoints keyed by the mode that ran."""

import pytest
import torch

from orderlib import precision

BF16 = precision.bf16_products()  # the library's own probe: the tests ask the CPU as the library does


def test_auto_agrees_with_the_probe():
    assert precision.resolve("auto", "cpu") == ("bf16" if BF16 else "fp32")
    assert precision.resolve("fp32", "cpu") == "fp32"
    if not BF16:
        with pytest.raises(ValueError, match="keeps float32 products"):
            precision.resolve("bf16", "cpu")  # never record a mode that did not run


def test_the_probe_sees_rounded_products_and_float32_ones(monkeypatch):
    """The probe's rule, on products it is shown: float32 ones are not rounded, bf16-input ones are."""
    precision.bf16_products.cache_clear()
    try:
        real_linear = torch.nn.functional.linear
        monkeypatch.setattr(
            torch.nn.functional, "linear", lambda a, w: real_linear(a.bfloat16().float(), w.bfloat16().float())
        )
        monkeypatch.setattr(
            torch.Tensor, "__matmul__", lambda a, w: torch.mm(a.bfloat16().float(), w.bfloat16().float())
        )
        assert precision.bf16_products()
        precision.bf16_products.cache_clear()
        monkeypatch.undo()
        assert precision.bf16_products() == BF16
    finally:
        precision.bf16_products.cache_clear()


def test_unknown_and_foreign_modes_are_refused():
    with pytest.raises(ValueError, match="unknown matmul precision 'fp16'"):
        precision.resolve("fp16", "cpu")
    with pytest.raises(ValueError, match="compute capability"):
        precision.resolve("tf32", "cpu")
    with pytest.raises(ValueError, match="CPU's"):
        precision.resolve("bf16", "cuda")


def test_the_flag_is_set_inside_and_restored_after_even_on_error(monkeypatch):
    monkeypatch.setattr(precision, "bf16_products", lambda: True)  # the flag itself exists on every CPU
    before = torch.backends.mkldnn.matmul.fp32_precision
    with pytest.raises(RuntimeError, match="boom"):
        with precision.matmul_precision("bf16", "cpu") as mode:
            assert mode == "bf16" and torch.backends.mkldnn.matmul.fp32_precision == "bf16"
            assert precision.in_effect("cpu") == "bf16"
            raise RuntimeError("boom")
    assert torch.backends.mkldnn.matmul.fp32_precision == before
    assert precision.in_effect("cpu") == "fp32"


def test_use_sets_the_mode_for_the_process_and_fp32_resets_it(monkeypatch):
    monkeypatch.setattr(precision, "bf16_products", lambda: True)
    before = torch.backends.mkldnn.matmul.fp32_precision
    try:
        assert precision.use("bf16", "cpu") == "bf16" and precision.in_effect("cpu") == "bf16"
        with precision.matmul_precision("fp32", "cpu"):  # a block can insist on float32
            assert precision.in_effect("cpu") == "fp32"
        assert precision.in_effect("cpu") == "bf16"
        assert precision.use("fp32", "cpu") == "fp32" and precision.in_effect("cpu") == "fp32"
    finally:
        torch.backends.mkldnn.matmul.fp32_precision = before


@pytest.mark.skipif(not BF16, reason="this CPU keeps float32 products under oneDNN's bf16 flag (probe)")
def test_bf16_products_round_their_inputs_and_keep_float32_sums():
    g = torch.Generator().manual_seed(1)
    a, w = torch.randn(64, 512, generator=g), torch.randn(256, 512, generator=g)
    exact = torch.nn.functional.linear(a.double(), w.double())
    full = torch.nn.functional.linear(a, w)
    with precision.matmul_precision("bf16", "cpu"):
        fast = torch.nn.functional.linear(a, w)
    rounded = torch.nn.functional.linear(a.bfloat16().double(), w.bfloat16().double())  # bf16 inputs, exact sums
    assert fast.dtype == torch.float32
    rel = lambda x, y: float((x.double() - y).norm() / y.norm())  # noqa: E731
    assert rel(full, exact) < 1e-6 < rel(fast, exact) < 1e-2  # rounded, but only the inputs
    assert rel(fast, rounded) < 1e-5


def _flag_in_worker():
    return torch.backends.mkldnn.matmul.fp32_precision


def test_spawned_workers_inherit_the_mode(monkeypatch):
    from orderlib.training import workers

    assert workers.run_in_workers(_flag_in_worker, {"a": {}}, 1, progress=False) == {"a": "ieee"}
    if BF16:
        before = torch.backends.mkldnn.matmul.fp32_precision
        try:
            precision.use("bf16", "cpu")
            assert workers.run_in_workers(_flag_in_worker, {"a": {}}, 1, progress=False) == {"a": "bf16"}
        finally:
            torch.backends.mkldnn.matmul.fp32_precision = before


def test_fit_keys_checkpoints_by_the_mode_that_ran(tmp_path, monkeypatch):
    from orderlib.checkpoint import load_checkpoint
    from orderlib.training.loop import fit

    def run():
        model = torch.nn.Linear(2, 1)
        return fit(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            {"x": 1},
            lambda e: 1.0,
            lambda: {"s": 1.0},
            "s",
            1,
            1,
            tmp_path / "m.pt",
            progress=False,
        )

    first = run()
    assert first.matmul == "fp32" and load_checkpoint(tmp_path / "m.pt")["cfg"]["matmul"] == "fp32"
    assert run().resumed
    monkeypatch.setattr(precision, "in_effect", lambda device: "bf16")  # as on a CPU with bf16 products
    other = run()
    assert not other.resumed and other.matmul == "bf16"  # another mode: another model


def test_retrieval_checkpoints_are_keyed_by_the_resolved_mode(tmp_path):
    from dataclasses import replace

    from ddp_worker import RETRIEVAL, retrieval_data

    from orderlib.training.retrieval import train_retrieval_model

    data, ckpt = retrieval_data(), tmp_path / "r.pt"
    cfg = replace(RETRIEVAL, epochs=1)
    first = train_retrieval_model(data, cfg, checkpoint=ckpt, progress=False)
    assert not first.resumed
    again = train_retrieval_model(data, cfg, checkpoint=ckpt, progress=False)
    assert again.resumed
    other = train_retrieval_model(data, replace(cfg, matmul="auto"), checkpoint=ckpt, progress=False)
    assert other.resumed != BF16  # auto is bf16 where the probe finds it: a different model
