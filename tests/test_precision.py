"""Matrix-product precision modes (orderlib.precision): what each resolves to, the flag restored,
bf16 products that are rounded yet close, and trainers that key their checkpoints by the mode."""
import pytest
import torch

from orderlib import precision

BF16 = torch.cpu._is_avx512_bf16_supported()


def test_modes_resolve_by_device_and_refuse_the_wrong_backend():
    assert precision.resolve("fp32", "cpu") == "fp32"
    assert precision.resolve("auto", "cpu") == ("bf16" if BF16 else "fp32")
    with pytest.raises(ValueError, match="unknown matmul precision 'fp16'"):
        precision.resolve("fp16", "cpu")
    with pytest.raises(ValueError, match="CUDA's"):
        precision.resolve("tf32", "cpu")
    with pytest.raises(ValueError, match="CPU's"):
        precision.resolve("bf16", "cuda")


def test_the_flag_is_set_inside_and_restored_after_even_on_error():
    before = torch.backends.mkldnn.matmul.fp32_precision
    with pytest.raises(RuntimeError, match="boom"):
        with precision.matmul_precision("bf16", "cpu") as mode:
            assert mode == "bf16" and torch.backends.mkldnn.matmul.fp32_precision == "bf16"
            raise RuntimeError("boom")
    assert torch.backends.mkldnn.matmul.fp32_precision == before


@pytest.mark.skipif(not BF16, reason="no bf16 matrix units on this CPU")
def test_bf16_products_round_their_inputs_and_keep_float32_sums():
    g = torch.Generator().manual_seed(0)
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
    if BF16:
        other = train_retrieval_model(data, replace(cfg, matmul="auto"), checkpoint=ckpt, progress=False)
        assert not other.resumed  # auto is bf16 here: a different model
