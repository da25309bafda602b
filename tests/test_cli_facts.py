"""`orderlib eval facts`: hand-worked K@k and AP, sklearn's AP, the library's `implied` functions,
Sherlock's own Table 4 rows (eval.facts.retrieval_rows on a FactTask-like input), and bad input."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import average_precision_score

from orderlib import cli
from orderlib.data.facts import Fact, implies
from orderlib.eval.facts import fact_scores, implied_topk, implied_truth, retrieval_rows

FACTS = "1\ta\t*\t*\n2\ta\tred\t*\n1\tb\t*\t*\n3\ta\tleft of\tb\n"
FACT_LIST = [Fact("a"), Fact("a", "red"), Fact("b"), Fact("a", "left of", "b")]


def run(tmp_path: Path, matrix, labels, kind="distance", facts=FACTS, out="out") -> pd.DataFrame:
    np.save(tmp_path / "m.npy", np.asarray(matrix, np.float64))
    (tmp_path / "facts.tsv").write_text(facts)
    (tmp_path / "labels.txt").write_text("".join(f"{v}\n" for v in labels))
    argv = [
        "eval",
        "facts",
        "--matrix",
        tmp_path / "m.npy",
        "--kind",
        kind,
        "--facts",
        tmp_path / "facts.tsv",
        "--labels",
        tmp_path / "labels.txt",
        "--out",
        tmp_path / out,
        "--method",
        "m",
    ]
    assert cli.main([str(a) for a in argv]) == 0
    return pd.read_csv(tmp_path / out / "facts.csv")


def ours(df, metric, protocol="strict", scope="all", candidates="all facts") -> float:
    sel = (df.metric == metric) & (df.protocol == protocol) & (df.scope == scope) & (df.candidates == candidates)
    assert sel.sum() == 1, (metric, protocol, scope, candidates)
    return float(df.loc[sel, "ours"].iloc[0])


def test_strict_by_hand(tmp_path):
    # 4 images: of <a, red> (fact 1), <a> (fact 0), <b> (fact 2), <a, left of, b> (fact 3); low = match.
    dist = [
        [0.2, 0.1, 0.9, 0.8],  # image 0 (fact 1): its fact first
        [0.3, 0.2, 0.9, 0.7],  # image 1 (fact 0): second, behind <a, red>
        [0.5, 0.6, 0.4, 0.1],  # image 2 (fact 2): second, behind <a, left of, b>
        [0.6, 0.5, 0.45, 0.2],  # image 3 (fact 3): first
    ]
    df = run(tmp_path, dist, [1, 0, 2, 3])
    assert ours(df, "K1") == 50
    assert ours(df, "K5") == 100
    # fact -> image, one image each: AP = 1 / its rank. Columns 1, 0, 2, 3: ranks 1, 2, 1, 2
    assert ours(df, "mAP") == 75
    # among the facts of the image's order every image finds its fact first
    assert ours(df, "K1", candidates="facts of the image's order") == 100
    assert ours(df, "K1", scope="order 1") == 0
    sim = run(tmp_path, -np.asarray(dist), [1, 0, 2, 3], kind="similarity", out="s")
    strict = lambda d: d[d.protocol == "strict"].reset_index(drop=True)
    pd.testing.assert_frame_equal(strict(df), strict(sim))


def test_against_sklearn_and_the_implied_functions(tmp_path):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 40)
    dist = rng.uniform(0.5, 2.0, (40, 4))
    dist[np.arange(40), labels] -= rng.uniform(0, 0.6, 40)
    df = run(tmp_path, dist, labels)
    assert ours(df, "K1") == pytest.approx(100 * np.mean(dist.argmin(1) == labels), abs=0.006)
    aps = [average_precision_score(labels == f, -dist[:, f]) for f in range(4)]
    assert ours(df, "mAP") == pytest.approx(100 * np.mean(aps), abs=0.006)
    truth = implied_truth(implies(FACT_LIST), labels)
    k = implied_topk(fact_scores(torch.as_tensor(dist)), truth)
    for name in ("K1", "K5", "K10"):
        assert ours(df, name, "implied") == pytest.approx(k[name], abs=0.006)


def test_parity_with_sherlock_table4_rows(tmp_path):
    """eval.facts.retrieval_rows (notebook 09's Table 4 rows) on a FactTask-like input and the
    command on the same matrix: every row, both protocols, every scope and candidate set."""
    rng = np.random.default_rng(1)
    facts = [Fact(s) for s in "abc"] + [Fact(s, p) for s in "abc" for p in ("red", "big")]
    facts += [Fact(s, "on", o) for s in "abc" for o in "abc" if s != o]
    labels = rng.integers(0, len(facts), 80)
    dist = rng.uniform(0, 3, (80, len(facts)))
    dist[np.arange(80), labels] *= 0.3
    task = SimpleNamespace(
        facts=facts, orders=torch.tensor([f.order for f in facts]), test=SimpleNamespace(fact=labels)
    )
    text = "".join(f"{f.order}\t{f.s}\t{f.p or '*'}\t{f.o or '*'}\n" for f in facts)
    for kind, scoring, matrix in (("distance", "euc", dist), ("similarity", "dot", -dist)):
        expected = pd.DataFrame(retrieval_rows("m", torch.as_tensor(dist), task, paper={}, scoring=scoring))
        df = run(tmp_path, matrix, labels, kind=kind, facts=text, out=kind)
        assert len(df) == len(expected) == 2 * 4 * 8
        keys = ["protocol", "scope", "candidates", "metric"]
        merged = expected.merge(df, on=keys, suffixes=("_lib", "_cli"))
        assert len(merged) == len(df)
        np.testing.assert_allclose(merged.ours_cli, merged.ours_lib, atol=0.006)


def test_bad_input(tmp_path, capsys):
    np.save(tmp_path / "m.npy", np.ones((3, 4)))
    (tmp_path / "facts.tsv").write_text(FACTS)
    (tmp_path / "labels.txt").write_text("0\n1\n2\n")

    def fails(path, what, matrix="m.npy", facts="facts.tsv", labels="labels.txt"):
        argv = [
            "eval",
            "facts",
            "--kind",
            "distance",
            "--matrix",
            tmp_path / matrix,
            "--facts",
            tmp_path / facts,
            "--labels",
            tmp_path / labels,
            "--out",
            tmp_path / "bad",
        ]
        assert cli.main([str(a) for a in argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"orderlib: error: {tmp_path / path}: ") and what in err, err
        assert not (tmp_path / "bad").exists()

    (tmp_path / "cols.tsv").write_text("1\ta\t*\n")
    fails("cols.tsv", "line 1: 3 columns, expected 4 (order, S, P, O)", facts="cols.tsv")
    (tmp_path / "order.tsv").write_text("2\ta\t*\t*\n")
    fails("order.tsv", "line 1: order 2 needs the first 2 of S, P, O filled", facts="order.tsv")
    (tmp_path / "dup.tsv").write_text(FACTS + "1\ta\t*\t*\n")
    fails("dup.tsv", "line 5: duplicate fact <a> (line 1)", facts="dup.tsv")
    np.save(tmp_path / "wide.npy", np.ones((3, 5)))
    fails("wide.npy", "5 columns for 4 facts", matrix="wide.npy")
    (tmp_path / "range.txt").write_text("0\n4\n1\n")
    fails("range.txt", "line 2: fact 4 out of range 0..3", labels="range.txt")
    (tmp_path / "few.txt").write_text("0\n1\n")
    fails("few.txt", "2 labels for 3 images", labels="few.txt")
    bad = np.ones((3, 4))
    bad[1, 1] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    fails("nan.npy", "NaN or inf", matrix="nan.npy")
    np.save(tmp_path / "neg.npy", -np.ones((3, 4)))
    fails("neg.npy", "negative distances", matrix="neg.npy")

    # no test image of an order-3 fact: that order's rows are left out, the others reported
    argv = ["eval", "facts", "--kind", "distance", "--matrix", tmp_path / "m.npy", "--facts", tmp_path / "facts.tsv"]
    assert cli.main([str(a) for a in [*argv, "--labels", tmp_path / "labels.txt", "--out", tmp_path / "ok"]]) == 0
    (table,) = (tmp_path / "ok").glob("*.csv")
    scopes = set(pd.read_csv(table).scope.dropna())
    assert "all" in scopes and "order 1" in scopes and "order 3" not in scopes
