"""Training joint embeddings for retrieval (Section 4.4) on toy data, and Table 2's runner on a
generated precomp fixture."""

import numpy as np
import pytest
import torch
from toys import toy_split

from orderlib.training.retrieval import RetrievalConfig, prepare, retrieval_metrics_of_model, train_retrieval_model


@pytest.fixture(scope="module")
def toy():
    return prepare({"train": toy_split(400, 0), "dev": toy_split(100, 1), "test": toy_split(100, 2)})


@pytest.mark.parametrize("penalty,loss", [("order", "sum"), ("cosine", "sum"), ("order", "max"), ("order", "infonce")])
def test_models_learn_toy_retrieval(toy, penalty, loss):
    cfg = RetrievalConfig(
        penalty=penalty,
        loss=loss,
        margin=0.2 if penalty == "cosine" else 0.05,
        word_dim=8,
        dim=16,
        batch=50,
        lr=1e-2,
        epochs=6,
        patience=6,
    )
    before = retrieval_metrics_of_model(
        train_retrieval_model(toy, RetrievalConfig(**{**vars(cfg), "epochs": 0}), progress=False).model, toy.test
    )
    r = train_retrieval_model(toy, cfg, progress=False)
    after = retrieval_metrics_of_model(r.model, toy.test)
    # 100 test images in 20 colour-shape kinds: a "colour shape" caption can reach R@5 ~ 100.
    assert after["image retrieval"]["R@10"] > before["image retrieval"]["R@10"] + 15
    assert after["rsum"] > before["rsum"] + 60
    assert r.best_epoch == max(range(len(r.history)), key=lambda e: (r.history[e]["dev_score"], -e))


