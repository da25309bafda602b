"""Table 1's runner: settings, checkpoint names, and the seed tables readers cite."""

import math

import pytest

from orderlib.eval.hypernymy import transitive_closure_accuracy
from orderlib.experiments import oe_wordnet as X
from orderlib.experiments import oe_wordnet_tables as tables
from orderlib.params import validate


def test_settings_follow_protocols_and_split():
    assert X.settings(["paper", "clean"], "both") == ["paper", "paper, authors' split", "clean"]
    assert X.settings(["paper", "clean"], "authors") == ["paper, authors' split"]
    assert X.settings(["clean"], "ours") == ["clean"]
    their = "paper, Athiwaratkun & Wilson's split"
    assert X.settings(["paper", "clean"], "athiwaratkun") == [their]
    assert X.settings(["paper", "clean"], "all") == ["paper", "paper, authors' split", their, "clean"]
    assert X.settings(["paper", "clean"]) == X.settings(["paper", "clean"], "all")  # the default: every split
    assert X.settings(["clean"], "athiwaratkun") == []
    with pytest.raises(ValueError, match="SPLIT"):
        validate(X.PARAMETERS, SPLIT="theirs")
    with pytest.raises(ValueError, match="WORKERS"):
        validate(X.PARAMETERS, WORKERS=0)


def test_checkpoint_names_are_safe_and_shared_by_equal_configs(tmp_path):
    cfg = X.PRESETS["full"]
    row = dict(setting="paper, authors' split", method="Poincaré embeddings", cfg=cfg, device="cpu", run_dir=tmp_path)
    a = X.training_job(kind="grid", seed=0, cost=1.0, **row)
    b = X.training_job(kind="train", seed=0, cost=1.0, **row)
    c = X.training_job(kind="train", seed=1, cost=1.0, **row)
    d = X.training_job(kind="train", seed=0, cost=1.0, overrides={"lr": 0.1}, **row)
    name = a["checkpoint"].rsplit("/", 1)[1]
    assert name.isascii() and " " not in name and "'" not in name and name.startswith("paper-authors-split-poincare")
    assert a["checkpoint"] == b["checkpoint"]
    assert len({b["checkpoint"], c["checkpoint"], d["checkpoint"]}) == 3


def test_grids_choose_on_dev_ties_to_the_point_listed_first():
    grid = X.dev_grid("word2gauss margin", "word2gauss", [{"margin": m} for m in (1.0, 3.0, 7.0)])

    def results(*devs):
        return [{"grid": grid["name"], "point": p, "dev": d} for p, d in zip(grid["points"], devs)]

    assert X.choose(grid, results(80.0, 81.0, 81.0)) == ({"margin": 3.0}, {1.0: 80.0, 3.0: 81.0, 7.0: 81.0})
    assert X.choose(grid, results(80.0, 81.0, 81.5))[0] == {"margin": 7.0}
    other = [{"grid": "bilinear lr", "point": {"margin": 1.0}, "dev": 99.0}]  # another grid's run is ignored
    assert X.choose(grid, other + results(80.0, 79.0, 79.0))[0] == {"margin": 1.0}
    assert X.point_label({"negatives": ("swap", "sibling")}) == "random + swap + sibling"
    assert X.point_label({"lr": 0.003, "model_kwargs": {"gamma": 100.0}}) == "lr 0.003, gamma 100"
    assert X.point_label({"lr": 0.01}) == 0.01


