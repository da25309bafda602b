"""Fused all-pairs order violation for CUDA tensors, in Triton: E[i, j] = sum_d max(0, y[j, d] -
x[i, d])^2 and its gradients, tiled so that N x M x D never exists.

The backward writes each gradient as sum_b w max(p, q) - q sum_b w (min for the other side), a
max and an FMA per element-pair. That form cancels, so x and y are centred per dimension first
(the violation is shift-invariant) and the rounding follows the embeddings' spread, not their
offset. NaN inputs give what the reference gives. Tiling, autotuning and CUDA-graph replay:
docs/performance.md.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import torch

from orderlib.kernels import no_second_order

try:
    import triton
    import triton.language as tl
except Exception:  # ImportError, or a broken install: no Triton path
    triton = None

# (tile rows, tile columns, warps, pipelining stages, loop unrolling): forward (BN, BM), backward
# (BA, BK); the first is the interpreter's. On the H200 (benchmarks/investigations/triton_backward_sweep.py) 64
# element-pairs per thread with unrolled, pipelined walks did best: 1.6x (forward 5.7 T/s) and 2x
# (each gradient 8.2-8.4 T/s) the untuned tiles; 128 columns or 8 warps halved the rate. Tiles of 8 x 256
# and 4 x 512 (fewer loads of w per step) ran at half the rate of 32 x 64 (H200, 2026-11-27): each step
# of b then reads 256 or 512 values of p for 8 or 4 rows, and the loads from L2 bound the loop.
FORWARD_CONFIGS = [
    (64, 64, 2, 3, 4),
    (64, 64, 2, 3, 8),
    (128, 64, 4, 3, 4),
    (128, 64, 2, 3, 1),
    (32, 64, 1, 3, 4),
    (64, 32, 1, 3, 4),
]
BACKWARD_CONFIGS = [
    (64, 64, 2, 3, 4),
    (128, 64, 4, 3, 8),
    (32, 64, 1, 3, 8),
    (128, 64, 4, 3, 4),
    (64, 32, 1, 3, 4),
    (32, 64, 1, 3, 4),
]

if triton is not None:

    @triton.jit
    def forward_kernel(
        x_ptr,
        y_ptr,
        e_ptr,
        n,
        m,
        d,
        sxn,
        sxd,
        syn,
        syd,
        sen,
        sem,
        BN: tl.constexpr,
        BM: tl.constexpr,
        UNROLL: tl.constexpr,
        STAGES: tl.constexpr,
    ):
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
    def weighted_max_kernel(
        q_ptr,
        p_ptr,
        w_ptr,
        r_ptr,
        out_ptr,
        na,
        nb,
        d,
        b_per,
        sqa,
        sqk,
        spb,
        spk,
        swa,
        swb,
        sos,
        soa,
        sok,
        FLIP: tl.constexpr,
        BA: tl.constexpr,
        BK: tl.constexpr,
        UNROLL: tl.constexpr,
        STAGES: tl.constexpr,
    ):
        # One gradient, closed in the kernel: -2 (sum_b w max(p, q) - q r) (min for FLIP), r the row
        # sums of w; part 0 of the walk alone subtracts q r, so that the parts sum to the gradient and
        # with one part the kernel writes it whole.
        ra = tl.program_id(0) * BA + tl.arange(0, BA)  # (BA,)
        rk = tl.program_id(1) * BK + tl.arange(0, BK)  # (BK,)
        split = tl.program_id(2)  # this program sums b in [split * b_per, (split + 1) * b_per)
        mask = (ra[:, None] < na) & (rk[None, :] < d)
        q = tl.load(q_ptr + ra[:, None] * sqa + rk[None, :] * sqk, mask=mask, other=0.0).to(tl.float32)
        acc = tl.zeros((BA, BK), dtype=tl.float32)
        lo = split * b_per
        for b in tl.range(lo, tl.minimum(lo + b_per, nb), num_stages=STAGES, loop_unroll_factor=UNROLL):
            w = tl.load(w_ptr + ra * swa + b * swb, mask=ra < na, other=0.0).to(tl.float32)  # (BA,)
            p = tl.load(p_ptr + b * spb + rk * spk, mask=rk < d, other=0.0).to(tl.float32)  # (BK,)
            if FLIP:
                acc += w[:, None] * tl.minimum(p[None, :], q)  # a NaN p yields q: cancelled by q r
            else:
                acc += w[:, None] * tl.maximum(p[None, :], q)
        r = tl.load(r_ptr + ra, mask=(ra < na) & (split == 0), other=0.0).to(tl.float32)  # (BA,)
        acc = tl.where(q == q, (acc - q * r[:, None]) * -2.0, 0.0)  # a NaN q masks its entry, as the reference
        tl.store(out_ptr + split * sos + ra[:, None] * soa + rk[None, :] * sok, acc, mask=mask)


_failure: list[str] = []  # why the Triton path was switched off in this process, if it was


def interpreting() -> bool:
    """True under Triton's CPU interpreter (TRITON_INTERPRET=1), where CPU tensors are allowed."""
    return triton is not None and os.environ.get("TRITON_INTERPRET") == "1"


