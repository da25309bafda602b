"""Table 1 guards: test data never chooses, and a checkpoint is reused only for the same inputs.

Table 1's selection rules: every row's accuracy threshold tau and its early-stopping epoch
are chosen on dev (train_concept_model, train_word2gauss); each dev grid's point (word2gauss
margin, bilinear lr, density order embeddings' negatives and lr x gamma) is chosen on dev at the
first seed (oe_wordnet.choose); the transitive closure baseline knows train and dev positives only.

The test split is corrupted by flipping every test label and permuting the test rows: a run that
never reads test labels to choose anything trains the same model, keeps the same epoch and tau and
scores the same on dev, while its test accuracy moves (to 100 minus itself).
"""

from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from guards import assert_key_covers, assert_test_blind
from test_train_hypernymy import chain_forest

from orderlib.concepts import HypernymyConfig, evaluation_trace, init_from_poincare, train_concept_model
from orderlib.concepts import train as H
from orderlib.concepts import word2gauss as W
from orderlib.concepts.compiled import concept_step_kernel, word2gauss_kernel
from orderlib.concepts.word2gauss import Word2GaussConfig, train_word2gauss
from orderlib.data.hypernymy import make_splits
from orderlib.eval.hypernymy import transitive_closure_accuracy
from orderlib.experiments import oe_wordnet as X

needs_step = pytest.mark.skipif(concept_step_kernel() is None, reason="no C++ compiler for the compiled step")
needs_w2g = pytest.mark.skipif(word2gauss_kernel() is None, reason="no C++ compiler for the word2gauss loop")


@pytest.fixture(scope="module")
def data():
    return make_splits(chain_forest(), "clean", n_test=30, n_dev=30, seed=0)


def flip_test(d):
    """The same data with its test split corrupted: rows permuted, every label flipped."""
    perm = np.random.default_rng(1).permutation(len(d.test))
    return dataclasses.replace(d, test=d.test[perm], test_labels=~d.test_labels[perm])


def reversed_row(a: np.ndarray, i: int) -> np.ndarray:
    """`a` with pair i reversed: one pair of the split changed."""
    a = a.copy()
    a[i] = a[i, ::-1]
    return a


@pytest.fixture
def code_once(monkeypatch):
    """The trainers' code version computed once, not on each of the key guards' many runs (each
    call parses the trainer's modules: a fifth of a second)."""
    for module in (H, W):
        monkeypatch.setattr(module, "code_version", functools.cache(module.code_version))


def weights(model: torch.nn.Module) -> list:
    return [(k, v.detach().cpu().numpy().tobytes()) for k, v in model.state_dict().items()]


def history(r) -> list:
    """What a run saw before test: per epoch its loss, tau and dev accuracy; then its final weights."""
    return [(h["epoch"], h["loss"], h["tau"], h["dev_accuracy"]) for h in r.history] + weights(r.model)


def chosen(r):
    return r.best_epoch, r.tau


def dev(r):
    return r.dev_accuracy


def on_test(r):
    return r.test_accuracy, [h["test_accuracy"] for h in r.history]


# --------------------------------------------------------------------------- train_concept_model

# One short run per Table 1 row (the chain forest separates in a few epochs); patience below the
# epoch count, so that an epoch chosen on test would also stop the run elsewhere.
ROWS = {
    "order-embeddings": dict(lr=0.05),
    "order-embeddings (symmetric)": dict(lr=0.05),
    "order-embeddings (bilinear)": dict(lr=0.05),
    "box embeddings": dict(lr=0.05),
    "Gumbel box embeddings": dict(lr=0.05),
    "density order embeddings": dict(lr=0.05, margin=1000.0),
    "Poincaré embeddings": dict(lr=0.1, negatives=("random", "random"), model_kwargs={"alpha": 1.0}),
    "hyperbolic entailment cones": dict(lr=0.01, margin=0.01),
}


def row_config(name: str, **over) -> HypernymyConfig:
    return HypernymyConfig(model=name, **{**dict(dim=10, epochs=6, batch=32, patience=2), **ROWS[name], **over})


