"""The walkthrough helpers of notebooks 08 and 09: the hand-worked checks agree with the library,
examples are classified as the figures colour them, histories run on across training phases."""

from __future__ import annotations

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
