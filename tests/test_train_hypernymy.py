import numpy as np
import pytest
import torch

from orderlib.checkpoint import load_checkpoint
from orderlib.concepts import HypernymyConfig, train_concept_model
from orderlib.data.hypernymy import make_splits


def chain_forest(depth=6, width=12):
    """`width` chains of length `depth` under one root: a clear partial order to learn."""
    parents = [[]]
    for _ in range(width):
        prev = 0
        for _ in range(depth):
            parents.append([prev])
            prev = len(parents) - 1
    return parents


@pytest.fixture(scope="module")
def data():
    return make_splits(chain_forest(), "clean", n_test=30, n_dev=30, seed=0)


def test_order_embedding_learns_and_is_nonnegative(data):
    cfg = HypernymyConfig(model="order-embeddings", dim=10, epochs=40, batch=32, lr=0.05, patience=40)
    r = train_concept_model(data, cfg, progress=False)
    assert (r.model.emb.weight >= 0).all()
    assert r.dev_accuracy > 80 and r.test_accuracy > 75
    assert r.history[-1]["loss"] < r.history[0]["loss"]


@pytest.mark.parametrize("name", ["order-embeddings (symmetric)", "order-embeddings (bilinear)", "word2gauss"])
def test_other_rows_train(data, name):
    cfg = HypernymyConfig(model=name, dim=10, epochs=5, batch=32, lr=0.05, patience=5)
    r = train_concept_model(data, cfg, progress=False)
    assert r.history[-1]["loss"] < 0.6 * r.history[0]["loss"]
    # chance is 50% (half true pairs, half corruptions); these rows untrained: dev 58-63 (tau fit on
    # dev), test 48-55
    assert r.dev_accuracy > 70 and r.test_accuracy > 60, (r.dev_accuracy, r.test_accuracy)


def test_lazy_adam_follows_dense_adam_and_sparse_adam_does_not(data):
    res = {}
    for opt in ("adam", "lazy_adam", "sparse_adam"):
        cfg = HypernymyConfig(model="order-embeddings", dim=6, epochs=3, batch=8, lr=0.05, optimizer=opt, patience=3)
        res[opt] = train_concept_model(data, cfg, progress=False).model.emb.weight.detach()
    assert torch.allclose(res["lazy_adam"], res["adam"], atol=1e-3)
    assert not torch.allclose(res["sparse_adam"], res["adam"], atol=1e-2)
    with pytest.raises(ValueError, match="unknown optimizer"):
        train_concept_model(data, HypernymyConfig(optimizer="sgd"), progress=False)


def test_resume_reproduces_uninterrupted_run(data, tmp_path, monkeypatch):
    from orderlib.training import loop

    cfg = HypernymyConfig(model="order-embeddings", dim=8, epochs=6, batch=32, lr=0.05, patience=6)
    full = train_concept_model(data, cfg, progress=False)
    ckpt = tmp_path / "run.pt"
    saved, save = [], loop.save_checkpoint

    def interrupt_at_the_fourth_save(path, state):
        saved.append(1)
        if len(saved) == 4:  # killed as the fourth epoch's checkpoint is written
            raise KeyboardInterrupt
        save(path, state)

    monkeypatch.setattr(loop, "CHECKPOINT_EVERY_S", 0.0)  # a checkpoint after every epoch
    monkeypatch.setattr(loop, "save_checkpoint", interrupt_at_the_fourth_save)
    with pytest.raises(KeyboardInterrupt):
        train_concept_model(data, cfg, checkpoint=ckpt, progress=False)
    state = load_checkpoint(ckpt)
    assert state["epoch"] == 2 and not state["done"] and "opt" in state  # 3 epochs done, resumable
    monkeypatch.setattr(loop, "save_checkpoint", save)
    resumed = train_concept_model(data, cfg, checkpoint=ckpt, progress=False)
    assert resumed.resumed
    assert [h["loss"] for h in resumed.history] == pytest.approx([h["loss"] for h in full.history])
    assert resumed.test_accuracy == full.test_accuracy
    finished = load_checkpoint(ckpt)
    assert finished["done"] and "model" not in finished and "opt" not in finished  # best weights only
    again = train_concept_model(data, cfg, checkpoint=ckpt, progress=False)
    assert again.resumed and again.test_accuracy == full.test_accuracy


