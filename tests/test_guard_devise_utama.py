"""Guards of the DeViSE and Utama trainers (tests/guards.py): test data never chooses, and a
checkpoint is reused only for the same inputs.

Selection rules, and the split that makes each choice:
- DeViSE, Tables 1-3 (experiments/devise.py, training/devise.py): the softmax baseline's (the
  CNN's) epoch and the epoch of each DeViSE stage (frozen CNN, fine-tune) on held-out Fashion-MNIST
  *train* items (train[50000:]); the zero-shot candidate sets from WordNet and the held-out classes
  alone. Test images are only scored.
- DeViSE on pair labels (experiments/devise_pairs.py): the softmax head's epoch and every DeViSE
  map's epoch on the "held" images.
- Utama (experiments/utama.py, training/composition.py): every row's epoch, frozen and finetune
  phase, on the validation pairs' generalised AUC; the bias of the "at the val-chosen bias" rows
  on val (the bias of best harmonic mean over the validation images).
"""

import copy
import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch
from guards import assert_key_covers, assert_test_blind

import orderlib.experiments.devise_pairs as dp
import orderlib.training.composition as composition
import orderlib.training.devise as devise_training
import orderlib.training.item_cnn as cnn_module
from orderlib.checkpoint import fingerprint
from orderlib.data.attribute_tasks import pair_index
from orderlib.data.fashion_mnist import FashionMNIST
from orderlib.data.wordnet import NounGraph
from orderlib.encoders.cnn import ItemCNN, item_features
from orderlib.eval.compositional import accuracy_at_bias, generalised_sweep, predict_scores
from orderlib.eval.hierarchy import hit_at_k
from orderlib.experiments import devise as dexp
from orderlib.experiments import utama as uexp
from orderlib.experiments import utama_tables as attribute_tables
from orderlib.training.composition import CompositionConfig, train_recogniser
from orderlib.training.devise import DeViSEConfig, embed_images, rank_labels, train_devise


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models train faster on one thread than on two contended ones."""
    with one_thread():
        yield


def _record_fits(monkeypatch, *modules) -> list:
    """Wrap the `fit` each module calls: every run's (history without timings, best epoch, best score)."""
    runs = []
    for module in modules:

        def recorded(*args, _real=module.fit, **kwargs):
            r = _real(*args, **kwargs)
            history = [{k: v for k, v in h.items() if k != "seconds"} for h in r.history]
            runs.append((history, r.best_epoch, r.best_score))
            return r

        monkeypatch.setattr(module, "fit", recorded)
    return runs


def _weights(model: torch.nn.Module) -> str:
    return fingerprint(model.state_dict())


# ---------------------------------------------------------------------------------------------
# DeViSE, Tables 1-3: a stand-in Fashion-MNIST (three toy classes) and a hand-built WordNet.

# 0 entity; 1 artifact -> 0; 2 garment -> 1; 3 footwear -> 1; 4 rock -> 0; 5-14 the ten classes
# (clothes under garment, shoes under footwear, the bag under artifact); 15 robe -> 2; 16 slipper
# -> 3; 17 pebble -> 4.
_CLASS_PARENT = [2, 2, 2, 2, 2, 3, 2, 3, 1, 3]
_NAMES = ["entity", "artifact", "garment", "footwear", "rock", *[f"class{c}" for c in range(10)]]
_NAMES += ["robe", "slipper", "pebble"]
_PARENTS = [[], [0], [1], [1], [0], *[[p] for p in _CLASS_PARENT], [2], [3], [4]]


def _spaces(dim: int = 8) -> dexp.LabelSpaces:
    graph = NounGraph([f"{n}.n.01" for n in _NAMES], _PARENTS, "toy", "guard-devise-toy-graph", "hand-built")
    unit = lambda seed: torch.nn.functional.normalize(
        torch.randn(len(_NAMES), dim, generator=torch.Generator().manual_seed(seed)), dim=1
    ).numpy()
    return dexp.LabelSpaces(graph, unit(0), unit(1), np.abs(unit(2)), np.arange(5, 15), {})


