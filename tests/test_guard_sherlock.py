"""Sherlock's trainers never let test data choose, and reuse a checkpoint only for the same inputs.

Selection rules guarded here: every SEM row (SEM-A, SEM-B, the averaged ablation, the structured
order embedding, the GLOSS row) keeps the epoch of best fact -> image mAP on the dev images; the
order-embeddings retrained on fact phrases stop early on the dev split's R@1+5+10; ESZSL and
multiview CCA have no selection (their gamma, lambda, k and reg are the preset's) and fit on the
training images alone. Checkpoints: a SEM row retrains whenever its training or dev images, its
facts, its word vectors, the pre-trained CNN or its configuration change, and reloads otherwise.
"""

import copy
import dataclasses

import numpy as np
import pytest
import torch
from guards import assert_key_covers, assert_test_blind
from test_facts import fake

from orderlib.checkpoint import fingerprint
from orderlib.data import fact_tasks
from orderlib.data.facts import implies, make_fact_images
from orderlib.encoders.cnn import ItemCNN
from orderlib.eval.facts import retrieval_rows
from orderlib.experiments import sherlock as exp
from orderlib.experiments import sherlock_tables as tables
from orderlib.training.sherlock import SEMConfig, distances, train_sem

OBJECTS = 2  # the facts of the first two objects: 66 facts, tiny splits
CFG = dict(
    seed=0,
    train_images=40,
    test_per_fact=1,
    dev_per_fact=1,
    base="small",
    sem=dict(epochs=2, hidden=8, lr=3e-3, batch=32),
    order=dict(margin=0.05),
    cca_dim=8,
    eszsl_gamma=1.0,
    eszsl_lambda=1.0,
    caption_epochs=3,
)
ORDER_ROW = "structured order-embedding (SEM-A)"


def _cnn(seed: int = 0) -> ItemCNN:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ItemCNN(10, 4, in_channels=3).eval()


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread: these tiny models train several times faster on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def sources():
    return {"train": fake("train", 60000), "test": fake("test", 10000)}


@pytest.fixture(scope="module")
def base(sources):
    """(cfg, FactData with GLOSS vectors, CNN) on fake Fashion-MNIST items."""
    mp = pytest.MonkeyPatch()
    mp.setattr(fact_tasks, "load_fashion_mnist", lambda split: sources[split])
    rng = np.random.default_rng(0)
    words = {w: rng.standard_normal(4).astype(np.float32) for w in exp.vocabulary()}
    gloss = {w: rng.standard_normal(5).astype(np.float32) for w in exp.vocabulary()}
    try:
        task = exp.fact_task(CFG, words, OBJECTS, gloss)
    finally:
        mp.undo()
    cnn = _cnn()
    images = {s: getattr(task, s).render() for s in ("train", "dev", "test")}
    return CFG, exp.FactData(task, images, {s: exp.frozen_features(cnn, x) for s, x in images.items()}), cnn


def _with_split(data, split: str, images, cnn=None):
    """`data` with `split`'s FactImages replaced by `images` (rendered again, features again)."""
    rendered = images.render()
    feats = {**data.features, split: exp.frozen_features(cnn, rendered)} if cnn is not None else data.features
    return exp.FactData(dataclasses.replace(data.task, **{split: images}), {**data.images, split: rendered}, feats)


def _other_items(images, counts=None, seed_shift: int = 1):
    """A split of the same facts drawn again (other items, cells, looks), optionally with other
    counts per fact."""
    counts = np.bincount(images.fact, minlength=len(images.facts)) if counts is None else counts
    return make_fact_images(images.source, images.split, images.facts, counts, images.seed + seed_shift)


def _reordered(images, seed: int = 0):
    """The split's images in another order: each image keeps its fact, but image k's fact moves."""
    p = np.random.default_rng(seed).permutation(len(images))
    return dataclasses.replace(
        images, fact=images.fact[p], items=images.items[p], cells=images.cells[p], seeds=images.seeds[p]
    )


