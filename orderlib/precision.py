"""Matrix-product precision of a run (a notebook's `MATMUL`: "fp32", "bf16", "tf32" or "auto"):
tensors stay float32, and only the inputs of matrix products may be rounded.

Whether a CPU has bf16 products is measured (`bf16_products()`), not read off its feature flags,
which can claim AVX-512 BF16 where oneDNN keeps float32 products. See docs/performance.md.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

import torch

MODES = ("fp32", "bf16", "tf32", "auto")


@functools.cache
def bf16_products() -> bool:
    """True if float32 products on this CPU take bfloat16 inputs under oneDNN's flag (probed once
    per process: a (64, 512) x (512, 256) product, rounded inputs give ~1e-3 relative error, float32
    ones ~1e-7)."""
    g = torch.Generator().manual_seed(0)
    a, w = torch.randn(64, 512, generator=g), torch.randn(256, 512, generator=g)
    exact = torch.mm(a.double(), w.double().T)
    flag = torch.backends.mkldnn.matmul
    before = flag.fp32_precision
    try:
        flag.fp32_precision = "bf16"
        products = (torch.nn.functional.linear(a, w), a @ w.T)
    except (RuntimeError, ValueError):  # a build without oneDNN
        return False
    finally:
        flag.fp32_precision = before
    return all(float((p.double() - exact).norm() / exact.norm()) > 1e-4 for p in products)


def resolve(mode: str, device) -> str:
    """Return the concrete mode ("fp32", "bf16" or "tf32") of `mode` on `device`; refuse a mode the
    device does not have, so a run never records one that did not run."""
    if mode not in MODES:
        raise ValueError(f"unknown matmul precision {mode!r}; known: {list(MODES)}")
    dev = torch.device(device)
    tf32 = lambda: dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] >= 8  # noqa: E731
    if mode == "auto":
        if dev.type == "cpu":
            return "bf16" if bf16_products() else "fp32"
        return "tf32" if tf32() else "fp32"
    if mode == "bf16":
        if dev.type != "cpu":
            raise ValueError(f"matmul precision 'bf16' is the CPU's (oneDNN); on {dev} use 'tf32', 'fp32' or 'auto'")
        if not bf16_products():
            raise ValueError(
                "matmul precision 'bf16': this CPU keeps float32 products under oneDNN's bf16 flag "
                "(orderlib.precision.bf16_products() probed it); use 'fp32' or 'auto'"
            )
    if mode == "tf32" and not tf32():
        raise ValueError(
            f"matmul precision 'tf32' needs a CUDA device of compute capability >= 8, not {dev}; use 'fp32' or 'auto'"
        )
    return mode


def _backend(device):
    return torch.backends.mkldnn.matmul if torch.device(device).type == "cpu" else torch.backends.cuda.matmul


def _flag(mode: str) -> str:
    return "ieee" if mode == "fp32" else mode


def in_effect(device) -> str:
    """The mode this process's float32 products on `device` run in now ("fp32", "bf16" or "tf32")."""
    dev = torch.device(device)
    if dev.type not in ("cpu", "cuda"):
        return "fp32"
    flag = _backend(dev).fp32_precision
    flag = torch.backends.fp32_precision if flag == "none" else flag  # "none": the generic setting
    if dev.type == "cpu":
        return "bf16" if flag == "bf16" and bf16_products() else "fp32"
    return "tf32" if flag == "tf32" else "fp32"


def use(mode: str, device) -> str:
    """Set `mode` for the rest of this process's float32 products on `device` (a notebook's MATMUL;
    `training.workers` hands it on to the processes it spawns); return the resolved mode."""
    mode = resolve(mode, device)
    if torch.device(device).type in ("cpu", "cuda"):
        _backend(device).fp32_precision = _flag(mode)
    return mode


@contextmanager
def matmul_precision(mode: str, device):
    """Run the body with `mode` (see `resolve`) for float32 matrix products on `device`; restore after."""
    mode = resolve(mode, device)
    if torch.device(device).type not in ("cpu", "cuda"):
        yield mode
        return
    backend = _backend(device)
    before = backend.fp32_precision
    backend.fp32_precision = _flag(mode)
    try:
        yield mode
    finally:
        backend.fp32_precision = before
