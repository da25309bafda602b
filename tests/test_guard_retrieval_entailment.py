"""Test data never chooses, and checkpoints are reused only for the same inputs: Table 2's retrieval
trainer (early stopping on dev) and its frozen item CNN (early stopping on held-out Fashion-MNIST
train items), Table 3's entailment trainer (epoch and threshold on the held-out split).

Each test-blind guard trains twice, the second time with the test split corrupted, and asserts that
the history, the choice and every dev score are identical while the test metrics move
(tests/guards.py). Each key guard changes one input at a time and asserts that the trainer trains
anew, and that the unchanged inputs load the checkpoint."""

import dataclasses
import functools

import numpy as np
import pytest
import torch
from guards import assert_key_covers, assert_test_blind
from toys import toy_pairs, toy_split

from orderlib.checkpoint import fingerprint
from orderlib.encoders.sentence import Vocab
from orderlib.training import entailment as E
from orderlib.training import retrieval as R


@pytest.fixture(autouse=True)
def _on_one_thread(one_thread):
    """Tiny models train many times faster on one intra-op thread (and alike, whatever the machine)."""
    with one_thread():
        yield


@pytest.fixture(autouse=True)
def _code_version_once(monkeypatch):
    """The trainers' code_version parses their modules on every call (a tenth of a second, more
    than a toy run): computed once per test here, since the code does not change within one."""
    from orderlib.experiments import oe_retrieval
    from orderlib.training import item_cnn as cnn

    for module in (R, E, cnn, oe_retrieval):
        monkeypatch.setattr(module, "code_version", functools.cache(module.code_version))


def _history(history: list[dict]) -> list[dict]:
    """A run's per-epoch record without its wall-clock seconds (which differ from run to run)."""
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


def _split(data, name: str, **fields):
    """`data` with fields of its split `name` replaced."""
    return dataclasses.replace(data, **{name: dataclasses.replace(getattr(data, name), **fields)})


def _renamed_word(vocab: Vocab) -> Vocab:
    """A vocabulary of the same size whose last word is another: the same token ids, other words."""
    return Vocab([*vocab.words[2:-1], "zzz-not-a-word"])


def _rolled(t: torch.Tensor) -> torch.Tensor:
    """Rows moved down by one (the last first): every row now pairs with its neighbour's partner."""
    return t.roll(1, 0)


# Table 2: the retrieval trainer ----------------------------------------------------------------


def _retrieval_data():
    return R.prepare({"train": toy_split(200, 0), "dev": toy_split(60, 1), "test": toy_split(60, 2)})


def test_table2_early_stopping_never_reads_test():
    """Permuting the test images (so their captions no longer match) leaves the history, the best
    epoch, its dev score and the dev metrics as they were; only the test metrics move."""
    cfg = R.RetrievalConfig(word_dim=8, dim=16, batch=50, lr=3e-2, epochs=12, patience=2)

    def train(data):
        r = R.train_retrieval_model(data, cfg, progress=False)
        return r, R.retrieval_metrics_of_model(r.model, data.dev), R.retrieval_metrics_of_model(r.model, data.test)

    data = _retrieval_data()
    perm = torch.from_numpy(np.random.default_rng(0).permutation(len(data.test)))
    (a, dev, test), _ = assert_test_blind(
        train,
        data,
        lambda d: _split(d, "test", features=d.test.features[perm]),
        history=lambda run: _history(run[0].history),
        chosen=lambda run: (run[0].best_epoch, run[0].dev_score),
        dev=lambda run: run[1],
        test=lambda run: run[2],
    )
    # early stopping chose: it stopped before the last epoch, at `patience` epochs past the best
    assert 0 < a.best_epoch and len(a.history) == a.best_epoch + cfg.patience + 1 < cfg.epochs
    # the choice is dev's: the best epoch has the highest dev score, which is the model's dev score
    assert a.best_epoch == max(range(len(a.history)), key=lambda e: (a.history[e]["dev_score"], -e))
    assert a.dev_score == R.dev_score(dev) == a.history[a.best_epoch]["dev_score"]
    assert test["rsum"] > 0  # the permuted run's test rsum differs (asserted above): this one is real