@pytest.fixture(scope="module")
def cones_init(data):
    """The cones start from Poincaré embeddings, as Table 1's row does."""
    pe = train_concept_model(data, row_config("Poincaré embeddings", epochs=6, patience=6), progress=False)
    return init_from_poincare(pe.model)


def blind(train, data):
    """assert_test_blind with Table 1's corruption and readings; also asserts that test accuracy
    varied across epochs (so an epoch chosen on test would differ). Returns the first run."""
    a, _ = assert_test_blind(train, data, flip_test, history=history, chosen=chosen, dev=dev, test=on_test)
    assert len({h["test_accuracy"] for h in a.history}) > 1
    return a


CASES = [pytest.param("order-embeddings", True, id="order-embeddings-compiled", marks=needs_step)]
CASES += [pytest.param("order-embeddings", False, id="order-embeddings-pytorch")]
CASES += [pytest.param(name, None, id=name) for name in ROWS if name != "order-embeddings"]


@pytest.mark.parametrize("name, fused", CASES)
def test_concept_rows_choose_epoch_and_threshold_on_dev_only(data, cones_init, name, fused):
    cfg = row_config(name)
    init = cones_init if name == "hyperbolic entailment cones" else None
    blind(lambda d: train_concept_model(d, cfg, progress=False, init=init, fused=fused), data)


def test_evaluation_trace_dev_records_are_test_blind(data):
    """Athiwaratkun & Wilson's every-k-steps trace (what choose_checkpoint picks from): dev and
    steps unchanged by the test split, test moved."""
    cfg = HypernymyConfig(model="order-embeddings", dim=6, epochs=2, batch=16, lr=0.05)
    assert_test_blind(
        lambda d: evaluation_trace(d, cfg, every=3, progress=False),
        data,
        flip_test,
        history=lambda t: [(r["step"], r["epoch"], r["epoch_end"]) for r in t],
        chosen=lambda t: None,
        dev=lambda t: [r["dev"] for r in t],
        test=lambda t: [r["test"] for r in t],
    )


def on_data(f):
    return lambda i: {**i, "data": f(i["data"])}


def on_cfg(**kw):
    return lambda i: {**i, "cfg": dataclasses.replace(i["cfg"], **kw)}


def data_changes() -> dict:
    """Every part of the data that feeds a Table 1 row's numbers, changed one at a time."""
    r = dataclasses.replace
    half = lambda a: len(a) // 2  # noqa: E731  dev and test: positives, then as many negatives
    flip0 = lambda y: np.r_[~y[:1], y[1:]]  # noqa: E731
    return {
        "a train pair": on_data(lambda x: r(x, train=reversed_row(x.train, 0))),
        "the train pairs' order": on_data(lambda x: r(x, train=x.train[::-1].copy())),
        "a dev positive": on_data(lambda x: r(x, dev=reversed_row(x.dev, 0))),
        "a dev negative": on_data(lambda x: r(x, dev=reversed_row(x.dev, half(x.dev)))),
        "a dev label": on_data(lambda x: r(x, dev_labels=flip0(x.dev_labels))),
        "a test positive": on_data(lambda x: r(x, test=reversed_row(x.test, 0))),
        "a test negative": on_data(lambda x: r(x, test=reversed_row(x.test, half(x.test)))),
        "a test label": on_data(lambda x: r(x, test_labels=flip0(x.test_labels))),
        "the closure pairs": on_data(lambda x: r(x, closure=x.closure[1:])),
        "the protocol": on_data(lambda x: r(x, protocol="paper")),
        "the concept count": lambda i: {
            **i,
            "data": r(i["data"], n_nodes=i["data"].n_nodes + 1),
            **({"init": {k: torch.cat([v, v[:1]]) for k, v in i["init"].items()}} if i.get("init") else {}),
        },
    }


