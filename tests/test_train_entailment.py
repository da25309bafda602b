import numpy as np
import pytest
import torch
from toys import toy_pairs

from orderlib.data.entailment import PairSet
from orderlib.encoders.entailment import ENTAILMENT_MODELS, BagOfWords, build_entailment_model, entailment_loss
from orderlib.training.entailment import (
    EntailmentConfig,
    energies,
    entailment_accuracy,
    prepare,
    train_entailment_model,
)


@pytest.fixture(scope="module")
def toy_data():
    return prepare(toy_pairs(600, 0), toy_pairs(200, 1), toy_pairs(200, 2))


def test_loss_is_eq7_for_energies_and_bce_for_classifiers():
    m = build_entailment_model("order-embeddings", 5, 3, 4)
    e = torch.tensor([0.0, 0.5, 0.05, 1.0])
    pos = torch.tensor([True, True, False, False])
    # positives pay E; negatives pay max(0, 0.2 - E): (0 + 0.5 + 0.15 + 0) / 4
    assert entailment_loss(m, e, pos, 0.2).item() == pytest.approx(0.65 / 4)
    clf = BagOfWords(5)
    want = torch.nn.functional.binary_cross_entropy_with_logits(-e, pos.float())
    assert entailment_loss(clf, e, pos, 0.2).item() == pytest.approx(want.item())


def test_every_model_gives_one_energy_per_pair(toy_data):
    p, pl, h, hl = toy_data.test.batch(torch.arange(7), "cpu")
    for name in ENTAILMENT_MODELS:
        e = build_entailment_model(name, len(toy_data.vocab), 8, 6)(p, pl, h, hl)
        assert e.shape == (7,) and torch.isfinite(e).all(), name
    with pytest.raises(ValueError, match="unknown model"):
        build_entailment_model("skip-thoughts", 5, 3, 4)


def test_order_model_learns_toy_entailment(toy_data):
    cfg = EntailmentConfig(model="order-embeddings", word_dim=16, dim=16, epochs=12, batch=32, lr=0.01, patience=12)
    r = train_entailment_model(toy_data, cfg, progress=False)
    assert r.test_accuracy >= 90.0, r.history  # chance (all negative) is about 67%
    assert r.history[r.best_epoch]["dev_accuracy"] == max(h["dev_accuracy"] for h in r.history)


def test_threshold_never_sees_test_labels(toy_data):
    """Flipping the test labels leaves the training history, the chosen epoch, the threshold and
    the held-out accuracy as they were (a full run each time), and turns every test hit into a
    miss: the two test accuracies sum to 100."""
    from guards import assert_test_blind

    cfg = EntailmentConfig(model="bag-of-words logistic regression", epochs=2, batch=64, lr=0.05, patience=2)

    def flip(data):
        return type(data)(
            data.train,
            data.holdout,
            type(data.test)(**{**vars(data.test), "positive": ~data.test.positive}),
            data.vocab,
        )

    a, b = assert_test_blind(
        lambda d: train_entailment_model(d, cfg, progress=False),
        toy_data,
        flip,
        history=lambda r: [{k: v for k, v in h.items() if k != "seconds"} for h in r.history],
        chosen=lambda r: (r.best_epoch, r.tau),
        dev=lambda r: r.dev_accuracy,
        test=lambda r: r.test_accuracy,
    )
    assert a.test_accuracy + b.test_accuracy == pytest.approx(100.0)
    again = entailment_accuracy(b.model, flip(toy_data), "cpu")  # the final evaluation alone, on the flipped split
    assert (again["tau"], again["dev_accuracy"]) == (a.tau, a.dev_accuracy)


def test_resume_equals_uninterrupted_run(toy_data, interrupt_then_resume):
    import orderlib.training.entailment as T

    cfg = EntailmentConfig(model="order-embeddings (symmetric)", word_dim=8, dim=8, epochs=4, batch=50, patience=4)
    full = train_entailment_model(toy_data, cfg, progress=False)
    resumed, ckpt = interrupt_then_resume(
        T, lambda c: train_entailment_model(toy_data, cfg, checkpoint=c, progress=False), at=2
    )
    assert resumed.resumed and len(resumed.history) == 4
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    assert resumed.test_accuracy == full.test_accuracy
    other = train_entailment_model(
        toy_data, EntailmentConfig(**{**vars(cfg), "seed": 1}), checkpoint=ckpt, progress=False
    )
    assert not other.resumed  # a checkpoint of another configuration is not resumed


