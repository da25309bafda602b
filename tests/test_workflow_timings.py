"""workflow/scripts/timings.py: bench_reproduce from papermill's durations in the executed notebooks and
the models of the reports each notebook wrote."""

import json

import nbformat
import pandas as pd
import pytest
import timings as T

from orderlib.reports import model_record, training_provenance


def _executed(path, seconds, cells=(1.0, 2.0), preset="full"):
    """An executed copy as papermill leaves it: its duration, and each code cell's."""
    nb = nbformat.v4.new_notebook(metadata={"papermill": {"duration": seconds, "parameters": {"PRESET": preset}}})
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1", execution_count=i + 1, metadata={"papermill": {"duration": d}})
        for i, d in enumerate(cells)
    ]
    nbformat.write(nb, str(path))
    return path


def _report(tables, rid, notebook, loaded, commit="61017e4aaaa"):
    """A report's provenance as write_table leaves it, naming the notebook that wrote it."""
    t = training_provenance({f"{rid}-m": model_record(120.0, commit, loaded)}, commit)
    meta = {"id": rid, "notebook": notebook, "git_commit": commit, "device": "cpu:Some CPU (2 threads)", "training": t}
    (tables / f"{rid}.meta.json").write_text(json.dumps(meta))


@pytest.fixture
def tables(tmp_path, monkeypatch):
    out = tmp_path / "tables"
    out.mkdir()
    monkeypatch.setattr(T, "run_paths", lambda name, preset: type("P", (), {"tables": out})())
    monkeypatch.setattr(T, "reference_speed", lambda: {"gemm_gflops": 100.0, "gather_gbs": 5.0})
    return out


def test_the_table_times_each_notebook_and_counts_the_models_of_its_reports(tmp_path, tables):
    a = _executed(tmp_path / "00_a.ipynb", 30.0, cells=(1.0, 25.0))
    b = _executed(tmp_path / "01_b.ipynb", 90.0)
    _report(tables, "r_b", "01_b.ipynb", loaded=False)
    _report(tables, "r_b2", "01_b.ipynb", loaded=True)
    _report(tables, "other", "02_c.ipynb", loaded=False)  # another notebook's: not b's
    assert T.main([str(a), str(b)]) == 0
    df = pd.read_csv(tables / "bench_reproduce.csv", dtype={"timed at": str})
    got = df.set_index(["method", "metric"]).ours
    assert got[("00_a.ipynb", "wall time (min)")] == 0.5 and got[("total", "wall time (min)")] == 2.0
    assert got[("00_a.ipynb", "share of the run's wall time (%)")] == 25.0
    assert got[("00_a.ipynb", "longest cell (min)")] == pytest.approx(25 / 60, abs=0.01)
    assert got[("01_b.ipynb", "models in its reports")] == 2 and got[("01_b.ipynb", "models trained in this run")] == 1
    assert got[("total", "training time of its reports' models (min)")] == 4.0
    assert ("00_a.ipynb", "models in its reports") not in got  # it wrote no report: not shown as 0
    timed = df[df.metric == "wall time (min)"].set_index("method")
    assert (
        timed.loc["01_b.ipynb", "timed at"] == "61017e4"
        and timed.loc["01_b.ipynb", "timed on"] == "Some CPU, 2 threads"
    )
    md = (tables / "bench_reproduce.md").read_text()
    assert "`61017e4`" in md and "e+0" not in md  # a commit that reads as a number stays a commit
    meta = json.loads((tables / "bench_reproduce.meta.json").read_text())
    assert meta["notebooks"]["01_b.ipynb"]["reports"] == ["r_b", "r_b2"] and meta["machine_reference"]["gemm_gflops"]
    assert meta["fingerprints"]["source"] == "workflow/scripts/timings.py"  # its staleness is its code's


def test_a_copy_papermill_did_not_finish_or_of_another_preset_is_refused(tmp_path, tables):
    nb = _executed(tmp_path / "00_a.ipynb", 30.0)
    with pytest.raises(SystemExit):
        T.main([str(nb), "--preset", "small"])
    broken = json.loads(nb.read_text())
    broken["metadata"]["papermill"]["exception"] = True
    nb.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="did not run it to its end"):
        T.main([str(nb)])


def test_a_gpu_table_gives_each_notebook_its_cpu_time(tmp_path, tables, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    nb = _executed(tmp_path / "03_t.ipynb", 60.0)
    with pytest.raises(SystemExit):  # no CUDA device here: nothing to time
        T.main([str(nb), "--cuda"])
    cpu = pd.DataFrame([{"method": "03_t.ipynb", "metric": "wall time (min)", "paper": None, "ours": 10.0}])
    run = T.timed(nb, tables)
    got = T.bench_table([run], cpu).set_index(["method", "metric"]).ours
    assert (
        got[("03_t.ipynb", "CPU run's wall time (min)")] == 10.0
        and got[("03_t.ipynb", "CPU run / this wall time")] == 10.0
    )


def test_machine_reference_and_device_names():
    ref = T.reference_speed(0.05)
    assert set(ref) == {"gemm_gflops", "gather_gbs"} and all(v > 0 for v in ref.values())
    assert T.short_device("cpu:Intel(R) Xeon(R) Processor (2 threads)") == "Intel Xeon, 2 threads"


def test_git_commit_can_be_named_for_a_copy_without_git(monkeypatch, tmp_path):
    from orderlib.reports import git_commit

    assert git_commit(tmp_path) == "unknown"
    monkeypatch.setenv("ORDERLIB_GIT_COMMIT", "abc1234")
    assert git_commit(tmp_path) == "abc1234"