def test_extra_negative_kinds(data):
    from orderlib.concepts.negatives import Siblings as _Siblings
    from orderlib.concepts.negatives import extra_negatives

    rng = np.random.default_rng(0)
    pos = data.train[:40]
    assert np.array_equal(extra_negatives("swap", data, pos, rng), pos[:, ::-1])
    sib = extra_negatives("sibling", data, pos, rng, _Siblings(data))
    from orderlib.data.hypernymy import in_set

    assert not in_set(sib, data.closure, data.n_nodes).any() and (sib[:, 0] != sib[:, 1]).all()
    hyponyms_of = {v: set(data.train[data.train[:, 1] == v, 0]) for v in np.unique(pos[:, 1])}
    drawn = sib[:, 1] == pos[:, 0]  # (w, u) with w another hyponym of v (else a random corruption)
    assert drawn.mean() > 0.5
    assert all(w in hyponyms_of[v] for w, v in zip(sib[drawn, 0], pos[drawn, 1]))
    with pytest.raises(ValueError, match="unknown negative kind"):
        train_concept_model(data, HypernymyConfig(negatives=("bogus",)), progress=False)


def test_extra_negatives_and_model_settings_train(data):
    cfg = HypernymyConfig(
        model="density order embeddings",
        dim=6,
        epochs=4,
        batch=16,
        lr=0.05,
        patience=4,
        margin=10.0,
        negatives=("swap", "sibling", "random"),
        loss="ranking_hinge",
        model_kwargs={"gamma": 2.0},
    )
    r = train_concept_model(data, cfg, progress=False)
    assert r.model.gamma == 2.0 and r.history[-1]["loss"] < r.history[0]["loss"]
    assert r.dev_accuracy > 65 and r.test_accuracy > 60, (r.dev_accuracy, r.test_accuracy)  # untrained: 60, 48


def test_init_is_copied_constrained_and_part_of_the_checkpoint_key(data, tmp_path):
    n = data.n_nodes
    init = {"emb.weight": torch.full((n, 4), -1.0)}
    cfg = HypernymyConfig(model="order-embeddings", dim=4, epochs=0, patience=1)
    m = train_concept_model(data, cfg, progress=False, init=init).model
    assert torch.equal(m.emb.weight, torch.zeros(n, 4))  # copied, then clamped at 0
    cfg = HypernymyConfig(model="order-embeddings", dim=4, epochs=1, batch=32, lr=0.05, patience=1)
    ckpt = tmp_path / "run.pt"
    a = {"emb.weight": torch.rand(n, 4, generator=torch.Generator().manual_seed(0))}
    assert not train_concept_model(data, cfg, checkpoint=ckpt, progress=False, init=a).resumed
    assert train_concept_model(data, cfg, checkpoint=ckpt, progress=False, init=a).resumed
    b = {"emb.weight": a["emb.weight"] + 0.5}
    assert not train_concept_model(data, cfg, checkpoint=ckpt, progress=False, init=b).resumed
    assert not train_concept_model(data, cfg, checkpoint=ckpt, progress=False).resumed


def test_bilinear_linear_term_hand_case():
    """[x_u; 1]^T W [x_v; 1] + b = x_u^T W' x_v + a . x_u + c . x_v + W_DD + b (Socher et al.'s V [x_u; x_v])."""
    from orderlib.concepts import build_concept_model

    m = build_concept_model("order-embeddings (bilinear)", 3, 2, 0, linear=True)
    assert m.emb.weight.shape == (3, 3) and m.w.shape == (3, 3) and (m.emb.weight[:, -1] == 1).all()
    with torch.no_grad():
        m.emb.weight.copy_(torch.tensor([[1.0, 2.0, 1.0], [3.0, -1.0, 1.0], [0.0, 0.0, 1.0]]))
        m.w.copy_(torch.tensor([[1.0, 0.5, 2.0], [0.0, -1.0, 3.0], [4.0, 5.0, 6.0]]))
        m.b.fill_(0.25)
    # u = (1, 2), v = (3, -1): u^T W' v = 1*(3 - 0.5) + 2*(0 + 1) = 4.5; a . u = 2 + 6 = 8; c . v = 12 - 5 = 7
    assert m.energy(torch.tensor([0]), torch.tensor([1])).item() == pytest.approx(-(4.5 + 8 + 7 + 6 + 0.25))
    block = m.constrain("emb.weight", torch.full((2, 3), 7.0))
    assert block[:, -1].tolist() == [1.0, 1.0] and (block[:, :-1] == 7).all()
    plain = build_concept_model("order-embeddings (bilinear)", 3, 2, 0)
    assert plain.emb.weight.shape == (3, 2) and plain.constant_columns() == {}


