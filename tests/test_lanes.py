"""orderlib.tools.lanes and reproduce.run_lanes: notebooks side by side, dependencies first."""

import json
import os
from pathlib import Path

import nbformat
import pytest

from orderlib.tools import lanes as L
from orderlib.tools import reproduce as R

NOTEBOOKS = sorted(Path(__file__).resolve().parents[1].glob("notebooks/[0-9][0-9]_*.ipynb"))


def test_every_notebook_that_reads_another_notebooks_runs_starts_after_it():
    owner = {}  # run id -> the first notebook that names it (the one that trains what is under it)
    for nb in NOTEBOOKS:
        for rid in L.run_ids(nb):
            owner.setdefault(rid, L.stem(nb))
    assert owner["oe_retrieval_scenes"] == "03_oe_table2_retrieval" and owner["utama"] == "08_utama_compositionality"

    def before(n, seen=()):
        return {d for m in L.AFTER.get(n, ()) if m not in seen for d in {m} | before(m, seen + (m,))}

    for nb in NOTEBOOKS:
        others = {owner[r] for r in L.run_ids(nb)} - {L.stem(nb)}
        assert others <= before(L.stem(nb)), f"{nb.name} reads the runs of {others}: list them in lanes.AFTER"
    assert set(L.AFTER) | {n for v in L.AFTER.values() for n in v} | L.EXCLUSIVE <= {L.stem(nb) for nb in NOTEBOOKS}


def simulate(names, estimate, lanes, after=None, exclusive=None):
    """Start times and threads of a run where each notebook takes its estimate."""
    pending, running, t, out = list(names), {}, 0.0, {}
    priority = L.critical_path(names, estimate, after)
    while pending or running:
        while (n := L.next_to_start(pending, set(running), lanes, priority, after, exclusive)) is not None:
            pending.remove(n)
            out[n] = (t, L.threads_for(n, lanes, 2, exclusive))
            running[n] = t + estimate[n]
        t = min(running.values())
        running = {k: v for k, v in running.items() if v > t}
    return out


def test_the_chain_with_most_work_behind_it_starts_first_and_exclusive_notebooks_run_alone():
    est = {
        "01_oe_table1_wordnet": 49,
        "02_oe_table3_snli": 14,
        "03_oe_table2_retrieval": 20,
        "04_oe_sec46_detail": 0.2,
        "06_devise_table1": 5,
        "07_devise_zeroshot": 3,
        "08_utama_compositionality": 13,
        "09_sherlock_facts": 24,
    }
    cp = L.critical_path(list(est), est)
    assert cp["03_oe_table2_retrieval"] == 44 and cp["08_utama_compositionality"] == 37 and cp["06_devise_table1"] == 8
    plan = simulate(list(est), est, lanes=2)
    assert plan["01_oe_table1_wordnet"] == (0.0, None)  # the longest, alone on every core
    assert all(start >= 49 for n, (start, _) in plan.items() if n != "01_oe_table1_wordnet")
    assert plan["03_oe_table2_retrieval"][0] == 49 and plan["08_utama_compositionality"][0] == 49  # 09's two chains
    assert plan["09_sherlock_facts"][0] == 49 + 20  # after 03 and 08
    assert plan["07_devise_zeroshot"][0] >= plan["06_devise_table1"][0] + 5
    assert plan["08_utama_compositionality"][1] == 1  # beside another: its share of the two cores
    # one lane: nothing beside anything, every notebook on all threads
    assert {th for _, th in simulate(list(est), est, lanes=1).values()} == {None}


def test_next_to_start_waits_for_dependencies_lanes_and_exclusive_notebooks():
    after, excl = {"c": ("a",)}, {"x"}
    pr = {"a": 1, "b": 5, "c": 10, "x": 100}
    assert L.next_to_start(["a", "b", "c"], set(), 2, pr, after, excl) == "b"  # c waits for a
    assert L.next_to_start(["c"], {"a"}, 2, pr, after, excl) is None  # a still running
    assert L.next_to_start(["c", "b"], {"a", "z"}, 2, pr, after, excl) is None  # both lanes busy
    assert L.next_to_start(["x", "b"], {"a"}, 2, pr, after, excl) is None  # x waits for the lanes to empty
    assert L.next_to_start(["b"], {"x"}, 2, pr, after, excl) is None  # nothing beside x
    assert L.next_to_start(["x", "b"], set(), 2, pr, after, excl) == "x"
    # a notebook's threads depend on the lanes and cores only (its results move with them), not on
    # what happens to run beside it
    assert L.threads_for("b", 2, 8, excl) == 4 and L.threads_for("b", 1, 8, excl) is None
    assert L.threads_for("x", 2, 8, excl) is None and L.threads_for("b", 3, 2, excl) == 1


def _notebook(path: Path, tables: Path, seconds: float, fail: bool = False) -> Path:
    """A notebook that writes a report with write_table, logs when it ran, sleeps, then maybe fails."""
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    rid = path.stem
    nb.cells = [
        nbformat.v4.new_code_cell('PRESET = "small"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import json, os, time, pathlib\nimport pandas as pd, torch\nfrom orderlib.reports import write_table\n"
            "from orderlib.threadshare import follow_share\n"
            f"t0 = time.time(); time.sleep({seconds}); follow_share()\n"
            f"write_table({rid!r}, pd.DataFrame({{'method': ['m'], 'metric': ['x'], 'paper': [None], 'ours': [1.0]}}), "
            "dict(preset=PRESET, seed=0, device='cpu', data_source='-', data_fingerprint='-', wall_time_s=0), "
            f"pathlib.Path({str(tables)!r}))\n"
            f"pathlib.Path({str(path.with_suffix('.ran'))!r}).write_text(json.dumps("
            "[t0, time.time(), os.environ.get('OMP_NUM_THREADS'), torch.get_num_threads()]))"
            + ("\nassert 1 > 2, 'sanity bound'" if fail else "")
        ),
    ]
    nbformat.write(nb, str(path))
    return path


