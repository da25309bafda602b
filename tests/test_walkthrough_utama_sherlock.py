"""The walkthrough helpers of notebooks 08 and 09: the hand-worked checks agree with the library,
examples are classified as the figures colour them, histories run on across training phases."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pandas as pd
import pytest

from orderlib.data.facts import Fact
from orderlib.experiments import sherlock_walkthrough as sw
from orderlib.experiments import utama_walkthrough as uw


def test_hinge_check_matches_the_library():
    table, by_hand, library = uw.hinge_check()
    assert by_hand == pytest.approx(library) == pytest.approx(0.5)
    assert list(table["hinge, phrase side"]) == pytest.approx([0.0, 0.35, 0.0])


def test_wildcard_check_puts_the_first_order_fact_first():
    t = sw.wildcard_check()
    assert list(t["distance by hand"]) == pytest.approx(list(t["structured_distance"]), abs=1e-3)
    assert t.loc["<sandal>", "rank"] == 1 and t.loc["<sandal, left of, bag>", "rank"] == 2


@pytest.mark.parametrize(
    "found, kind",
    [
        (Fact("bag", "left of", "coat"), "the queried fact"),
        (Fact("coat", "right of", "bag"), "same scene, other wording"),
        (Fact("coat", "left of", "bag"), "subject and object swapped"),
        (Fact("bag", "right of", "coat"), "subject and object swapped"),
        (Fact("bag", "above", "coat"), "another fact"),
        (Fact("bag"), "another fact"),
    ],
)
def test_retrieved_facts_are_classified_against_the_query(found, kind):
    assert sw.hit_kind(found, Fact("bag", "left of", "coat")) == kind


def test_intended_pair_replaces_the_modified_word():
    assert uw.intended_pair("red sandal", "attribute", "blue") == "blue sandal"
    assert uw.intended_pair("red sandal", "object", "bag") == "red bag"


def test_histories_number_finetune_epochs_on():
    fit = lambda n: SimpleNamespace(history=[{"epoch": e, "loss": 1.0, "val_auc": 2.0} for e in range(n)])
    h = uw.histories({"row": {"fits": [fit(3), fit(2)]}})
    assert [r["epoch"] for r in h["row"]] == [0, 1, 2, 3, 4]


def test_training_figure_rings_the_epoch_each_row_keeps():
    fit = lambda n, best: SimpleNamespace(
        history=[{"epoch": e, "loss": 1.0 + e, "val_auc": 10.0 * e} for e in range(n)], best_epoch=best
    )
    trained = {"frozen": {"fits": [fit(4, 2)]}, "+ finetune": {"fits": [fit(3, 2), fit(2, 0)]}}
    assert uw.chosen_epoch(trained["frozen"]) == 2 and uw.chosen_epoch(trained["+ finetune"]) == 3
    fig = uw.training_figure(trained)
    rings = [ln for ln in fig.axes[1].get_lines() if ln.get_markerfacecolor() == "none" and len(ln.get_xdata())]
    assert [(float(r.get_xdata()[0]), float(r.get_ydata()[0])) for r in rings] == [(3.0, 20.0), (4.0, 0.0)]


def test_transfer_figure_sizes_points_and_names_absent_attributes():
    rows = [
        ("frozen CNN features", a, "context dependence", d) for a, d in (("red", 0.3), ("wet", 0.9), ("small", 0.5))
    ]
    rows += [
        (uw.MAIN, a, m, v)
        for a, acc, n in (("red", 80.0, 200), ("wet", 20.0, 40))
        for m, v in (("pair top-1", acc), ("test images", n))
    ]
    df2 = pd.DataFrame([dict(section="per attribute", method=m, item=a, metric=k, ours=v) for m, a, k, v in rows])
    fig = uw.plot_transfer(df2, {"pair top-1": -1.0})
    ax = fig.axes[0]
    assert sorted(ax.collections[0].get_sizes()) == [40.0, 200.0]
    assert "no unseen test pair (not shown): small" in ax.get_xlabel()


def test_sherlock_training_figures_put_the_legend_below_the_curves():
    fit = lambda: SimpleNamespace(history=[{"epoch": e, "loss": 1.0, "dev mAP": 2.0 + e} for e in range(3)])
    figs = sw.training_figures({m: {"fit": fit()} for m in sw.SEM_ROWS[:2]})
    assert len(figs) == 1 and all(ax.get_legend() is None for ax in figs[0].axes)
    (legend,) = figs[0].legends
    assert [t.get_text() for t in legend.get_texts()] == sw.SEM_ROWS[:2]


def test_fact_curve_values_hold_every_point_plotted():
    grid = itertools.product((810, 117), ("SEM-A", "MV CCA"), sw.FACT_PROTOCOLS, (sw.ALL, sw.SAME_ORDER))
    scale = pd.DataFrame(
        [dict(facts=n, method=m, protocol=p, candidates=c, K1=float(k)) for k, (n, m, p, c) in enumerate(grid)]
    )
    grid = itertools.product(sw.FACT_PROTOCOLS, ("0", "51+"), ("SEM-A", "MV CCA", "ESZSL"))
    per_fact = pd.DataFrame([dict(bin=b, method=m, protocol=p, K10=50.0) for p, b, m in grid])
    t = sw.fact_curve_values(scale, per_fact)
    assert list(t.index) == ["SEM-A", "MV CCA", "ESZSL"] and t.shape == (3, 2 * (2 + 2 + 2))
    assert [c[2] for c in t.columns[:6]] == ["117", "810", "117", "810", "0", "51+"]
    k = scale.set_index(["method", "protocol", "candidates", "facts"])["K1"]
    assert t.loc["MV CCA", ("implied", "own order", "810")] == k[("MV CCA", "implied", sw.SAME_ORDER, 810)]
    assert (
        t.loc["ESZSL", ("strict", "Fig 4 K1: all", "117")] == "" and t.loc["ESZSL", ("strict", "Fig 7 K10", "0")] == 50
    )


def test_tie_line_names_the_methods_with_ties():
    ties = pd.DataFrame(
        [dict(method="a", protocol="strict", images=0, most=1), dict(method="a", protocol="implied", images=3, most=7)]
    )
    assert sw.tie_line(ties, 10).splitlines()[1:] == ["  strict: none", "  implied: a 3 (up to 7 facts)"]
