"""Sweep the Triton backward's formulation and tiles on a CUDA device (issue 14: backward >= 25% of GEMM).

One pass of the backward is out[a, k] = sum_b w[a, b] relu(s (p[b, k] - q[a, k])), s = +-1. Two
formulations, each over tiles, warps, pipelining stages and loop unrolling:
  subtract  v = s (p - q); t = max(v, 0); acc += w t                      3 instructions per element-pair
  max       acc += w max(p, q) (s = +1) or w min(p, q) (s = -1), then
            out = acc - q sum_b w  (or q sum_b w - acc)                      2 instructions per element-pair
Prints one line per (formulation, pass, config): seconds and element-pairs/s, the fp32 GEMM rate of
the same run, and each formulation's largest error against a float64 reference; then orderlib's own
backward, timed both ways. --library-only skips the formulations and times orderlib's backward by
parts and tiles, against an earlier kernels_triton.py (--before), then the levers outside the main
loop: the closure in the kernel (`closed_backward`) and one CUDA-graph replay per call (`graphed`).
Under TRITON_INTERPRET=1 (CPU) it checks the formulations and `closed_backward` on a small case and
times nothing. bench_penalty's CUDA rows are the reported figures; this script chose the
CONFIGS of orderlib/kernels_triton.py. The two runs that did (H200, Triton 3.6, logs in the closing
note of issue 14) were, before the grid became arguments:

    python benchmarks/investigations/triton_backward_sweep.py --tiles 32x64w4,64x64w4,64x128w4,64x128w8,128x64w4,128x128w8,32x128w4,64x64w2 --stages 1,3 --unroll 1,4
    python benchmarks/investigations/triton_backward_sweep.py --forward --forms max --tiles 64x64w2,128x64w4,32x64w1,128x128w8,64x128w4,128x64w2,64x32w1 --stages 2,3,4 --unroll 2,4,8

On an H100 (2026-11-26, README "Fast all-pairs penalties") `benchmarks/standing/gpu_check.sh` ran the
library mode against 12bf627's one-launch backward:

    git show 12bf627:orderlib/kernels_triton.py > /tmp/one_launch.py
    python benchmarks/investigations/triton_backward_sweep.py --library-only --before /tmp/one_launch.py \
        --configs 64x64w2s3u8,32x64w1s4u8,32x64w1s2u8

On an H200 (2026-11-27, README "The three levers, timed") it timed d1021ba, whose library had just
taken over the closure in the kernel and the CUDA graph, against 571af01's file (its kernels unchanged since):

    git show f23364f:orderlib/kernels_triton.py > before.py
    BEFORE=before.py SWEEP_CONFIGS=16x128w1s3u8,8x256w1s4u8,4x512w1s3u8,16x256w2s3u8 bash benchmarks/standing/gpu_check.sh
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from orderlib import kernels_triton as K
from orderlib.penalties import order_violation_matrix_reference

# penalty.py (best_seconds) is a standing benchmark, in benchmarks/standing/; triton_sass.py sits beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "standing"))


@triton.jit
def _pass_kernel(
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
    MAX: tl.constexpr,
    CLOSED: tl.constexpr,
    BA: tl.constexpr,
    BK: tl.constexpr,
    UNROLL: tl.constexpr,
    STAGES: tl.constexpr,
):
    # One pass in either formulation. MAX without CLOSED closes each part with its own running sum of
    # w; CLOSED (the max form, orderlib's walk unchanged) closes in the kernel with the row sums r of w
    # taken once outside: part 0 subtracts q r, every part masks a NaN q and scales by -2, so that
    # with one part the kernel writes the gradient itself and nothing else runs after it. Both passes
    # close as -2 (acc - q r): dE/dx = -2 sum w relu(p - q); dE/dy = 2 (q r - sum w min(p, q)).
    ra = tl.program_id(0) * BA + tl.arange(0, BA)  # (BA,)
    rk = tl.program_id(1) * BK + tl.arange(0, BK)  # (BK,)
    split = tl.program_id(2)
    mask = (ra[:, None] < na) & (rk[None, :] < d)
    q = tl.load(q_ptr + ra[:, None] * sqa + rk[None, :] * sqk, mask=mask, other=0.0)  # (BA, BK)
    acc = tl.zeros((BA, BK), dtype=tl.float32)
    wsum = tl.zeros((BA,), dtype=tl.float32)
    lo = split * b_per
    hi = tl.minimum(lo + b_per, nb)
    for b in tl.range(lo, hi, num_stages=STAGES, loop_unroll_factor=UNROLL):
        w = tl.load(w_ptr + ra * swa + b * swb, mask=ra < na, other=0.0)  # (BA,)
        p = tl.load(p_ptr + b * spb + rk * spk, mask=rk < d, other=0.0)  # (BK,)
        if MAX:
            if FLIP:
                acc += w[:, None] * tl.minimum(p[None, :], q)
            else:
                acc += w[:, None] * tl.maximum(p[None, :], q)
            if not CLOSED:
                wsum += w
        else:
            if FLIP:
                v = q - p[None, :]
            else:
                v = p[None, :] - q
            acc += w[:, None] * tl.where(v > 0.0, v, 0.0)
    if CLOSED:
        r = tl.load(r_ptr + ra, mask=(ra < na) & (split == 0), other=0.0)  # (BA,): part 0 alone closes
        acc = tl.where(q == q, (acc - q * r[:, None]) * -2.0, 0.0)
    elif MAX:
        if FLIP:
            acc = q * wsum[:, None] - acc
        else:
            acc = acc - q * wsum[:, None]
        acc = tl.where(q == q, acc, 0.0)  # a NaN q masks every term, as clamp's backward does
    tl.store(out_ptr + split * sos + ra[:, None] * soa + rk[None, :] * sok, acc, mask=mask)


def closed_backward(g, x, y, config=(32, 64, 1, 3, 8), split=None):
    """orderlib's backward with the closure in the kernel (`_pass_kernel` with CLOSED): centring, g's
    transposed copy, two row sums, two launches, and a sum over parts only where a walk is cut."""
    c = torch.cat([x, y]).nanmean(0).nan_to_num_()  # (D,)
    x, y = x - c, y - c
    ba, bk, warps, stages, unroll = config
    grads = []
    for q, p, w, r, flip in ((x, y, g.t().contiguous().t(), g.sum(1), False), (y, x, g.contiguous().T, g.sum(0), True)):
        na, nb, d = q.shape[0], p.shape[0], q.shape[1]
        parts = split or K.splits(na, nb, d, K._processors(q.device))
        out = torch.empty((parts, na, d), dtype=torch.float32, device=q.device)
        grid = (triton.cdiv(na, ba), triton.cdiv(d, bk), parts)
        _pass_kernel[grid](
            q,
            p,
            w,
            r,
            out,
            na,
            nb,
            d,
            triton.cdiv(nb, parts),
            *q.stride(),
            *p.stride(),
            *w.stride(),
            *out.stride(),
            FLIP=flip,
            MAX=True,
            CLOSED=True,
            BA=ba,
            BK=bk,
            UNROLL=unroll,
            STAGES=stages,
            num_warps=warps,
            num_stages=stages,
        )
        grads.append(out[0] if parts == 1 else out.sum(0))
    return tuple(grads)


def graphed(fn, *inputs):
    """fn(*inputs) captured once in a CUDA graph: the returned callable copies its arguments into the
    captured inputs, replays, and returns copies of the outputs (as a caller keeping them would need)."""
    static = [t.clone() for t in inputs]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # autotuning and allocation happen outside the capture
            fn(*static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = fn(*static)

    def replay(*args):
        for s, a in zip(static, args):
            s.copy_(a)
        graph.replay()
        return tuple(o.clone() for o in outs)

    return replay


def forward(x, y, bn, bm, warps, stages, unroll):
    """orderlib's forward kernel with one fixed config (tile, warps, stages, unrolling)."""
    return K.forward(x, y, K.forward_kernel, **K.meta((bn, bm, warps, stages, unroll), ("BN", "BM")))