@needs_step
def test_concept_checkpoint_key_covers_every_input(data, tmp_path, code_once):
    """Train, dev and test pairs (positives and negatives), labels, closure, protocol, the extra
    negative kinds, every setting, the init and the step: each change retrains; none reloads."""
    n = data.n_nodes
    base = {
        "data": data,
        "cfg": HypernymyConfig(model="order-embeddings", dim=4, epochs=2, batch=32, lr=0.05, patience=2),
        "init": {"emb.weight": torch.rand(n, 4, generator=torch.Generator().manual_seed(0))},
        "fused": None,  # the compiled step where it applies: "the step" change switches it off
    }
    assert_key_covers(
        lambda i, ckpt: train_concept_model(
            i["data"], i["cfg"], checkpoint=ckpt, progress=False, init=i["init"], fused=i["fused"]
        ),
        base,
        {
            **data_changes(),
            "the extra negative kinds": on_cfg(negatives=("swap",)),
            "the learning rate": on_cfg(lr=0.02),
            "the margin": on_cfg(margin=0.5),
            "the seed": on_cfg(seed=1),
            "the epochs": on_cfg(epochs=3),
            "the patience": on_cfg(patience=1),
            "the optimizer": on_cfg(optimizer="sparse_adam"),
            "the loss": on_cfg(loss="logistic_ranking"),
            "the training fraction": on_cfg(train_fraction=0.5),
            "the batch": on_cfg(batch=16),
            "the init": lambda i: {**i, "init": {k: v * 0.5 for k, v in i["init"].items()}},
            "no init": lambda i: {**i, "init": None},
            "the step (compiled or PyTorch)": lambda i: {**i, "fused": False},
        },
        tmp_path / "run.pt",
        lambda r: r.resumed,
    )


def test_concept_checkpoint_key_covers_model_settings(data, tmp_path, code_once):
    base = {
        "data": data,
        "cfg": HypernymyConfig(
            model="density order embeddings",
            dim=4,
            epochs=1,
            batch=32,
            lr=0.05,
            margin=10.0,
            model_kwargs={"gamma": 2.0},
        ),
        "init": None,
        "fused": False,
    }
    assert_key_covers(
        lambda i, ckpt: train_concept_model(i["data"], i["cfg"], checkpoint=ckpt, progress=False, fused=i["fused"]),
        base,
        {"gamma": on_cfg(model_kwargs={"gamma": 3.0}), "the model": on_cfg(model="order-embeddings", model_kwargs={})},
        tmp_path / "run.pt",
        lambda r: r.resumed,
    )


# --------------------------------------------------------------------------------- word2gauss


def w2g_config(**over) -> Word2GaussConfig:
    return Word2GaussConfig(**{**dict(dim=8, epochs=8, patience=3, margin=2.0, eta=0.5), **over})


@needs_w2g
def test_word2gauss_chooses_epoch_and_threshold_on_dev_only(data):
    a = blind(lambda d: train_word2gauss(d, w2g_config(), progress=False), data)
    assert a.dev_accuracy > 80  # learned (chance 50; untrained about 60)


@needs_w2g
def test_word2gauss_checkpoint_key_covers_every_input(data, tmp_path, code_once):
    base = {"data": data, "cfg": w2g_config(epochs=2, patience=2)}
    changes = {
        **data_changes(),
        "the margin": on_cfg(margin=1.0),
        "eta": on_cfg(eta=0.2),
        "the seed": on_cfg(seed=1),
        "the epochs": on_cfg(epochs=3),
        "mu_max": on_cfg(mu_max=1.5),
        "the variance bounds": on_cfg(var_min=0.5),
        "the gradient clip": on_cfg(max_grad=5.0),
        "the training fraction": on_cfg(train_fraction=0.5),
    }
    assert_key_covers(
        lambda i, ckpt: train_word2gauss(i["data"], i["cfg"], ckpt, progress=False),
        base,
        changes,
        tmp_path / "w2g.pt",
        lambda r: r.resumed,
    )


# ------------------------------------------------------------------------ Table 1's runner


