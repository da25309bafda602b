"""Fused all-pairs order violation for CUDA tensors, written in Triton.

Same contract as the C++ CPU kernel (orderlib/kernels.py): E[i, j] = sum_d max(0, y[j, d] -
x[i, d])^2 and its gradients, tiled so that N x M x D never exists. Forward: each program owns a
BN x BM tile of E and walks d, an outer-product update per d like a SIMT GEMM. Backward: each of the
two gradients is out[a, k] = sum_b w[a, b] max(0, p[b, k] - q[a, k]) (for dE/dy with p and q negated),
written as sum_b w[a, b] max(p[b, k], q[a, k]) - q[a, k] sum_b w[a, b]: two instructions per
element-pair (a max and an FMA) instead of three, the row sums of w taken once outside. One launch
computes both gradients: each program owns a BA x BK tile of one of them and walks its part of b
(`splits`), so that the grid's last wave idles little. Every load of the walks is contiguous: x and
y go in as (D, N) and (D, M) copies for the forward, w with its a-index unit-strided. Tiles, pipelining stages and loop unrolling are tuned per D at the first call
(triton.autotune over the CONFIGS below, chosen by benchmarks/triton_backward_sweep.py on an H200;
`tuned()` says what was picked), the first config under the interpreter.

Rounding: the max form cancels q * sum_b w against the sum, so its error grows with |q| sum_b |w|
rather than with the terms that survive the max; `backward` centres x and y per dimension first
(the violation is shift-invariant), so |q| is the embeddings' spread, not their offset. NaN rules are the reference's: a NaN in p
masks its terms, a NaN in q masks its whole gradient entry, a NaN in w propagates.

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

# (tile rows, tile columns, warps, pipelining stages, loop unrolling): forward (BN, BM), backward
# (BA, BK); the first is the interpreter's. On the H200 (benchmarks/triton_backward_sweep.py) 64
# element-pairs per thread with unrolled, pipelined walks did best: 1.6x (forward 5.7 T/s) and 2x
# (each gradient 8.2-8.4 T/s) the untuned tiles; 128 columns or 8 warps halved the rate.
FORWARD_CONFIGS = [(64, 64, 2, 3, 4), (64, 64, 2, 3, 8), (128, 64, 4, 3, 4), (128, 64, 2, 3, 1), (32, 64, 1, 3, 4),
                   (64, 32, 1, 3, 4)]
BACKWARD_CONFIGS = [(64, 64, 2, 3, 4), (128, 64, 4, 3, 8), (32, 64, 1, 3, 8), (128, 64, 4, 3, 4), (64, 32, 1, 3, 4),
                    (32, 64, 1, 3, 4)]

if triton is not None:

    @triton.jit
    def _forward_kernel(x_ptr, y_ptr, e_ptr, n, m, d, sxn, sxd, syn, syd, sen, sem,
                        BN: tl.constexpr, BM: tl.constexpr, UNROLL: tl.constexpr, STAGES: tl.constexpr):
        rn = tl.program_id(0) * BN + tl.arange(0, BN)  # (BN,)
        rm = tl.program_id(1) * BM + tl.arange(0, BM)  # (BM,)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
        for k in tl.range(0, d, num_stages=STAGES, loop_unroll_factor=UNROLL):
            xk = tl.load(x_ptr + rn * sxn + k * sxd, mask=rn < n, other=0.0).to(tl.float32)  # (BN,)
            yk = tl.load(y_ptr + rm * syn + k * syd, mask=rm < m, other=0.0).to(tl.float32)  # (BM,)
            v = yk[None, :] - xk[:, None]  # (BN, BM)
            t = tl.where(v < 0.0, 0.0, v)  # max(v, 0) keeping NaN, as torch.clamp does
            acc += t * t
        mask = (rn[:, None] < n) & (rm[None, :] < m)
        tl.store(e_ptr + rn[:, None] * sen + rm[None, :] * sem, acc, mask=mask)

    @triton.jit
    def _backward_kernel(z_ptr, w_ptr, r_ptr, o_ptr, n, m, d, sx, sy, bx_per, by_per,
                         BA: tl.constexpr, BK: tl.constexpr, UNROLL: tl.constexpr, STAGES: tl.constexpr):
        # Both gradients in one launch; each program owns a BA x BK tile of one gradient's part `split`.
        # z (2(n+m), D): x - c, y - c, c - x, c - y. dE/dx: q = x - c, p = y - c; dE/dy: q = c - y,
        # p = c - x (min(x, y) = -max(-x, -y), so both walks are a max). w (2nm,): g as (m, n) then as
        # (n, m), each gradient's a-index unit-strided. r (n + m,): the row sums of w. o: the parts.
        pid = tl.program_id(0)
        kt = tl.cdiv(d, BK)
        first = tl.cdiv(n, BA) * kt * sx  # programs of dE/dx
        is_y = pid >= first
        t = tl.where(is_y, pid - first, pid)
        na = tl.where(is_y, m, n)
        nb = tl.where(is_y, n, m)
        b_per = tl.where(is_y, by_per, bx_per)
        at = tl.cdiv(na, BA)
        split = t // (at * kt)
        ra = (t // kt) % at * BA + tl.arange(0, BA)  # (BA,)
        rk = t % kt * BK + tl.arange(0, BK)  # (BK,)
        q0 = tl.where(is_y, 2 * n + m, 0)  # first row of q in z
        p0 = tl.where(is_y, n + m, n)  # first row of p in z
        w0 = tl.where(is_y, n * m, 0)  # w[a, b] at w0 + a + b na
        mask = (ra[:, None] < na) & (rk[None, :] < d)
        q = tl.load(z_ptr + (q0 + ra[:, None]) * d + rk[None, :], mask=mask, other=0.0)  # (BA, BK)
        acc = tl.zeros((BA, BK), dtype=tl.float32)
        lo = split * b_per
        for b in tl.range(lo, tl.minimum(lo + b_per, nb), num_stages=STAGES, loop_unroll_factor=UNROLL):
            w = tl.load(w_ptr + w0 + ra + b * na, mask=ra < na, other=0.0)  # (BA,)
            p = tl.load(z_ptr + (p0 + b) * d + rk, mask=rk < d, other=0.0)  # (BK,)
            acc += w[:, None] * tl.maximum(p[None, :], q)  # a NaN p yields q: cancelled below
        rs = tl.load(r_ptr + tl.where(is_y, n, 0) + ra, mask=(ra < na) & (split == 0), other=0.0)  # (BA,)
        acc = (acc - q * rs[:, None]) * tl.where(is_y, 2.0, -2.0)  # part 0 closes the max form
        acc = tl.where(q == q, acc, 0.0)  # a NaN q masks every term, as clamp's backward does
        o0 = tl.where(is_y, sx * n, 0) + split * na  # first row of this part in o
        tl.store(o_ptr + (o0 + ra[:, None]) * d + rk[None, :], acc, mask=mask)


_failure: list[str] = []  # why the Triton path was switched off in this process, if it was


def interpreting() -> bool:
    """True under Triton's CPU interpreter (TRITON_INTERPRET=1), where CPU tensors are allowed."""
    return triton is not None and os.environ.get("TRITON_INTERPRET") == "1"