def one_pass(
    q, p, w, flip: bool, use_max: bool, ba: int, bk: int, warps: int, stages: int, unroll: int, split: int
) -> torch.Tensor:
    na, nb, d = q.shape[0], p.shape[0], q.shape[1]
    b_per = triton.cdiv(nb, split)
    out = torch.empty((split, na, d), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(na, ba), triton.cdiv(d, bk), split)
    _pass_kernel[grid](
        q,
        p,
        w,
        q,
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
        MAX=use_max,
        CLOSED=False,
        BA=ba,
        BK=bk,
        UNROLL=unroll,
        STAGES=stages,
        num_warps=warps,
        num_stages=stages,
    )  # r_ptr unread without CLOSED
    return out.sum(0)


def passes(x, y, g):
    """(q, p, w, flip) of the two passes: dE/dx = -2 pass0, dE/dy = 2 pass1."""
    return ((x, y, g.t().contiguous().t(), False), (y, x, g.contiguous().T, True))


def reference(x, y, g):
    x, y, g = x.double(), y.double(), g.double()
    v = (y[None, :, :] - x[:, None, :]).clamp(min=0)  # (N, M, D)
    return (g[:, :, None] * v).sum(1), (g[:, :, None] * v).sum(0)


def check(x, y, g, configs) -> None:
    rx, ry = reference(x, y, g)
    scale = max(rx.abs().max().item(), ry.abs().max().item())
    for use_max in (False, True):
        errs = []
        for ba, bk, warps, stages, unroll, split in configs:
            for (q, p, w, flip), ref in zip(passes(x, y, g), (rx, ry)):
                got = one_pass(q, p, w, flip, use_max, ba, bk, warps, stages, unroll, split)
                errs.append((got.double() - ref).abs().max().item() / scale)
        print(f"{'max' if use_max else 'subtract':9s} largest error / largest gradient: {max(errs):.2e}", flush=True)