def _small(toy_items, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Toy items at 14 x 14 (every other pixel): the same three classes, a quarter of the work."""
    x, y = toy_items(n, seed)
    return np.ascontiguousarray(x[:, ::2, ::2]), y


def _levels(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (n, 14, 14) items whose class (0-2) is their brightness: what a random, frozen CNN's
    pooled features tell apart."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    return (rng.integers(0, 60, (n, 14, 14)) + 80 * labels[:, None, None]).astype(np.uint8), labels


def _fashion(toy_items, test_seed: int = 2, permute: bool = False) -> dict:
    """load_fashion_mnist's splits: train items [0, 240) and held-out items [50000, 50090) (as the
    experiment reads them), 150 test items."""
    x, y = _small(toy_items, 240)
    hx, hy = _small(toy_items, 90, seed=1)
    images, labels = np.zeros((50090, 14, 14), np.uint8), np.zeros(50090, np.int64)
    images[:240], labels[:240], images[50000:], labels[50000:] = x, y, hx, hy
    tx, ty = _small(toy_items, 150, seed=test_seed)
    if permute:
        ty = np.random.default_rng(test_seed).permutation(ty)
    return {"train": FashionMNIST(images, labels, "train"), "test": FashionMNIST(tx, ty, "test")}


DEVISE_CFG = dict(
    seed=0,
    items=240,
    cnn=dict(epochs=2, batch=32, width=4, lr=1e-2),
    devise=dict(epochs=3, finetune_epochs=1, batch=32, lr=3e-2),
    unseen=(2,),
    hop_sets=(2,),
    top="artifact.n.01",
)


def test_devise_experiment_never_lets_test_choose(toy_items, tmp_path, monkeypatch):
    """Notebooks 06-07's flow on a stand-in: the softmax baseline's epoch, both DeViSE stages'
    epochs, the models and their held-out scores, and the zero-shot candidate sets are the same when
    the test split is redrawn and its labels permuted; only the test metrics move."""
    fits = _record_fits(monkeypatch, cnn_module, devise_training)
    spaces, runs = _spaces(), itertools.count()

    def run(fashion: dict) -> dict:
        monkeypatch.setattr(dexp, "load_fashion_mnist", lambda split, root=None: fashion[split])
        start, workdir = len(fits), tmp_path / f"run{next(runs)}"
        sets = dexp.zero_shot_sets(DEVISE_CFG, spaces)
        trained = dexp.train_models(DEVISE_CFG, spaces, [0, 1], workdir, progress=False, methods=("devise",))
        test = dexp.load_fashion_mnist("test")
        seen = np.isin(test.labels, [0, 1])
        held = fashion["train"].images[50000:], fashion["train"].labels[50000:]
        keep = np.isin(held[1], [0, 1])
        cand = spaces.classes[[0, 1]]
        return {
            "fits": fits[start:],
            "histories": {
                m: [{k: v for k, v in h.items() if k != "seconds"} for h in hist]
                for m, hist in trained["histories"].items()
            },
            "weights": {m: _weights(model) for m, model in trained["models"].items()},
            "sets": {k: v.tolist() for k, v in sets.items()},
            "held": {
                m: hit_at_k(
                    dexp.ranking(trained, m, spaces, held[0][keep], cand, 1), spaces.classes[held[1][keep]], (1,)
                )
                for m in trained["models"]
            },
            "test": (
                dexp.candidate_set_metrics(trained, spaces, test.images[seen], test.labels[seen], cand, (1, 2), (2,)),
                dexp.zero_shot_table(trained, spaces, test.images[~seen], test.labels[~seen], sets).ours.tolist(),
            ),
        }

    a, _ = assert_test_blind(
        run,
        _fashion(toy_items),
        lambda data: {**data, "test": _fashion(toy_items, test_seed=3, permute=True)["test"]},
        history=lambda r: (r["fits"], r["histories"]),
        chosen=lambda r: ([f[1] for f in r["fits"]], r["weights"], r["sets"]),
        dev=lambda r: r["held"],
        test=lambda r: r["test"],
    )
    assert len(a["fits"]) == 3  # the CNN, DeViSE's two stages: each chose its epoch
    for m in ("softmax baseline", "devise"):  # two seen labels: well above chance (50%)
        assert a["held"][m]["hit@1"] > 75 and a["test"][0][m]["hit@1"] > 75, m


def test_devise_pair_labels_never_let_test_choose(tmp_path, monkeypatch):
    """Notebook-08-style pair labels (devise_pairs): the softmax head's and each DeViSE map's epoch
    and weights, and their held-out hit@1, are blind to a redrawn, relabelled test split."""
    fits = _record_fits(monkeypatch, dp, devise_training)
    pairs = np.array([[0, 0], [0, 1], [1, 0]])  # label i is the pair of toy class i
    cnn = ItemCNN(3, width=4).eval().requires_grad_(False)
    words = np.random.default_rng(0).standard_normal((30, 8)).astype(np.float32)
    vectors = {"devise": dp.pair_vectors(words, pairs), "random embeddings": dexp.random_vectors((3, 8), 1)}
    cfg = dict(seed=0, epochs=4, batch=32, lr=0.5)  # a large step: the random CNN's features are ~0.01
    runs = itertools.count()

    def run(data: dict) -> dict:
        start = len(fits)
        models, _ = dp.train_rows(cnn, data, vectors, cfg, tmp_path / f"run{next(runs)}")
        hx, hy = data["held"]
        with torch.no_grad():
            held = {dp.SOFTMAX: float((models[dp.SOFTMAX](item_features(cnn, hx)).argmax(1).numpy() == hy).mean())}
        for row, vec in vectors.items():
            ranked = rank_labels(models[row], embed_images(models[row], hx), torch.as_tensor(vec), 1)[:, 0]
            held[row] = float((ranked == hy).mean())
        return {
            "fits": fits[start:],
            "weights": {row: _weights(m) for row, m in models.items()},
            "held": held,
            "test": dp.pair_label_metrics(models, cnn, vectors, data, pairs),
        }

    def relabel(data):
        tx, ty = _levels(120, seed=3)
        return {**data, "test": (tx, np.random.default_rng(3).permutation(ty))}

    a, _ = assert_test_blind(
        run,
        {
            "train": _levels(150),
            "held": _levels(60, seed=1),
            "test": _levels(120, seed=2),
        },
        relabel,
        history=lambda r: r["fits"],
        chosen=lambda r: ([f[1] for f in r["fits"]], r["weights"]),
        dev=lambda r: r["held"],
        test=lambda r: r["test"],
    )
    assert len(a["fits"]) == 3  # the softmax head and the two DeViSE maps (no fine-tuning stage)
    assert a["test"]["chance"]["hit@1"] == pytest.approx(100 / 3)
    for row in a["held"]:  # every head well above chance (1 in 3), held out and on test
        assert a["held"][row] > 0.6 and a["test"][row]["hit@1"] > 60, row


def _devise_inputs(toy_items) -> dict:
    x, y = _small(toy_items, 64)
    hx, hy = _small(toy_items, 32, seed=1)
    labels = torch.nn.functional.normalize(torch.randn(3, 6, generator=torch.Generator().manual_seed(0)), dim=1)
    return dict(
        cnn=ItemCNN(3, width=4).eval(),
        x=x,
        y=y,
        hx=hx,
        hy=hy,
        labels=labels,
        cfg=DeViSEConfig(epochs=1, finetune_epochs=1, batch=32),
    )


def _nudged(images: np.ndarray) -> np.ndarray:
    out = images.copy()
    out[0, 0, 0] ^= 1
    return out


def _swapped(labels: np.ndarray) -> np.ndarray:
    out = labels.copy()
    i, j = 0, int(np.flatnonzero(labels != labels[0])[0])
    out[i], out[j] = out[j], out[i]
    return out


def test_devise_checkpoint_key_covers_every_split_the_label_vectors_the_cnn_and_the_config(toy_items, tmp_path):
    def train(inp: dict, ckpt):
        model, _ = train_devise(
            inp["cnn"],
            inp["x"],
            inp["y"],
            inp["hx"],
            inp["hy"],
            inp["labels"],
            inp["cfg"],
            progress=False,
            checkpoint_dir=ckpt,
        )
        return model

    def cnn_changed(inp):
        cnn = copy.deepcopy(inp["cnn"])
        with torch.no_grad():
            cnn.trunk[0].weight[0, 0, 0, 0] += 1e-3
        return {**inp, "cnn": cnn}

    def labels_changed(inp):
        t = inp["labels"].clone()
        t[2, 0] += 1e-3
        return {**inp, "labels": t}

    cfg = lambda **kw: lambda inp: {**inp, "cfg": replace(inp["cfg"], **kw)}
    assert_key_covers(
        train,
        _devise_inputs(toy_items),
        {
            "the training images": lambda inp: {**inp, "x": _nudged(inp["x"])},
            "the training labels": lambda inp: {**inp, "y": _swapped(inp["y"])},
            "the held-out images": lambda inp: {**inp, "hx": _nudged(inp["hx"])},
            "the held-out labels": lambda inp: {**inp, "hy": _swapped(inp["hy"])},
            "the label vectors": labels_changed,
            "the CNN": cnn_changed,
            "the margin": cfg(margin=0.2),
            "the learning rate": cfg(lr=2e-3),
            "the fine-tuning learning rate": cfg(finetune_lr=2e-4),
            "the epochs": cfg(epochs=2),
            "the batch": cfg(batch=16),
            "the seed": cfg(seed=1),
        },
        tmp_path / "devise",
        lambda model: model.provenance["loaded_from_checkpoint"],
    )


# ---------------------------------------------------------------------------------------------
# Utama: an in-memory task (4 attributes x 3 objects): images and a frozen CNN's features of them
# (what the finetune row needs), or factorised features alone.

U_ATTRS, U_OBJS = ["big", "old", "red", "wet"], ["car", "house", "tree"]
_ALL = np.array([(a, o) for a in range(4) for o in range(3)])
U_PAIRS = {"seen": _ALL[::2], "val_unseen": _ALL[1::4], "test_unseen": _ALL[3::4]}
FAST_ROWS = (
    "visual product",
    "label embedding (LE)",
    "CRF (Eq. 7)",
    attribute_tables.MAIN,
    "VSE++, RNN (LSTM) + finetune",
)


def _pair_images(pairs: np.ndarray, per_pair: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (N, 8, 8, 3): the attribute tints a channel, the object brightens a band of rows."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(pairs, per_pair, 0)
    x = rng.integers(0, 60, (len(labels), 8, 8, 3))
    for i, (a, o) in enumerate(labels):
        x[i, :, :, a % 3] += 90 + 40 * (a // 3)
        x[i, 2 * o : 2 * o + 3] += 90
    return x.astype(np.uint8), labels


def _utama_task(cnn: ItemCNN | None = None, test_seed: int = 2, permute: bool = False, per_pair: int = 4) -> uexp.Task:
    """Train (6 per seen pair), val (seen[:3] and the val unseen pairs) and test (seen[3:] and the
    test unseen pairs) images. With a CNN: the images and their CNN features; without: no images,
    features = attribute code + object code + noise (a world where composition works). `permute`
    scrambles the test labels after drawing their images."""
    p = U_PAIRS
    splits = {
        "train": (p["seen"], 6, 0),
        "val": (np.concatenate([p["seen"][:3], p["val_unseen"]]), per_pair, 1),
        "test": (np.concatenate([p["seen"][3:], p["test_unseen"]]), per_pair, test_seed),
    }
    codes = np.random.default_rng(0).standard_normal((len(U_ATTRS) + len(U_OBJS), 12))
    images, labels, features = {}, {}, {}
    for name, (pairs, n, seed) in splits.items():
        images[name], labels[name] = _pair_images(pairs, n, seed)
        if cnn is not None:
            features[name] = item_features(cnn, images[name])
        else:
            noise = 0.3 * np.random.default_rng(seed + 10).standard_normal((len(labels[name]), 12))
            x = codes[labels[name][:, 0]] + codes[len(U_ATTRS) + labels[name][:, 1]] + noise
            features[name] = torch.as_tensor(x, dtype=torch.float32)
    if permute:
        labels["test"] = labels["test"][np.random.default_rng(test_seed).permutation(len(labels["test"]))]
    return uexp.Task(list(U_ATTRS), list(U_OBJS), dict(p), features, labels, images if cnn is not None else {})


def _utama_cfg(**train) -> dict:
    return {
        **uexp.PRESETS["small"],
        "train": {**dict(epochs=3, dim=16, hidden=16, tensor_dim=4, batch=8), **train},
        "finetune_epochs": 2,
    }


def _words(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((len(U_ATTRS) + len(U_OBJS), 6)).astype(np.float32)


def test_utama_epochs_and_the_val_chosen_bias_never_see_test(tmp_path, monkeypatch):
    """Every row's epochs (frozen and finetune phases), weights and validation scores, and the bias
    behind "at the val-chosen bias", are the same when the test images are redrawn and their
    labels permuted; only Table 1's test numbers move."""
    fits = _record_fits(monkeypatch, composition)
    biases = []

    def recorded_bias(scores, target, unseen, bias):
        biases.append(float(bias))
        return accuracy_at_bias(scores, target, unseen, bias)

    monkeypatch.setattr(attribute_tables, "accuracy_at_bias", recorded_bias)
    torch.manual_seed(0)
    cnn = ItemCNN(3, width=4, in_channels=3).eval().requires_grad_(False)
    cfg, words, runs = _utama_cfg(), _words(), itertools.count()

    def run(task: uexp.Task) -> dict:
        start, b0 = len(fits), len(biases)
        trained = uexp.train_rows(cfg, task, words, tmp_path / f"run{next(runs)}", cnn, progress=False, rows=FAST_ROWS)
        df = attribute_tables.utama_table1(trained, task)
        val_pairs, val_unseen = task.candidates("val")
        val_target = pair_index(task.labels["val"], val_pairs)
        val = {}
        for row, t in trained.items():
            s = generalised_sweep(
                predict_scores(t["model"], uexp.inputs(task, t["model"], "val"), val_pairs), val_target, val_unseen
            )
            val[row] = {k: v for k, v in s.items() if k != "curve"}
        return {
            "rows": list(trained),
            "fits": fits[start:],
            "biases": biases[b0:],
            "weights": {row: _weights(t["model"]) for row, t in trained.items()},
            "val": val,
            "test": df.set_index(["method", "protocol", "metric"]).ours.to_dict(),
        }

    a, _ = assert_test_blind(
        run,
        _utama_task(cnn),
        lambda task: _utama_task(cnn, test_seed=3, permute=True),
        history=lambda r: r["fits"],
        chosen=lambda r: ([f[1] for f in r["fits"]], r["biases"], r["weights"]),
        dev=lambda r: r["val"],
        test=lambda r: r["test"],
    )
    assert a["rows"] == list(FAST_ROWS) and len(a["fits"]) == len(FAST_ROWS) + 1  # + the finetune phase
    assert a["biases"] == [a["val"][row]["bias"] for row in FAST_ROWS]  # the bias of best val HM, row by row