def test_run_lanes_runs_notebooks_side_by_side_after_their_dependencies(tmp_path, monkeypatch):
    tables = tmp_path / "tables"
    tables.mkdir()
    # b sleeps long enough to overlap a even when a's kernel starts seconds after b's (two kernels
    # importing torch at once on 2 busy cores: 1.2 s apart was seen with a 1 s sleep)
    a, b, c = (_notebook(tmp_path / f"{n}.ipynb", tables, s) for n, s in (("00_a", 12), ("01_b", 5), ("02_c", 0)))
    monkeypatch.setattr(L, "AFTER", {"02_c": ("00_a",)})
    runs, failures, wall = R.run_lanes(
        [a, b, c],
        "full",
        tmp_path / "out",
        tables,
        lanes=2,
        estimate={"00_a": 4, "01_b": 1, "02_c": 0},
        poll=0.05,
        elastic=True,
    )
    ran = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.ran")}
    assert not failures and {r["notebook"] for r in runs} == {"00_a.ipynb", "01_b.ipynb", "02_c.ipynb"}
    assert ran["01_b"][0] < ran["00_a"][1] and ran["00_a"][0] < ran["01_b"][1]  # side by side
    assert ran["02_c"][0] >= ran["00_a"][1]  # after its dependency
    assert ran["00_a"][2] == "1" and ran["01_b"][2] == "1"  # a share of the cores each
    cores = os.cpu_count()
    assert ran["00_a"][3] == cores and ran["01_b"][3] == 1  # elastic: a gets every core once b ended (c waits on a)
    by = {r["notebook"]: r for r in runs}
    assert [by[n]["reports"] for n in ("00_a.ipynb", "01_b.ipynb", "02_c.ipynb")] == [["00_a"], ["01_b"], ["02_c"]]
    assert json.loads((tables / "01_b.meta.json").read_text())["notebook"] == "01_b.ipynb"
    assert (
        wall < sum(r["seconds"] for r in runs)
        and by["02_c.ipynb"]["started"] >= by["00_a.ipynb"]["started"] + by["00_a.ipynb"]["seconds"]
    )
    df = R.bench_table(runs, {}, wall)
    total = df[df.method == "total"].set_index("metric").ours
    assert (
        total["share of the run's wall time (%)"] == 100
        and total["wall time (min)"] == wall / 60
        and total["notebooks' wall times summed (min)"] > wall / 60
    )
    assert set(df[df.metric == "torch threads at its start"].ours) <= {1, cores}
    raised = by["00_a.ipynb"]["raised"]
    assert [n for _, n in raised] == ([cores] if cores > 1 else [])
    assert cores == 1 or f"torch threads raised to {cores} (min into it)" in set(df.metric)


def test_a_failure_beside_another_notebook_lets_it_finish_and_starts_nothing_after(tmp_path, monkeypatch):
    tables = tmp_path / "tables"
    tables.mkdir()
    monkeypatch.setattr(R, "run_paths", lambda name, preset: type("P", (), {"tables": tables})())
    monkeypatch.setattr(L, "AFTER", {"02_c": ("00_a",)})
    a, b, c = (
        _notebook(tmp_path / f"{n}.ipynb", tables, s, fail=n == "01_b")
        for n, s in (("00_a", 4), ("01_b", 0), ("02_c", 0))
    )
    assert R.main([str(a), str(b), str(c), "--lanes", "2", "--preset", "small", "--out", str(tmp_path / "out")]) == 1
    assert json.loads((tables / "01_b.meta.json").read_text())["failed_run"]["error"].startswith(
        "AssertionError: sanity bound"
    )
    assert "failed_run" not in json.loads((tables / "00_a.meta.json").read_text())  # ran beside it, finished
    assert not (tables / "02_c.meta.json").exists()  # not started after the failure
    ran = json.loads((tmp_path / "00_a.ran").read_text())
    assert ran[2] == "1" and ran[3] == 1  # not elastic: its share of the cores to the end, though b had failed
    bench = json.loads((tables / f"{R.TABLE_ID}.meta.json").read_text())
    assert set(bench["notebooks"]) == {"00_a.ipynb"} and bench["lanes"] == 2
    with pytest.raises(ValueError, match="--lanes"):
        R.resolve_lanes("0")


def test_follow_share_sets_torch_threads_from_the_file_only_when_asked(tmp_path, monkeypatch):
    import torch

    from orderlib import threadshare

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv(threadshare.ENV, raising=False)
        assert threadshare.follow_share() is None  # a notebook run by hand: nothing changes
        share = tmp_path / "nb.threads"
        monkeypatch.setenv(threadshare.ENV, str(share))
        assert threadshare.follow_share() is None  # no file yet
        target = 1 if before != 1 else 2
        share.write_text(f"{target}\n")
        assert threadshare.follow_share() == target and torch.get_num_threads() == target
        assert threadshare.follow_share() is None  # unchanged: nothing to do
        share.write_text("garbage")
        assert threadshare.follow_share() is None and torch.get_num_threads() == target
    finally:
        torch.set_num_threads(before)
