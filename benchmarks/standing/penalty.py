"""All-pairs order-violation speed and memory, every ratio taken in one run on one machine.

Measures element-pairs/s (one element-pair = one (i, j, d) term of E[i, j] = sum_d
max(0, y[j, d] - x[i, d])^2) at N x M x D = 1000 x 5000 x 1024 for:
  gemm      x @ y.T of the same shape: the machine's rate for one FMA per element-pair
  naive     the chunked broadcast reference (orderlib.penalties.order_violation_matrix_reference)
  compiled  torch.compile (inductor) of the same broadcast, one chunk of rows at a time
  fused     orderlib's C++ kernel (orderlib.kernels), forward and backward
then the 5k retrieval evaluation (5,000 images x 25,000 captions, D = 1024) in a fresh process
for its wall time and peak memory, the 1k-fold evaluation with the naive and fused paths, and
one epoch of the Table 1 hypernymy training (which uses aligned pairs, not all-pairs).
Writes reports/tables/bench_penalty.{csv,md,meta.json}.

    make bench-penalty        # or: .venv/bin/python benchmarks/standing/penalty.py [--quick]
    .venv/bin/python benchmarks/standing/penalty.py --only rates   # the rate rows alone, GEMM included; no report
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time

import pandas as pd
import torch

from orderlib import kernels, kernels_triton
from orderlib.penalties import order_violation_matrix, order_violation_matrix_reference
from orderlib.reports import device_description, write_table


def best_seconds(fn, reps: int = 3, cuda: bool = False) -> float:
    """Return the fastest of `reps` timed calls after one warm-up call."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    fn()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return min(times)


