"""Penalties (energies): low means "the pair holds". Kept apart from the losses.

Aligned versions take (..., D) tensors and return (...); `*_matrix` versions take (N, D), (M, D)
and return the (N, M) all-pairs matrix in bounded memory.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

DEFAULT_CHUNK_BYTES = 256 * 2**20  # working set of one chunk of the all-pairs broadcast


def order_violation(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return E(x, y) = ||max(0, y - x)||^2, zero iff x ⪯ y (Eq. 2 of Vendrov et al.).

    x is the specific side (hyponym, image), y the general side (hypernym, caption).
    """
    return torch.clamp(y - x, min=0).pow(2).sum(-1)


def _auto_chunk(m: int, d: int, itemsize: int, budget: int = DEFAULT_CHUNK_BYTES) -> int:
    return max(1, budget // max(1, m * d * itemsize))


def order_violation_matrix(x: torch.Tensor, y: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """Return E[i, j] = order_violation(x[i], y[j]) for x (N, D), y (M, D), chunked over rows of x.

    `chunk` rows of x are broadcast at a time (default: a 256 MiB working set), so memory is
    O(chunk * M * D) beyond the (N, M) result.
    """
    if x.dim() != 2 or y.dim() != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"expected x (N, D) and y (M, D), got {tuple(x.shape)} and {tuple(y.shape)}")
    n, m = x.shape[0], y.shape[0]
    chunk = chunk or _auto_chunk(m, x.shape[1], x.element_size())
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    out = [order_violation(x[i:i + chunk, None, :], y[None, :, :]) for i in range(0, n, chunk)]
    return torch.cat(out, 0) if out else x.new_zeros((0, m))  # (N, M)


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