def test_training_does_not_touch_global_rng(toy_data):
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    train_entailment_model(
        toy_data, EntailmentConfig(model="bag-of-words logistic regression", epochs=1), progress=False
    )
    assert torch.equal(torch.rand(1), before)


def write_snli_1_0(root, toy: PairSet, test: PairSet | None = None) -> None:
    """An official-layout `snli_1.0/` folder under root whose three splits all hold `toy` (the test
    split `test` instead, if given)."""
    import json

    d = root / "snli_1.0"
    d.mkdir()
    names = ["entailment", "neutral", "contradiction"]
    for split in ("train", "dev", "test"):
        pairs = test if split == "test" and test is not None else toy
        (d / f"snli_1.0_{split}.jsonl").write_text(
            "".join(
                json.dumps({"sentence1": p, "sentence2": h, "gold_label": names[l]}) + "\n"
                for p, h, l in zip(pairs.premises, pairs.hypotheses, pairs.labels)
            )
        )


def test_table3_splits_majority_and_table(tmp_path):
    from orderlib.experiments import oe_snli as X

    write_snli_1_0(tmp_path, toy_pairs(120, 3), test=toy_pairs(120, 4))  # a test split unlike dev
    cfg = dict(X.PRESETS["small"], data="official", word_dim=8, dim=8, epochs=1, train_limit=50)
    train, dev, test, how = X.splits("snli", cfg, tmp_path)
    assert len(train) == 50 and len(dev) == len(test) == 120 and "official" in how
    assert X.majority_accuracy(train, test) == pytest.approx(100 * (1 - test.positive.mean()))
    run = X.run_dataset("snli", cfg, "cpu", directory=tmp_path, progress=False)
    df = X.table({"snli": run})
    assert list(df.columns[:4]) == ["method", "metric", "paper", "ours"]
    ours = df.dropna(subset=["ours"])
    assert set(ours["method"]) == {"majority class", *X.MODELS}
    assert (ours["n_train"] == 50).all()
    # parity: each row recounted here from the test labels, and each model's test energies and tau
    positive = run["data"].test.positive.numpy()
    by_method = ours.set_index("method")["ours"]
    assert by_method["majority class"] == pytest.approx(100 * (~positive).mean())  # the toy's majority: not entailed
    for m in X.MODELS:
        r = run["results"][m]
        e = energies(r.model, run["data"].test, "cpu")
        assert by_method[m] == pytest.approx(100 * np.mean((e <= r.tau) == positive)), m
    paper = df.set_index("method")["paper"]
    assert paper["order-embeddings"] == 88.6 and paper["skip-thoughts"] == 87.7
    assert pd_isna(paper["GRU features + MLP"])  # a stand-in never carries the paper's number
    with pytest.raises(ValueError, match="official protocol covers SNLI only"):
        X.splits("sick", cfg, tmp_path)


def test_table3_models_trained_by_workers_equal_models_trained_here_on_one_thread(tmp_path, one_thread):
    """Two one-thread worker processes train every model into its checkpoint; the loaded models are
    those this process trains on one thread, and they count as trained in this run, not resumed."""
    from orderlib.experiments import oe_snli as X

    write_snli_1_0(tmp_path, toy_pairs(120, 3))
    cfg = dict(X.PRESETS["small"], data="official", datasets=["snli"], word_dim=8, dim=8, epochs=2, train_limit=60)
    with one_thread():
        here = X.run_datasets(cfg, "cpu", tmp_path / "here", tmp_path, progress=False)
    pooled = X.run_datasets(cfg, "cpu", tmp_path / "pooled", tmp_path, progress=False, workers=2)
    assert list(pooled["snli"]["results"]) == X.MODELS
    for m in X.MODELS:
        a, b = here["snli"]["results"][m], pooled["snli"]["results"][m]
        assert not b.resumed and b.seconds > 0, m
        assert [h["dev_accuracy"] for h in a.history] == [h["dev_accuracy"] for h in b.history], m
        assert a.test_accuracy == b.test_accuracy, m
        sa, sb = a.model.state_dict(), b.model.state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa), m
    again = X.run_datasets(cfg, "cpu", tmp_path / "pooled", tmp_path, progress=False, workers=2)
    assert all(r.resumed for r in again["snli"]["results"].values())


def pd_isna(x) -> bool:
    import pandas as pd

    return bool(pd.isna(x))