def corrupt_test(data, cnn):
    """The test split drawn again from other items and shuffled (its fact labels move with it)."""
    return _with_split(data, "test", _reordered(_other_items(data.task.test, seed_shift=7)), cnn)


def _history(fitted) -> list[dict]:
    return [{k: v for k, v in h.items() if k != "seconds"} for h in fitted.history]


def _test_metrics(out: dict, task) -> tuple:
    return tuple(round(float(v), 9) for v in tables.table4(out, task)["ours"])


# ---------------------------------------------------------------- test data never chooses


def test_sem_rows_choose_their_epoch_on_dev_never_on_test(base, tmp_path):
    """Every SEM row, trained on the data and on the data with its test split redrawn and shuffled:
    the same losses, dev mAPs, chosen epochs and model; only Table 4's numbers move."""
    cfg, data, cnn = base
    rows = list(exp.SEM_ROWS)
    runs = iter(range(10))

    def train(d):
        out = exp.train_sem_rows(cfg, d, cnn, tmp_path / f"run{next(runs)}", progress=False, rows=rows)
        assert list(out) == rows  # the GLOSS row too: every selection rule is seen
        return d, out

    assert_test_blind(
        train,
        data,
        lambda d: corrupt_test(d, cnn),
        history=lambda r: {m: _history(x["fit"]) for m, x in r[1].items()},
        chosen=lambda r: {m: (x["fit"].best_epoch, fingerprint(x["model"].state_dict())) for m, x in r[1].items()},
        dev=lambda r: {m: x["fit"].best_score for m, x in r[1].items()},
        test=lambda r: _test_metrics(r[1], r[0].task),
    )


def test_sem_rows_select_on_their_dev_split(base, tmp_path):
    """The converse: the dev split redrawn moves the dev mAPs (so the guard above watches a score
    that reads dev), while the training losses of the first epoch stay."""
    cfg, data, cnn = base
    rows = ["SEM-A"]
    a = exp.train_sem_rows(cfg, data, cnn, tmp_path / "a", progress=False, rows=rows)["SEM-A"]["fit"]
    other = _with_split(data, "dev", _reordered(_other_items(data.task.dev, seed_shift=3)))
    b = exp.train_sem_rows(cfg, other, cnn, tmp_path / "b", progress=False, rows=rows)["SEM-A"]["fit"]
    assert a.history[0]["loss"] == b.history[0]["loss"]
    assert [h["dev mAP"] for h in a.history] != [h["dev mAP"] for h in b.history]
    assert a.best_score == max(h["dev mAP"] for h in a.history) == a.history[a.best_epoch]["dev mAP"]


def test_retrained_caption_rows_stop_on_dev_never_on_test(base, tmp_path):
    """The order-embeddings retrained on fact phrases: the same history, epoch and dev score with
    the test split redrawn; only its test numbers move."""
    cfg, data, cnn = base
    runs = iter(range(10))
    rows = ["order-embeddings"]

    def train(d):
        return d, exp.caption_retrained_rows(cfg, d, tmp_path / f"run{next(runs)}", progress=False, rows=rows)

    def test_metrics(r):
        d, out = r
        rows = retrieval_rows("m", out["order-embeddings, retrained on facts"]["dist"], d.task)
        return tuple(round(float(row["ours"]), 9) for row in rows)

    assert_test_blind(
        train,
        data,
        lambda d: corrupt_test(d, cnn),
        history=lambda r: {m: _history(x["fit"]) for m, x in r[1].items()},
        chosen=lambda r: {m: (x["fit"].best_epoch, fingerprint(x["fit"].model.state_dict())) for m, x in r[1].items()},
        dev=lambda r: {m: x["fit"].dev_score for m, x in r[1].items()},
        test=test_metrics,
    )