def check_closed(x, y, g) -> None:
    """closed_backward against the float64 reference, with one part and with several; NaN rules as
    orderlib's (a NaN in x or y masks what the reference masks)."""
    rx, ry = reference(x, y, g)
    rx, ry = -2 * rx, 2 * ry  # the gradients
    scale = max(rx.abs().max().item(), ry.abs().max().item())
    errs = [
        max(
            (a.double() - r).abs().max().item()
            for a, r in zip(closed_backward(g, x, y, (16, 16, 1, 1, 2), s), (rx, ry))
        )
        / scale
        for s in (1, 3)
    ]
    xn, yn = x.clone(), y.clone()
    xn[1, 2] = yn[3, 5] = float("nan")
    got = closed_backward(g, xn, yn, (16, 16, 1, 1, 2), 2)
    xr, yr = xn.double().requires_grad_(), yn.double().requires_grad_()
    ref = torch.autograd.grad(order_violation_matrix_reference(xr, yr), (xr, yr), g.double())
    nan_err = max((a.double() - r).abs().max().item() for a, r in zip(got, ref)) / scale
    print(f"closed    largest error / largest gradient: {max(errs):.2e}; with NaN inputs: {nan_err:.2e}", flush=True)


def seconds(fn) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=10, rep=60) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--m", type=int, default=5000)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--forms", default="subtract,max", help="backward formulations to sweep")
    ap.add_argument(
        "--tiles",
        default="64x64w2,128x64w4,32x64w1,64x32w1,32x64w4,64x64w4,64x128w4,128x128w8",
        help="backward tiles, rows x columns w warps",
    )
    ap.add_argument("--stages", default="1,3", help="pipelining stages of the walk")
    ap.add_argument("--unroll", default="1,4,8", help="loop unrolling of the walk")
    ap.add_argument("--forward", action="store_true", help="also sweep the forward's tiles")
    ap.add_argument(
        "--library-only",
        action="store_true",
        help="skip the formulations: time orderlib's backward by parts and by tile, against --before",
    )
    ap.add_argument(
        "--before",
        help="an earlier orderlib/kernels_triton.py (e.g. `git show REV:orderlib/"
        "kernels_triton.py > FILE`), whose backward is timed in the same run",
    )
    ap.add_argument("--parts", default="1,2,5,8", help="parts of the walk over b to force (--library-only)")
    ap.add_argument(
        "--configs",
        default="",
        help="extra backward configs to force, rows x cols w warps s stages "
        "u unroll, e.g. 64x64w2s4u4 (--library-only)",
    )
    a = ap.parse_args()
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    tiles = [tuple(int(v) for v in t.replace("w", "x").split("x")) for t in a.tiles.split(",")]
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    dev = "cpu" if interp else "cuda"
    gen = torch.Generator().manual_seed(0)
    if interp:
        x, y, g = (
            torch.rand(37, 11, generator=gen),
            torch.rand(29, 11, generator=gen),
            torch.randn(37, 29, generator=gen),
        )
        check(x, y, g, [(16, 16, 1, 1, 1, 1), (16, 8, 1, 1, 2, 3)])
        check_closed(x, y, g)
        return
    x, y = (torch.rand(s, a.d, generator=gen).to(dev) for s in (a.n, a.m))
    g = torch.randn(a.n, a.m, generator=gen).to(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    gemm = a.n * a.m * a.d / seconds(lambda: x @ y.T)
    print(f"{torch.cuda.get_device_name(0)}  triton {triton.__version__}  fp32 GEMM {gemm / 1e12:.2f} T/s", flush=True)
    xs, ys, gs = x[:300, :200], y[:500, :200], g[:300, :500]
    check(xs.contiguous(), ys.contiguous(), gs.contiguous(), [(64, 64, 4, 2, 1, 2), (64, 128, 8, 3, 4, 1)])
    ref = ((y[None, :300, :] - x[:200, None, :]).clamp(min=0) ** 2).sum(-1)
    print("forward largest error:", (forward(x[:200], y[:300], 64, 64, 2, 3, 4) - ref).abs().max().item())
    fwd_tiles = [(64, 64, 4), (128, 64, 4), (64, 64, 2), (128, 128, 8), (128, 64, 2), (64, 128, 4)]
    for (bn, bm, warps), stages, unroll in itertools.product(fwd_tiles if a.forward else [], (3,), (1, 4, 8)):
        s = seconds(lambda: forward(x, y, bn, bm, warps, stages, unroll))
        rate = a.n * a.m * a.d / s
        print(
            f"forward {bn:3d}x{bm:3d} w{warps} s{stages} u{unroll}: {s * 1e3:7.3f} ms {rate / 1e12:6.2f} T/s "
            f"({rate / gemm:5.1%} of GEMM)",
            flush=True,
        )
    if a.library_only:
        library_sweep(x, y, g, gemm, a.n * a.m * a.d, a.before, ints(a.parts), a.configs)
        return
    forms = [f == "max" for f in a.forms.split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    best = {}
    for use_max, (ba, bk, warps), stages, unroll in itertools.product(forms, tiles, ints(a.stages), ints(a.unroll)):
        for name, (q, p, w, flip) in zip(("dx", "dy"), passes(x, y, g)):
            tiles_n = triton.cdiv(q.shape[0], ba) * triton.cdiv(a.d, bk)
            split = max(1, min(8, triton.cdiv(8 * sms, tiles_n), p.shape[0] // 32))
            t0 = time.time()
            try:
                s = seconds(lambda: one_pass(q, p, w, flip, use_max, ba, bk, warps, stages, unroll, split))
            except Exception as exc:  # an unsupported config: say so, go on
                print(
                    f"{'max' if use_max else 'subtract'} {name} {ba}x{bk} w{warps} s{stages} u{unroll}: "
                    f"{type(exc).__name__}: {str(exc)[:120]}",
                    flush=True,
                )
                continue
            rate = a.n * a.m * a.d / s
            key = ("max" if use_max else "subtract", name)
            if rate > best.get(key, (0,))[0]:
                best[key] = (rate, (ba, bk, warps, stages, unroll, split))
            print(
                f"{key[0]:8s} {name} {ba:3d}x{bk:3d} w{warps} s{stages} u{unroll} split {split}: {s * 1e3:7.3f} ms "
                f"{rate / 1e12:6.2f} T/s ({rate / gemm:5.1%} of GEMM; compile+bench {time.time() - t0:.1f} s)",
                flush=True,
            )
    for form in ("subtract", "max"):
        if (form, "dx") in best and (form, "dy") in best:
            both = 1 / (1 / best[(form, "dx")][0] + 1 / best[(form, "dy")][0])  # the two passes in turn
            print(
                f"BEST {form}: dx {best[(form, 'dx')]} dy {best[(form, 'dy')]} -> backward {both / 1e12:.2f} T/s, "
                f"{both / gemm:.1%} of fp32 GEMM",
                flush=True,
            )
    library(x, y, g, gemm, a.n * a.m * a.d)


def library(x, y, g, gemm: float, pairs: int) -> None:
    """orderlib's backward (autotuned), timed as the sweep times (CUDA events over many calls) and as
    bench_penalty does (fastest of a few synchronised calls): the gap is the launches' overhead."""
    from penalty import best_seconds  # benchmarks/standing/penalty.py

    from orderlib.penalties import order_violation_matrix

    xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
    e = order_violation_matrix(xg, yg, backend="fused")
    step = lambda: torch.autograd.grad(e, (xg, yg), g, retain_graph=True)  # noqa: E731
    for how, s in (("CUDA events", seconds(step)), ("synchronised calls", best_seconds(step, 5, True))):
        print(f"orderlib backward, {how}: {s * 1e3:.3f} ms {pairs / s / 1e12:.2f} T/s ({pairs / s / gemm:.1%} of GEMM)")
    print("tiles:", K.tuned())


def library_sweep(x, y, g, gemm: float, pairs: int, before: str | None, parts: list[int], extra: str) -> None:
    """orderlib's backward (autotuned), then the earlier file's in the same run, then orderlib's by
    forced parts of the walk over b and by forced config: each timed with CUDA events, each forced
    result's largest difference from the autotuned one printed; then a CUDA profile of 20 calls."""
    import importlib.util

    from penalty import best_seconds  # benchmarks/standing/penalty.py
    from triton_sass import parse  # benchmarks/investigations/triton_sass.py: "32x64w1s3u8" -> (32, 64, 1, 3, 8)

    library(x, y, g, gemm, pairs)
    steps = {"orderlib": lambda: K.backward(g, x, y)}
    if before:
        spec = importlib.util.spec_from_file_location("kernels_triton_before", before)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        steps[before] = lambda: old.backward(g, x, y)
    for name, step in steps.items():
        step()
        for how, sec in (("CUDA events", seconds(step)), ("synchronised calls", best_seconds(step, 5, True))):
            print(
                f"{name} backward alone (no autograd), {how}: {sec * 1e3:.3f} ms {pairs / sec / 1e12:.2f} T/s "
                f"({pairs / sec / gemm:.1%} of GEMM)",
                flush=True,
            )
    ref = K.backward(g, x, y)
    for split in parts:
        sec = seconds(lambda: K.backward(g, x, y, split=split))
        print(
            f"parts {split}: {sec * 1e3:7.3f} ms {pairs / sec / 1e12:6.2f} T/s ({pairs / sec / gemm:5.1%} of GEMM)",
            flush=True,
        )
    configs = list(K.BACKWARD_CONFIGS) + [parse(text) for text in filter(None, extra.split(","))]
    for c in configs:
        tile = K.meta(c, ("BA", "BK"))
        try:
            got = K.backward(g, x, y, K.weighted_max_kernel, **tile)
            sec = seconds(lambda: K.backward(g, x, y, K.weighted_max_kernel, **tile))
        except Exception as exc:  # an unsupported config: say so, go on
            print(f"config {c}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            continue
        diff = max((a - b).abs().max().item() for a, b in zip(got, ref))
        print(
            f"config {c}: {sec * 1e3:7.3f} ms {pairs / sec / 1e12:6.2f} T/s ({pairs / sec / gemm:5.1%} of GEMM), "
            f"largest difference from the tuned {diff:.1e}",
            flush=True,
        )
    # the levers outside the main loop: the closure in the kernel, and one graph replay per call
    gemm_sync = pairs / best_seconds(lambda: x @ y.T, 5, True)
    print(f"fp32 GEMM, synchronised calls as bench_penalty times it: {gemm_sync / 1e12:.2f} T/s", flush=True)
    variants = {
        f"closed {c[0]}x{c[1]}w{c[2]}u{c[4]}": functools.partial(closed_backward, config=c)
        for c in ((32, 64, 1, 3, 8), (64, 64, 2, 3, 8), (8, 256, 1, 3, 8))
    }
    variants["orderlib, CUDA graph"] = K.backward
    variants["closed 32x64w1u8, CUDA graph"] = variants["closed 32x64w1u8"]
    for name, fn in variants.items():
        try:
            step = graphed(fn, g, x, y) if "graph" in name else fn
            got = step(g, x, y)
            ev, sy = seconds(lambda: step(g, x, y)), best_seconds(lambda: step(g, x, y), 5, True)
        except Exception as exc:  # report, go on
            print(f"{name}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            continue
        diff = max((a - b).abs().max().item() for a, b in zip(got, ref))
        print(
            f"{name}: CUDA events {ev * 1e3:.3f} ms ({pairs / ev / gemm:.1%} of GEMM), synchronised calls "
            f"{sy * 1e3:.3f} ms ({pairs / sy / gemm_sync:.1%} of GEMM timed alike), largest difference from "
            f"orderlib's {diff:.1e}",
            flush=True,
        )
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    ) as prof:
        for _ in range(20):
            K.backward(g, x, y)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=14), flush=True)


if __name__ == "__main__":
    main()
