"""make test's runner (workflow/scripts/run_tests.py): every step runs when one fails, the run folder is
measured and removed, and the last line counts every step's tests."""

from pathlib import Path

import run_tests


def test_a_failing_step_does_not_hide_the_next_and_the_run_folder_is_removed(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_step(name, cmd, env, junit=None):
        calls.append(name)
        runs = Path(env["ORDERLIB_RUNS"])
        (runs / f"{len(calls)}.bin").write_bytes(b"x" * 2**20)  # what a step leaves behind
        failed = name == "library tests"
        return {"name": name, "rc": int(failed), "seconds": 1.0, "passed": 3, "failed": int(failed), "skipped": 1}

    monkeypatch.setattr(run_tests, "step", fake_step)
    monkeypatch.setattr(run_tests, "repo_root", lambda: tmp_path)
    monkeypatch.setattr(run_tests, "entailment_available", lambda: True)
    rc = run_tests.main(["--notebooks", "notebooks/00_x.ipynb"])
    out = capsys.readouterr().out
    assert rc == 1 and calls == [
        "lint (ruff check)",
        "format (ruff format --check)",
        "import layers (lint-imports)",
        "report index",
        "library tests",
        "notebooks (small preset)",
    ]
    assert "disk: 6 MiB written under runs/test-" in out and "(removed)" in out
    assert not list((tmp_path / "runs").glob("test-*"))
    assert out.rstrip().splitlines()[-1] == "total: 18 passed, 1 failed, 6 skipped"


def test_junit_counts_read_passes_failures_errors_and_skips(tmp_path):
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuites><testsuite><testcase name="a"/><testcase name="b"><failure/></testcase>'
        '<testcase name="c"><error/></testcase><testcase name="d"><skipped/></testcase></testsuite></testsuites>'
    )
    assert run_tests.junit_counts(xml) == {"passed": 1, "failed": 2, "skipped": 1}
    assert run_tests.junit_counts(tmp_path / "missing.xml") == {"passed": 0, "failed": 0, "skipped": 0}


def test_workers_take_every_core_within_memory_and_run_a_file_each(monkeypatch):
    monkeypatch.setattr(run_tests.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert run_tests.available_memory() > 0  # Linux: /proc/meminfo's MemAvailable
    for free_gib, expected in ((64, 8), (10, 3), (1, 1), (None, 8)):
        monkeypatch.setattr(run_tests, "available_memory", lambda: free_gib and free_gib * 2**30)
        assert run_tests.workers() == expected
    assert run_tests.parallel(2) == ["-n", "2", "--dist", "loadfile"]  # a notebook's cells stay in one kernel
    assert run_tests.parallel(1) == []


def test_the_pytest_steps_run_on_one_thread_per_worker(tmp_path, monkeypatch):
    seen = {}

    def fake_step(name, cmd, env, junit=None):
        seen[name] = (cmd, env)
        return {"name": name, "rc": 0, "seconds": 1.0, "passed": 1, "failed": 0, "skipped": 0}

    monkeypatch.setattr(run_tests, "step", fake_step)
    monkeypatch.setattr(run_tests, "repo_root", lambda: tmp_path)
    monkeypatch.setattr(run_tests, "entailment_available", lambda: True)
    monkeypatch.setattr(run_tests, "workers", lambda: 2)
    assert run_tests.main(["--notebooks", "notebooks/00_x.ipynb", "notebooks/01_y.ipynb"]) == 0
    for name in ("library tests", "notebooks (small preset)"):
        cmd, env = seen[name]
        assert cmd[cmd.index("-n") + 1] == "2" and env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
