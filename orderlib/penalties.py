"""Penalties (energies): low means "the pair holds". Kept apart from the losses.

Aligned versions take (..., D) tensors and return (...); `*_matrix` versions take (N, D), (M, D)
and return the (N, M) all-pairs matrix in bounded memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

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


def order_violation_matrix_reference(x: torch.Tensor, y: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """Return the all-pairs order violation by broadcasting `chunk` rows of x at a time.

    Memory is O(chunk * M * D) beyond the (N, M) result (default: `chunk_bytes()`). Slow (one
    N x M x D tensor written and read per chunk) but plain PyTorch: any device, dtype, autograd.
    """
    n, m = x.shape[0], y.shape[0]
    chunk = chunk or _auto_chunk(m, x.shape[1], x.element_size())
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    out = [order_violation(x[i : i + chunk, None, :], y[None, :, :]) for i in range(0, n, chunk)]
    return torch.cat(out, 0) if out else order_violation(x[:, None, :], y[None, :, :])  # (N, M)


def order_violation_matrix(
    x: torch.Tensor, y: torch.Tensor, chunk: int | None = None, backend: str = "auto"
) -> torch.Tensor:
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


def gaussian_kl(mu_x: torch.Tensor, var_x: torch.Tensor, mu_y: torch.Tensor, var_y: torch.Tensor) -> torch.Tensor:
    """Return KL(N(mu_x, diag var_x) || N(mu_y, diag var_y)), the word2gauss energy (Vilnis & McCallum).

    Small when the specific x lies inside the broad y: the asymmetric hypernymy energy.
    """
    diff = mu_y - mu_x
    return 0.5 * (var_x / var_y + diff.pow(2) / var_y - 1.0 + torch.log(var_y) - torch.log(var_x)).sum(-1)


# --- Later hypernymy energies (boxes, densities, hyperbolic points and cones) -------------------
# Each takes aligned (B, D) tensors, u the specific side (hyponym) and v the general side
# (hypernym), and returns (B,): low means "u is a v".

EULER_GAMMA = 0.5772156649015329


def _log_softplus(x: torch.Tensor) -> torch.Tensor:
    """Return log(softplus(x)) without underflow: softplus(x) ~ e^x far below zero."""
    return torch.where(x < -15.0, x, torch.log(F.softplus(x.clamp(min=-15.0))))


def box_log_volume(lo: torch.Tensor, hi: torch.Tensor, temperature: float = 1.0, offset: float = 0.0) -> torch.Tensor:
    """Return sum_i log(t * softplus((hi_i - lo_i - offset) / t)), the log softplus volume.

    Li et al. (ICLR 2019)'s smoothed volume: the hard side max(0, hi - lo) replaced by a softplus of
    temperature t, so disjoint boxes still get gradients. With offset = 2 * gamma_E * beta it is the
    Bessel approximation of a Gumbel box's expected volume (Dasgupta et al., NeurIPS 2020).
    """
    side = (hi - lo - offset) / temperature  # (..., D)
    return (_log_softplus(side) + side.new_tensor(temperature).log()).sum(-1)


def box_energy(
    lo_u: torch.Tensor, hi_u: torch.Tensor, lo_v: torch.Tensor, hi_v: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Return -log P(v | u) = log vol(u) - log vol(u ∧ v) for boxes [lo, hi] (Vilnis et al., ACL 2018:
    P(v | u) = vol(u ∧ v) / vol(u)).

    The meet has corners max(lo_u, lo_v), min(hi_u, hi_v); volumes are Li et al.'s softplus
    volumes (`box_log_volume`), the standard fix for the zero gradient of disjoint hard boxes.
    Zero only when u sits inside v (in the hard limit t -> 0); never negative.
    """
    lo, hi = torch.maximum(lo_u, lo_v), torch.minimum(hi_u, hi_v)  # (B, D): the meet u ∧ v
    return box_log_volume(lo_u, hi_u, temperature) - box_log_volume(lo, hi, temperature)