def test_density_grid_stages_share_the_final_seed0_run(tmp_path):
    cfg = X.PRESETS["full"]
    first = X.grid_jobs(cfg, "paper", "cpu", tmp_path, 1)
    assert [j["grid"] for j in first].count("density order embeddings negatives") == len(X.DOE_NEGATIVES)
    assert all(j["grid"] != "density order embeddings lr x gamma" for j in first)
    # stage 1 runs on their command's 20 epochs, not the final schedule: its checkpoints are its own
    neg = [j for j in first if j["method"] == X.DOE]
    assert {j["overrides"]["epochs"] for j in neg} == {20} and cfg["models"][X.DOE]["epochs"] != 20
    # stage 2 starts from stage 1's choice and is the final seed-0 run for the chosen point
    second = X.grid_jobs(cfg, "paper", "cpu", tmp_path, 2, {X.DOE: {"negatives": ("swap",)}})
    assert len(second) == 8 and all(j["overrides"]["negatives"] == ("swap",) for j in second)
    chosen = {"negatives": ("swap",), "lr": 0.003, "model_kwargs": {"gamma": 100.0}}
    final = X.training_job(
        kind="train",
        setting="paper",
        method=X.DOE,
        seed=0,
        cfg=cfg,
        device="cpu",
        run_dir=tmp_path,
        cost=1.0,
        overrides=chosen,
    )
    assert [j["checkpoint"] for j in second].count(final["checkpoint"]) == 1
    assert final["checkpoint"] not in [j["checkpoint"] for j in neg]
    # the bilinear grid runs the final schedule: its chosen point is the final seed-0 run
    bil = [j for j in first if j["method"] == "order-embeddings (bilinear)"]
    bil_final = X.training_job(
        kind="train",
        setting="paper",
        method="order-embeddings (bilinear)",
        seed=0,
        cfg=cfg,
        device="cpu",
        run_dir=tmp_path,
        cost=1.0,
        overrides={"lr": 0.003},
    )
    assert bil_final["checkpoint"] == bil[1]["checkpoint"]


def _fake_run():
    def res(seed, test):
        return {
            "seed": seed,
            "test": test,
            "dev": test + 0.5,
            "best_test_over_epochs": test + 1,
            "epochs_run": 3,
            "best_epoch": 2,
            "history": [],
            "seconds": 1.0,
            "resumed": False,
            "config": {},
        }

    results = {
        "order-embeddings": [res(1, 91.0), res(0, 90.0), res(2, 92.0)],
        "density order embeddings": [res(0, 91.5), res(1, 91.5), res(2, 91.5)],
    }
    return X.Table1Run({"paper": X.SettingRun("paper", {}, 87.61250000000001, {}, results)})


def test_table_reports_mean_sd_and_each_seed_rounded():
    t = tables.table(_fake_run(), "paper")
    oe = t[(t.method == "order-embeddings") & (t.metric == "test accuracy (%)")]
    mean = oe[oe.seed == "mean"].iloc[0]
    assert mean.ours == 91.0 and mean.sd == 1.0 and mean.n_seeds == 3 and mean.paper == 90.6
    assert list(oe[oe.seed != "mean"].seed) == ["0", "1", "2"] and list(oe[oe.seed != "mean"].ours) == [90, 91, 92]
    assert t[t.method == "transitive closure"].ours.iloc[0] == 87.61  # no floating-point noise
    doe = t[(t.method == "density order embeddings") & (t.seed == "mean") & (t.metric == "test accuracy (%)")].iloc[0]
    assert math.isnan(doe.paper) and doe.published == 92.3  # beyond the paper: no paper cell
    assert tables.markdown_view(t).ours.tolist()[:2] == ["87.61", "91.00 ± 1.00"]
    g = tables.gains(_fake_run(), "paper").set_index("method")
    assert g.loc["density order embeddings"].gain_over_order_embeddings == 0.5
    assert g.loc["density order embeddings"].se == round(math.sqrt(1 / 3), 2)


def test_a_run_is_read_by_protocol_and_split_not_by_setting_names():
    facts = {
        "test positives also in train": 800,
        "test negatives that are true pairs": 550,
        "accuracy ceiling (%)": 93.1,
    }
    authors = X.SettingRun("paper, authors' split", {}, 88.2, facts, {"order-embeddings": []})
    run = X.Table1Run({"paper": _fake_run().settings["paper"], authors.name: authors}, 60.0, 2)
    assert run.setting("paper", "authors") is authors and run.setting("clean", "ours") is None
    assert (authors.protocol, authors.split) == ("paper", "authors")
    assert (authors.test_positives_in_train, authors.true_test_negatives, authors.accuracy_ceiling) == (800, 550, 93.1)
    assert run.setting("paper", "ours").test_accuracies("order-embeddings") == [90.0, 91.0, 92.0]  # seed order