def tiny_table1() -> dict:
    """A Table 1 preset on the chain forest: two rows, a dev grid each, one of two stages."""
    return dict(
        wordnet="toy",
        dim=8,
        batch=32,
        split_seed=0,
        seeds=[0],
        n_test=30,
        n_dev=30,
        train_fraction=1.0,
        models={
            "word2gauss": dict(epochs=4, patience=4, eta=0.5),
            "order-embeddings": dict(epochs=4, patience=4, lr=0.05, margin=1.0),
        },
        methods=["word2gauss", "order-embeddings"],
        grids=[
            X.dev_grid("word2gauss margin", "word2gauss", [{"margin": m} for m in (0.5, 2.0, 7.0)], dict(epochs=3)),
            X.dev_grid("oe lr", "order-embeddings", [{"lr": x} for x in (0.002, 0.05)]),
            X.dev_grid("oe margin", "order-embeddings", [{"margin": m} for m in (0.05, 1.0)], stage=2),
        ],
    )


def table1_run(transform, monkeypatch, settings=("paper", "clean")):
    """run_table1 on the chain forest with each setting's data passed through `transform`."""
    real = X.setting_data
    monkeypatch.setattr(X, "setting_data", lambda g, s, cfg: transform(real(g, s, cfg)))
    graph = SimpleNamespace(parents=chain_forest(), version="toy", source="toy", fingerprint="toy")
    try:
        return X.run_table1(graph, tiny_table1(), list(settings), progress=False)
    finally:
        monkeypatch.setattr(X, "setting_data", real)


def _runs(run, f):
    return {s: {m: [f(r) for r in res.seed_runs(m)] for m in res.results} for s, res in run.settings.items()}


@needs_w2g
def test_table1_grid_points_are_chosen_on_dev_only(monkeypatch, code_once):
    hist = lambda r: [(h["epoch"], h["loss"], h["tau"], h["dev_accuracy"]) for h in r["history"]]  # noqa: E731
    a, b = assert_test_blind(
        lambda transform: table1_run(transform, monkeypatch),
        lambda d: d,
        lambda _: flip_test,
        history=lambda run: _runs(run, lambda r: (hist(r), r["best_epoch"], r["epochs_run"])),
        chosen=lambda run: {s: res.chosen for s, res in run.settings.items()},
        dev=lambda run: ({s: res.grids for s, res in run.settings.items()}, _runs(run, lambda r: r["dev"])),
        test=lambda run: _runs(run, lambda r: r["test"]),
    )
    for res in a.settings.values():  # the points differ on dev, so a choice on test could differ too
        assert all(len(set(g.values())) > 1 for g in res.grids.values()), res.grids
    assert a.settings["clean"].closure + b.settings["clean"].closure == pytest.approx(100)  # labels only


def closure_reference(known: np.ndarray, queries: np.ndarray, n: int) -> np.ndarray:
    """Reachability over `known` by repeated boolean matrix squaring (independent of the library's walk)."""
    r = np.zeros((n, n), bool)
    r[known[:, 0], known[:, 1]] = True
    while True:
        nxt = r | ((r.astype(np.int64) @ r.astype(np.int64)) > 0)
        if (nxt == r).all():
            return r[queries[:, 0], queries[:, 1]]
        r = nxt


@pytest.mark.parametrize("protocol", ["paper", "clean"])
def test_closure_baseline_knows_train_and_dev_positives_only(protocol):
    d = make_splits(chain_forest(), protocol, n_test=30, n_dev=30, seed=0)
    known = np.r_[d.train, d.dev[d.dev_labels]]
    want = 100 * float((closure_reference(known, d.test, d.n_nodes) == d.test_labels).mean())
    assert transitive_closure_accuracy(d) == pytest.approx(want)
    assert transitive_closure_accuracy(d) < 95  # held-out edges it cannot derive: test positives are not known
    # test labels only score it: flipped, its predictions stay and its accuracy becomes 100 minus it
    assert transitive_closure_accuracy(flip_test(d)) == pytest.approx(100 - transitive_closure_accuracy(d))
    # each test pair is judged alone: the other test pairs are never known
    alone = [
        transitive_closure_accuracy(
            dataclasses.replace(d, test=d.test[i : i + 1], test_labels=d.test_labels[i : i + 1])
        )
        for i in range(len(d.test))
    ]
    assert np.mean(alone) == pytest.approx(transitive_closure_accuracy(d))
