"""The walkthrough helpers of notebooks 00-02: the hand-worked checks agree with the library, the
side-by-side tables and claims read the reports' rows as the CSVs hold them, and Figure 2's fit
records its history without changing the fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orderlib.data.entailment import PairSet
from orderlib.experiments import oe_snli_walkthrough as sw
from orderlib.experiments import oe_toy2d as toy
from orderlib.experiments import oe_wordnet_walkthrough as ww


def test_energy_check_matches_the_library():
    table, by_hand, library = toy.energy_check()
    assert by_hand == pytest.approx(library) == pytest.approx(0.5)
    assert list(table["E by hand"]) == pytest.approx(list(table["E, library"]))


def test_fit_history_changes_nothing_of_the_fit():
    tree = toy.Subtree(["a", "b", "c", "d"], [[], [0], [0], [1]])
    fit = toy.fit_2d(tree, steps=60, every=20)
    again = toy.fit_2d(tree, steps=60, every=7)
    assert np.array_equal(fit["x"], again["x"])
    assert [h["epoch"] for h in fit["history"]] == [0, 20, 40, 59]
    assert fit["history"][-1]["wrong pairs"] >= 0 and fit["history"][0]["loss"] > 0
    rows = toy.figure2_rows(fit)
    assert list(rows.metric) == list(toy.PAPER_FIGURE2) and list(rows.paper) == [0, 2]


def test_sweep_claims_count_seeds():
    sweep = pd.DataFrame({"seed": [0, 1, 2], "missed": [0, 0, 1], "spurious": [3, 2, 9]})
    c = toy.sweep_claims(sweep, 24).set_index("claim")
    assert c.loc["all 24 true pairs embedded", "verdict"] == "holds in 2 of 3 seeds"
    assert c.iloc[1]["over seeds"] == "spurious: 2 to 9" and c.iloc[1]["verdict"] == "2 or fewer in 1 of 3 seeds"


def _rows(setting, method, values, sd=None, paper=None, metric="test accuracy (%)"):
    protocol, split = ww.exp.SETTINGS[setting]
    seeds = [str(i) for i in range(len(values))] if len(values) > 1 else ["none"]
    out = [dict(method=method, metric=metric, paper=None, ours=v, sd=None, seed=s) for s, v in zip(seeds, values)]
    if len(values) > 1:
        out.append(dict(method=method, metric=metric, paper=paper, ours=float(np.mean(values)), sd=sd, seed="mean"))
    return [{**r, "protocol": protocol, "split": split} for r in out]


def _frame():
    a = "paper, authors' split"
    rows = (
        _rows(a, "transitive closure", [88.21], paper=88.2)
        + _rows(a, "order-embeddings", [90.7, 90.8, 90.9], sd=0.1, paper=90.6)
        + _rows(a, "word2gauss", [88.3, 88.1, 88.0], sd=0.15, paper=86.6)
        + _rows("clean", "order-embeddings", [97.9, 98.0], sd=0.07, paper=90.6)
    )
    return pd.DataFrame(rows)


def test_table1_side_by_side_blanks_the_paper_on_the_clean_protocol():
    rows, methods, metrics = ww.side_by_side_rows(_frame())
    t = rows.set_index(["method", "metric"])
    assert t.loc[("order-embeddings", "test acc. (%), authors' split"), "ours"] == "90.80 ± 0.10"
    assert t.loc[("order-embeddings", "test acc. (%), authors' split"), "paper"] == 90.6
    assert pd.isna(t.loc[("order-embeddings", "test acc. (%), clean protocol"), "paper"])
    assert t.loc[("transitive closure", "test acc. (%), authors' split"), "ours"] == "88.21"
    assert methods[0] == "transitive closure"


def test_table1_claims_pair_the_closure_with_every_seed():
    c = ww.claims(_frame(), settings=["paper, authors' split"]).set_index("claim")
    assert c.loc["order-embeddings beat the transitive closure", "verdict"] == "holds beyond the spread"
    assert c.loc["order-embeddings beat the transitive closure", "seeds"] == 3
    assert c.loc["the transitive closure beats word2gauss", "verdict"] == "within the spread"
    assert "density order embeddings beat order-embeddings" not in c.index  # no such rows: not judged


def test_table3_claims_and_examples():
    df = pd.DataFrame(
        [
            dict(method="order-embeddings", metric="SNLI test 2-class accuracy (%)", paper=88.6, ours=74.0),
            dict(method="order-embeddings (symmetric)", metric="SNLI test 2-class accuracy (%)", paper=79.3, ours=70.0),
            dict(method="skip-thoughts", metric="SNLI test 2-class accuracy (%)", paper=87.7, ours=None),
            dict(method="GRU features + MLP", metric="SNLI test 2-class accuracy (%)", paper=None, ours=75.0),
        ]
    )
    c = sw.claims(df).set_index("claim")
    assert c.loc["order-embeddings beat the symmetric row", "ours a - b"] == 4.0
    assert c.loc["order-embeddings beat the symmetric row", "paper a - b"] == 9.3
    assert c.loc["order-embeddings beat the skip-thoughts stand-in", "paper a - b"] == 0.9
    assert (
        c.loc["order-embeddings beat the skip-thoughts stand-in", "verdict"]
        == "opposite sign, one seed, against a stand-in"
    )
    assert c.loc["order-embeddings beat the symmetric row", "verdict"] == "holds, one seed"
    long = "p2 " * 60  # the premise whole, however long
    pairs = PairSet(["p1", long, long, long], ["a", "b", "c", "d"], np.array([0, 2, 0, 1], np.int8), "x")
    ex = sw.pair_examples(pairs)
    assert list(ex["hypothesis"]) == ["c", "d", "b"] and ex.attrs["premise"] == long
    assert list(ex["2-class"]) == ["entailment", "not entailment", "not entailment"]


def test_table3_view_gives_each_dataset_its_table():
    """SNLI beside the paper's Table 3, SICK alone (the paper has no SICK column to show)."""
    rows = [
        ("order-embeddings", 88.6, 75.6, 79.8),
        ("skip-thoughts", 87.7, None, None),
        ("majority class", None, 65.7, 71.4),
    ]
    df = pd.DataFrame(
        [dict(method=m, metric="SNLI test 2-class accuracy (%)", paper=p, ours=o) for m, p, o, _ in rows]
        + [dict(method=m, metric="SICK test 2-class accuracy (%)", paper=None, ours=s) for m, _, _, s in rows if s]
    )
    runs = {
        "snli": {"pairs": ([0] * 8858, [], []), "how": "SNLI dev minus a 10% held-out part"},
        "sick": {"pairs": ([0] * 4439, [], []), "how": "SICK: train on train"},
    }
    snli, sick = sw.table3_view(df, runs).values()
    assert list(snli.columns) == ["method", "paper", "ours", "ours ran on"] and "paper" not in sick.columns
    assert snli.set_index("method").loc["skip-thoughts", "ours ran on"] == ""  # the paper's row only
    assert sick.set_index("method").loc["order-embeddings", "ours ran on"] == "4,439 SICK train pairs; real SICK test"
    assert (
        "8,858 SNLI dev pairs (no SNLI train: stand-in)"
        in snli.set_index("method").loc["order-embeddings", "ours ran on"]
    )
