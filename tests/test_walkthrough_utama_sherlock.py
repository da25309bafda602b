"""The walkthrough helpers of notebooks 08 and 09: the hand-worked checks agree with the library,
examples are classified as the figures colour them, histories run on across training phases."""

from __future__ import annotations

from types import SimpleNamespace

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
