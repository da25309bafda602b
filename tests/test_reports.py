import json
import time

import nbformat
import pandas as pd
import pytest
from strip_notebooks import strip

from orderlib.reports import NotebookReports, write_table
from orderlib.runs import run_paths

META = {"preset": "small", "seed": 0, "device": "cpu", "data_source": "x", "data_fingerprint": "ab", "wall_time_s": 1.0}


def test_write_table_long_format_and_provenance(tmp_path):
    df = pd.DataFrame({"method": ["a", "b"], "metric": ["acc", "acc"], "paper": [90.6, None], "ours": [91.0, 50.0]})
    paths = write_table("t1", df, META, tmp_path, title="T", notes="note")
    back = pd.read_csv(paths["csv"])
    assert list(back.columns[:4]) == ["method", "metric", "paper", "ours"]
    assert pd.isna(back.loc[1, "paper"])
    meta = json.loads(paths["meta"].read_text())
    assert meta["preset"] == "small" and meta["id"] == "t1" and "git_commit" in meta
    md = paths["md"].read_text()
    assert "| a" in md and "90.6" in md and "note" in md
    assert not list(tmp_path.glob("*.tmp"))


def test_write_table_rejects_missing_columns_and_provenance(tmp_path):
    with pytest.raises(ValueError, match="long format"):
        write_table("t", pd.DataFrame({"method": [], "ours": []}), META, tmp_path)
    df = pd.DataFrame({"method": [], "metric": [], "paper": [], "ours": []})
    with pytest.raises(ValueError, match="wall_time_s"):
        write_table("t", df, {k: v for k, v in META.items() if k != "wall_time_s"}, tmp_path)


def test_notebook_reports_write_the_described_meta_with_its_wall_time_taken_now(tmp_path):
    run = NotebookReports("small", {}, "cpu", 1, "abc", t_start=time.perf_counter() - 100, tables=tmp_path)
    df = pd.DataFrame({"method": ["a"], "metric": ["acc"], "paper": [1.0], "ours": [2.0]})
    with pytest.raises(RuntimeError, match="describe.*before writing t1"):
        run.write_table("t1", df, "T", "n")
    run.meta = META  # what a notebook's describe(...) sets
    meta = json.loads(run.write_table("t1", df, "T", "n")["meta"].read_text())
    assert meta["wall_time_s"] >= 100  # seconds since t_start, not the described 1.0
    given = json.loads(run.write_table("t2", df, "T", "n", meta=META)["meta"].read_text())
    assert given["wall_time_s"] == 1.0 and given["id"] == "t2"


def test_small_presets_never_write_reports(tmp_path):
    assert run_paths("x", "small", tmp_path).tables == tmp_path / "runs/small/reports/tables"
    assert run_paths("x", "full", tmp_path).tables == tmp_path / "reports/tables"


def test_strip_keeps_only_checked_outputs():
    nb = nbformat.v4.new_notebook()
    out = nbformat.v4.new_output("stream", text="42\n")
    checked = nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(42)", outputs=[out], execution_count=3)
    other = nbformat.v4.new_code_cell("print(1)", outputs=[out], execution_count=4)
    nb.cells = [checked, other]
    strip(nb)
    assert checked.outputs and checked.execution_count == 3
    assert other.outputs == [] and other.execution_count is None


def test_environment_yml_installs_the_one_dependency_list():
    from orderlib.paths import repo_root

    text = (repo_root() / "environment.yml").read_text()
    assert '-e ".[dev]"' in text
    pip_lines = [ln.strip() for ln in text.split("- pip:")[1].splitlines() if ln.strip().startswith("-")]
    assert pip_lines == ['- -e ".[dev]"']  # no second list to drift


