"""The walkthrough helpers of notebooks 06 and 07: the hand-worked Eq. (1) agrees with the library,
histories run on across the fine-tuning stage, the rows they show exist in the committed reports
and fit one side-by-side table, and the seed-spread reports are found where a benchmark moved the
reports folder."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from orderlib.experiments import devise_walkthrough as dw
from orderlib.paths import REPORTS_ENV, repo_root
from orderlib.viz import side_by_side, verdicts

TABLES = repo_root() / "reports" / "tables"


def test_hinge_example_matches_the_library():
    table, loss = dw.hinge_example()
    assert loss["hinge_rank, full sum"] == pytest.approx(loss["Eq. (1) by hand (sum of terms)"], abs=1e-4)
    assert loss["hinge_rank, first violator (mean of 2,000 orders)"] == pytest.approx(
        loss["mean of the violating terms"], abs=0.01
    )
    assert table["hinge term"].iloc[0] == 0 and table["hinge term"].iloc[-1] == 0  # the truth, and a far label


def test_histories_run_on_into_fine_tuning():
    trained = {
        "histories": {
            "softmax baseline": [{"epoch": e, "loss": 1.0, "held_out_accuracy": 50.0 + e} for e in range(3)],
            "devise": [{"epoch": e, "loss": 0.1, "held_out_hit@1": 60.0, "stage": "frozen CNN"} for e in range(2)]
            + [{"epoch": 0, "loss": 0.1, "held_out_hit@1": 61.0, "stage": "fine-tuned"}],
        }
    }
    h = dw.training_histories(trained)
    assert [r["epoch"] for r in h["devise"]] == [0, 1, 2]
    assert [r[dw.SELECTION] for r in h["softmax baseline"]] == [50.0, 51.0, 52.0]


@pytest.mark.parametrize(
    "table_id, rows",
    [("devise_table1", dw.TABLE1_ROWS), ("devise_zeroshot", dw.TABLE4_ROWS), ("devise_zeroshot", dw.TABLES23_ROWS)],
)
def test_side_by_side_rows_exist_and_fit(table_id, rows):
    df = pd.read_csv(TABLES / f"{table_id}.csv")
    shown = side_by_side(df, data="stand-in", **rows)
    assert len(shown) == len(rows["methods"]) * len(rows["metrics"]) <= 25


def test_claims_and_seed_rows_are_in_the_reports():
    assert len(verdicts("devise_seed_spread", tables=TABLES, claims=dw.TABLE1_CLAIMS)) == 8
    # zero-shot: 6 claims, and 3 on the paper's Table 3 (DeViSE-0 above softmax)
    assert len(verdicts("devise_seed_spread", tables=TABLES, claims=dw.ZEROSHOT_CLAIMS)) == 9
    rows = dw.seed_rows("devise_seed_spread", dw.TABLE1_SEED_ROWS + dw.ZEROSHOT_SEED_ROWS, TABLES)
    assert list(rows.columns)[1:] == ["metric", "mean ± sd", "seed 0", "seed 1", "seed 2"]
    commit = json.loads((TABLES / "devise_seed_spread.meta.json").read_text())["git_commit"][:7]
    assert rows.columns[0].startswith(f"row (devise_seed_spread, commit {commit}, 20")  # which run wrote it
    claims = [c for c in verdicts("devise_seed_spread", tables=TABLES).columns if c.startswith("claim")]
    assert len(claims) == 1 and claims[0].startswith(f"claim (devise_seed_spread, commit {commit}, 20")
    assert len(dw.seed_rows("devise_pair_labels", dw.PAIR_SEED_ROWS, TABLES)) == 4
    with pytest.raises(KeyError):
        dw.seed_rows("devise_seed_spread", [("no such row", "hit@1")], TABLES)


def test_spread_reports_found_when_a_benchmark_moves_the_reports(tmp_path, monkeypatch):
    monkeypatch.setenv(REPORTS_ENV, str(tmp_path))
    assert dw.spread_tables() == TABLES
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "devise_seed_spread.csv").write_text("method\n")
    assert dw.spread_tables() == tmp_path.resolve() / "tables"


def test_zero_shot_figure_draws_every_set():
    import matplotlib

    matplotlib.use("Agg")
    fig = dw.plot_zero_shot(pd.read_csv(TABLES / "devise_zeroshot.csv"))
    assert len(fig.axes) == 6 and "1,589" in fig.axes[0].get_title()


def test_made_names_the_run_or_only_the_report(tmp_path):
    from orderlib.viz import made

    (tmp_path / "r.csv").write_text("method,metric\n")
    assert made(tmp_path / "r.csv") == "r"  # no provenance beside it
    (tmp_path / "r.meta.json").write_text(json.dumps({"git_commit": "0123456789abc", "created": "2026-12-02T11:00:00"}))
    assert made(tmp_path / "r.csv") == "r, commit 0123456, 2026-12-02"
