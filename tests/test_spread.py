"""orderlib.spread: a paired claim over seeds is judged against the spread of its differences."""

import pandas as pd
import pytest

from orderlib import spread


def test_verdict_holds_only_when_every_seed_agrees_and_the_mean_clears_the_sd():
    assert spread.verdict([0.76, 0.75, 0.77], [0.74, 0.74, 0.74]) == spread.HOLDS
    assert spread.verdict([0.756, 0.731, 0.75], [0.742, 0.748, 0.74]) == spread.WITHIN  # one seed flips
    assert spread.verdict([1.0, 1.0, 1.0], [2.0, 2.5, 2.2]) == spread.REVERSED
    # every seed agrees, but the mean difference is within one sd of it
    assert spread.verdict([1.1, 1.1, 5.0], [1.0, 1.0, 1.0]) == spread.WITHIN
    assert spread.verdict([2, 3], [1, 1], higher_is_better=False) == spread.REVERSED
    with pytest.raises(ValueError, match="at least 2 seeds"):
        spread.verdict([1.0], [0.0])


def test_summary_and_claims_pair_rows_by_seed():
    df = pd.DataFrame(
        [
            dict(method=m, metric="hit@1", seed=s, ours=v)
            for m, vs in (("a", [3, 4, 5]), ("b", [1, 1, 2]))
            for s, v in enumerate(vs)
        ]
    )
    stats = spread.summary(df, ["method", "metric"]).set_index(["method", "statistic"])["ours"]
    assert (
        stats[("a", "mean")] == 4
        and stats[("a", "sd")] == 1
        and stats[("b", "max")] == 2
        and stats[("a", "seeds")] == 3
    )
    got = spread.claims(df.iloc[::-1], [("a beats b", "hit@1", "a", "b")]).iloc[0]
    assert got.seeds == 3 and got.mean_difference == pytest.approx(8 / 3) and got.verdict == spread.HOLDS


def test_long_table_holds_seeds_summary_and_claims_with_their_verdict():
    df = pd.DataFrame(
        [
            dict(table="T", method=m, metric="hit@1", paper=p, seed=s, ours=v)
            for m, p, vs in (("a", 5.0, [3, 4, 5]), ("b", None, [1, 1, 2]))
            for s, v in enumerate(vs)
        ]
    )
    claims = spread.claims(df, [("a beats b", "hit@1", "a", "b")]).assign(table="T")
    out = spread.long_table(df, claims, ["table", "method", "metric"])
    assert list(out.columns) == ["table", "method", "metric", "statistic", "paper", "ours", "verdict"]
    assert len(out) == 6 + 2 * 5 + 2  # 6 seed rows, 5 statistics per row, 2 per claim
    seed1 = out[(out.method == "a") & (out.statistic == "seed 1")].iloc[0]
    assert seed1.ours == 4 and seed1.paper == 5.0 and seed1.verdict is None
    mean = out[(out.method == "a beats b") & (out.statistic == "mean of a - b")].iloc[0]
    assert mean.ours == pytest.approx(8 / 3) and mean.verdict == spread.HOLDS and mean.table == "T"
    assert out[out.statistic == "sd of a - b"].ours.iloc[0] == pytest.approx(0.57735, abs=1e-5)


def test_write_report_writes_every_seed_and_shows_the_summary(tmp_path):
    df = pd.DataFrame(
        [
            dict(method=m, metric="R@1", paper=None, seed=s, ours=v)
            for m, vs in (("a", [3, 4]), ("b", [1, 2]))
            for s, v in enumerate(vs)
        ]
    )
    claims = spread.claims(df, [("a beats b", "R@1", "a", "b")])
    meta = dict(preset="small", seed=[0, 1], device="cpu", data_source="toy", data_fingerprint="t", wall_time_s=0.0)
    paths = spread.write_report("toy_seed_spread", df, claims, ["method", "metric"], meta, tmp_path, "Toy", "Toy data.")
    csv = pd.read_csv(paths["csv"])
    assert {"seed 0", "seed 1", "mean", "sd", "mean of a - b"} <= set(csv.statistic)
    md = paths["md"].read_text()
    assert "seed 0" not in md and "holds beyond the spread" in md and "Toy data. 'seed N' rows" in md


def test_run_seeds_tags_rows_and_models_with_their_seed():
    def one(seed):
        return pd.DataFrame([dict(method="a", metric="m", ours=float(seed))]), {"cnn": {"s": seed}}, f"fp{seed}"

    rows, models, fps = spread.run_seeds([2, 0], one, progress=False)
    assert rows.seed.tolist() == [2, 0] and rows.ours.tolist() == [2.0, 0.0]
    assert models == {"seed 2, cnn": {"s": 2}, "seed 0, cnn": {"s": 0}} and fps == ["fp2", "fp0"]


def test_command_line_defaults_and_workers_flag():
    args = spread.command_line("doc", {"full": {}, "small": {}}, argv=[])
    assert (args.preset, args.seeds, args.workers) == ("full", [0, 1, 2], "auto")
    args = spread.command_line(
        "doc", {"full": {}, "small": {}}, workers=False, argv=["--preset", "small", "--seeds", "4"]
    )
    assert (args.preset, args.seeds, hasattr(args, "workers")) == ("small", [4], False)


def test_seed_folders_share_the_notebooks_checkpoints_only_for_its_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("ORDERLIB_RUNS", str(tmp_path))
    from orderlib.runs import run_paths

    folder = spread.seed_folders("utama", "utama_seeds", "small", 0)
    assert folder(0) == run_paths("utama", "small").checkpoints
    assert folder(2) == run_paths("utama_seeds", "small").checkpoints / "seed2"
    assert folder(0) != folder(2).parent
