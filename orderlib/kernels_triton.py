"""Fused all-pairs order violation for CUDA tensors, written in Triton.

Same contract as the C++ CPU kernel (orderlib/kernels.py): E[i, j] = sum_d max(0, y[j, d] -
x[i, d])^2 and its gradients, tiled so that N x M x D never exists. Forward: each program owns a
BLOCK_N x BLOCK_M tile of E and walks d, an outer-product update per d like a SIMT GEMM.
Backward: out[a, k] = sum_b w[a, b] * max(0, s * (p[b, k] - q[a, k])), each program owning a
BLOCK_A x BLOCK_K tile of the gradient and walking b.

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

BLOCK_N, BLOCK_M = 64, 64  # forward tile of E
BLOCK_A, BLOCK_K = 32, 64  # backward tile of the gradient (rows, feature lanes)

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
    def _weighted_relu_kernel(q_ptr, p_ptr, w_ptr, out_ptr, na, nb, d, sqa, sqk, spb, spk, swa, swb,
                              soa, sok, FLIP: tl.constexpr, BA: tl.constexpr, BK: tl.constexpr):
        ra = tl.program_id(0) * BA + tl.arange(0, BA)  # (BA,)
        rk = tl.program_id(1) * BK + tl.arange(0, BK)  # (BK,)
        mask = (ra[:, None] < na) & (rk[None, :] < d)
        q = tl.load(q_ptr + ra[:, None] * sqa + rk[None, :] * sqk, mask=mask, other=0.0).to(tl.float32)
        acc = tl.zeros((BA, BK), dtype=tl.float32)
        for b in range(0, nb):
            w = tl.load(w_ptr + ra * swa + b * swb, mask=ra < na, other=0.0).to(tl.float32)  # (BA,)
            p = tl.load(p_ptr + b * spb + rk * spk, mask=rk < d, other=0.0).to(tl.float32)  # (BK,)
            if FLIP:
                v = q - p[None, :]
            else:
                v = p[None, :] - q
            t = tl.where(v > 0.0, v, 0.0)  # NaN -> 0, as clamp's backward mask (v >= 0)
            acc += w[:, None] * t
        tl.store(out_ptr + ra[:, None] * soa + rk[None, :] * sok, acc, mask=mask)


_failure: list[str] = []  # why the Triton path was switched off in this process, if it was


def interpreting() -> bool:
    """True under Triton's CPU interpreter (TRITON_INTERPRET=1), where CPU tensors are allowed."""
    return triton is not None and os.environ.get("TRITON_INTERPRET") == "1"


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


def forward(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return E (N, M) for x (N, D), y (M, D); accumulates in float32."""
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    e = torch.empty((n, m), dtype=torch.float32, device=x.device)
    if n and m:
        grid = (triton.cdiv(n, BLOCK_N), triton.cdiv(m, BLOCK_M))
        _forward_kernel[grid](x, y, e, n, m, d, *x.stride(), *y.stride(), *e.stride(), BN=BLOCK_N, BM=BLOCK_M)
    return e.to(x.dtype)


def _weighted_relu(q, p, w, flip: bool) -> torch.Tensor:
    na, nb, d = q.shape[0], p.shape[0], q.shape[1]
    out = torch.zeros((na, d), dtype=torch.float32, device=q.device)
    if na and nb and d:
        grid = (triton.cdiv(na, BLOCK_A), triton.cdiv(d, BLOCK_K))
        _weighted_relu_kernel[grid](q, p, w, out, na, nb, d, *q.stride(), *p.stride(), *w.stride(),
                                    *out.stride(), FLIP=flip, BA=BLOCK_A, BK=BLOCK_K)
    return out.to(q.dtype)


def backward(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (dE/dx, dE/dy) contracted with the upstream gradient g (N, M)."""
    gx = _weighted_relu(x, y, g, flip=False).mul_(-2)  # (N, D)
    gy = _weighted_relu(y, x, g.T, flip=True).mul_(2)  # (M, D): w[a=j, b=i] = g[i, j] via strides
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
