"""Fused all-pairs order violation for CUDA tensors, written in Triton.

Same contract as the C++ CPU kernel (orderlib/kernels.py): E[i, j] = sum_d max(0, y[j, d] -
x[i, d])^2 and its gradients, tiled so that N x M x D never exists. Forward: each program owns a
BN x BM tile of E and walks d, an outer-product update per d like a SIMT GEMM. Backward:
out[a, k] = sum_b w[a, b] * max(0, s * (p[b, k] - q[a, k])), each program owning a BA x BK tile of
the gradient and walking its part of b (`splits`). Every load of the walk is contiguous: x and y go in as (D, N) and
(D, M) copies, w with its a-index unit-strided. The tile sizes are tuned per D at the first call
(triton.autotune over the CONFIGS below; `tuned()` says what was chosen), the first config
under the interpreter.

Checked against the reference in Triton's CPU interpreter (TRITON_INTERPRET=1, tests/
test_fused.py); where Triton is missing or a launch fails, `order_violation_matrix` falls back to
the chunked reference.
"""
from __future__ import annotations

import os

import torch

from orderlib.kernels import no_second_order

try:
    import triton
    import triton.language as tl
except Exception:  # ImportError, or a broken install: no Triton path
    triton = None

# (tile rows, tile columns, warps): forward (BN, BM), backward (BA, BK); the first is the
# interpreter's. Forward tiles read BN + BM floats per d for BN * BM element-pairs; backward grids
# are small (cdiv(N, BA) x cdiv(D, BK) programs), hence the small tiles too.
FORWARD_CONFIGS = [(64, 64, 4), (64, 64, 8), (128, 64, 4), (128, 64, 8), (128, 128, 8), (32, 64, 4), (32, 32, 2)]
BACKWARD_CONFIGS = [(32, 64, 4), (16, 64, 2), (32, 32, 2), (64, 64, 4), (32, 128, 4), (64, 128, 8), (64, 64, 8)]

if triton is not None:

    @triton.jit
    def _forward_kernel(x_ptr, y_ptr, e_ptr, n, m, d, sxn, sxd, syn, syd, sen, sem,
                        BN: tl.constexpr, BM: tl.constexpr):
        rn = tl.program_id(0) * BN + tl.arange(0, BN)  # (BN,)
        rm = tl.program_id(1) * BM + tl.arange(0, BM)  # (BM,)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
        for k in range(0, d):
            xk = tl.load(x_ptr + rn * sxn + k * sxd, mask=rn < n, other=0.0).to(tl.float32)  # (BN,)
            yk = tl.load(y_ptr + rm * syn + k * syd, mask=rm < m, other=0.0).to(tl.float32)  # (BM,)
            v = yk[None, :] - xk[:, None]  # (BN, BM)
            t = tl.where(v < 0.0, 0.0, v)  # max(v, 0) keeping NaN, as torch.clamp does
            acc += t * t
        mask = (rn[:, None] < n) & (rm[None, :] < m)
        tl.store(e_ptr + rn[:, None] * sen + rm[None, :] * sem, acc, mask=mask)

    @triton.jit
    def _weighted_relu_kernel(q_ptr, p_ptr, w_ptr, out_ptr, na, nb, d, b_per, sqa, sqk, spb, spk, swa, swb,
                              sos, soa, sok, FLIP: tl.constexpr, BA: tl.constexpr, BK: tl.constexpr):
        ra = tl.program_id(0) * BA + tl.arange(0, BA)  # (BA,)
        rk = tl.program_id(1) * BK + tl.arange(0, BK)  # (BK,)
        split = tl.program_id(2)  # this program sums b in [split * b_per, (split + 1) * b_per)
        mask = (ra[:, None] < na) & (rk[None, :] < d)
        q = tl.load(q_ptr + ra[:, None] * sqa + rk[None, :] * sqk, mask=mask, other=0.0).to(tl.float32)
        acc = tl.zeros((BA, BK), dtype=tl.float32)
        for b in range(split * b_per, tl.minimum(split * b_per + b_per, nb)):
            w = tl.load(w_ptr + ra * swa + b * swb, mask=ra < na, other=0.0).to(tl.float32)  # (BA,)
            p = tl.load(p_ptr + b * spb + rk * spk, mask=rk < d, other=0.0).to(tl.float32)  # (BK,)
            if FLIP:
                v = q - p[None, :]
            else:
                v = p[None, :] - q
            t = tl.where(v > 0.0, v, 0.0)  # NaN -> 0, as clamp's backward mask (v >= 0)
            acc += w[:, None] * t
        tl.store(out_ptr + split * sos + ra[:, None] * soa + rk[None, :] * sok, acc, mask=mask)


_failure: list[str] = []  # why the Triton path was switched off in this process, if it was


def interpreting() -> bool:
    """True under Triton's CPU interpreter (TRITON_INTERPRET=1), where CPU tensors are allowed."""
    return triton is not None and os.environ.get("TRITON_INTERPRET") == "1"


