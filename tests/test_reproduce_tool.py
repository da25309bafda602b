"""orderlib.tools.reproduce: times notebooks and counts the models their reports trained."""

import json

import nbformat
import pandas as pd

from orderlib.reports import model_record, training_provenance
from orderlib.tools import reproduce as R


def _notebook(path, tables, loaded):
    """A notebook that writes one report whose single model was trained here or loaded."""
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nb.cells = [
        nbformat.v4.new_code_cell('PRESET = "small"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import json, pathlib\n"
            f"t = json.loads({json.dumps(json.dumps(training_provenance({'m': model_record(2.0, 'c', loaded)}, 'c')))})\n"
            f"pathlib.Path({str(tables)!r}, 'x_' + PRESET + '.meta.json').write_text("
            "json.dumps({'id': 'x_' + PRESET, 'training': t}))"
        ),
    ]
    nbformat.write(nb, str(path))
    return path


def test_run_notebook_times_it_and_reads_the_reports_it_wrote(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "old.meta.json").write_text(json.dumps({"id": "old"}))  # written before: not this notebook's
    import os

    os.utime(tables / "old.meta.json", (0, 0))
    r = R.run_notebook(_notebook(tmp_path / "01_a.ipynb", tables, False), "tiny", tmp_path / "out", tables)
    assert r["reports"] == ["x_tiny"] and r["models"] == 1 and r["trained"] == 1 and r["seconds"] > 0
    assert (tmp_path / "out" / "01_a.ipynb").exists()
    loaded = R.model_counts([{"training": training_provenance({"m": model_record(2.0, "c", True)}, "c")}])
    assert loaded == {"models": 1, "trained": 0, "train_seconds": 2.0, "recorded": True}
    assert not R.model_counts([{"id": "no training block"}])["recorded"]


def test_bench_table_shares_sum_to_100_and_compares_with_the_previous_run():
    runs = [
        {"notebook": "a", "seconds": 30.0, "models": 2, "trained": 2, "train_seconds": 20.0, "recorded": True},
        {"notebook": "b", "seconds": 90.0, "models": 0, "trained": 0, "train_seconds": 0.0, "recorded": False},
    ]
    df = R.bench_table(runs, {"a": 60.0})
    share = df[df.metric == "share of the run's wall time (%)"].set_index("method").ours
    assert share["a"] == 25.0 and share["b"] == 75.0 and share["total"] == 100.0
    ratio = df[df.metric == "previous / this wall time"].set_index("method").ours
    assert dict(ratio) == {"a": 2.0}  # b and the total have no previous time
    assert "models in its reports" not in set(df[df.method == "b"].metric)  # not recorded: not shown as 0
    both = R.bench_table(runs, {"a": 60.0, "b": 45.0})
    assert both[(both.method == "total") & (both.metric == "previous / this wall time")].ours.item() == 105 / 120
    assert isinstance(df, pd.DataFrame) and {"method", "metric", "paper", "ours"} <= set(df.columns)


