"""A table's independent rows trained side by side: one spawned process per worker, one thread each.

The steps of Table 2's caption-image models, Table 3's entailment models, Utama's recognisers and
Sherlock's SEMs use a second thread poorly: two processes on one core each train more per second
than one process on two (benchmarks/standing/lanes.py, report `bench_lanes`). Each job here trains rows into
their checkpoints with the experiment's own trainer, in a worker on one thread; the caller then
loads the finished checkpoints, as after an interrupted run. A row's numbers are therefore those of that row
trained alone on one thread, whichever worker ran it, in whatever order, and beside whatever else.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from multiprocessing import get_context
from typing import Any

import torch
from tqdm.auto import tqdm

from orderlib import precision
from orderlib.params import workers

# glibc >= 2.35: malloc asks the kernel (madvise) to back its large blocks with 2 MB transparent huge
# pages. Read once, when a process starts, so it can only be given to processes started here.
HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb=1"
HUGE_PAGES_ENV = "ORDERLIB_HUGE_PAGES"  # "0": workers keep 4 KB pages


@contextmanager
def huge_pages_for_children(enabled: bool | None = None):
    """Within: processes started from here (spawned workers) get GLIBC_TUNABLES with glibc's
    huge-page advice for malloc, unless disabled (`enabled`, default: $ORDERLIB_HUGE_PAGES != "0").
    Table 1's table rows gather rows of 16-100 MB tables at random: with 2 MB pages the TLB covers
    them (benchmarks/standing/huge_pages.py). Results do not change, only the page size. Elsewhere (no glibc,
    an older glibc) the variable is ignored."""
    if enabled is None:
        enabled = os.environ.get(HUGE_PAGES_ENV, "1") != "0"
    old = os.environ.get("GLIBC_TUNABLES")
    if enabled and "glibc.malloc.hugetlb" not in (old or ""):  # a user's own setting wins
        os.environ["GLIBC_TUNABLES"] = f"{old}:{HUGE_PAGES_TUNABLE}" if old else HUGE_PAGES_TUNABLE
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("GLIBC_TUNABLES", None)
        else:
            os.environ["GLIBC_TUNABLES"] = old


def resolve_workers(value, device="cpu", most: int | None = None) -> int:
    """Return how many processes train a table's independent rows. "auto": one single-threaded process
    per thread of this process's share of the cores (torch's intra-op threads: every core, or what
    `make reproduce --lanes` gave the notebook), at most `most`; 1 on CUDA, where the rows would share
    one device. A count (an int, or its string from a command line) is taken as it is."""
    if value == "auto":
        if torch.device(device).type == "cuda":
            return 1
        n = max(1, torch.get_num_threads())
        return min(n, most) if most else n
    return workers("WORKERS", int(value) if isinstance(value, str) and value.isdigit() else value)


Setup = tuple[Callable[..., Any], tuple]  # (fn, args): fn(*args) once in each worker, after it starts


def _init_worker(matmul: str = "fp32", setup: Setup | None = None) -> None:
    torch.set_num_threads(1)
    precision.use(matmul, "cpu")  # the notebook's MATMUL, which a spawned process does not inherit
    if setup is not None:  # e.g. data every job reads, pickled once per worker instead of once per job
        setup[0](*setup[1])


def run_in_workers(
    fn: Callable[..., Any],
    jobs: dict[str, dict],
    n_workers: int,
    costs: dict[str, float] | None = None,
    progress: bool = True,
    desc: str = "rows",
    setup: Setup | None = None,
    huge_pages: bool = False,
    in_process: bool = False,
) -> dict[str, Any]:
    """Call fn(**jobs[name]) for every job in `n_workers` spawned processes of one thread each, the
    costliest first (`costs`, default: as listed); return name -> fn's return value, in the listed
    order. `fn` must be importable (a module-level function) and its arguments picklable.

    `setup` (fn, args): called as fn(*args) in each worker once it has started (args are pickled
    once per worker). `huge_pages`: the workers start with glibc's huge-page advice
    (huge_pages_for_children). `in_process`: with n_workers <= 1, call fn here, in this process as
    it is (its threads and precision; `setup` is not called: this process holds what it installs)."""
    costs = costs or {}
    order = sorted(jobs, key=lambda n: -costs.get(n, 0.0))  # stable: ties keep the listed order
    out: dict[str, Any] = {}
    if in_process and n_workers <= 1:
        bar = tqdm(total=len(jobs), desc=f"{desc} (this process)", disable=not progress)
        for n in order:
            out[n] = fn(**jobs[n])
            bar.update()
        bar.close()
        return {n: out[n] for n in jobs}
    bar = tqdm(total=len(jobs), desc=f"{desc} ({n_workers} processes)", disable=not progress)
    with huge_pages_for_children() if huge_pages else nullcontext():  # read by workers as they start
        pool = ProcessPoolExecutor(
            max(1, min(n_workers, len(jobs))),
            mp_context=get_context("spawn"),
            initializer=_init_worker,
            initargs=(precision.in_effect("cpu"), setup),
        )
        try:
            futures = {pool.submit(fn, **jobs[n]): n for n in order}  # the workers start here
            for f in as_completed(futures):
                out[futures[f]] = f.result()  # a row's error stops the others and is raised here
                bar.update()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    bar.close()
    return {n: out[n] for n in jobs}
