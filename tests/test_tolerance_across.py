"""benchmarks/seed_spread/tolerance.py --across: two machines' tables, same code and data, compared number by number."""

import json
from pathlib import Path

import pandas as pd
import pytest


def _folder(tmp_path, name, device, ours, code="c1"):
    d = tmp_path / name
    d.mkdir()
    pd.DataFrame(
        {"method": ["CompCos", "CompCos"], "metric": ["top-1", "top-3"], "paper": [None, None], "ours": ours}
    ).to_csv(d / "utama_table1_unseen_pairs.csv", index=False)
    meta = {
        "device": device,
        "git_commit": "a" * 40,
        "fingerprints": {"source": "notebooks/08.ipynb", "code": {"orderlib/x.py": code}, "data": "d"},
    }
    (d / "utama_table1_unseen_pairs.meta.json").write_text(json.dumps(meta))
    return d


def test_across_compares_every_number_of_two_cpu_kinds(tmp_path, benchmark_module):
    tol = benchmark_module("tolerance")
    a = _folder(tmp_path, "a", "cpu:AMD EPYC, AVX2 kernels (2 threads)", [60.7, 80.0])
    b = _folder(tmp_path, "b", "cpu:Intel Xeon, AVX512 kernels, bf16 products (2 threads)", [64.1, 80.0])
    rows, info = tol.across(a, b)
    assert (
        info["label"]
        == "cpu:Intel Xeon, AVX512 kernels, bf16 products (2 threads) vs cpu:AMD EPYC, AVX2 kernels (2 threads)"
    )
    moves = {r["measure"]: r["ours"] for r in rows}
    assert moves["top-1"] == pytest.approx(3.4) and moves["top-3"] == 0.0


def test_across_refuses_other_code_or_one_kind(tmp_path, benchmark_module):
    tol = benchmark_module("tolerance")
    a = _folder(tmp_path, "a", "cpu:AMD EPYC, AVX2 kernels (2 threads)", [60.7, 80.0])
    other_code = _folder(tmp_path, "b", "cpu:Intel Xeon, AVX512 kernels (2 threads)", [64.1, 80.0], code="c2")
    with pytest.raises(ValueError, match=r"utama_table1_unseen_pairs\.meta\.json.*differs.*code"):
        tol.across(a, other_code)
    same_kind = _folder(tmp_path, "c", "cpu:AMD EPYC, AVX2 kernels (2 threads)", [60.8, 80.0])
    with pytest.raises(ValueError, match="two kinds"):
        tol.across(a, same_kind)


def test_add_across_keeps_the_other_rows_and_replaces_its_own(tmp_path, monkeypatch, benchmark_module):
    tol = benchmark_module("tolerance")
    a = _folder(tmp_path, "a", "cpu:AMD EPYC, AVX2 kernels (2 threads)", [60.7, 80.0])
    b = _folder(tmp_path, "b", "cpu:Intel Xeon, AVX512 kernels (2 threads)", [64.1, 80.0])
    out = tmp_path / "reports" / "tables"
    out.mkdir(parents=True)
    pd.DataFrame(
        [dict(method="1 thread vs reference", metric="x", paper=None, ours=0.6, table="t", measure="hit@1")]
    ).to_csv(out / "bench_tolerance.csv", index=False)
    (out / "bench_tolerance.meta.json").write_text(json.dumps({"notes": "Variants."}))
    monkeypatch.setattr(tol, "repo_root", lambda: tmp_path)
    monkeypatch.setattr(tol, "write_table", lambda tid, df, meta, o, **k: df.to_csv(o / f"{tid}.csv", index=False))
    tol.add_across(a, b)
    tol.add_across(a, b)  # a second time replaces, not appends
    df = pd.read_csv(out / "bench_tolerance.csv")
    assert sorted(df["method"].value_counts().tolist()) == [1, 2]
    assert df.loc[df["measure"] == "top-1", "ours"].item() == pytest.approx(3.4)


def test_a_rerun_of_the_variants_keeps_the_across_rows(tmp_path, monkeypatch, benchmark_module):
    tol = benchmark_module("tolerance")
    label = "cpu:AMD EPYC, AVX2 kernels (2 threads) vs cpu:AMD EPYC, AVX512 kernels (2 threads)"
    out = tmp_path / "repo" / "reports" / "tables"
    out.mkdir(parents=True)
    pd.DataFrame(
        [
            dict(method="1 thread vs reference", metric="x", paper=None, ours=0.6),
            dict(method=label, metric="top-1", paper=None, ours=3.15),
        ]
    ).to_csv(out / "bench_tolerance.csv", index=False)
    other = tmp_path / "shared" / "tolerance"
    meta = {"across": {label: {"folders": ["reports/tables", str(other)], "label": label}}}
    (out / "bench_tolerance.meta.json").write_text(json.dumps(meta))
    monkeypatch.setattr(tol, "repo_root", lambda: tmp_path / "repo")
    rows, across = tol.kept_across(out)
    assert rows["method"].tolist() == [label] and rows["ours"].item() == 3.15
    assert across[label]["folders"] == ["reports/tables", "../shared/tolerance"]  # no absolute path in provenance
    assert tol.kept_across(tmp_path)[1] == {}  # no report yet: nothing to keep


def test_the_workflow_rule_reruns_every_notebook_of_the_committed_report(benchmark_module):
    """The bench_tolerance rule runs tolerance.py without arguments: its default notebooks must be the
    committed report's, or a `make refresh` rewrites the report without some of them."""
    tol = benchmark_module("tolerance")
    meta = json.loads((Path(__file__).parents[1] / "reports" / "tables" / "bench_tolerance.meta.json").read_text())
    assert [f"notebooks/{nb}.ipynb" for nb in tol.NOTEBOOKS] == meta["notebooks"]