def test_a_partial_run_keeps_the_other_notebooks_rows_with_the_commit_that_timed_them(tmp_path):
    from orderlib.reports import write_table

    first = [
        {
            "notebook": "00_a",
            "seconds": 30.0,
            "models": 2,
            "trained": 2,
            "train_seconds": 60.0,
            "recorded": True,
            "commit": "1111111aaaa",
            "device": "cpu:x",
        },
        {
            "notebook": "01_b",
            "seconds": 90.0,
            "models": 0,
            "trained": 0,
            "train_seconds": 0.0,
            "recorded": False,
            "commit": "1111111aaaa",
            "device": "cpu:x",
        },
    ]
    meta = {
        "preset": "full",
        "seed": 0,
        "device": "cpu:x",
        "data_source": "-",
        "data_fingerprint": "-",
        "wall_time_s": 120.0,
        "git_commit": "1111111aaaa",
        "notebooks": {
            r["notebook"]: {"reports": ["r_" + r["notebook"]], "seconds": r["seconds"], "commit": r["commit"]}
            for r in first
        },
    }
    write_table(R.TABLE_ID, R.bench_table(first, {}), meta, tmp_path)
    carried = R.carried_runs(tmp_path, {"01_b"})  # this run re-times 01_b only
    assert [c["notebook"] for c in carried] == ["00_a"]
    a = carried[0]
    assert (a["seconds"], a["models"], a["trained"], a["train_seconds"], a["recorded"]) == (30.0, 2, 2, 60.0, True)
    assert a["commit"] == "1111111aaaa" and a["reports"] == ["r_00_a"]
    assert R.carried_runs(tmp_path, {"00_a", "01_b"}) == [] and R.carried_runs(tmp_path / "none", set()) == []
    # a commit that looks like a number stays a commit in the Markdown (not 6.1017e+08)
    R.write_bench([{**first[0], "commit": "61017e4aaaa", "reports": []}], tmp_path, "full", [], "61017e4aaaa", {}, "")
    md = (tmp_path / f"{R.TABLE_ID}.md").read_text()
    assert "`61017e4`" in md and "`1111111`" in md and "e+0" not in md
    now = {
        "notebook": "01_b",
        "seconds": 45.0,
        "models": 0,
        "trained": 0,
        "train_seconds": 0.0,
        "recorded": False,
        "commit": "2222222bbbb",
    }
    df = R.bench_table(carried + [now], {"01_b": 90.0})
    wall = df[df.metric == "wall time (min)"].set_index("method")
    assert wall.ours["total"] == 1.25 and dict(wall["timed at"]) == {"00_a": "1111111", "01_b": "2222222", "total": ""}
    assert set(df[df.metric == "previous / this wall time"].method) == {"01_b"}
    assert dict(wall["timed on"]) == {"00_a": "x", "01_b": "", "total": ""}  # the machine of each row's run
    assert R.short_device("cpu:Intel(R) Xeon(R) Processor (2 threads)") == "Intel Xeon, 2 threads"


def test_a_notebook_that_fails_after_writing_a_report_marks_it_and_keeps_the_finished_timings(tmp_path, monkeypatch):
    from orderlib.tools import report_index

    tables = tmp_path / "tables"
    tables.mkdir()
    ok = _notebook(tmp_path / "00_ok.ipynb", tables, False)
    bad = nbformat.read(str(_notebook(tmp_path / "01_bad.ipynb", tables, False)), as_version=4)
    bad.cells[1].source = bad.cells[1].source.replace("'x_'", "'y_'")
    bad.cells.append(nbformat.v4.new_code_cell("assert 1 > 2, 'sanity bound'"))  # fails after writing y_full
    nbformat.write(bad, str(tmp_path / "01_bad.ipynb"))
    monkeypatch.setattr(R, "run_paths", lambda name, preset: type("P", (), {"tables": tables})())
    monkeypatch.setattr("orderlib.tools.publish_notebook.publish", lambda p: p)
    assert R.main([str(ok), str(tmp_path / "01_bad.ipynb"), "--out", str(tmp_path / "out")]) == 1
    failed = json.loads((tables / "y_full.meta.json").read_text())["failed_run"]
    assert failed["notebook"] == "01_bad.ipynb" and "AssertionError: sanity bound" in failed["error"]
    assert "failed_run" not in json.loads((tables / "x_full.meta.json").read_text())  # the notebook that finished
    bench = pd.read_csv(tables / f"{R.TABLE_ID}.csv")
    assert set(bench.method) == {"00_ok.ipynb", "total"}
    # the index refuses a report of a failed run
    rep = tmp_path / "root" / "reports"
    (rep / "tables").mkdir(parents=True)
    (rep / "figures").mkdir()
    (rep / "tables" / "devise_zeroshot.meta.json").write_text(json.dumps({"git_commit": "c", "failed_run": failed}))
    (rep / "figures" / "devise_zeroshot_examples.png").write_bytes(b"png")
    import pytest

    with pytest.raises(ValueError, match="devise_zeroshot: written by a run of 01_bad.ipynb that then failed"):
        report_index.render(tmp_path / "root")


def test_a_previous_time_from_another_machine_is_no_baseline(tmp_path):
    from orderlib.reports import device_description

    here = device_description("cpu")
    nb = tmp_path / "00_a.ipynb"
    nb.write_text("{}")
    run = lambda: [
        {
            "notebook": "00_a.ipynb",
            "seconds": 60.0,
            "models": 0,
            "trained": 0,  # noqa: E731
            "train_seconds": 0.0,
            "recorded": False,
            "reports": [],
        }
    ]
    for previous_machine, compared in (("cpu:Some Other CPU (2 threads)", False), (here, True)):
        R.write_bench(run(), tmp_path, "full", [nb], "3333333cccc", {}, "")  # the previous run, then re-labelled
        meta = json.loads((tmp_path / f"{R.TABLE_ID}.meta.json").read_text())
        meta["notebooks"]["00_a.ipynb"]["device"] = previous_machine
        (tmp_path / f"{R.TABLE_ID}.meta.json").write_text(json.dumps(meta))
        before, before_commit = R.previous_times(tmp_path)
        df = R.write_bench(run(), tmp_path, "full", [nb], "4444444dddd", before, before_commit)
        assert ("previous / this wall time" in set(df.metric)) == compared
        notes = (tmp_path / f"{R.TABLE_ID}.md").read_text()
        assert ("on another machine (Some Other CPU, 2 threads)" in notes) == (not compared)


