"""What notebooks 03-05 show: the hand checks, the compact tables built from the reports, and the
helpers of Section 4.6 (orderlib.experiments.oe_retrieval_tables, oe_detail, oe_regularities)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from orderlib.experiments import oe_detail, oe_regularities
from orderlib.experiments import oe_retrieval_tables as t2
from orderlib.paths import reports_root
from orderlib.training.retrieval import CaptionedImages

CFG = {"data": "scenes", "n_train": 10000}


def _report(table_id: str) -> pd.DataFrame:
    return pd.read_csv(reports_root() / "tables" / f"{table_id}.csv")


def test_toy_energies_follow_eq2():
    t = t2.toy_energies().astype({"E(x, y)": float, "E(y, x)": float, "||x - y||²": float})
    assert t.loc["caption above the image", "E(x, y)"] == 0
    assert t.loc["caption below it", "E(y, x)"] == 0
    assert np.allclose(t["E(x, y)"] + t["E(y, x)"], t["||x - y||²"])


def test_toy_regularities_max_below_min_above():
    t = oe_regularities.toy_regularities()
    assert (t["E(x, y)"].astype(float).iloc[:4] == 0).all()  # max below a and b, min above them
    assert (t["E(x, y)"].astype(float).iloc[4:] > 0).all()  # a and b themselves unordered


def test_table2_fits_one_side_by_side_and_keeps_the_ceiling():
    df = _report("oe_table2_retrieval")
    t = t2.table2(df, CFG)
    assert len(t) == 25 and t["method"].iloc[-1] == t2.CEILING
    assert set(t[t.metric.str.startswith("5k")].method) == {"order-embeddings", "order-embeddings (symm.)"}
    assert len(t2.rsum_table(df, CFG)) == 8
    assert list(t2.tie_table(df).columns) == ["ours (expected)", "ties against", "ties for", "ties by index"]


def test_rule_changes_names_the_turning_metric():
    df = _report("oe_table2_retrieval")
    line, changed = t2.rule_changes(df)
    assert "21 of 22" in line and list(changed.index) == ["5k caption R@1"]
    same = df.assign(**{"ties for": df["ours"], "ties against": df["ours"], "ties by index": df["ours"]})
    assert t2.rule_changes(same)[1] is None


def test_texts_shared_counts_images_of_one_text():
    # three images; image 0's first caption and image 2's first caption read the same
    tokens = torch.tensor([[1, 2], [3, 0], [4, 0], [5, 0], [6, 0]] * 3)
    tokens[5] = torch.tensor([9, 0])  # image 1's first caption differs
    lengths = torch.tensor([2, 1, 1, 1, 1] * 3)
    split = CaptionedImages(torch.zeros(3, 1), tokens, lengths)
    assert oe_detail.texts_shared(split, [0, 5, 10]).tolist() == [2, 1, 2]
    t = oe_detail.pairs_table(split, np.array([[1, 0], [6, 5]]))
    assert list(t.index) == ["shorter captions", "longer captions"]


def test_tie_gap_is_zero_on_the_reports():
    assert oe_detail.tie_gap(_report("oe_sec46_detail")) == 0
    assert oe_regularities.tie_gap(_report("oe_fig4_regularities")) == 0


def test_regularities_results_show_short_labels_whole():
    t = oe_regularities.results(_report("oe_fig4_regularities"))
    assert len(t) == 14 and set(t.metric) == set(oe_regularities.SHORT.values())
    assert max(map(len, t.metric)) <= 50  # pandas' default column width: no label cut