def meta(config: tuple[int, int, int, int, int], names: tuple[str, str]) -> dict[str, int]:
    """The launch keywords of one config: tile sizes, UNROLL and STAGES (the walk's loop unrolling and
    software pipelining, asked of tl.range itself), num_warps, num_stages."""
    rows, cols, warps, stages, unroll = config
    return {
        names[0]: rows,
        names[1]: cols,
        "UNROLL": unroll,
        "STAGES": stages,
        "num_warps": warps,
        "num_stages": stages,
    }


def _tuned(kernel, configs: list[tuple[int, int, int, int, int]], names: tuple[str, str], key: list[str]):
    """`kernel` autotuned over `configs` per `key`, or as it is (first config) under the interpreter."""
    if interpreting():
        return kernel, meta(configs[0], names)
    tuned_configs = []
    for c in configs:
        kw = meta(c, names)
        tuned_configs.append(
            triton.Config(
                {k: kw[k] for k in (*names, "UNROLL", "STAGES")}, num_warps=kw["num_warps"], num_stages=kw["num_stages"]
            )
        )
    return triton.autotune(tuned_configs, key=key)(kernel), {}


if triton is not None:
    _forward, _FORWARD_FIXED = _tuned(forward_kernel, FORWARD_CONFIGS, ("BN", "BM"), ["d"])
    _backward, _BACKWARD_FIXED = _tuned(weighted_max_kernel, BACKWARD_CONFIGS, ("BA", "BK"), ["d", "FLIP"])


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
    if _failure:
        return "disabled after a failed launch: " + _failure[0]
    graphs = "backward replayed from CUDA graphs" if _use_graphs[0] else "backward eager (CUDA graphs off)"
    failed = f"; a capture failed: {_failure_graphs[0]}" if _failure_graphs else ""
    return f"Triton {triton.__version__}, {graphs}{failed}"


def forward(x: torch.Tensor, y: torch.Tensor, kernel=None, **tile) -> torch.Tensor:
    """Return E (N, M) for x (N, D), y (M, D); accumulates in float32. `kernel` and `tile`
    (`meta` of a config): one fixed config instead of the tuned one (tests/test_devices.py)."""
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    e = torch.empty((n, m), dtype=torch.float32, device=x.device)
    if n and m:
        xt, yt = x.t().contiguous(), y.t().contiguous()  # (D, N), (D, M): the walk over d reads rows
        grid = lambda meta: (triton.cdiv(n, meta["BN"]), triton.cdiv(m, meta["BM"]))  # noqa: E731
        (kernel or _forward)[grid](
            xt,
            yt,
            e,
            n,
            m,
            d,
            xt.stride(1),
            xt.stride(0),
            yt.stride(1),
            yt.stride(0),
            *e.stride(),
            **(tile or _FORWARD_FIXED),
        )
    return e.to(x.dtype)