def test_table1_reports_test_accuracy_at_the_bias_of_best_validation_hm(tmp_path):
    """The "at the val-chosen bias" rows, against a reference computed here: sweep the validation
    images' scores for the bias of best harmonic mean, then score the test images at it. The
    test's own best bias gives other numbers here, so the rows cannot come from it."""
    task = _utama_task(per_pair=8)
    trained = uexp.train_rows(
        _utama_cfg(epochs=20, batch=4, decay_every=100),
        task,
        _words(),
        tmp_path,
        progress=False,
        rows=("visual product",),
    )
    ours = attribute_tables.utama_table1(trained, task).set_index(["method", "metric"]).ours
    model = trained["visual product"]["model"]
    score = lambda split: predict_scores(model, task.features[split], task.candidates(split)[0])
    target = lambda split: pair_index(task.labels[split], task.candidates(split)[0])
    val_bias = generalised_sweep(score("val"), target("val"), task.candidates("val")[1])["bias"]
    test_pairs, test_unseen = task.candidates("test")
    want = accuracy_at_bias(score("test"), target("test"), test_unseen, val_bias)
    test_sweep = generalised_sweep(score("test"), target("test"), test_unseen)
    at_test_bias = accuracy_at_bias(score("test"), target("test"), test_unseen, test_sweep["bias"])
    assert at_test_bias["hm"] == pytest.approx(test_sweep["best hm"])
    for m in ("seen", "unseen", "hm"):
        assert ours[("visual product", f"{m} at the val-chosen bias")] == pytest.approx(want[m])
    assert want != at_test_bias  # the reference tells the two biases apart on this task
    assert ours[("visual product", "top-1")] > 2 * ours[("chance", "top-1")]  # it composes: 3 unseen pairs


