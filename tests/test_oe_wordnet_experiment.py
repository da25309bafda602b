"""Table 1's runner: settings, checkpoint names, and the seed tables readers cite."""
import math

import pytest

from orderlib.experiments import oe_wordnet as X
from orderlib.params import validate


def test_settings_follow_protocols_and_split():
    assert X.settings(["paper", "clean"], "both") == ["paper", "paper, authors' split", "clean"]
    assert X.settings(["paper", "clean"], "authors") == ["paper, authors' split"]
    assert X.settings(["clean"], "ours") == ["clean"]
    with pytest.raises(ValueError, match="SPLIT"):
        validate(X.PARAMETERS, SPLIT="theirs")
    with pytest.raises(ValueError, match="WORKERS"):
        validate(X.PARAMETERS, WORKERS=0)


def test_checkpoint_names_are_safe_and_shared_by_equal_configs(tmp_path):
    cfg = X.PRESETS["full"]
    a = X._job("grid", "paper, authors' split", "Poincaré embeddings", 0, cfg, "cpu", tmp_path, 1.0)
    b = X._job("train", "paper, authors' split", "Poincaré embeddings", 0, cfg, "cpu", tmp_path, 1.0)
    c = X._job("train", "paper, authors' split", "Poincaré embeddings", 1, cfg, "cpu", tmp_path, 1.0)
    d = X._job("train", "paper, authors' split", "Poincaré embeddings", 0, cfg, "cpu", tmp_path, 1.0, {"lr": 0.1})
    name = a["checkpoint"].rsplit("/", 1)[1]
    assert name.isascii() and " " not in name and "'" not in name and name.startswith("paper-authors-split-poincare")
    assert a["checkpoint"] == b["checkpoint"]
    assert len({b["checkpoint"], c["checkpoint"], d["checkpoint"]}) == 3


def test_grids_choose_on_dev_with_stated_tiebreaks(tmp_path):
    def point(method, key, value, dev):
        return {"method": method, "overrides": {key: value}, "dev": dev}
    margins = [point("word2gauss", "margin", m, d) for m, d in [(1.0, 80.0), (3.0, 81.0), (7.0, 81.0)]]
    assert X.choose(margins, "word2gauss", "margin") == (3.0, {1.0: 80.0, 3.0: 81.0, 7.0: 81.0})
    assert X.choose(margins, "word2gauss", "margin", prefer_small=False)[0] == 7.0
    kinds = [point("density order embeddings", "negatives", k, d)
             for k, d in [((), 92.0), (("swap",), 92.0), (("swap", "sibling"), 90.1)]]
    assert X.choose(kinds, "density order embeddings", "negatives")[0] == ()  # tie: the one listed first
    kinds[1]["dev"] = 92.2
    assert X.choose(kinds, "density order embeddings", "negatives")[0] == ("swap",)
    # the grid's plain point is the final seed-0 run: one checkpoint, one training
    cfg = X.PRESETS["full"]
    grid = [j for j in X.grid_jobs(cfg, "paper", "cpu", tmp_path) if j["method"] == "density order embeddings"]
    assert [j["overrides"]["negatives"] for j in grid] == X.DOE_NEGATIVES
    final = X._job("train", "paper", "density order embeddings", 0, cfg, "cpu", tmp_path, 1.0, {"negatives": ()})
    assert grid[0]["checkpoint"] == final["checkpoint"]
    assert X.negatives_label(("swap", "sibling")) == "random + swap + sibling"


def _fake_run():
    def res(seed, test):
        return {"seed": seed, "test": test, "dev": test + 0.5, "best_test_over_epochs": test + 1,
                "epochs_run": 3, "history": [], "seconds": 1.0, "resumed": False, "config": {}}
    return {"settings": {"paper": {"closure": 87.61250000000001, "facts": {}, "grids": {}, "results": {
        "order-embeddings": [res(1, 91.0), res(0, 90.0), res(2, 92.0)],
        "density order embeddings": [res(0, 91.5), res(1, 91.5), res(2, 91.5)]}}}}


def test_table_reports_mean_sd_and_each_seed_rounded():
    t = X.table(_fake_run(), "paper")
    oe = t[(t.method == "order-embeddings") & (t.metric == "test accuracy (%)")]
    mean = oe[oe.seed == "mean"].iloc[0]
    assert mean.ours == 91.0 and mean.sd == 1.0 and mean.n_seeds == 3 and mean.paper == 90.6
    assert list(oe[oe.seed != "mean"].seed) == ["0", "1", "2"] and list(oe[oe.seed != "mean"].ours) == [90, 91, 92]
    assert t[t.method == "transitive closure"].ours.iloc[0] == 87.61  # no floating-point noise
    doe = t[(t.method == "density order embeddings") & (t.seed == "mean") & (t.metric == "test accuracy (%)")].iloc[0]
    assert math.isnan(doe.paper) and doe.published == 92.3  # beyond the paper: no paper cell
    assert X.markdown_view(t).ours.tolist()[:2] == ["87.61", "91.00 ± 1.00"]
    g = X.gains(_fake_run(), "paper").set_index("method")
    assert g.loc["density order embeddings"].gain_over_order_embeddings == 0.5
    assert g.loc["density order embeddings"].se == round(math.sqrt(1 / 3), 2)