def splits(na: int, nb: int, d: int, processors: int) -> int:
    """How many programs share each gradient tile's walk over b: enough for about eight programs per
    multiprocessor (counted with 64 x 64 tiles), at most 8, each walking at least 32 b's."""
    tiles = triton.cdiv(na, 64) * triton.cdiv(d, 64)
    return max(1, min(8, triton.cdiv(8 * processors, tiles), nb // 32))


def _processors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def _weighted_relu(q, p, w, r, flip: bool, kernel=None, tile=None, split: int | None = None) -> torch.Tensor:
    """One gradient (na, D): -2 sum_b w[a, b] (max(p[b], q[a]) - q[a]) (min and the sign flipped for
    flip, i.e. +2 sum_b w relu(q - p)), r = w's row sums; w's a-index should be unit-strided. The
    walk over b is cut into `split` parts (default `splits`), summed afterwards in a fixed order: a
    small grid (few rows of q) still fills the GPU, and the result does not depend on timing."""
    na, nb, d = q.shape[0], p.shape[0], q.shape[1]
    if not (na and nb and d):
        return torch.zeros((na, d), dtype=q.dtype, device=q.device)
    q, p = q.contiguous(), p.contiguous()
    split = split or splits(na, nb, d, _processors(q.device))
    b_per = triton.cdiv(nb, split)
    out = torch.empty((split, na, d), dtype=torch.float32, device=q.device)  # every tile of every part is stored
    grid = lambda meta: (triton.cdiv(na, meta["BA"]), triton.cdiv(d, meta["BK"]), split)  # noqa: E731
    (kernel or _backward)[grid](
        q,
        p,
        w,
        r,
        out,
        na,
        nb,
        d,
        b_per,
        *q.stride(),
        *p.stride(),
        *w.stride(),
        *out.stride(),
        FLIP=flip,
        **(tile or _BACKWARD_FIXED),
    )
    return out[0] if split == 1 else out.sum(0)


def backward(
    g: torch.Tensor, x: torch.Tensor, y: torch.Tensor, kernel=None, split: int | None = None, **tile
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (dE/dx, dE/dy) contracted with the upstream gradient g (N, M). x and y are first shifted
    by a per-dimension mean (of the side with fewer rows; the violation does not change), so that the
    max form's rounding follows the spread of the embeddings, not their distance from 0."""
    small = x if x.shape[0] <= y.shape[0] else y  # any shift is exact: the smaller side's mean, one reduction
    c = small.nansum(0).div_(max(small.shape[0], 1)).nan_to_num_(0.0, 0.0, 0.0)  # (D,)
    x, y, g = x - c, y - c, g.float().contiguous()
    gx = _weighted_relu(x, y, g.t().contiguous().t(), g.sum(1), False, kernel, tile, split)  # (N, D); w = g
    gy = _weighted_relu(y, x, g.T, g.sum(0), True, kernel, tile, split)  # (M, D): w[a=j, b=i] = g[i, j]
    return gx, gy


GRAPH_AFTER = 2  # eager calls of one shape (the first autotunes) before its backward is captured
MAX_GRAPHS = 8  # shapes captured per process; further shapes run eagerly (no capture churn)
_graphs: dict = {}  # shape key -> (graph, static inputs, static outputs), or None: not capturable
_calls: dict = {}  # shape key -> eager calls so far
_use_graphs = [os.environ.get("ORDERLIB_CUDA_GRAPH", "1") != "0"]
_failure_graphs: list[str] = []  # why a shape's capture failed, if one did


@contextmanager
def cuda_graphs(on: bool):
    """Within the block, replay the CUDA backward from captured graphs (on) or run it eagerly, launch
    by launch (off); the setting before it (ORDERLIB_CUDA_GRAPH=0: off) comes back after it."""
    before, _use_graphs[0] = _use_graphs[0], bool(on)
    try:
        yield
    finally:
        _use_graphs[0] = before


def _capture(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
    """`backward` on copies of (g, x, y) captured in a CUDA graph: (graph, inputs, outputs)."""
    static_in = tuple(t.detach().clone() for t in (g, x, y))
    side = torch.cuda.Stream(device=x.device)
    side.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(side):  # allocations settle outside the capture
        backward(*static_in)
    torch.cuda.current_stream(x.device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        static_out = backward(*static_in)
    return graph, static_in, static_out


def _graph_key(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple:
    return (tuple(g.shape), tuple(x.shape), tuple(y.shape), g.dtype, x.dtype, y.dtype, x.device)


def captured(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> bool:
    """True once `graphed_backward` replays the backward of (g, x, y)'s shapes, dtypes and device
    from a captured CUDA graph (False before GRAPH_AFTER eager calls, and where a capture failed)."""
    return _graphs.get(_graph_key(g, x, y)) is not None


def graphed_backward(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`backward(g, x, y)`, replayed from a CUDA graph once a shape has run GRAPH_AFTER times eagerly:
    one replay instead of about ten launches, so the GPU no longer waits on the CPU between them.
    Same kernels, same tiles, the same bits as eager; returns fresh tensors. Eager on the CPU, with
    graphs off, while a stream is already capturing, or where a capture failed for that shape."""
    if not (x.is_cuda and _use_graphs[0]) or torch.cuda.is_current_stream_capturing():
        return backward(g, x, y)
    key = _graph_key(g, x, y)
    if key not in _graphs:
        _calls[key] = _calls.get(key, 0) + 1
        if _calls[key] <= GRAPH_AFTER or len(_graphs) >= MAX_GRAPHS:
            return backward(g, x, y)
        with torch.cuda.device(x.device):
            try:
                _graphs[key] = _capture(g, x, y)
            except Exception as exc:  # capture refused (e.g. a driver without graphs): eager for this shape
                _graphs[key] = None
                _failure_graphs.append(f"{type(exc).__name__}: {exc}")
    entry = _graphs[key]
    if entry is None:
        return backward(g, x, y)
    graph, static_in, static_out = entry
    for s, a in zip(static_in, (g, x, y)):
        s.copy_(a)
    graph.replay()
    return tuple(o.clone() for o in static_out)


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
        gx, gy = graphed_backward(grad, x, y)
        return (gx if ctx.needs_input_grad[0] else None), (gy if ctx.needs_input_grad[1] else None)
