"""Worker processes: how many "auto" starts; glibc's huge-page advice reaches the workers, and only them."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from orderlib.training.workers import HUGE_PAGES_TUNABLE, huge_pages_for_children, resolve_workers

CHILD_ENV = [sys.executable, "-c", "import os; print(os.environ.get('GLIBC_TUNABLES', ''))"]


def _child_tunables() -> str:
    return subprocess.run(CHILD_ENV, capture_output=True, text=True, check=True).stdout.strip()


def test_children_started_inside_get_the_advice_and_the_environment_is_restored(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("ORDERLIB_HUGE_PAGES", raising=False)
    with huge_pages_for_children():
        assert _child_tunables() == HUGE_PAGES_TUNABLE
    assert "GLIBC_TUNABLES" not in os.environ
    assert _child_tunables() == ""


def test_other_tunables_are_kept_and_a_users_hugetlb_setting_wins(monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    with huge_pages_for_children():
        assert _child_tunables() == f"glibc.malloc.arena_max=2:{HUGE_PAGES_TUNABLE}"
    assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")
    with huge_pages_for_children():
        assert _child_tunables() == "glibc.malloc.hugetlb=0"


def test_orderlib_huge_pages_0_turns_it_off(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setenv("ORDERLIB_HUGE_PAGES", "0")
    with huge_pages_for_children():
        assert _child_tunables() == ""
    with huge_pages_for_children(enabled=True):
        assert _child_tunables() == HUGE_PAGES_TUNABLE


def _thp_mode() -> str:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return ""
    return text.split("[")[1].split("]")[0] if "[" in text else ""


@pytest.mark.skipif(
    platform.system() != "Linux"
    or _thp_mode() not in ("madvise", "always")
    or tuple(map(int, (platform.libc_ver()[1] or "0.0").split(".")[:2])) < (2, 35),
    reason="needs Linux with transparent huge pages and glibc >= 2.35",
)
def test_a_worker_with_the_advice_backs_a_large_tensor_with_huge_pages(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("ORDERLIB_HUGE_PAGES", raising=False)
    code = """
import torch
x = torch.ones(16 << 20)  # 64 MB, written
ptr, inside = x.data_ptr(), False
for line in open("/proc/self/smaps"):
    head = line.split()[0]
    if "-" in head and not head.endswith(":"):
        lo, hi = (int(v, 16) for v in head.split("-"))
        inside = lo <= ptr < hi
    elif inside and line.startswith("AnonHugePages"):
        print(int(line.split()[1]))  # kB of the tensor's mapping on 2 MB pages
"""

    def tensor_huge_kb() -> int:
        return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)

    with huge_pages_for_children():
        assert tensor_huge_kb() >= 32 << 10  # at least half of the tensor's 64 MB
    if _thp_mode() == "madvise":  # ("always": the kernel gives huge pages unasked)
        assert tensor_huge_kb() < 32 << 10  # without the advice, 4 KB pages


def test_auto_workers_follow_this_process_s_threads_and_counts_are_taken_as_given(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)  # e.g. the share `make reproduce --lanes` gave
    assert resolve_workers("auto") == resolve_workers("auto", "cpu") == 3
    assert resolve_workers("auto", "cpu", most=2) == 2
    assert resolve_workers("auto", "cuda") == resolve_workers("auto", "cuda:0") == 1  # rows would share one GPU
    assert resolve_workers(5, "cuda") == resolve_workers("5") == 5  # a count, also from a command line
    monkeypatch.setattr(torch, "get_num_threads", lambda: 0)
    assert resolve_workers("auto") == 1
    with pytest.raises(ValueError, match="WORKERS"):
        resolve_workers(0)
    with pytest.raises(ValueError, match="WORKERS='four'"):  # a bad string names the parameter too
        resolve_workers("four")


_INSTALLED: dict = {}


def _install(value):
    _INSTALLED["value"] = value


def _worker_state(name: str) -> tuple:
    import torch

    return name, _INSTALLED.get("value"), os.environ.get("GLIBC_TUNABLES", ""), torch.get_num_threads(), os.getpid()


def test_run_in_workers_setup_huge_pages_and_in_process(monkeypatch):
    from orderlib.training.workers import run_in_workers

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("ORDERLIB_HUGE_PAGES", raising=False)
    jobs = {n: {"name": n} for n in "abc"}
    costs = {"a": 1.0, "b": 3.0, "c": 2.0}
    out = run_in_workers(_worker_state, jobs, 2, costs, False, setup=(_install, ("data",)), huge_pages=True)
    assert list(out) == list(jobs)  # the listed order, whatever order they ran in
    assert all(v[:4] == (n, "data", HUGE_PAGES_TUNABLE, 1) and v[4] != os.getpid() for n, v in out.items())
    assert "GLIBC_TUNABLES" not in os.environ
    here = run_in_workers(_worker_state, jobs, 1, costs, False, setup=(_install, ("data",)), in_process=True)
    assert list(here) == list(jobs) and all(v[4] == os.getpid() and v[1] is None for v in here.values())