def test_model_records_give_each_seed_runs_training_provenance():
    from orderlib.reports import training_provenance

    run = _fake_run()
    doe = run.settings["paper"].results["density order embeddings"]
    doe[0].update(resumed=True, trained_at="old", seconds=2.5)  # a dev grid's run, loaded from its checkpoint
    for rs in run.settings["paper"].results.values():
        for x in rs:
            x.setdefault("trained_at", "abc")
    recs = tables.model_records(run, ["paper"])
    assert len(recs) == 6 and recs["paper / density order embeddings / seed 0"]["loaded_from_checkpoint"]
    assert sum(not r["loaded_from_checkpoint"] for r in recs.values()) == 5
    block = training_provenance(recs, "abc")
    assert block["train_seconds_total"] == 7.5 and block["trained_at_other_commit"] == [
        "paper / density order embeddings / seed 0"
    ]


def test_doe_gamma_benchmark_trains_each_gamma_and_schedule_as_configured(tmp_path, benchmark_module):
    B, cfg = benchmark_module("doe_gamma"), X.PRESETS["full"]
    jobs = B.point_jobs(cfg, "paper", [0, 1], 0.001, [100.0, 50.0], {}, tmp_path)
    configs = [X.model_config(j["method"], cfg, j["seed"], **j["overrides"]) for j in jobs]
    assert [(c.model_kwargs["gamma"], c.seed) for c in configs] == [(100.0, 0), (100.0, 1), (50.0, 0), (50.0, 1)]
    assert all(c.lr == 0.001 and c.negatives == () and c.epochs == 40 and c.patience == 5 for c in configs)
    assert len({j["checkpoint"] for j in jobs}) == 4
    # the notebook's final seed-0 run has exactly this config: the same checkpoint name
    final = X.training_job(
        kind="train",
        setting="paper",
        method=X.DOE,
        seed=0,
        cfg=cfg,
        device="cpu",
        run_dir=tmp_path,
        cost=1.0,
        overrides={"negatives": (), "lr": 0.001, "model_kwargs": {"gamma": 100.0}},
    )
    assert final["checkpoint"] == jobs[0]["checkpoint"]
    long = B.point_jobs(cfg, "paper", [0], 0.001, [100.0], B.LONG, tmp_path)[0]
    c = X.model_config(long["method"], cfg, 0, **long["overrides"])
    assert (c.epochs, c.patience) == (60, 10) and long["checkpoint"] != jobs[0]["checkpoint"]
    result = {
        "overrides": long["overrides"],
        "config": vars(c),
        "seed": 0,
        "dev": 92.5,
        "test": 92.3,
        "best_test_over_epochs": 92.4,
        "epochs_run": 33,
    }
    rows = B.rows_of([result], "longer")
    assert [(r["metric"], r["ours"], r["gamma"], r["lr"], r["seed"]) for r in rows] == [
        ("dev accuracy (%)", 92.5, 100.0, "0.001", "0"),
        ("test accuracy (%)", 92.3, 100.0, "0.001", "0"),
        ("test accuracy, best epoch chosen on test (%)", 92.4, 100.0, "0.001", "0"),
        ("epochs trained", 33, 100.0, "0.001", "0"),
    ]  # one seed: no mean row
    assert [r["published"] for r in rows] == [None, 92.3, None, None]
    assert {(r["negatives"], r["epochs"], r["patience"], r["block"]) for r in rows} == {("random", 60, 10, "longer")}
    swap = B.point_jobs(cfg, "paper", [0], 0.001, [100.0], {}, tmp_path, ("swap",))[0]
    assert X.model_config(swap["method"], cfg, 0, **swap["overrides"]).negatives == ("swap",)
    two = B.rows_of([result, {**result, "seed": 1, "test": 92.1}], "longer")
    mean = [r for r in two if r["seed"] == "mean" and r["metric"] == "test accuracy (%)"]
    assert len(mean) == 1 and mean[0]["ours"] == pytest.approx(92.2) and mean[0]["n_seeds"] == 2
    assert mean[0]["sd"] == round(math.sqrt(0.02), 2)  # rounded as cited