def test_resume_equals_uninterrupted_run(toy, interrupt_then_resume):
    import orderlib.training.retrieval as T

    cfg = RetrievalConfig(word_dim=8, dim=8, batch=64, epochs=3, patience=3)
    full = train_retrieval_model(toy, cfg, progress=False)
    resumed, _ = interrupt_then_resume(T, lambda c: train_retrieval_model(toy, cfg, checkpoint=c, progress=False), at=1)
    assert resumed.resumed and [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    assert retrieval_metrics_of_model(resumed.model, toy.test) == retrieval_metrics_of_model(full.model, toy.test)


def test_training_does_not_touch_global_rng(toy):
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    train_retrieval_model(toy, RetrievalConfig(word_dim=4, dim=4, epochs=1), progress=False)
    assert torch.equal(torch.rand(1), before)


def test_prepare_checks_five_captions_per_image():
    feats, caps = toy_split(3, 0)
    with pytest.raises(ValueError, match="14 captions for 3 images"):
        prepare({"train": (feats, caps[:14]), "dev": (feats, caps), "test": (feats, caps)})


def test_table2_runner_on_a_precomp_fixture(tmp_path):
    """The COCO path end to end: a generated coco_precomp folder, every row, long table with the
    paper's numbers on the paper's rows only."""
    from orderlib.experiments import oe_retrieval as X

    folder = tmp_path / "coco_precomp"
    folder.mkdir()
    for split, n, seed in (("train", 200, 0), ("dev", 100, 1), ("test", 1000, 2)):
        feats, caps = toy_split(n, seed)
        (folder / f"{split}_caps.txt").write_text("\n".join(" ".join(c) for c in caps) + "\n")
        np.save(folder / f"{split}_ims.npy", np.repeat(feats.numpy(), 5, 0))  # one row per caption
    data = {"10crop": X.precomp_retrieval_data(folder, "10crop", min_count=1)}  # no 1-crop file: row skipped
    cfg = {**X.PRESETS["small"], "word_dim": 4, "dim": 8, "epochs": 1, "batch": 100}
    trained = X.train_rows(data, cfg, "cpu", tmp_path / "ckpt", progress=False)
    assert "order-embeddings (1-crop)" not in trained.results and len(trained.results) == len(X.ROWS) - 1
    df = X.test_table(trained, cfg)
    assert set(df.metric) >= {"1k caption R@1", "1k image R@10", "1k image med r", "1k rsum"}
    paper = df.dropna(subset=["paper"]).set_index(["method", "metric"])["paper"]
    assert paper[("order-embeddings", "1k image R@1")] == 37.9
    assert paper[("order-embeddings (symm.)", "1k caption mean r")] == 5.8
    assert df[df.method.isin(X.EXTRA_ROWS)].paper.isna().all()
    assert df[df.metric.str.contains("R@5")].paper.isna().all()  # Table 2 prints no R@5
    assert (df.train_images == 200).all()
    # parity: the order-embeddings row's image retrieval recounted here from its penalty matrix,
    # expected rank under random tie-breaking = images strictly better + 1 + half the tied ones
    ims, caps = trained.test_embeddings("order-embeddings")
    e = trained.results["order-embeddings"].model.penalty_matrix(ims, caps).double().numpy()  # (1000, 5000)
    true = e[np.arange(5000) // 5, np.arange(5000)]
    ahead, tied = (e < true).sum(0), (e == true).sum(0) - 1
    row = df[df.method == "order-embeddings"].set_index("metric")["ours"]
    assert row["1k image R@10"] == pytest.approx(100 * np.clip((10 - ahead) / (tied + 1), 0, 1).mean())
    assert row["1k image mean r"] == pytest.approx((ahead + 1 + tied / 2).mean())
    again = X.train_rows(data, cfg, "cpu", tmp_path / "ckpt", progress=False)  # finished checkpoints load
    assert all(r.resumed for r in again.results.values())
    with pytest.raises(ValueError, match="unknown rows"):
        X.train_rows(data, cfg, "cpu", tmp_path / "ckpt", rows=["order-embedings"], progress=False)


def test_rows_trained_by_workers_equal_rows_trained_here_on_one_thread(tmp_path, one_thread):
    """Two one-thread worker processes train the rows into their checkpoints; the loaded models are
    those this process trains on one thread, and they count as trained in this run, not resumed."""
    from orderlib.experiments import oe_retrieval as X

    folder = tmp_path / "precomp"
    folder.mkdir()
    for split, n, seed in (("train", 200, 0), ("dev", 100, 1), ("test", 1000, 2)):
        feats, caps = toy_split(n, seed)
        (folder / f"{split}_caps.txt").write_text("\n".join(" ".join(c) for c in caps) + "\n")
        np.save(folder / f"{split}_ims.npy", np.repeat(feats.numpy(), 5, 0))
    data = {"10crop": X.precomp_retrieval_data(folder, "10crop", min_count=1)}
    cfg = {
        **X.PRESETS["small"],
        "word_dim": 4,
        "dim": 8,
        "epochs": 2,
        "batch": 100,
        "rows": ["order-embeddings", "order-embeddings (symm.)", "InfoNCE (order)"],
    }
    with one_thread():
        here = X.train_rows(data, cfg, "cpu", tmp_path / "here", progress=False)
    pooled = X.train_rows(data, cfg, "cpu", tmp_path / "pooled", progress=False, workers=2)
    assert list(pooled.results) == cfg["rows"]
    for m in cfg["rows"]:
        assert not pooled.results[m].resumed and pooled.results[m].seconds > 0
        assert [h["dev_score"] for h in pooled.results[m].history] == [h["dev_score"] for h in here.results[m].history]
        a, b = here.results[m].model.state_dict(), pooled.results[m].model.state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a), m
    assert all(
        r.resumed
        for r in X.train_rows(data, cfg, "cpu", tmp_path / "pooled", progress=False, workers=2).results.values()
    )


def test_a_diverged_run_stops_with_a_clear_message(toy, tmp_path):
    """NaN features make NaN embeddings and a NaN loss: the trainer stops and names the model
    instead of reporting a table (issue 16)."""
    import dataclasses

    from orderlib.training import TrainingDiverged

    bad = dataclasses.replace(toy, train=dataclasses.replace(toy.train, features=toy.train.features.clone()))
    bad.train.features[3, 0] = float("nan")
    cfg = RetrievalConfig(word_dim=4, dim=4, batch=64, epochs=2, patience=2)
    with pytest.raises(TrainingDiverged, match=r"order-embeddings \(toy\): the training loss became nan in epoch 0"):
        train_retrieval_model(bad, cfg, checkpoint=tmp_path / "m.pt", progress=False, desc="order-embeddings (toy)")
    assert not (tmp_path / "m.pt").exists()  # nothing of the diverged epoch is kept


def test_fit_stops_when_the_held_out_score_turns_nan():
    from orderlib.training import TrainingDiverged, fit

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scores = iter([1.0, float("nan")])
    with pytest.raises(TrainingDiverged, match=r"toy: the held-out acc became nan in epoch 1"):
        fit(model, opt, {}, lambda e: 0.5, lambda: {"acc": next(scores)}, "acc", 5, 5, progress=False, desc="toy")