def test_recogniser_checkpoint_key_covers_features_labels_words_seen_pairs_and_config(tmp_path):
    task = _utama_task()
    val_pairs, val_unseen = task.candidates("val")
    val_target = pair_index(task.labels["val"], val_pairs)

    def evaluate(model):
        return {
            "auc": generalised_sweep(predict_scores(model, task.features["val"], val_pairs), val_target, val_unseen)[
                "auc"
            ]
        }

    def train(inp: dict, ckpt):
        _, fits = train_recogniser(
            inp["cfg"], inp["words"], 4, inp["features"], inp["labels"], inp["seen"], evaluate, "auc", ckpt, False
        )
        return fits

    def features_changed(inp):
        f = inp["features"].clone()
        f[0, 0] += 1e-3
        return {**inp, "features": f}

    def labels_changed(inp):
        lab = inp["labels"].copy()
        other = int(np.flatnonzero((lab != lab[0]).any(1))[0])
        lab[[0, other]] = lab[[other, 0]]
        return {**inp, "labels": lab}

    def words_changed(inp):
        w = inp["words"].copy()
        w[-1, 0] += 1e-3
        return {**inp, "words": w}

    cfg = lambda **kw: lambda inp: {**inp, "cfg": replace(inp["cfg"], **kw)}
    assert_key_covers(
        train,
        dict(
            cfg=CompositionConfig(model="le", composer="mlp", epochs=2, dim=8, hidden=8, batch=8, lr=1e-3),
            words=_words(),
            features=task.features["train"],
            labels=task.labels["train"],
            seen=task.pairs["seen"],
        ),
        {
            "the features": features_changed,
            "the labels": labels_changed,
            "the seen pairs": lambda inp: {**inp, "seen": np.roll(inp["seen"], 1, 0)},
            "the word vectors": words_changed,
            "the model": cfg(model="visual_product"),
            "the composer": cfg(composer="linear"),
            "the learning rate": cfg(lr=2e-3),
            "the epochs": cfg(epochs=3),
            "the seed": cfg(seed=1),
        },
        tmp_path / "row.pt",
        lambda fits: any(f.resumed for f in fits),
    )


