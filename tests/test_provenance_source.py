"""A notebook's reports record the same provenance however it runs: papermill alone, JupyterLab or
the workflow (freshness.this_notebook, run_source)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from orderlib import freshness
from orderlib.reports import write_table

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
META = dict(preset="small", seed=0, device="cpu", data_source="toy", data_fingerprint="d0", wall_time_s=0.0)


@pytest.fixture
def named(monkeypatch):
    monkeypatch.delenv("ORDERLIB_NOTEBOOK", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(freshness, "_NOTEBOOK", [])
    return freshness


def test_a_named_notebook_is_the_source_of_its_reports(named, tmp_path):
    df = pd.DataFrame({"method": ["m"], "metric": ["acc"], "paper": [None], "ours": [1.0]})
    assert named.this_notebook("06_devise_table1.ipynb") == "notebooks/06_devise_table1.ipynb"
    meta = json.loads(write_table("t", df, META, tmp_path)["meta"].read_text())
    assert meta["notebook"] == "06_devise_table1.ipynb"
    fp = meta["fingerprints"]
    assert fp["source"] == "notebooks/06_devise_table1.ipynb" and "orderlib/reports.py" in fp["code"]


def test_a_name_that_is_no_notebook_is_refused(named):
    with pytest.raises(ValueError, match="no such notebook"):
        named.this_notebook("99_missing.ipynb")
    assert named.run_source() is None or not named.run_source().startswith("notebooks/")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_names_itself(path):
    code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
    assert re.findall(r"this_notebook\(\"([^\"]+)\"\)", code) == [path.name]