def peak_rss_gib() -> float:
    """Peak resident memory of this process. VmHWM, not ru_maxrss: Linux carries the parent's
    ru_maxrss across fork + exec, which would charge the benchmark's own peak to the child."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB -> GiB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def embeddings(n: int, m: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-negative random embeddings, like |W f| image and |GRU| caption vectors."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g).abs(), torch.randn(m, d, generator=g).abs()


def eval_child(n_images: int, d: int, backend: str, folds: int, seed: int) -> None:
    """Run one retrieval evaluation in this (fresh) process and print JSON: wall time, peak RSS."""
    from orderlib.eval.retrieval import evaluate_retrieval

    images, captions = embeddings(n_images, 5 * n_images, d, seed)  # (N, D), (5N, D)
    order_violation_matrix(images[:2], captions[:2], backend=backend)  # build/load the kernel
    base = peak_rss_gib()
    t = time.perf_counter()
    res = evaluate_retrieval(images, captions, lambda a, b: order_violation_matrix(a, b, backend=backend), folds=folds)
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - t,
                "peak_rss_gib": peak_rss_gib(),
                "rss_before_eval_gib": base,
                "rsum": res["rsum"],
            }
        )
    )


def run_eval(n_images: int, d: int, backend: str, folds: int, seed: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--eval-child",
        str(n_images),
        "--dim",
        str(d),
        "--backend",
        backend,
        "--folds",
        str(folds),
        "--seed",
        str(seed),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def hypernymy_epoch_seconds() -> float:
    """Wall time of one Table 1 order-embedding epoch (paper protocol, lazy_adam, with eval)."""
    from orderlib.concepts import train_concept_model
    from orderlib.data.hypernymy import make_splits
    from orderlib.data.wordnet import ensure_wordnet, load_noun_graph
    from orderlib.experiments.oe_wordnet import PRESETS, model_config

    cfg = PRESETS["full"]
    ensure_wordnet(cfg["wordnet"])
    data = make_splits(load_noun_graph(cfg["wordnet"]).parents, "paper", cfg["n_test"], cfg["n_dev"], cfg["split_seed"])
    c = model_config("order-embeddings", cfg, epochs=1, patience=1, optimizer="lazy_adam")
    t = time.perf_counter()
    train_concept_model(data, c, "cpu", None, progress=False)
    return time.perf_counter() - t


def rate_rows(n: int, m: int, d: int, seed: int, skip_compile: bool) -> tuple[list[dict], dict]:
    x, y = embeddings(n, m, d, seed)
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(seed + 1))
    pairs = n * m * d
    rates, notes = {}, {}
    rates["gemm"] = pairs / best_seconds(lambda: x @ y.T)
    sub = max(1, n // 16)  # the naive path on a slice of rows; its rate does not depend on N
    rates["naive"] = sub * m * d / best_seconds(lambda: order_violation_matrix_reference(x[:sub], y), 2)
    if not skip_compile:
        try:
            t = time.perf_counter()
            step = torch.compile(lambda a, b: torch.clamp(b[None] - a[:, None], min=0).pow(2).sum(-1), dynamic=False)
            rows = 4 * sub
            chunked = lambda: [step(x[i : i + sub], y) for i in range(0, rows, sub)]  # noqa: E731
            chunked()
            notes["compile_seconds"] = time.perf_counter() - t
            rates["compiled"] = rows * m * d / best_seconds(chunked, 2)
        except Exception as exc:  # no compiler: leave the row out, say why
            notes["compiled"] = f"torch.compile failed: {type(exc).__name__}"
    if kernels.cpu_kernel() is not None:
        rates["fused"] = pairs / best_seconds(lambda: order_violation_matrix(x, y, backend="fused"))
        xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
        e = order_violation_matrix(xg, yg, backend="fused")
        rates["fused backward"] = pairs / best_seconds(
            lambda: torch.autograd.grad(e, (xg, yg), g, retain_graph=True), 2
        )
        xr, yr = x[:sub].clone().requires_grad_(), y.clone().requires_grad_()
        er = order_violation_matrix_reference(xr, yr)
        rates["naive backward"] = (
            sub * m * d / best_seconds(lambda: torch.autograd.grad(er, (xr, yr), g[:sub], retain_graph=True), 1)
        )
    rows = []
    for method, r in rates.items():
        base = "naive backward" if method.endswith("backward") else "naive"
        rows += [
            dict(method=method, metric="element-pairs/s (G)", ours=r / 1e9),
            dict(method=method, metric="fraction of GEMM", ours=r / rates["gemm"]),
        ]
        if method != base and method != "gemm":
            rows.append(dict(method=method, metric="speedup vs naive", ours=r / rates[base]))
    return rows, notes


def cuda_rows(n: int, m: int, d: int, seed: int, n_eval: int = 5000) -> tuple[list[dict], dict]:
    """GEMM, naive and Triton-fused rates on the CUDA device (forward and backward), against that
    GPU's own GEMM, and the 5k retrieval evaluation's wall time and peak GPU memory (first, while
    nothing else is on the GPU)."""
    rows, notes = [], {}
    try:
        rows = cuda_eval_rows(n_eval, d, seed)
    except Exception as exc:  # report, do not hide
        notes["cuda_eval_failure"] = f"{type(exc).__name__}: {exc}"
        print(f"CUDA retrieval eval failed: {notes['cuda_eval_failure']}", file=sys.stderr)
    x, y = (t.cuda() for t in embeddings(n, m, d, seed))
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(seed + 1)).cuda()
    pairs, rates = n * m * d, {}
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        rates["gemm (cuda, tf32)" if tf32 else "gemm (cuda, fp32)"] = pairs / best_seconds(lambda: x @ y.T, 5, True)
    torch.backends.cuda.matmul.allow_tf32 = False
    rates["naive (cuda)"] = pairs / best_seconds(lambda: order_violation_matrix_reference(x, y), 3, True)
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    er = order_violation_matrix_reference(xr, yr)
    rates["naive backward (cuda)"] = pairs / best_seconds(
        lambda: torch.autograd.grad(er, (xr, yr), g, retain_graph=True), 3, True
    )
    try:
        rates["fused (cuda)"] = pairs / best_seconds(lambda: order_violation_matrix(x, y, backend="fused"), 5, True)
        xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
        e = order_violation_matrix(xg, yg, backend="fused")
        rates["fused backward (cuda)"] = pairs / best_seconds(
            lambda: torch.autograd.grad(e, (xg, yg), g, retain_graph=True), 5, True
        )  # replayed from a CUDA graph
        with kernels_triton.cuda_graphs(False):  # the same backward launch by launch: what the replay saves
            rates["fused backward, eager (cuda)"] = pairs / best_seconds(
                lambda: torch.autograd.grad(e, (xg, yg), g, retain_graph=True), 5, True
            )
        batch_rows = training_batch_rows(d, seed)
    except Exception as exc:  # report, do not hide: the rows are missing and the note says why
        notes["cuda_failure"] = f"{type(exc).__name__}: {exc}"
        print(f"fused CUDA path failed: {notes['cuda_failure']}", file=sys.stderr)
        batch_rows = []
    base = rates["gemm (cuda, fp32)"]
    out = [
        dict(method=k, metric=metric, ours=val)
        for k, r in rates.items()
        for metric, val in (("element-pairs/s (G)", r / 1e9), ("fraction of fp32 GEMM", r / base))
    ]
    for k in ("fused (cuda)", "fused backward (cuda)", "fused backward, eager (cuda)"):
        if k in rates:
            naive = rates["naive backward (cuda)" if "backward" in k else "naive (cuda)"]
            out.append(dict(method=k, metric="speedup vs naive", ours=rates[k] / naive))
    notes["triton_tiles"] = kernels_triton.tuned()
    return out + batch_rows + rows, notes


def training_batch_rows(d: int, seed: int, batch: int = 128) -> list[dict]:
    """One in-batch loss's backward at a training batch's size (batch x batch x d, where launches
    dominate): microseconds per synchronised call, replayed from a CUDA graph and eager."""
    x, y = (t.cuda().requires_grad_() for t in embeddings(batch, batch, d, seed + 2))
    g = torch.randn(batch, batch, generator=torch.Generator().manual_seed(seed + 3)).cuda()
    e = order_violation_matrix(x, y, backend="fused")
    metric = f"microseconds per backward, {batch} x {batch} x {d}"
    rows = []
    for graphs, method in ((True, "fused backward (cuda)"), (False, "fused backward, eager (cuda)")):
        with kernels_triton.cuda_graphs(graphs):
            sec = best_seconds(lambda: torch.autograd.grad(e, (x, y), g, retain_graph=True), 20, True)
        rows.append(dict(method=method, metric=metric, ours=sec * 1e6))
    return rows


def cuda_eval_rows(n_images: int, d: int, seed: int) -> list[dict]:
    """The n_images x 5 n_images retrieval evaluation on the GPU, fused and naive: wall time, peak memory."""
    from orderlib.eval.retrieval import evaluate_retrieval

    images, captions = (t.cuda() for t in embeddings(n_images, 5 * n_images, d, seed))  # (N, D), (5N, D)
    size = f"{n_images // 1000}k" if n_images % 1000 == 0 else str(n_images)
    rows, rsum = [], {}
    for backend, method in (("fused", "fused (cuda)"), ("reference", "naive (cuda)")):
        evaluate_retrieval(images[:50], captions[:250], lambda a, b: order_violation_matrix(a, b, backend=backend))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        rows.append(
            dict(
                method=method,
                metric="GPU memory before eval, same process (GiB)",
                ours=torch.cuda.memory_allocated() / 2**30,
            )
        )
        t = time.perf_counter()
        res = evaluate_retrieval(images, captions, lambda a, b: order_violation_matrix(a, b, backend=backend))
        torch.cuda.synchronize()
        rows += [
            dict(method=method, metric=f"{size} retrieval eval wall time (s)", ours=time.perf_counter() - t),
            dict(
                method=method,
                metric=f"peak GPU memory {size} eval (GiB)",
                ours=torch.cuda.max_memory_allocated() / 2**30,
            ),
        ]
        rsum[backend] = res["rsum"]
    if abs(rsum["fused"] - rsum["reference"]) > 1e-6:
        raise RuntimeError(
            f"fused and naive retrieval disagree on the GPU: rsum {rsum['fused']} vs {rsum['reference']}"
        )
    return rows


def merge_cuda_rows(rows: list[dict], notes: dict, t0: float, shape: list[int]) -> None:
    """Put this run's CUDA rows into the existing bench_penalty (its CPU rows and their provenance
    kept), replacing earlier CUDA rows; the CUDA run's own provenance goes under meta["cuda_run"]."""
    from orderlib.reports import git_commit

    old, meta = committed_table()
    cpu = old[~is_cuda(old)]
    df = pd.concat([cpu, pd.DataFrame(rows).assign(paper=None)], ignore_index=True)[
        ["method", "metric", "paper", "ours"]
    ]
    meta = {k: v for k, v in meta.items() if k not in ("id", "created", "cuda_device", "triton")}
    meta["cuda_run"] = {
        "device": device_description("cuda"),
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "triton": kernels_triton.status(),
        "shape": shape,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_time_s": time.perf_counter() - t0,
        **notes,
    }
    notes_md = describe(meta["shape"][0], meta["kernel"], meta["threads"]) + cuda_note(meta["cuda_run"])
    write_table("bench_penalty", df, meta, title="All-pairs order violation: fused vs naive vs GEMM", notes=notes_md)
    print(df.to_string(index=False))