def gumbel_box_energy(
    lo_u: torch.Tensor,
    hi_u: torch.Tensor,
    lo_v: torch.Tensor,
    hi_v: torch.Tensor,
    beta: float = 0.01,
    temperature: float | None = None,
) -> torch.Tensor:
    """Return -log P(v | u) for Gumbel boxes (Dasgupta et al., NeurIPS 2020).

    Corners are Gumbel location parameters; the meet's are beta * logsumexp(lo / beta) and
    -beta * logsumexp(-hi / beta) (the Gumbel intersection), and each expected volume is
    prod_i t * softplus((hi_i - lo_i - 2 gamma_E beta) / t) (the Bessel approximation; t = beta
    unless `temperature`).
    Smoothed boxes of Li et al. (ICLR 2019) are the t-softplus part alone (`box_energy`).
    """
    t = beta if temperature is None else temperature
    lo = beta * torch.logaddexp(lo_u / beta, lo_v / beta)  # (B, D), >= max(lo_u, lo_v)
    hi = -beta * torch.logaddexp(-hi_u / beta, -hi_v / beta)  # (B, D), <= min(hi_u, hi_v)
    off = 2 * EULER_GAMMA * beta
    return box_log_volume(lo_u, hi_u, t, off) - box_log_volume(lo, hi, t, off)


def density_order_violation(
    mu_u: torch.Tensor, var_u: torch.Tensor, mu_v: torch.Tensor, var_v: torch.Tensor, gamma: float = 0.0
) -> torch.Tensor:
    """Return d_gamma(u, v) = max(0, KL(N_u || N_v) - gamma), the thresholded divergence of
    density order embeddings (Athiwaratkun & Wilson, ICLR 2018): zero once the specific
    density u is encapsulated in the broad v up to gamma nats.
    """
    return torch.clamp(gaussian_kl(mu_u, var_u, mu_v, var_v) - gamma, min=0)


def poincare_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return d(x, y) = arccosh(1 + 2 |x - y|^2 / ((1 - |x|^2)(1 - |y|^2))) in the unit Poincare
    ball (Nickel & Kiela, NeurIPS 2017, Eq. 1), computed by geoopt as 2 artanh |(-x) ⊕ y|."""
    from geoopt.manifolds.stereographic import math as pmath

    return pmath.dist(x, y, k=x.new_tensor(-1.0))


def poincare_isa_energy(x: torch.Tensor, y: torch.Tensor, alpha: float = 1000.0) -> torch.Tensor:
    """Return (1 + alpha (|y| - |x|)) d(x, y), minus Nickel & Kiela's is-a score (NeurIPS 2017,
    lexical entailment experiment): general concepts sit near the origin, so a hypernym y with a smaller norm than x
    lowers the energy and the reversed pair raises it. alpha = 0 gives the plain distance."""
    return (1 + alpha * (y.norm(dim=-1) - x.norm(dim=-1))) * poincare_distance(x, y)


def cone_aperture(x: torch.Tensor, K: float = 0.1) -> torch.Tensor:
    """Return psi(x) = arcsin(K (1 - |x|^2) / |x|), the half-aperture of the hyperbolic entailment
    cone at x (Ganea et al., ICML 2018, the closed-form hyperbolic cone); defined for
    |x| >= 2K / (1 + sqrt(1 + 4K^2))."""
    n = x.norm(dim=-1)
    return torch.asin((K * (1 - n * n) / n).clamp(max=1 - 1e-6))


def cone_angle(x: torch.Tensor, y: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Return Xi(x, y), the angle at x between the geodesic from x to y and the half-line from the
    origin through x, in the Poincare ball (Ganea et al., ICML 2018, the closed form of Xi):
    arccos((<x,y>(1 + |x|^2) - |x|^2 (1 + |y|^2)) / (|x| |x - y| sqrt(1 + |x|^2 |y|^2 - 2<x,y>))).
    """
    xy = (x * y).sum(-1)
    nx2, ny2 = (x * x).sum(-1), (y * y).sum(-1)
    num = xy * (1 + nx2) - nx2 * (1 + ny2)
    den = nx2.sqrt() * (x - y).norm(dim=-1) * (1 + nx2 * ny2 - 2 * xy).clamp(min=0).sqrt()
    cos = torch.where(den > 1e-12, num / den.clamp(min=1e-12), 1.0)  # y = x: angle 0 (reflexive)
    return torch.acos(cos.clamp(-1 + eps, 1 - eps))