@pytest.mark.parametrize("optimizer", ["adam", "lazy_adam"])
def test_bilinear_linear_term_column_stays_constant(data, optimizer):
    cfg = HypernymyConfig(
        model="order-embeddings (bilinear)",
        dim=6,
        epochs=3,
        batch=16,
        lr=0.05,
        patience=3,
        optimizer=optimizer,
        model_kwargs={"linear": True},
    )
    r = train_concept_model(data, cfg, progress=False)
    w = r.model.emb.weight
    assert (w[:, -1] == 1).all() and w[:, :-1].std() > 0
    assert r.model.w[:-1, -1].abs().max() > 0.05  # the linear weights a moved off their ~0.01 start


def test_evaluation_trace_epoch_ends_are_the_trainers_epochs(data):
    from orderlib.concepts import evaluation_trace
    from orderlib.eval.selection import choose_checkpoint

    cfg = HypernymyConfig(
        model="density order embeddings",
        dim=6,
        epochs=6,
        batch=16,
        lr=0.05,
        margin=10.0,
        patience=2,
        model_kwargs={"gamma": 1.0},
    )
    steps = -(-len(data.train) // cfg.batch)  # per epoch
    fitted = train_concept_model(data, HypernymyConfig(**{**cfg.__dict__, "patience": cfg.epochs}), progress=False)
    trace = evaluation_trace(data, cfg, every=10 * steps, progress=False)  # no evaluation inside an epoch
    assert [r["step"] for r in trace] == [steps * (e + 1) for e in range(cfg.epochs)]
    assert all(r["epoch_end"] for r in trace)
    assert [(r["dev"], r["test"]) for r in trace] == [(h["dev_accuracy"], h["test_accuracy"]) for h in fitted.history]
    # the patience rule picks the epoch train_concept_model's early stopping keeps
    early = train_concept_model(data, cfg, progress=False)
    assert choose_checkpoint(trace, epoch_ends_only=True, patience=cfg.patience)["epoch"] == early.best_epoch
    assert choose_checkpoint(trace, epoch_ends_only=True, patience=cfg.patience)["test"] == early.test_accuracy


def test_evaluation_trace_evaluates_every_k_steps(data):
    from orderlib.concepts import evaluation_trace

    cfg = HypernymyConfig(model="order-embeddings", dim=6, epochs=2, batch=16, lr=0.05)
    steps = -(-len(data.train) // cfg.batch)
    trace = evaluation_trace(data, cfg, every=3, progress=False)
    mid = [r["step"] for r in trace if not r["epoch_end"]]
    assert mid == [s for s in range(3, 2 * steps + 1, 3) if s not in (steps, 2 * steps)]
    assert [r["step"] for r in trace if r["epoch_end"]] == [steps, 2 * steps]
    assert [r["epoch"] for r in trace] == sorted(r["epoch"] for r in trace)
    assert all(0 <= r["test"] <= 100 for r in trace)
    with pytest.raises(ValueError, match="positive number of steps"):
        evaluation_trace(data, cfg, every=0, progress=False)


def test_choose_checkpoint_rules():
    from orderlib.eval.selection import choose_checkpoint

    recs = [
        dict(epoch=e, epoch_end=end, dev=d, test=t)
        for e, end, d, t in [
            (0, False, 50, 1),
            (0, True, 60, 2),
            (1, False, 70, 3),
            (1, True, 60, 4),
            (2, True, 60, 5),
            (3, True, 65, 6),
            (4, False, 90, 7),
            (4, True, 80, 8),
        ]
    ]
    assert choose_checkpoint(recs)["test"] == 7  # every evaluation, the highest dev
    assert choose_checkpoint(recs, by="test")["test"] == 8
    assert choose_checkpoint(recs, epoch_ends_only=True)["test"] == 8
    assert choose_checkpoint(recs, epoch_ends_only=True, epochs=4)["test"] == 6
    # epoch 1 and 2 do not beat epoch 0 (ties keep the first); patience 2 stops at epoch 2
    assert choose_checkpoint(recs, epoch_ends_only=True, patience=2)["test"] == 2
    assert choose_checkpoint(recs, epoch_ends_only=True, patience=3)["test"] == 8
    with pytest.raises(ValueError, match="patience counts epochs"):
        choose_checkpoint(recs, patience=2)
    with pytest.raises(ValueError, match="no evaluation records"):
        choose_checkpoint(recs, epochs=0)