def _tuned(kernel, configs: list[tuple[int, int, int]], names: tuple[str, str]):
    """`kernel` autotuned over `configs` per D, or as it is (first config) under the interpreter."""
    if interpreting():
        return kernel, dict(zip(names, configs[0][:2]))
    return triton.autotune([triton.Config(dict(zip(names, c[:2])), num_warps=c[2]) for c in configs],
                           key=["d"])(kernel), {}


if triton is not None:
    _forward, _FORWARD_FIXED = _tuned(_forward_kernel, FORWARD_CONFIGS, ("BN", "BM"))
    _backward, _BACKWARD_FIXED = _tuned(_weighted_relu_kernel, BACKWARD_CONFIGS, ("BA", "BK"))


def tuned() -> dict[str, str]:
    """The tile each kernel's autotuner chose (after a first call), by kernel."""
    if triton is None or interpreting():
        return {}
    return {name: str(getattr(k, "best_config", None)) for name, k in (("forward", _forward), ("backward", _backward))}


def supports(x: torch.Tensor, y: torch.Tensor) -> bool:
    """True where this path applies: float32 CUDA tensors (CPU ones under the interpreter)."""
    if triton is None or _failure or x.dtype != torch.float32 or y.dtype != torch.float32:
        return False
    return (x.is_cuda and y.is_cuda) or (interpreting() and x.device.type == y.device.type == "cpu")


def disable(exc: Exception) -> None:
    """Switch the Triton path off for this process after a failed launch (kept for `status`)."""
    _failure.append(f"{type(exc).__name__}: {exc}")


def status() -> str:
    if triton is None:
        return "Triton not installed"
    return "disabled after a failed launch: " + _failure[0] if _failure else f"Triton {triton.__version__}"


def forward(x: torch.Tensor, y: torch.Tensor, kernel=None, **tile) -> torch.Tensor:
    """Return E (N, M) for x (N, D), y (M, D); accumulates in float32. `kernel` and `tile`
    (BN, BM, num_warps): one fixed config instead of the tuned one (tests/test_devices.py)."""
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    e = torch.empty((n, m), dtype=torch.float32, device=x.device)
    if n and m:
        xt, yt = x.t().contiguous(), y.t().contiguous()  # (D, N), (D, M): the walk over d reads rows
        grid = lambda meta: (triton.cdiv(n, meta["BN"]), triton.cdiv(m, meta["BM"]))  # noqa: E731
        (kernel or _forward)[grid](xt, yt, e, n, m, d, xt.stride(1), xt.stride(0), yt.stride(1), yt.stride(0),
                                   *e.stride(), **(tile or _FORWARD_FIXED))
    return e.to(x.dtype)


def splits(na: int, nb: int, d: int, processors: int) -> int:
    """How many programs share each gradient tile's walk over b: enough for about eight programs per
    multiprocessor (counted with 64 x 64 tiles), at most 8, each walking at least 32 b's."""
    tiles = triton.cdiv(na, 64) * triton.cdiv(d, 64)
    return max(1, min(8, triton.cdiv(8 * processors, tiles), nb // 32))


def _processors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def _weighted_relu(q, p, w, flip: bool, kernel=None, tile=None, split: int | None = None) -> torch.Tensor:
    """out (na, D) = sum_b w[a, b] max(0, ±(p[b] - q[a])); w's a-index should be unit-strided.
    The walk over b is cut into `split` parts (default `splits`), summed afterwards in a fixed
    order: a small grid (few rows of q) still fills the GPU, and the result does not depend on timing."""
    na, nb, d = q.shape[0], p.shape[0], q.shape[1]
    if not (na and nb and d):
        return torch.zeros((na, d), dtype=q.dtype, device=q.device)
    q, p = q.contiguous(), p.contiguous()
    split = split or splits(na, nb, d, _processors(q.device))
    b_per = triton.cdiv(nb, split)
    out = torch.empty((split, na, d), dtype=torch.float32, device=q.device)  # every tile of every part is stored
    grid = lambda meta: (triton.cdiv(na, meta["BA"]), triton.cdiv(d, meta["BK"]), split)  # noqa: E731
    (kernel or _backward)[grid](q, p, w, out, na, nb, d, b_per, *q.stride(), *p.stride(), *w.stride(),
                                *out.stride(), FLIP=flip, **(tile or _BACKWARD_FIXED))
    return (out[0] if split == 1 else out.sum(0)).to(q.dtype)


def backward(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor, kernel=None, split: int | None = None,
             **tile) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (dE/dx, dE/dy) contracted with the upstream gradient g (N, M)."""
    gx = _weighted_relu(x, y, g.t().contiguous().t(), False, kernel, tile, split).mul_(-2)  # (N, D); w = g, a-index unit-strided
    gy = _weighted_relu(y, x, g.contiguous().T, True, kernel, tile, split).mul_(2)  # (M, D): w[a=j, b=i] = g[i, j]
    return gx, gy


class TritonOrderViolation(torch.autograd.Function):
    """E[i, j] = ||max(0, y_j - x_i)||^2 (Eq. 2 of Vendrov et al.) over all pairs, fused."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, y)
        return forward(x, y)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        no_second_order()
        x, y = ctx.saved_tensors
        gx, gy = backward(grad, x, y)
        return (gx if ctx.needs_input_grad[0] else None), (gy if ctx.needs_input_grad[1] else None)