def cuda_note(run: dict) -> str:
    """The Markdown note on CUDA rows measured by another run than the CPU rows."""
    return (
        f" CUDA rows: timed on {run['device']} at commit {run['git_commit'][:7]} ({run['triton']}), fractions of "
        "that GPU's fp32 GEMM in the same run; the CPU rows keep their own run's provenance (this meta's top level). "
        "The Triton backward spends a max and an FMA per element-pair in each of its two passes (four per "
        "counted element-pair) and closes each gradient as it stores; each rate is the fastest of a few synchronised "
        "calls, launch overhead included. The backward replays a CUDA graph per shape (after two eager calls); "
        "'fused backward, eager' is the same kernels launched one by one (ORDERLIB_CUDA_GRAPH=0), in the same run."
    )


def committed_table() -> tuple[pd.DataFrame, dict]:
    """The bench_penalty table under reports/tables and its meta (FileNotFoundError if there is none)."""
    from orderlib.paths import repo_root

    tables = repo_root() / "reports" / "tables"
    return pd.read_csv(tables / "bench_penalty.csv"), json.loads((tables / "bench_penalty.meta.json").read_text())


def is_cuda(df: pd.DataFrame) -> pd.Series:
    """Which rows were measured on the GPU (their method names say "(cuda")."""
    return df.method.str.contains("(cuda", regex=False)


