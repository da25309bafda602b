"""reports/README.md: generated from the reports present, current, and strict about unlisted ones."""

import json

import pytest
import report_index as R


def test_committed_index_is_current():
    assert (R.reports_dir() / "README.md").read_text() == R.render()


def test_unlisted_or_missing_reports_are_errors(tmp_path):
    (tmp_path / "reports" / "tables").mkdir(parents=True)
    (tmp_path / "reports" / "figures").mkdir()
    meta = {"git_commit": "0123456789abcdef", "preset": "full", "created": "2026-11-23T12:00:00+0000", "matmul": "fp32"}
    (tmp_path / "reports" / "tables" / "oe_table3_snli.meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="oe_table3_roc.png is missing"):
        R.render(tmp_path)
    (tmp_path / "reports" / "figures" / "oe_table3_roc.png").write_bytes(b"png")
    text = R.render(tmp_path)
    assert (
        "| `oe_table3_snli` |" in text
        and "| fp32 | 0123456 | not recorded | stale | 2026-11-23 |" in text
        and "oe_table2" not in text
    )
    assert 'e.g. "orderlib `oe_table3_snli` at 0123456"' in text  # the example cites a real table
    no_mode = {k: v for k, v in meta.items() if k != "matmul"}
    (tmp_path / "reports" / "tables" / "oe_table3_snli.meta.json").write_text(json.dumps(no_mode))
    with pytest.raises(ValueError, match="does not say which matrix-product precision ran"):
        R.render(tmp_path)
    (tmp_path / "reports" / "tables" / "oe_table3_snli.meta.json").write_text(json.dumps(meta))
    (tmp_path / "reports" / "tables" / "made_up.meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="made_up.meta.json has no entry"):
        R.render(tmp_path)


def test_models_trained_at_column_reads_every_provenance_form():
    from report_index import trained_at

    from orderlib.reports import model_record, training_provenance

    here = "a" * 40
    fresh = {"git_commit": here, "training": training_provenance({"m": model_record(1.0, here, False)}, here)}
    assert trained_at(fresh) == "this commit"
    mixed = {"m": model_record(1.0, here, False), "n": model_record(2.0, "b" * 40, True)}
    assert trained_at({"git_commit": here, "training": training_provenance(mixed, here)}) == "1 of 2 at bbbbbbb"
    assert trained_at({"git_commit": here, "training": training_provenance({}, here)}) == "no models"
    # reports written before the `training` block: a list, a dict per model, or per-model records
    assert trained_at({"git_commit": here, "trained_at": [here, "c" * 40]}) == "at ccccccc"
    assert trained_at({"git_commit": here, "trained_at": {"m": here}}) == "this commit"
    assert trained_at({"git_commit": here, "models": {"m": {"trained_at": "d" * 40}}}) == "at ddddddd"
    assert trained_at({"git_commit": here, "train_seconds": {"m": 1.0}}) == "not recorded"


def test_the_tolerance_line_is_read_off_the_bench_tolerance_report(tmp_path):
    tables = tmp_path / "reports" / "tables"
    tables.mkdir(parents=True)
    assert R.tolerance_line(tmp_path / "reports") == ""
    (tables / "bench_tolerance.csv").write_text(
        "method,metric,paper,ours\n1 thread vs reference,a,,0.5\n"
        "1 thread vs reference,b,,0\n1 thread vs reference,c,,1.25\n"
    )
    (tables / "bench_tolerance.meta.json").write_text(json.dumps({"notebooks": ["notebooks/06_x.ipynb"]}))
    line = R.tolerance_line(tmp_path / "reports")
    assert "Notebooks: 06_x.ipynb;" in line
    assert "| `all` | 1.25 (c) |" in line and "| numbers moved | 2 of 3 |" in line
    (tables / "bench_tolerance.csv").write_text(  # hp@k is a fraction: its move is given apart from hit@k's
        "method,metric,paper,ours,measure,table,reference\n1 thread vs reference,a,,0.5,hit@1,t1,80\n"
        "1 thread vs reference,b,,0.004,hp@5,t1,0.7\n1 thread vs reference,c,,0.25,hit@5,t1,90\n"
        "1 thread vs reference,d,,0,top-1,t2,50\n"
    )
    line = R.tolerance_line(tmp_path / "reports")
    assert "| table | 1 thread |" in line and "| numbers moved | 3 of 4 |" in line
    assert "| `t1` | 0.5 (hit@1); 0.004 (hp@5) |" in line
    assert "| `t2` | no move |" in line


def test_a_copy_showing_an_older_run_of_a_seed_spread_is_stale(tmp_path):
    """A notebook that displays a seed spread (viz.verdicts names the run in its first column) shows
    that spread's numbers: a rerun of the spread stales the copy until the notebook reruns."""
    nb = {"cells": [{"cell_type": "code", "source": ['verdicts("x_spread")\n', 'seed_rows("y", rows)']}]}
    assert R.shown_reports(nb) == ["x_spread", "y"]
    html = "<th>x_spread, commit abcdef1, 2026-11-28</th>"
    ran = {"cells": [{"cell_type": "code", "outputs": [{"data": {"text/html": [html]}}]}]}
    meta = {"git_commit": "abcdef1" + "0" * 33, "created": "2026-11-28T17:02:28+0000"}
    (tmp_path / "x_spread.meta.json").write_text(json.dumps(meta))
    assert R.shown_changed(ran, tmp_path) == []
    (tmp_path / "x_spread.meta.json").write_text(json.dumps({**meta, "created": "2026-12-02T10:00:00+0000"}))
    assert R.shown_changed(ran, tmp_path) == [
        "shows x_spread of abcdef1, 2026-11-28; reports/tables holds commit abcdef1, 2026-12-02"
    ]