def test_git_commit_ignores_generated_reports_but_not_code(tmp_path):
    import subprocess

    from orderlib.reports import git_commit

    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)
    run("init", "-q")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "t.csv").write_text("a\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    run("add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    sha = git_commit(tmp_path)
    assert len(sha) == 40
    (tmp_path / "reports" / "t.csv").write_text("b\n")  # an earlier notebook of the same run wrote it
    assert git_commit(tmp_path) == sha
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == sha + "-dirty"


def test_csv_numbers_are_rounded_as_cited(tmp_path):
    import pandas as pd

    from orderlib.reports import write_table

    df = pd.DataFrame(
        {
            "method": ["a", "b", "c"],
            "metric": ["acc", "auc", "count"],
            "paper": [88.2, None, None],
            "ours": [87.61250000000001, 0.85341234, 4000.0],
        }
    )
    meta = dict(preset="small", seed=0, device="cpu", data_source="x", data_fingerprint="y", wall_time_s=1.0)
    out = write_table("t", df, meta, tmp_path)
    text = out["csv"].read_text()
    assert "87.61," not in text and "87.61\n" in text and "0.853\n" in text and "4000\n" in text
    assert "00000" not in text and ",88.2," in text


def test_markdown_shows_missing_values_as_empty_cells(tmp_path):
    df = pd.DataFrame(
        {
            "method": ["closure", "oe"],
            "metric": ["acc", "acc"],
            "paper": [88.2, None],
            "ours": [87.61, 90.89],
            "n_seeds": pd.array([None, 3], dtype="Int64"),
            "seed": [None, "mean"],
        }
    )
    md = write_table("t", df, META, tmp_path)["md"].read_text()
    assert "<NA>" not in md and "nan" not in md.lower() and "None" not in md
    cells = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in md.splitlines()
        if line.startswith(("| closure", "| oe"))
    }
    assert cells == {"closure": ["acc", "88.2", "87.61", "", ""], "oe": ["acc", "", "90.89", "3", "mean"]}


def test_training_provenance_names_models_from_another_commit():
    from orderlib.reports import model_record, training_provenance

    models = {
        "a": model_record(10.0004, "c1", False, epochs_run=3),
        "b": model_record(5.0, "c0", True),
        "c": model_record(None, None, True),
    }
    t = training_provenance(models, "c1")
    assert (
        t["train_seconds_total"] == 15.0
        and model_record(0.0123, "c1", False)["train_seconds"] == 0.012
        and t["models"]["a"]
        == {"train_seconds": 10.0, "trained_at": "c1", "loaded_from_checkpoint": False, "epochs_run": 3}
    )
    assert t["trained_at"] == ["None", "c0", "c1"] and t["trained_at_other_commit"] == ["b", "c"]
    assert t["note"].startswith("2 of 3 models were trained at another commit") and "b, c" in t["note"]
    same = training_provenance({"a": models["a"]}, "c1")
    assert same["trained_at_other_commit"] == [] and same["note"].startswith("all 1 models trained at this")


def test_report_meta_holds_the_fields_every_notebook_writes(tmp_path):
    from report_index import trained_at

    from orderlib import precision
    from orderlib.reports import device_description, model_record, report_meta, training_provenance

    trained = {"order-embeddings": model_record(12.5, "c1", False), "symmetric": model_record(3.0, "c0", True)}
    meta = report_meta(
        preset="full",
        seed=0,
        device="cpu",
        processes=2,
        commit="c1",
        data_source="toy",
        data_fingerprint="ab",
        wall_time_s=7.0,
        trained=trained,
        config={"epochs": 3},
    )
    assert meta == {
        "preset": "full",
        "seed": 0,
        "device": device_description("cpu", 2),
        "git_commit": "c1",
        "data_source": "toy",
        "data_fingerprint": "ab",
        "wall_time_s": 7.0,
        "config": {"epochs": 3},
        "training": training_provenance(trained, "c1"),
        "matmul": precision.in_effect("cpu"),  # the index refuses a report without it
    }
    assert meta["device"].endswith("(2 processes x 1 thread)")
    one = dict(preset="small", seed=0, device="cpu", commit="c1", data_source="x", data_fingerprint="y")
    assert report_meta(**one, wall_time_s=1.0, trained={})["device"] == device_description("cpu")  # one process
    df = pd.DataFrame({"method": ["a"], "metric": ["acc"], "paper": [None], "ours": [1.0]})
    written = json.loads(write_table("t", df, meta, tmp_path)["meta"].read_text())
    assert {k: written[k] for k in meta} == json.loads(json.dumps(meta))  # as given, the commit included
    assert trained_at(written) == "1 of 2 at c0"


def test_device_description_names_the_cpu_kind_it_probes():
    """The kernels ATen dispatches to are probed, so capping them (as bench_tolerance's SSE4 variant
    does) shows in the description, and the description says which kind of CPU produced a report."""
    import os
    import subprocess
    import sys

    code = "from orderlib.reports import device_description as d; print(d('cpu'))"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    capped = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "DEFAULT kernels" in capped.stdout
    from orderlib.reports import device_description

    here = device_description("cpu")
    assert here.startswith("cpu:") and " kernels" in here and here.endswith("threads)")