def cone_violation(x: torch.Tensor, y: torch.Tensor, K: float = 0.1) -> torch.Tensor:
    """Return E(x, y) = max(0, Xi(y, x) - psi(y)): zero iff x lies in the entailment cone of the
    general y (Ganea et al., ICML 2018, the energy of their max-margin loss)."""
    return torch.clamp(cone_angle(y, x) - cone_aperture(y, K), min=0)


def _order_reversed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return order_violation(y, x)


def _order_reversed_matrix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return order_violation_matrix(y, x).T  # y above x: E(y, x), as an (N, M) matrix


def _poincare_isa_table1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return poincare_isa_energy(x, y, alpha=1.0)  # Table 1's Poincaré row scores its test pairs at alpha 1


@dataclass(frozen=True)
class Energy:
    """A named energy, low = "the pair holds", the specific side first: its aligned form `pairs`,
    its all-pairs form `matrix` (bounded memory) where one exists, whether models keep embeddings
    in the positive orthant (`nonnegative`), and its code and parameters in the compiled table-model
    step (csrc/concept_step.cpp) where it has one. `vectors`: `pairs` takes two vectors (x, y);
    the energies of boxes, densities and the bilinear model take their models' parameters
    (corners, means and variances, a matrix) instead."""

    pairs: Callable[..., torch.Tensor]
    matrix: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    nonnegative: bool = False
    vectors: bool = True
    kernel: int | None = None
    kernel_params: tuple[str, ...] = ()


# The one name -> energy registry: retrieval (`orderlib.eval.retrieval`, `orderlib.encoders.joint`),
# hypernymy (`orderlib.eval.hypernymy`, the command) and the compiled step (`orderlib.concepts`).
ENERGIES: dict[str, Energy] = {
    "order": Energy(order_violation, order_violation_matrix, nonnegative=True, kernel=0),  # Eq. (2) of Vendrov et al.
    "order-reversed": Energy(_order_reversed, _order_reversed_matrix, nonnegative=True),  # images above captions
    "cosine": Energy(cosine_distance, cosine_distance_matrix, kernel=1, kernel_params=("eps",)),
    "density-order": Energy(density_order_violation, vectors=False, kernel=2, kernel_params=("gamma", "normalize")),
    "box": Energy(box_energy, vectors=False, kernel=3, kernel_params=("temperature",)),
    "gumbel-box": Energy(gumbel_box_energy, vectors=False, kernel=4, kernel_params=("beta", "temperature")),
    "bilinear": Energy(bilinear_score, vectors=False, kernel=5),  # a score: the model's energy is minus it, less a bias
    "poincare-distance": Energy(poincare_distance, kernel=6),  # what Nickel & Kiela's loss trains on
    "poincare": Energy(_poincare_isa_table1),  # the is-a energy Table 1's Poincaré row is scored by
    "cone": Energy(cone_violation, kernel=7, kernel_params=("K",)),
}


MATRIX_ENERGIES = tuple(name for name, e in ENERGIES.items() if e.matrix is not None)  # retrieval's penalties
VECTOR_ENERGIES = tuple(name for name, e in ENERGIES.items() if e.vectors)  # E(x, y) of two embeddings


def energy(name: str) -> Energy:
    """The registered energy `name` (ENERGIES); an unknown name is a ValueError listing the known ones."""
    if name not in ENERGIES:
        raise ValueError(f"unknown energy {name!r}; known: {', '.join(ENERGIES)}")
    return ENERGIES[name]