def meta(config: tuple[int, int, int, int, int], names: tuple[str, str]) -> dict[str, int]:
    """The launch keywords of one config: tile sizes, UNROLL and STAGES (the walk's loop unrolling and
    software pipelining, asked of tl.range itself), num_warps, num_stages."""
    rows, cols, warps, stages, unroll = config
    return {names[0]: rows, names[1]: cols, "UNROLL": unroll, "STAGES": stages, "num_warps": warps,
            "num_stages": stages}


def _tuned(kernel, configs: list[tuple[int, int, int, int, int]], names: tuple[str, str], key: list[str]):
    """`kernel` autotuned over `configs` per `key`, or as it is (first config) under the interpreter."""
    if interpreting():
        return kernel, meta(configs[0], names)
    tuned_configs = []
    for c in configs:
        kw = meta(c, names)
        tuned_configs.append(triton.Config({k: kw[k] for k in (*names, "UNROLL", "STAGES")}, num_warps=kw["num_warps"],
                                           num_stages=kw["num_stages"]))
    return triton.autotune(tuned_configs, key=key)(kernel), {}


if triton is not None:
    _forward, _FORWARD_FIXED = _tuned(_forward_kernel, FORWARD_CONFIGS, ("BN", "BM"), ["d"])
    _backward, _BACKWARD_FIXED = _tuned(_backward_kernel, BACKWARD_CONFIGS, ("BA", "BK"), ["d"])


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
    (`meta` of a config): one fixed config instead of the tuned one (tests/test_devices.py)."""
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    e = torch.empty((n, m), dtype=torch.float32, device=x.device)
    if n and m:
        xt, yt = x.t().contiguous(), y.t().contiguous()  # (D, N), (D, M): the walk over d reads rows
        grid = lambda meta: (triton.cdiv(n, meta["BN"]), triton.cdiv(m, meta["BM"]))  # noqa: E731
        (kernel or _forward)[grid](xt, yt, e, n, m, d, xt.stride(1), xt.stride(0), yt.stride(1), yt.stride(0),
                                   *e.stride(), **(tile or _FORWARD_FIXED))
    return e.to(x.dtype)


PROGRAMS_PER_SM = 32  # the backward's target: many short programs, so the last wave idles little


def splits(n: int, m: int, d: int, processors: int, per_sm: int = PROGRAMS_PER_SM) -> tuple[int, int]:
    """How many parts each gradient's walk over b is cut into, (dE/dx's, dE/dy's): about
    `per_sm` programs per multiprocessor (counted with 64 x 64 tiles), every part of either
    gradient about as long, at most 8 parts, each walking at least 32 b's."""
    k = triton.cdiv(d, 64)
    steps = triton.cdiv(n, 64) * k * m + triton.cdiv(m, 64) * k * n  # walk steps of all tiles, both gradients
    length = max(32, steps // (per_sm * processors))  # each part's walk
    return tuple(max(1, min(8, triton.cdiv(nb, length), nb // 32)) for nb in (m, n))


def _processors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def backward(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor, kernel=None, split: tuple[int, int] | None = None,
             **tile) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (dE/dx, dE/dy) contracted with the upstream gradient g (N, M), in one launch.

    Each gradient is out[a, k] = sum_b w[a, b] max(0, p[b, k] - q[a, k]), summed as
    sum_b w max(p, q) - q sum_b w: a max and an FMA per element-pair. x and y are first shifted by their
    per-dimension mean (the violation does not change), so that this form's rounding follows the spread
    of the embeddings, not their distance from 0. Each walk over b is cut into `split` parts (default
    `splits`), summed afterwards in a fixed order: the grid fills the GPU, and the result does not
    depend on timing. `kernel` and `tile`: one fixed config instead of the tuned one."""
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    if not (n and m and d):
        return torch.zeros_like(x), torch.zeros_like(y)
    xy = torch.cat([x, y])  # (N + M, D)
    xy -= xy.nanmean(0).nan_to_num_()
    z = torch.cat([xy, xy.neg()])  # (2 (N + M), D): x - c, y - c, c - x, c - y
    w = torch.empty(2 * n * m, dtype=torch.float32, device=x.device)
    w[: n * m].view(m, n).copy_(g.t())  # dE/dx's w[a=i, b=j] = g[i, j] at i + j N
    w[n * m:].view(n, m).copy_(g)  # dE/dy's w[a=j, b=i] = g[i, j] at j + i M
    r = torch.cat([g.sum(1), g.sum(0)]).float()  # (N + M,): the row sums of each w
    sx, sy = split or splits(n, m, d, _processors(x.device))
    if max(z.numel(), w.numel(), (sx * n + sy * m) * d) >= 2**31:
        raise ValueError(f"order violation backward of {n} x {m} x {d}: past the Triton kernel's 32-bit offsets; "
                         "use backend='reference'")
    o = torch.empty((sx * n + sy * m, d), dtype=torch.float32, device=x.device)  # every tile of every part is stored
    grid = lambda meta: (triton.cdiv(n, meta["BA"]) * triton.cdiv(d, meta["BK"]) * sx  # noqa: E731
                         + triton.cdiv(m, meta["BA"]) * triton.cdiv(d, meta["BK"]) * sy,)
    (kernel or _backward)[grid](z, w, r, o, n, m, d, sx, sy, triton.cdiv(m, sx), triton.cdiv(n, sy),
                                **(tile or _BACKWARD_FIXED))
    gx, gy = o[: sx * n].view(sx, n, d), o[sx * n:].view(sy, m, d)
    return (gx[0] if sx == 1 else gx.sum(0)).to(x.dtype), (gy[0] if sy == 1 else gy.sum(0)).to(y.dtype)


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
