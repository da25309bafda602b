"""Freshness: a report is current exactly while the code that produced it is unchanged, and an
executed notebook while its code cells equal its source's."""

import json
from pathlib import Path

import pandas as pd
import pytest
import report_index as R

from orderlib import freshness as F
from orderlib.reports import write_table

NOTEBOOK = "notebooks/00_oe_fig2_toy2d.ipynb"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


def _notebook(*cells: str, injected: str | None = None, outputs: str = "", title: str = "# a title") -> str:
    code = [
        {"cell_type": "code", "metadata": {}, "source": c, "outputs": [{"text": outputs}], "execution_count": 1}
        for c in cells
    ]
    if injected:
        code.insert(0, {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": injected})
    return json.dumps({"cells": [{"cell_type": "markdown", "source": title}, *code]})


def test_a_file_fingerprint_follows_code_not_comments_docstrings_or_layout():
    py = 'def f(x):\n    """Doc."""\n    return x + 1  # one\n'
    fp = F.file_fingerprint("a.py", py)
    assert F.file_fingerprint("a.py", 'def f(x):\n    """Other doc."""\n\n    return (x + 1)\n') == fp
    assert F.file_fingerprint("a.py", "def f(x):\n    return x + 2\n") != fp
    cpp = "int f(int x) { return x + 1; } // one\n"
    assert F.file_fingerprint("k.cpp", "/* a */ int f(int x) {\n  return x + 1;\n}\n") == F.file_fingerprint(
        "k.cpp", cpp
    )
    assert F.file_fingerprint("k.cpp", cpp.replace("+ 1", "+ 2")) != F.file_fingerprint("k.cpp", cpp)
    nb = _notebook("x = 1\n%matplotlib inline", injected='PRESET = "full"', outputs="1")
    assert F.file_fingerprint("n.ipynb", nb) == F.file_fingerprint("n.ipynb", _notebook("x = 1", outputs="2"))
    assert F.file_fingerprint("n.ipynb", nb) != F.file_fingerprint("n.ipynb", _notebook("x = 2"))


def test_the_closure_follows_imports_through_the_library(tmp_path):
    root = _tree(
        tmp_path,
        {
            "notebooks/n.ipynb": _notebook("from orderlib.experiments import e"),
            "orderlib/__init__.py": "",
            "orderlib/experiments/__init__.py": "",
            "orderlib/experiments/e.py": "def run():\n    from orderlib import kernels\n",
            "orderlib/kernels.py": "import orderlib.paths\n",
            "orderlib/paths.py": "",
            "orderlib/unused.py": "",
            "orderlib/csrc/step.cpp": "int f();\n",
        },
    )
    files = F.closure("notebooks/n.ipynb", F.tree_reader(root))
    assert files == [
        "notebooks/n.ipynb",
        "orderlib/__init__.py",
        "orderlib/csrc/step.cpp",
        "orderlib/experiments/__init__.py",
        "orderlib/experiments/e.py",
        "orderlib/kernels.py",
        "orderlib/paths.py",
    ]


def test_a_report_goes_stale_when_any_file_that_made_it_changes(tmp_path):
    tables = tmp_path / "tables"
    df = pd.DataFrame({"method": ["m"], "metric": ["x"], "paper": [None], "ours": [1.0]})
    meta = {"preset": "full", "seed": 0, "device": "cpu", "data_source": "d", "data_fingerprint": "f" * 64}
    write_table("t", df, {**meta, "wall_time_s": 1.0, "source": NOTEBOOK}, out_dir=tables)
    written = json.loads((tables / "t.meta.json").read_text())
    record = written["fingerprints"]
    assert record["source"] == NOTEBOOK and record["data"] == "f" * 64
    assert "orderlib/viz.py" in record["code"] and NOTEBOOK in record["code"]
    here = F.tree_reader()
    assert R.report_freshness(written, NOTEBOOK, here) == []

    def planted(changed: str, text: str):
        return lambda path: text if path == changed else here(path)

    viz = here("orderlib/viz.py")
    assert R.report_freshness(written, NOTEBOOK, planted("orderlib/viz.py", viz + "\nX = 1\n")) == ["orderlib/viz.py"]
    assert R.report_freshness(written, NOTEBOOK, planted("orderlib/viz.py", viz + "\n# a comment\n")) == []
    assert R.report_freshness(written, NOTEBOOK, planted("orderlib/viz.py", None)) == ["orderlib/viz.py"]
    assert R.report_freshness(written, "notebooks/other.ipynb", here) == [
        f"written by {NOTEBOOK}, not notebooks/other.ipynb"
    ]
    assert R.report_freshness({**written, "fingerprints": None}, NOTEBOOK, here) == [
        "its provenance records no fingerprints"
    ]


def test_an_executed_copy_is_stale_when_its_code_cells_differ(tmp_path):
    source = _notebook("x = 1", "print(x)")
    root = _tree(tmp_path, {"notebooks/n.ipynb": source})
    assert R.copy_freshness("notebooks/n.ipynb", root) == ""  # no executed copy
    copy = tmp_path / "reports" / "notebooks" / "n.ipynb"
    copy.parent.mkdir(parents=True)
    copy.write_text(_notebook("x = 1", "print(x)", injected='PRESET = "full"', outputs="1"))
    assert R.copy_freshness("notebooks/n.ipynb", root) == "current"  # outputs and parameters aside
    copy.write_text(_notebook("x = 2", "print(x)", injected='PRESET = "full"'))
    assert R.copy_freshness("notebooks/n.ipynb", root) == "stale"


def test_an_executed_copy_whose_text_lags_is_brought_in_line_without_a_rerun(tmp_path):
    from report_index import sync_text

    root = _tree(tmp_path, {"notebooks/n.ipynb": _notebook("x = 1", title="# What this shows: 61.2")})
    copy = tmp_path / "reports" / "notebooks" / "n.ipynb"
    copy.parent.mkdir(parents=True)
    copy.write_text(_notebook("x = 1", injected='PRESET = "full"', outputs="1", title="# What this shows: 60.7"))
    assert R.copy_freshness("notebooks/n.ipynb", root) == "text"  # code current, Markdown behind
    assert sync_text(copy, root / "notebooks/n.ipynb") is True
    assert R.copy_freshness("notebooks/n.ipynb", root) == "current"
    assert json.loads(copy.read_text())["cells"][-1]["outputs"] == [{"text": "1"}]  # outputs kept
    assert sync_text(copy, root / "notebooks/n.ipynb") is False
    (root / "notebooks/n.ipynb").write_text(_notebook("x = 1", title="[t](../reports/tables/t.md)"))
    assert R.copy_freshness("notebooks/n.ipynb", root) == "text"
    assert sync_text(copy, root / "notebooks/n.ipynb") is True  # its links, relinked for reports/notebooks/
    assert json.loads(copy.read_text())["cells"][0]["source"] == ["[t](../tables/t.md)"]
    assert R.copy_freshness("notebooks/n.ipynb", root) == "current"
    copy.write_text(_notebook("x = 2", title="# old"))  # other code: only a rerun helps
    with pytest.raises(ValueError, match="n.ipynb: its code cells or cell order differ"):
        sync_text(copy, root / "notebooks/n.ipynb")


def test_the_index_shows_stale_reports_and_why(tmp_path):
    (tmp_path / "reports" / "tables").mkdir(parents=True)
    (tmp_path / "reports" / "figures").mkdir()
    (tmp_path / "reports" / "figures" / "oe_table3_roc.png").write_bytes(b"png")
    meta = {"git_commit": "0" * 40, "preset": "full", "created": "2026-11-23T12:00:00+0000", "matmul": "fp32"}
    (tmp_path / "reports" / "tables" / "oe_table3_snli.meta.json").write_text(json.dumps(meta))
    text = R.render(tmp_path)
    assert "| 0000000 | not recorded | stale | 2026-11-23 |" in text
    assert "0 of 1 reports with provenance are current" in text
    assert "| `oe_table3_snli` | its provenance records no fingerprints |" in text
    assert R.stale_sources(tmp_path) == ["notebooks/02_oe_table3_snli.ipynb"]


def test_the_committed_reports_record_their_fingerprints():
    reports, _ = R.freshness_of()
    unrecorded = [rid for rid, why in reports.items() if why == ["its provenance records no fingerprints"]]
    assert unrecorded == [], unrecorded


def test_strict_fails_on_a_stale_report_but_not_on_one_only_a_gpu_reruns(tmp_path, monkeypatch, capsys):
    reports = {"oe_table3_snli": ["notebooks/02_oe_table3_snli.ipynb"], "bench_reproduce_cuda": ["a.py"]}
    monkeypatch.setattr(R, "freshness_of", lambda root=None: (reports, {}))
    monkeypatch.setattr(R, "render", lambda root=None, fresh=None: "index\n")
    monkeypatch.setattr(R, "reports_dir", lambda root=None: tmp_path)
    (tmp_path / "README.md").write_text("index\n")
    assert R.main(["--check", "--strict"]) == 1
    reports.pop("oe_table3_snli")
    assert R.main(["--check", "--strict"]) == 0
    assert "bench_reproduce_cuda is stale; it reruns on a CUDA device" in capsys.readouterr().err
    assert "only a machine with a device reruns" in R.freshness_section({"bench_reproduce_cuda": ["a.py"]}, {})