def test_machine_reference_is_recorded_per_run_and_kept_with_carried_rows(tmp_path):
    ref = R.reference_speed(0.05)
    assert set(ref) == {"gemm_gflops", "gather_gbs"} and all(v > 0 for v in ref.values())
    run = {
        "notebook": "00_a",
        "seconds": 30.0,
        "models": 0,
        "trained": 0,
        "train_seconds": 0.0,
        "recorded": False,
        "reports": [],
    }
    R.write_bench([run], tmp_path, "full", [], "1111111aaaa", {}, "", {"start": ref, "end": ref})
    meta = json.loads((tmp_path / f"{R.TABLE_ID}.meta.json").read_text())
    assert meta["machine_reference"]["start"] == ref and meta["notebooks"]["00_a"]["reference"] == ref
    assert "Machine reference" in (tmp_path / f"{R.TABLE_ID}.md").read_text()
    carried = R.carried_runs(tmp_path, {"01_b"})  # a later run of another notebook keeps 00_a's reference
    assert carried[0]["reference"] == ref
    later = {**run, "notebook": "01_b"}
    R.write_bench([later], tmp_path, "full", [], "2222222bbbb", {}, "1111111", None)
    meta = json.loads((tmp_path / f"{R.TABLE_ID}.meta.json").read_text())
    assert meta["notebooks"]["00_a"]["reference"] == ref and meta["notebooks"]["01_b"]["reference"] is None


def test_a_gpu_run_writes_its_own_table_beside_the_cpu_runs_times(tmp_path):
    """On a CUDA machine the timings go to bench_reproduce_cuda (the CPU table untouched), with each
    notebook's CPU wall time and the ratio; the next GPU run compares with the last GPU run only."""
    run = lambda s: {
        "notebook": "03_t",
        "seconds": s,
        "models": 1,
        "trained": 1,
        "train_seconds": s / 2,  # noqa: E731
        "recorded": True,
        "reports": [],
    }
    R.write_bench([run(600.0)], tmp_path, "full", [], "1111111aaaa", {}, "", device="cpu:Some CPU (2 threads)")
    cpu_csv = (tmp_path / f"{R.TABLE_ID}.csv").read_text()
    gpu = "cuda:Some GPU with Some CPU (16 threads)"
    assert R.bench_id(gpu) == R.CUDA_TABLE_ID and R.bench_id("cpu:x") == R.TABLE_ID
    df = R.write_bench([run(60.0)], tmp_path, "full", [], "2222222bbbb", {}, "", device=gpu)
    assert (tmp_path / f"{R.TABLE_ID}.csv").read_text() == cpu_csv
    got = pd.read_csv(tmp_path / f"{R.CUDA_TABLE_ID}.csv").query("method == '03_t'").set_index("metric")
    assert got.loc["CPU run / this wall time", "ours"] == 10.0 and got.loc["CPU run's wall time (min)", "ours"] == 10.0
    assert got.loc["CPU run / this wall time", "timed on"] == "Some CPU, 2 threads"
    assert got.loc["wall time (min)", "timed on"] == "Some GPU with Some CPU, 16 threads"
    assert df[df.metric == "wall time (min)"].set_index("method").ours["03_t"] == 1.0
    before, commit = R.previous_times(tmp_path, R.bench_id(gpu))
    assert before == {"03_t": 60.0} and commit == "2222222bbbb"
    assert R.tables_since(tmp_path, 0) == []  # neither bench table counts as a notebook's report


def test_git_commit_can_be_named_for_a_copy_without_git(monkeypatch, tmp_path):
    from orderlib.reports import git_commit

    assert git_commit(tmp_path) == "unknown"
    monkeypatch.setenv("ORDERLIB_GIT_COMMIT", "abc1234")
    assert git_commit(tmp_path) == "abc1234"