def test_closed_form_baselines_fit_on_training_images_alone(base):
    """ESZSL and multiview CCA: half the test images' features replaced leaves every other test
    image's distances as they were (nothing is fitted or normalised on test), and moves the replaced
    ones."""
    cfg, data, _ = base
    task, x = data.task, data.features
    a = exp.baseline_distances(task, x["train"], x["test"], cfg)
    half = len(x["test"]) // 2
    moved = x["test"].copy()
    moved[half:] = np.random.default_rng(1).permutation(moved[half:]) * 1.5 + 0.3
    b = exp.baseline_distances(task, x["train"], moved, cfg)
    for m in ("ESZSL", "MV CCA"):
        assert torch.equal(a[m][:half], b[m][:half]), m
        assert not torch.allclose(a[m][half:], b[m][half:]), m


# ---------------------------------------------------------------- checkpoint keys


def _perturb_cnn(cnn):
    other = copy.deepcopy(cnn)
    with torch.no_grad():
        next(other.parameters()).view(-1)[0] += 1e-3
    return other


def _language(data, fact: int, view=None):
    """`data` with one value of `fact`'s subject word vector (of `view`: None the task's, or a
    key of task.languages) changed."""
    task = data.task
    if view is None:
        lang = task.language.clone()
        lang[fact, 0, 0] += 0.25
        return exp.FactData(dataclasses.replace(task, language=lang), data.images, data.features)
    lang = task.languages[view].clone()
    lang[fact, 0, 0] += 0.25
    return exp.FactData(dataclasses.replace(task, languages={**task.languages, view: lang}), data.images, data.features)


def _pixel(data, split: str):
    images = data.images[split].copy()
    images[-1, 0, 0, 0] ^= 0x10  # the last image: well past any prefix a key might sample
    return exp.FactData(data.task, {**data.images, split: images}, data.features)


def _swap_facts(data):
    """Two third-order facts swap places in the fact list (their word vectors stay): what implies
    what changes, as the structured order embedding's loss sees it."""
    task = data.task
    i, j = np.flatnonzero(task.orders.numpy() == 3)[[0, -1]]
    facts = list(task.facts)
    facts[i], facts[j] = facts[j], facts[i]
    return exp.FactData(dataclasses.replace(task, facts=facts), data.images, data.features)


def _sem(cfg, **change):
    return {**cfg, "sem": {**cfg["sem"], **change}}


def _sem_row_changes(data, row: str, part: str) -> dict:
    """Changes of (cfg, data, cnn) that must retrain `row`: for SEM-A every input (its data in
    part "data", the CNN and settings in part "model"); for the other rows what they read beyond
    SEM-A's path (their own language view, margin, implications) and the dev split, the input the
    shared key once missed."""
    task = data.task
    seen = int(np.flatnonzero(task.train_counts > 0)[0])
    unseen = int(np.flatnonzero(task.train_counts == 0)[0])  # in no training image: only dev reads it
    view = exp.GLOSS if "gloss" in row else None

    def on_data(change):
        return lambda i: (i[0], change(i[1]), i[2])

    if part == "model":
        return {
            "the pre-trained CNN": lambda i: (i[0], i[1], _perturb_cnn(i[2])),
            "sem.hidden": lambda i: (_sem(i[0], hidden=9), i[1], i[2]),
            "sem.lr": lambda i: (_sem(i[0], lr=2e-3), i[1], i[2]),
            "sem.batch": lambda i: (_sem(i[0], batch=16), i[1], i[2]),
            "sem.epochs": lambda i: (_sem(i[0], epochs=2), i[1], i[2]),
        }
    changes = {
        "the dev split's items": on_data(lambda d: _with_split(d, "dev", _other_items(d.task.dev))),
        "an unseen fact's word vector": on_data(lambda d: _language(d, unseen, view)),
    }
    if row == "SEM-A":
        changes |= {
            "the training split's items": on_data(lambda d: _with_split(d, "train", _other_items(d.task.train))),
            "a training image's pixels": on_data(lambda d: _pixel(d, "train")),
            "the dev split's images per fact": on_data(
                lambda d: _with_split(d, "dev", _other_items(d.task.dev, np.full(len(d.task.facts), 2), 0))
            ),
            "a dev image's pixels": on_data(lambda d: _pixel(d, "dev")),
            "a seen fact's word vector": on_data(lambda d: _language(d, seen, view)),
        }
    if row == ORDER_ROW:
        changes["order.margin"] = lambda i: ({**i[0], "order": {"margin": 0.1}}, i[1], i[2])
        changes["the facts (what implies what)"] = on_data(_swap_facts)
    if view is not None:
        changes["a seen fact's GLOSS vector"] = on_data(lambda d: _language(d, seen, view))
    return changes


