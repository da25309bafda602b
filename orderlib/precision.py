"""Matrix-product precision of a training run: the tensors stay float32, only the inputs of matrix
products are rounded (their sums stay float32), as mixed-precision training does on a GPU.

Modes (a trainer config's `matmul`):
- "fp32": float32 products (PyTorch's default);
- "bf16": on CPU, oneDNN's products take bfloat16 inputs (AMX tiles or AVX-512 BF16 dot products;
  about 4x the float32 rate of a (128, 1024) x (1024, 3072) product on a 2-core Xeon with AMX;
  benchmarks/gru_step.py times a training step);
- "tf32": on CUDA, TensorFloat-32 products (Ampere and later);
- "auto": "bf16" on a CPU with bfloat16 dot products (AVX-512 BF16, which every CPU with AMX has),
  "tf32" on a CUDA device of compute capability >= 8, else "fp32".
A run records the mode it resolved to (checkpoint key, report provenance): models trained in
different modes are different models.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

MODES = ("fp32", "bf16", "tf32", "auto")


def resolve(mode: str, device) -> str:
    """Return the concrete mode ("fp32", "bf16" or "tf32") of `mode` on `device`."""
    if mode not in MODES:
        raise ValueError(f"unknown matmul precision {mode!r}; known: {list(MODES)}")
    dev = torch.device(device)
    if mode == "auto":
        if dev.type == "cpu":
            return "bf16" if torch.cpu._is_avx512_bf16_supported() else "fp32"
        if dev.type == "cuda":
            return "tf32" if torch.cuda.get_device_capability(dev)[0] >= 8 else "fp32"
        return "fp32"
    if mode == "bf16" and dev.type != "cpu":
        raise ValueError(f"matmul precision 'bf16' is the CPU's (oneDNN); on {dev} use 'tf32' or 'auto'")
    if mode == "tf32" and dev.type != "cuda":
        raise ValueError(f"matmul precision 'tf32' is CUDA's; on {dev} use 'bf16' or 'auto'")
    return mode


@contextmanager
def matmul_precision(mode: str, device):
    """Run the body with `mode` (see `resolve`) for float32 matrix products on `device`; restore after."""
    mode = resolve(mode, device)
    if mode == "fp32":
        yield mode
        return
    backend = torch.backends.mkldnn.matmul if mode == "bf16" else torch.backends.cuda.matmul
    before = backend.fp32_precision
    backend.fp32_precision = mode
    try:
        yield mode
    finally:
        backend.fp32_precision = before