def earlier_cuda_rows() -> tuple[pd.DataFrame | None, dict | None]:
    """The CUDA rows of the committed bench_penalty and their run's provenance, if it has any."""
    try:
        old, meta = committed_table()
    except FileNotFoundError:
        return None, None
    run, cuda = meta.get("cuda_run"), old[is_cuda(old)]
    return (cuda, run) if run and len(cuda) else (None, None)


def describe(n: int, kernel: str, threads: int) -> str:
    """The Markdown notes under the table."""
    return (
        "One element-pair = one (i, j, d) term. GEMM spends one FMA per element-pair; the fused kernel "
        "spends a subtract, a max and an FMA, so its ceiling is 1/3 to 1/2 of the GEMM rate, depending "
        "on how many of the three a core issues together. 'compiled' is torch.compile (inductor) of the "
        f"naive broadcast, one {max(1, n // 16)}-row chunk at a time (compile time in the meta). Backward rates "
        "count N·M·D per call that returns both gradients. Peak memory is the whole process's peak "
        "RSS (torch included), measured in a fresh process per evaluation. "
        f"Kernel: {kernel}. Threads: {threads}."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=int, nargs=3, default=(1000, 5000, 1024), metavar=("N", "M", "D"))
    ap.add_argument("--quick", action="store_true", help="small shapes, no compile, no training: a smoke run")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument(
        "--only",
        choices=("rates",),
        help="measure the element-pair rates only (GEMM, naive, compiled, fused, backward: every "
        "fraction of GEMM from this run) and print them; writes no report",
    )
    ap.add_argument(
        "--cuda-only",
        action="store_true",
        help="on a GPU machine: measure the CUDA rows alone and put them into the existing "
        "bench_penalty, whose CPU rows (and their provenance) stay",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--dim", type=int, default=1024, help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--folds", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.eval_child:
        return eval_child(args.eval_child, args.dim, args.backend, args.folds, args.seed)

    t0 = time.perf_counter()
    n, m, d = (200, 1000, 256) if args.quick else args.shape
    n_eval = 200 if args.quick else 5000
    if args.cuda_only:
        if not torch.cuda.is_available():
            raise SystemExit("--cuda-only needs a CUDA device; torch sees none")
        rows, notes = cuda_rows(n, m, d, args.seed, n_eval)
        return merge_cuda_rows(rows, notes, t0, [n, m, d])
    rows, notes = rate_rows(n, m, d, args.seed, args.skip_compile or args.quick)
    if args.only == "rates":
        print(pd.DataFrame(rows)[["method", "metric", "ours"]].to_string(index=False))
        print(
            json.dumps(
                {
                    "shape": [n, m, d],
                    "threads": torch.get_num_threads(),
                    "kernel": kernels.kernel_status(),
                    "wall_time_s": time.perf_counter() - t0,
                    **notes,
                }
            )
        )
        return
    evals = {"fused": run_eval(n_eval, d, "auto", 1, args.seed)}
    fold = {b: run_eval(n_eval, d, b, 5, args.seed) for b in ("auto", "reference")}
    size = f"{n_eval // 1000}k" if n_eval % 1000 == 0 else str(n_eval)
    rows += [
        dict(method="fused", metric=f"{size} retrieval eval wall time (s)", ours=evals["fused"]["seconds"]),
        dict(method="fused", metric=f"peak memory {size} eval (GiB)", ours=evals["fused"]["peak_rss_gib"]),
        dict(
            method="fused", metric="memory before eval, same process (GiB)", ours=evals["fused"]["rss_before_eval_gib"]
        ),
    ]
    for backend, method in (("auto", "fused"), ("reference", "naive")):
        rows += [
            dict(method=method, metric="5 x 1k-fold retrieval eval wall time (s)", ours=fold[backend]["seconds"]),
            dict(method=method, metric="peak memory 5 x 1k-fold eval (GiB)", ours=fold[backend]["peak_rss_gib"]),
        ]
    rows.append(
        dict(
            method="fused",
            metric="1k-fold eval speedup vs naive",
            ours=fold["reference"]["seconds"] / fold["auto"]["seconds"],
        )
    )
    if abs(fold["auto"]["rsum"] - fold["reference"]["rsum"]) > 1e-6:
        raise RuntimeError(
            f"fused and naive retrieval disagree: rsum {fold['auto']['rsum']} vs {fold['reference']['rsum']}"
        )
    if not args.quick:
        rows.append(
            dict(method="lazy_adam training", metric="hypernymy epoch wall time (s)", ours=hypernymy_epoch_seconds())
        )
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    meta = {
        "preset": "quick" if args.quick else "full",
        "seed": args.seed,
        "device": device_description("cpu"),
        "data_source": "random non-negative embeddings (|randn|), generated from the seed",
        "data_fingerprint": f"randn seed {args.seed}: x ({n}, {d}), y ({m}, {d}); eval {n_eval} x {5 * n_eval}",
        "wall_time_s": time.perf_counter() - t0,
        "shape": [n, m, d],
        "cpu": device_description("cpu").split(":", 1)[1].rsplit(" (", 1)[0],
        "machine": platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "kernel": kernels.kernel_status(),
        **notes,
    }
    if torch.cuda.is_available() and not args.quick:
        more, cuda_notes = cuda_rows(n, m, d, args.seed, n_eval)
        rows += more
        df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
        meta["cuda_device"] = device_description("cuda")
        meta["triton"] = kernels_triton.status()
        meta.update(cuda_notes)
    notes_md = describe(n, meta["kernel"], meta["threads"])
    if not torch.cuda.is_available() and not args.quick:  # keep an earlier GPU run's rows, with their provenance
        kept, cuda_run = earlier_cuda_rows()
        if kept is not None:
            df = pd.concat([df, kept], ignore_index=True)
            meta["cuda_run"] = cuda_run
            notes_md += cuda_note(cuda_run)
    if args.quick:
        print(df.to_string(index=False))
        return
    write_table("bench_penalty", df, meta, title="All-pairs order violation: fused vs naive vs GEMM", notes=notes_md)
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