@pytest.mark.parametrize(
    "row, part",
    [("SEM-A", "data"), ("SEM-A", "model"), (ORDER_ROW, "data"), ("SEM-A, gloss skip-gram vectors", "data")],
)
def test_sem_row_checkpoint_key_covers_every_input(base, tmp_path, row, part):
    """A SEM row retrains when its training or dev images, word vectors, facts, the pre-trained
    CNN or its settings change, and reloads when nothing does."""
    cfg, data, cnn = base
    cfg = _sem(cfg, epochs=1)

    def train(inputs, workdir):
        c, d, n = inputs
        return exp.train_sem_rows(c, d, n, workdir, progress=False, rows=[row])[row]

    changes = _sem_row_changes(data, row, part)
    assert_key_covers(train, (cfg, data, cnn), changes, tmp_path / "ckpt", lambda r: r["fit"].resumed)


def test_train_sem_checkpoint_key_covers_every_input(base, tmp_path):
    """train_sem on its own (no data_key): its images (all of them), word vectors, orders, fact
    ids, implications, the CNN, every SEMConfig field and a given data_key."""
    _, data, cnn = base
    task = data.task
    fact = task.train.fact[:24]  # 24 images, one step an epoch
    x = data.images["train"][:24]

    def evaluate(model):
        return {"fit": -float(distances(model, x[:8], task.language, task.orders)[np.arange(8), fact[:8]].mean())}

    def train(inputs, ckpt):
        c, n, images, lang, orders, f, imp, key = inputs
        return train_sem(
            c, n, images, lang, orders, evaluate, "fit", ckpt, progress=False, data_key=key, fact=f, implied=imp
        )[1]

    cfg = SEMConfig(hidden=8, epochs=1, batch=64, objective="order")
    base_inputs = (cfg, cnn, x, task.language[fact], task.orders[fact], fact, implies(task.facts), "")

    def at(k, value):
        return lambda i: tuple(value(v) if j == k else v for j, v in enumerate(i))

    def bump_image(images):
        images = images.copy()
        images[-1, 5, 5, 1] ^= 0x20
        return images

    def bump_lang(lang):
        lang = lang.clone()
        lang[-1, 2, 1] += 0.5
        return lang

    def flip_implied(imp):
        imp = np.array(imp, copy=True)
        imp[-1, 0] = ~imp[-1, 0]
        return imp

    changes = {
        "an image (the last)": at(2, bump_image),
        "a word vector": at(3, bump_lang),
        "an image's order": at(4, lambda o: torch.cat([o[:-1], (o[-1:] % 3) + 1])),
        "an image's fact": at(5, lambda f: np.r_[f[:-1], (f[-1] + 1) % len(task.facts)]),
        "what implies what": at(6, flip_implied),
        "the data key": at(7, lambda k: "other data"),
        "the pre-trained CNN": at(1, _perturb_cnn),
        **{
            f"SEMConfig.{f.name}": at(
                0, lambda c, f=f: dataclasses.replace(c, **{f.name: _other_value(f.name, getattr(c, f.name))})
            )
            for f in dataclasses.fields(SEMConfig)
            if f.name != "objective"
        },
    }
    assert_key_covers(train, base_inputs, changes, tmp_path / "sem.pt", lambda r: r.resumed)


def _other_value(name: str, value):
    if isinstance(value, bool):
        return not value
    if name == "epochs":
        return value + 1
    if isinstance(value, int):
        return value + 1 if name != "dim" else 3
    return value * 1.5
