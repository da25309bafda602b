"""Penalties (energies): low means "the pair holds". Kept apart from the losses.

Aligned versions take (..., D) tensors and return (...); `*_matrix` versions take (N, D), (M, D)
and return the (N, M) all-pairs matrix in bounded memory.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from orderlib import kernels, kernels_triton

MAX_CHUNK_BYTES = 256 * 2**20  # working set of one chunk of the all-pairs broadcast
BACKENDS = ("auto", "fused", "reference")


def order_violation(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return E(x, y) = ||max(0, y - x)||^2, zero iff x ⪯ y (Eq. 2 of Vendrov et al.).

    x is the specific side (hyponym, image), y the general side (hypernym, caption).
    """
    return torch.clamp(y - x, min=0).pow(2).sum(-1)


def chunk_bytes() -> int:
    """Return the working-set budget for one chunk: $ORDERLIB_CHUNK_BYTES, else
    min(256 MiB, 1/8 of the memory available now)."""
    setting = os.environ.get("ORDERLIB_CHUNK_BYTES")
    if setting:
        return max(1, int(setting))
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return MAX_CHUNK_BYTES
    return max(2**20, min(MAX_CHUNK_BYTES, available // 8))


def _auto_chunk(m: int, d: int, itemsize: int, budget: int | None = None) -> int:
    return max(1, (budget or chunk_bytes()) // max(1, m * d * itemsize))


def order_violation_matrix_reference(x: torch.Tensor, y: torch.Tensor,
                                     chunk: int | None = None) -> torch.Tensor:
    """Return the all-pairs order violation by broadcasting `chunk` rows of x at a time.

    Memory is O(chunk * M * D) beyond the (N, M) result (default: `chunk_bytes()`). Slow (one
    N x M x D tensor written and read per chunk) but plain PyTorch: any device, dtype, autograd.
    """
    n, m = x.shape[0], y.shape[0]
    chunk = chunk or _auto_chunk(m, x.shape[1], x.element_size())
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    out = [order_violation(x[i:i + chunk, None, :], y[None, :, :]) for i in range(0, n, chunk)]
    return torch.cat(out, 0) if out else order_violation(x[:, None, :], y[None, :, :])  # (N, M)


def order_violation_matrix(x: torch.Tensor, y: torch.Tensor, chunk: int | None = None,
                           backend: str = "auto") -> torch.Tensor:
    """Return E[i, j] = order_violation(x[i], y[j]) for x (N, D), y (M, D): Eq. (2) of Vendrov
    et al. over all pairs, differentiable in x and y.

    backend "auto" uses a fused kernel that never materialises N x M x D where one applies: the
    C++ kernel for float32/float64 CPU tensors (orderlib.kernels), the Triton kernel for float32
    CUDA tensors (orderlib.kernels_triton); else the chunked reference. "fused" insists on a
    kernel; "reference" forces the chunked broadcast (`chunk` rows at a time).
    """
    if x.dim() != 2 or y.dim() != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"expected x (N, D) and y (M, D), got {tuple(x.shape)} and {tuple(y.shape)}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "reference" and kernels.supports(x, y) and kernels.cpu_kernel() is not None:
        return kernels.FusedOrderViolation.apply(x, y)
    if backend != "reference" and kernels_triton.supports(x, y):
        try:
            return kernels_triton.TritonOrderViolation.apply(x, y)
        except Exception as exc:  # Triton cannot compile/launch here: remember, use the reference
            kernels_triton.disable(exc)
            if backend == "fused":
                raise
    if backend == "fused":
        status = kernels_triton.status() if x.is_cuda else kernels.kernel_status()
        raise RuntimeError(f"fused order violation unavailable for {x.device.type} {x.dtype} tensors ({status})")
    return order_violation_matrix_reference(x, y, chunk)


def cosine_distance(x: torch.Tensor, y: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Return 1 - cos(x, y), the symmetric baseline of Table 1 ("order-embeddings (symmetric)")."""
    return 1.0 - F.cosine_similarity(x, y, dim=-1, eps=eps)


def cosine_distance_matrix(x: torch.Tensor, y: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Return the (N, M) matrix 1 - cos(x[i], y[j])."""
    return 1.0 - F.normalize(x, dim=-1, eps=eps) @ F.normalize(y, dim=-1, eps=eps).T


def bilinear_score(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return x^T W y, the bilinear model of Socher et al. (2013) used for Table 1's bilinear row."""
    return ((x @ w) * y).sum(-1)


def gaussian_kl(mu_x: torch.Tensor, var_x: torch.Tensor, mu_y: torch.Tensor,
                var_y: torch.Tensor) -> torch.Tensor:
    """Return KL(N(mu_x, diag var_x) || N(mu_y, diag var_y)), the word2gauss energy (Vilnis & McCallum).

    Small when the specific x lies inside the broad y: the asymmetric hypernymy energy.
    """
    diff = mu_y - mu_x
    return 0.5 * (var_x / var_y + diff.pow(2) / var_y - 1.0 + torch.log(var_y) - torch.log(var_x)).sum(-1)