def test_utama_row_checkpoints_follow_every_split_the_pairs_the_vectors_and_the_preset(tmp_path):
    """train_rows keys a row by the whole task (train, val and test features and labels, the three
    pair sets), the row's word vectors and its configuration."""

    def train(inp: dict, workdir):
        t = uexp.train_rows(
            inp["cfg"], inp["task"], inp["words"], workdir, progress=False, rows=("label embedding (LE)",)
        )
        return t["label embedding (LE)"]["fits"]

    def task_changed(what: str, split: str):
        def change(inp):
            task = copy.copy(inp["task"])
            if what == "features":
                f = task.features[split].clone()
                f[0, 0] += 1e-3
                task.features = {**task.features, split: f}
            elif what == "labels":
                lab = task.labels[split]
                other = int(np.flatnonzero((lab != lab[0]).any(1))[0])
                lab = lab.copy()
                lab[[0, other]] = lab[[other, 0]]
                task.labels = {**task.labels, split: lab}
            else:
                task.pairs = {**task.pairs, split: np.roll(task.pairs[split], 1, 0)}
            return {**inp, "task": task}

        return change

    def words_changed(inp):
        w = inp["words"].copy()
        w[0, 0] += 1e-3
        return {**inp, "words": w}

    changes = {
        f"the {split} {what}": task_changed(what, split)
        for what in ("features", "labels")
        for split in ("train", "val", "test")
    }
    changes.update({f"the {k} pairs": task_changed("pairs", k) for k in U_PAIRS})
    changes["the word vectors"] = words_changed
    changes["the preset's batch"] = lambda inp: {
        **inp,
        "cfg": {**inp["cfg"], "train": {**inp["cfg"]["train"], "batch": 4}},
    }
    changes["the seed"] = lambda inp: {**inp, "cfg": {**inp["cfg"], "seed": 1}}
    assert_key_covers(
        train,
        dict(task=_utama_task(), words=_words(), cfg=_utama_cfg(epochs=2)),
        changes,
        tmp_path / "rows",
        lambda fits: any(f.resumed for f in fits),
    )