def test_table1_auto_device_stays_on_the_cpu_where_the_compiled_step_builds(monkeypatch):
    import torch

    from orderlib.concepts import compiled
    from orderlib.runs import resolve_device

    def table1_device(value):
        return resolve_device(value, prefer=X.preferred_device()).type

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(compiled, "concept_step_kernel", lambda: object())
    assert table1_device("auto") == "cpu"  # a GPU is there, the compiled CPU step too
    assert table1_device("cuda") == "cuda"  # asked for
    monkeypatch.setattr(compiled, "concept_step_kernel", lambda: None)
    assert table1_device("auto") == "cuda"  # no compiled step: the GPU's PyTorch step
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert table1_device("auto") == "cpu"


def test_table1_auto_workers_are_one_per_thread_up_to_its_cap(monkeypatch):
    import torch

    from orderlib.training.workers import resolve_workers

    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert resolve_workers("auto", "cpu", X.MAX_WORKERS) == 2  # a 2-core machine: two processes, as before
    monkeypatch.setattr(torch, "get_num_threads", lambda: 32)
    assert resolve_workers("auto", "cpu", X.MAX_WORKERS) == X.MAX_WORKERS == 8


def test_doe_selection_reads_the_authors_log_and_applies_each_rule(tmp_path, benchmark_module):
    B = benchmark_module("doe_selection")
    log = tmp_path / "hyp_prediction.log"
    log.write_text(
        "{\n  lr : 0.01\n}\nEpoch 1 Batch 10 Error 5.0\t\n"
        "Number of positives, negatives, tp, tn: 4000 4000 1 2\t\n"
        "Best accuracy 0.70 at threshold 29739.75\t\ncontrastive_trans_s1-1 Accuracy 0.68\t\n"
        "Epoch 2 Batch 20 Error 4.0\t\nBest accuracy 0.90 at threshold 100.5\t\n"
        "contrastive_trans_s1-1 Accuracy 0.85\t\nEpoch 3 Batch 30 Error 3.0\t\n"
        "Best accuracy 0.80 at threshold 90\t\ncontrastive_trans_s1-1 Accuracy 0.91\t\n"
    )
    recs = B.read_authors_log(log)
    assert [(r["epoch"], round(r["dev"], 6), round(r["test"], 6)) for r in recs] == [
        (0, 70, 68),
        (1, 90, 85),
        (2, 80, 91),
    ]
    rows = {r["metric"]: r for r in B.rows_of(recs, "their command", "authors", "1234")}
    assert rows["test accuracy, evaluation chosen on dev (%)"]["ours"] == pytest.approx(85)
    assert rows["test accuracy, evaluation chosen on dev (%)"]["chosen_epoch"] == 2
    assert rows["test accuracy, evaluation chosen on test (their rule) (%)"]["ours"] == pytest.approx(91)
    assert rows["test accuracy at the last evaluation (%)"]["ours"] == pytest.approx(91)
    assert rows["evaluations"]["ours"] == 3
    assert not any("epoch chosen" in m for m in rows)  # a log marks no epoch ends
    (tmp_path / "empty.log").write_text("Epoch 1 Batch 10 Error 5.0\n")
    with pytest.raises(ValueError, match="empty.log: no 'Best accuracy"):
        B.read_authors_log(tmp_path / "empty.log")


def test_athiwaratkun_split_is_createdatasets_on_wordnet_30(real_wordnet):
    """Their split: the authors' split code on WordNet 3.0, whose counts their script's comments give."""
    from orderlib.data.wordnet import load_noun_graph

    g31 = load_noun_graph("3.1")
    setting = "paper, Athiwaratkun & Wilson's split"
    assert X.setting_graph(g31, "paper") is g31
    g = X.setting_graph(g31, setting)
    assert (g.version, len(g.names), g.n_edges) == ("3.0", 82115, 84427)
    d = X.setting_data(g31, setting, X.PRESETS["full"])
    assert d.stats["listed pairs"] == 837888 and d.split == "authors"
    assert (len(d.test), len(d.dev), d.n_nodes) == (8000, 8000, 82115)
    assert round(transitive_closure_accuracy(d), 2) == 87.70  # oe_table1_doe_selection's closure row