def test_table2_checkpoint_key_covers_every_split_the_vocabulary_and_the_config(tmp_path):
    data = _retrieval_data()
    cfg = R.RetrievalConfig(word_dim=4, dim=4, batch=100, epochs=1, patience=1)

    def train(inputs, checkpoint):
        d, c = inputs
        return R.train_retrieval_model(d, c, checkpoint=checkpoint, progress=False)

    def nudged(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[0, 0] += 0.5
        return x

    changes = {}
    for s in ("train", "dev", "test"):
        changes[f"{s} features"] = lambda i, s=s: (_split(i[0], s, features=nudged(getattr(i[0], s).features)), i[1])
        # every caption moved to the next row (tokens and lengths together): other image-caption pairs
        changes[f"{s} captions"] = lambda i, s=s: (
            _split(i[0], s, tokens=_rolled(getattr(i[0], s).tokens), lengths=_rolled(getattr(i[0], s).lengths)),
            i[1],
        )
    changes["vocabulary"] = lambda i: (dataclasses.replace(i[0], vocab=_renamed_word(i[0].vocab)), i[1])
    for field, value in (("seed", 1), ("margin", 0.1), ("penalty", "cosine"), ("lr", 2e-3), ("epochs", 2)):
        changes[f"config {field}"] = lambda i, f=field, v=value: (i[0], dataclasses.replace(i[1], **{f: v}))
    assert_key_covers(train, (data, cfg), changes, tmp_path / "retrieval.pt", lambda r: r.resumed)


# Table 2: the frozen item CNN whose features the scenes use --------------------------------------


def _fake_fashion_mnist(toy_items):
    """Stand-ins for Fashion-MNIST's train (60,000) and test (10,000) splits, of three classes."""
    from orderlib.data.fashion_mnist import FashionMNIST

    (x, y), (tx, ty) = toy_items(60000, 0), toy_items(10000, 1)
    return {
        "train": FashionMNIST(x, y.astype(np.int64), "train"),
        "test": FashionMNIST(tx, ty.astype(np.int64), "test"),
    }


def _hand_lexicon():
    """A lexicon over the 10 classes without WordNet (whose loading takes seconds): two branches."""
    from orderlib.data.scenes import Lexicon

    ladders = tuple((f"c{c}", "top" if c < 5 else "shoe", "thing") for c in range(10))
    words = {**{f"c{c}": (f"word{c}",) for c in range(10)}, "top": ("top",), "shoe": ("shoe",), "thing": ("thing",)}
    return Lexicon(ladders, words)


def test_table2_item_cnn_early_stops_on_held_out_train_items_never_on_test(tmp_path, monkeypatch, toy_items):
    """The scenes' frozen CNN is trained and early-stopped on Fashion-MNIST train items only (its
    held-out items are train[50000:], which the dev scenes draw from): corrupting Fashion-MNIST test
    (whose items only the test scenes hold) leaves its history, its weights and the dev scenes'
    features as they were; only the test scenes' features move."""
    from orderlib.experiments import oe_retrieval as X

    fm = _fake_fashion_mnist(toy_items)
    monkeypatch.setattr(X, "ensure_fashion_mnist", lambda: (tmp_path, "synthetic"))
    monkeypatch.setattr(X, "fmnist_fingerprint", lambda: "synthetic")
    monkeypatch.setattr(X, "ensure_wordnet", lambda version: None)
    monkeypatch.setattr(X, "open_wordnet", lambda version: None)
    monkeypatch.setattr(X.Lexicon, "from_wordnet", classmethod(lambda cls, wn: _hand_lexicon()))
    cfg = dict(n_train=20, n_dev=10, n_test=10, seed=0, cnn=dict(epochs=1, width=4, batch=100), cnn_items=1000)
    runs = iter(range(2))

    def build(source):
        monkeypatch.setattr(X, "load_fashion_mnist", lambda split: source[split])
        sd = X.build_scene_data(cfg, "cpu", tmp_path / f"run{next(runs)}", progress=False)
        return sd, sd.cnn.provenance

    def corrupt(source):
        from orderlib.data.fashion_mnist import FashionMNIST

        t = source["test"]
        return {**source, "test": FashionMNIST(255 - t.images, (t.labels + 1) % 3, "test")}  # other pixels, labels

    (a, provenance), (b, _) = assert_test_blind(
        build,
        fm,
        corrupt,
        history=lambda run: _history(run[0].cnn_history),
        chosen=lambda run: fingerprint(run[0].cnn.state_dict()),
        dev=lambda run: (fingerprint(run[0].features["10crop"]["dev"]), fingerprint(run[0].features["1crop"]["dev"])),
        test=lambda run: fingerprint(run[0].features["10crop"]["test"]),
    )
    assert not provenance["loaded_from_checkpoint"] and len(a.cnn_history) == 1  # both runs trained their own CNN


def test_table2_item_cnn_checkpoint_key_covers_its_items_and_config(tmp_path, toy_items):
    from orderlib.encoders.cnn import CNNConfig
    from orderlib.training.item_cnn import train_item_cnn

    (x, y), (hx, hy) = toy_items(200, 0), toy_items(100, 1)
    cfg = CNNConfig(epochs=1, batch=100, width=4)

    def train(inputs, checkpoint):
        model, history = train_item_cnn(*inputs, checkpoint=checkpoint, progress=False)
        return model.provenance

    def flip_one(a: np.ndarray) -> np.ndarray:
        a = a.copy()
        a[0] = 255 - a[0] if a.ndim > 1 else (a[0] + 1) % 3
        return a

    base = (x, y, hx, hy, cfg)
    changes = {
        name: lambda i, k=k: tuple(flip_one(v) if j == k else v for j, v in enumerate(i))
        for k, name in enumerate(("training images", "training labels", "held-out images", "held-out labels"))
    }
    changes["config seed"] = lambda i: (*i[:4], dataclasses.replace(i[4], seed=1))
    changes["config width"] = lambda i: (*i[:4], dataclasses.replace(i[4], width=6))
    assert_key_covers(train, base, changes, tmp_path / "item_cnn.pt", lambda p: p["loaded_from_checkpoint"])


# Table 3: the entailment trainer ----------------------------------------------------------------


def _entailment_data():
    return E.prepare(toy_pairs(300, 0), toy_pairs(100, 1), toy_pairs(100, 2))


def _corrupt_test_pairs(data):
    """Test labels flipped and test hypotheses permuted: other energies and other labels."""
    perm = torch.from_numpy(np.random.default_rng(0).permutation(len(data.test)))
    t = data.test
    return _split(data, "test", h=t.h[perm], hl=t.hl[perm], positive=~t.positive)


def test_table3_epoch_and_threshold_never_read_test():
    """Corrupting the test pairs leaves the history (held-out tau and accuracy per epoch), the best
    epoch, its threshold and its held-out accuracy as they were; only test accuracy moves."""
    cfg = E.EntailmentConfig(word_dim=8, dim=8, epochs=10, batch=100, lr=0.002, patience=2)
    a, _ = assert_test_blind(
        lambda d: E.train_entailment_model(d, cfg, progress=False),
        _entailment_data(),
        _corrupt_test_pairs,
        history=lambda r: _history(r.history),
        chosen=lambda r: (r.best_epoch, r.tau),
        dev=lambda r: r.dev_accuracy,
        test=lambda r: r.test_accuracy,
    )
    # early stopping chose: held-out accuracy climbs for epochs, and the run stops before the last
    assert 0 < a.best_epoch and len(a.history) == a.best_epoch + cfg.patience + 1 < cfg.epochs
    # the choice is the held-out split's: the best epoch's held-out accuracy and tau are the result's
    assert a.best_epoch == max(range(len(a.history)), key=lambda e: (a.history[e]["dev_accuracy"], -e))
    assert (a.tau, a.dev_accuracy) == (a.history[a.best_epoch]["tau"], a.history[a.best_epoch]["dev_accuracy"])


def test_table3_checkpoint_key_covers_every_split_the_vocabulary_and_the_config(tmp_path):
    data = _entailment_data()
    cfg = E.EntailmentConfig(model="bag-of-words logistic regression", epochs=1, batch=100, patience=1)

    def train(inputs, checkpoint):
        return E.train_entailment_model(*inputs, checkpoint=checkpoint, progress=False)

    changes = {}
    for s in ("train", "holdout", "test"):
        changes[f"{s} premises"] = lambda i, s=s: (
            _split(i[0], s, p=_rolled(getattr(i[0], s).p), pl=_rolled(getattr(i[0], s).pl)),
            i[1],
        )
        changes[f"{s} hypotheses"] = lambda i, s=s: (
            _split(i[0], s, h=_rolled(getattr(i[0], s).h), hl=_rolled(getattr(i[0], s).hl)),
            i[1],
        )
        changes[f"{s} labels"] = lambda i, s=s: (
            _split(i[0], s, positive=_flip_first(getattr(i[0], s).positive)),
            i[1],
        )
    changes["vocabulary"] = lambda i: (dataclasses.replace(i[0], vocab=_renamed_word(i[0].vocab)), i[1])
    for field, value in (("seed", 1), ("margin", 0.1), ("model", "order-embeddings"), ("lr", 2e-3), ("epochs", 2)):
        changes[f"config {field}"] = lambda i, f=field, v=value: (i[0], dataclasses.replace(i[1], **{f: v}))
    assert_key_covers(train, (data, cfg), changes, tmp_path / "entailment.pt", lambda r: r.resumed)


def _flip_first(positive: torch.Tensor) -> torch.Tensor:
    positive = positive.clone()
    positive[0] = ~positive[0]
    return positive
