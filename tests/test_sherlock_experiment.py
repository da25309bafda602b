"""Sherlock's tables from distance matrices: an oracle scores 100, chance-level noise does not."""

import numpy as np
import pytest
import torch
from test_facts import fake

from orderlib.data import fact_tasks
from orderlib.data.attributes import OBJECTS
from orderlib.data.facts import Fact
from orderlib.eval.facts import (
    ALL,
    FACT_PROTOCOLS,
    SAME_ORDER,
    chance_rows,
    fact_topk,
    generalisation_rows,
    retrieval_rows,
)
from orderlib.experiments import sherlock as exp
from orderlib.experiments import sherlock_tables as tables

TINY_SEM = dict(  # a SEM preset that trains in a second
    seed=0,
    train_images=200,
    test_per_fact=1,
    dev_per_fact=1,
    sem=dict(epochs=1, hidden=8, batch=32),
    order=dict(margin=0.05),
)


def fake_task(cfg: dict, word_dim: int, gloss_dim: int | None = None):
    """exp.fact_task on synthetic Fashion-MNIST items and random word vectors (and random GLOSS
    vectors of `gloss_dim`)."""
    sources = {"train": fake("train", 60000), "test": fake("test", 10000)}
    mp = pytest.MonkeyPatch()
    mp.setattr(fact_tasks, "load_fashion_mnist", lambda split: sources[split])
    rng = np.random.default_rng(0)
    words = {w: rng.standard_normal(word_dim).astype(np.float32) for w in exp.vocabulary()}
    gloss = gloss_dim and {w: rng.standard_normal(gloss_dim).astype(np.float32) for w in exp.vocabulary()}
    try:
        return exp.fact_task(cfg, words, gloss=gloss)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def task():
    return fake_task(dict(seed=0, train_images=3000, test_per_fact=2), word_dim=6)


def test_task_shapes_and_language_views(task):
    n = len(task.facts)
    assert task.language.shape == (n, 3, 6) and len(task.test) == 2 * n
    assert task.notes["unseen facts"] > 0 and task.train_counts.sum() == len(task.train)
    i = task.facts.index(Fact("sandal", "left of", "bag"))
    assert torch.allclose(task.language[i, 1], (task.language[task.facts.index(Fact("bag", "left of", "sandal")), 1]))
    assert task.language[task.facts.index(Fact("sandal")), 1:].abs().sum() == 0  # wild-cards are zeros
    objects = task.language[:10, 0]  # the first-order facts: one per object
    cos = objects @ objects.T  # centred on their mean, then unit length: spread out
    assert torch.allclose(objects.norm(dim=1), torch.ones(10)) and cos[~torch.eye(10, dtype=torch.bool)].mean() < 0
    rng = np.random.default_rng(3)
    shared = {w: (np.ones(6) + 0.2 * rng.standard_normal(6)).astype(np.float32) for w in exp.vocabulary()}
    for centre, check in ((False, lambda c: c > 0.9), (True, lambda c: c < 0)):
        o = fact_tasks.slot_vectors(shared, task.facts[:10], centre=centre)[:, 0]
        o = o / o.norm(dim=1, keepdim=True)
        assert check(float((o @ o.T)[~torch.eye(10, dtype=torch.bool)].mean())), centre


def test_oracle_and_noise(task):
    img_fact = torch.as_tensor(task.test.fact)
    rng = torch.Generator().manual_seed(0)
    oracle = torch.rand(len(img_fact), len(task.facts), generator=rng) + 1.0
    oracle[torch.arange(len(img_fact)), img_fact] = 0.0
    rows = {
        (r["scope"], r["candidates"], r["metric"]): r["ours"]
        for r in retrieval_rows("SEM-A", oracle, task)
        if r["protocol"] == "strict"
    }
    assert all(v == pytest.approx(100.0) for v in rows.values()) and len(rows) == 4 * (5 + 3)
    noise = {
        (r["scope"], r["candidates"], r["metric"]): r["ours"]
        for r in retrieval_rows("x", torch.rand(len(img_fact), len(task.facts), generator=rng), task)
        if r["protocol"] == "strict"
    }
    assert noise[("all", ALL, "K10")] < 5 and noise[("all", ALL, "mAP")] < 5
    assert noise[("order 1", SAME_ORDER, "K10")] == 100.0  # only 10 first-order facts to choose from
    gen = generalisation_rows("SEM-A", oracle, task)
    k10 = [r for r in gen if r["metric"] == "K10" and r["candidates"] == ALL and r["protocol"] == "strict"]
    assert len(k10) == 4 and all(r["ours"] == pytest.approx(100.0) for r in k10)
    assert {r["paper"] for r in k10} == {2.063, 3.022, 3.092, 2.962}
    chance = {(r["candidates"], r["metric"]): r["ours"] for r in chance_rows(task) if r["protocol"] == "strict"}
    assert [chance[(ALL, f"K{k}")] for k in (1, 5, 10)] == pytest.approx([100 / 810, 500 / 810, 1000 / 810])
    n = len(task.test)  # 2 images per fact: 20 of order 1 (10 candidates), 400 of order 2 (200), 1200 of order 3 (600)
    assert chance[(SAME_ORDER, "K1")] == pytest.approx(100 * (20 / 10 + 400 / 200 + 1200 / 600) / n)


def test_baselines_learn_from_features_that_carry_the_fact(task):
    """Features = the fact's language view (flattened) projected + noise: both closed-form
    baselines then rank the right fact far above chance, including facts unseen in training."""
    rng = np.random.default_rng(1)
    proj = rng.standard_normal((18, 24))
    feats = lambda fs: task.language[fs].flatten(1).numpy() @ proj + 0.05 * rng.standard_normal((len(fs), 24))
    d = exp.baseline_distances(
        task, feats(task.train.fact), feats(task.test.fact), dict(cca_dim=18, eszsl_gamma=0.1, eszsl_lambda=0.1)
    )
    img_fact = torch.as_tensor(task.test.fact)
    unseen = torch.as_tensor(task.train_counts == 0)[img_fact]
    for name, dist in d.items():
        assert dist.shape == (len(img_fact), len(task.facts))
        k = fact_topk(dist, img_fact, ks=(10,))["K10"]
        k_unseen = fact_topk(dist[unseen], img_fact[unseen], ks=(10,))["K10"]
        assert k > 30 and k_unseen > 10, (name, k, k_unseen)  # chance K10 is 1.2%


def test_frozen_features_keep_the_layout():
    from orderlib.encoders.cnn import ItemCNN

    with torch.random.fork_rng(devices=[]):  # the same random CNN whatever ran before (the bound depends on it)
        torch.manual_seed(0)
        cnn = ItemCNN(10, 4, in_channels=3).eval()
    img = np.zeros((2, 64, 64, 3), np.uint8)
    img[0, :32, :32] = 200  # top left
    img[1, 32:, 32:] = 200  # bottom right
    f = exp.frozen_features(cnn, img)
    assert f.shape == (2, 4 * cnn.channels)
    cells = f.reshape(2, cnn.channels, 4)  # (N, C, cell)
    assert not np.allclose(cells[0], cells[1])
    same = np.abs(cells[0][:, 0] - cells[1][:, 3]).sum()  # the same patch in another cell
    empty = np.abs(cells[0][:, 0] - cells[0][:, 3]).sum()  # the patch vs an empty cell
    assert same < 0.5 * empty


def test_same_order_candidates_and_figure7_bins(task):
    """An image's own-order candidates exclude the lower-order facts that win among all facts
    when wild-card slots are ignored; Figure 7's bins cover every SPO test image once."""
    img_fact = torch.as_tensor(task.test.fact)
    s_of = torch.tensor([OBJECTS.index(f.s) for f in task.facts])
    dist = torch.rand(len(img_fact), len(task.facts), generator=torch.Generator().manual_seed(2)) + 1.0
    dist[torch.arange(len(img_fact)), img_fact] = 0.5  # the true fact beats every other fact of its order ...
    dist[s_of[img_fact][:, None] == s_of[None, :]] *= 0.1  # ... but not its subject's lower-order facts
    dist[:, task.orders == 1] = dist[:, task.orders == 1].clamp(max=0.01)
    rows = {
        (r["scope"], r["candidates"], r["metric"]): r["ours"]
        for r in retrieval_rows("m", dist, task)
        if r["protocol"] == "strict"
    }
    assert rows[("order 3", ALL, "K1")] == 0.0 and rows[("order 3", SAME_ORDER, "K1")] == 100.0
    curve = tables.images_per_fact_curve({"m": {"dist": dist}}, task)
    spo_images = int((task.orders[img_fact] == 3).sum())
    assert curve[curve.protocol == "strict"]["images"].sum() == spo_images
    assert set(curve["bin"]) == {"0", "1", "2-5", "6-15", "16-50", "51+"}


def test_table1_and_table5_layout(task):
    img_fact = torch.as_tensor(task.test.fact)
    oracle = torch.ones(len(img_fact), len(task.facts))
    oracle[torch.arange(len(img_fact)), img_fact] = 0.0
    results = {f"{m}, {s}": {"dist": oracle} for m in tables.CAPTION_METHODS for s in tables.TRAININGS.values()}
    t1 = tables.sherlock_table1(results, task)
    assert len(t1) == 16 and set(t1["protocol"]) == {"strict", "implied"} and t1["paper"].notna().all()
    assert (t1[t1.protocol == "strict"]["ours"] == 100.0).all()
    t5 = tables.table5({"SEM-A": {"dist": oracle}}, task)
    assert "unseen SPO facts" in set(t5["case"])
    unseen = t5[(t5.case == "unseen SPO facts") & (t5.metric == "facts") & (t5.protocol == "strict")]["ours"].item()
    assert unseen == ((task.orders.numpy() == 3) & (task.train_counts == 0)).sum() > 0


def test_sem_rows_seed_seeds_the_model_not_the_data(tmp_path):
    """train_sem_rows(seed=s) trains the same data from another initialisation and batch order,
    into its own checkpoint; the default seed is the preset's (same model, same file name)."""
    from orderlib.encoders.cnn import ItemCNN

    cfg = dict(TINY_SEM)
    t = fake_task(cfg, word_dim=4)
    data = exp.FactData(t, {s: getattr(t, s).render() for s in ("train", "dev", "test")}, {})
    cnn = ItemCNN(10, 4, in_channels=3)
    row = ["structured order-embedding (SEM-A)"]
    runs = {
        s: exp.train_sem_rows(cfg, data, cnn, tmp_path, progress=False, rows=row, seed=s)[row[0]] for s in (None, 0, 1)
    }
    assert torch.equal(runs[None]["dist"], runs[0]["dist"])  # default = the preset's seed
    assert not torch.allclose(runs[0]["dist"], runs[1]["dist"])  # another seed, another model
    assert runs[0]["fit"].resumed and not runs[1]["fit"].resumed  # seed 0 reloaded, seed 1 its own file
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == [
        "structured-order-embedding-sem-a_810.pt",
        "structured-order-embedding-sem-a_810_seed1.pt",
    ]


def test_sem_rows_trained_by_workers_equal_rows_trained_here_on_one_thread(tmp_path, one_thread):
    """Sherlock's SEM rows side by side in two one-thread processes: the distances this process gets
    training them on one thread, counted as trained in this run."""
    from orderlib.encoders.cnn import ItemCNN

    cfg = dict(TINY_SEM)
    t = fake_task(cfg, word_dim=4)
    data = exp.FactData(t, {s: getattr(t, s).render() for s in ("train", "dev", "test")}, {})
    cnn = ItemCNN(10, 4, in_channels=3)
    rows = ["SEM-A", "SEM-B", "structured order-embedding (SEM-A)"]
    with one_thread():
        here = exp.train_sem_rows(cfg, data, cnn, tmp_path / "here", progress=False, rows=rows)
    pooled = exp.train_sem_rows(cfg, data, cnn, tmp_path / "pooled", progress=False, rows=rows, workers=2)
    assert list(pooled) == rows
    for m in rows:
        assert torch.equal(here[m]["dist"], pooled[m]["dist"]), m
        assert not pooled[m]["fit"].resumed and pooled[m]["fit"].seconds > 0, m


def test_gloss_row_regresses_its_own_language_view(tmp_path):
    """ "SEM-A, gloss skip-gram vectors" is SEM-A regressing the GLOSS view (its own dimension, its own
    checkpoint, a Table 4 row under both protocols); without that view it is left out."""
    import dataclasses

    from orderlib.encoders.cnn import ItemCNN
    from orderlib.training.sherlock import embed_images

    cfg = dict(TINY_SEM)
    t = fake_task(cfg, word_dim=4, gloss_dim=6)
    gloss = exp.GLOSS
    assert t.languages[gloss].shape == (len(t.facts), 3, 6) and t.language.shape == (len(t.facts), 3, 4)
    data = exp.FactData(t, {s: getattr(t, s).render() for s in ("train", "dev", "test")}, {})
    cnn = ItemCNN(10, 4, in_channels=3)
    rows = ["SEM-A", "SEM-A, gloss skip-gram vectors"]
    out = exp.train_sem_rows(cfg, data, cnn, tmp_path, progress=False, rows=rows)
    assert list(out) == rows
    with torch.no_grad():
        dims = [embed_images(out[m]["model"], data.images["test"][:2]).shape[-1] for m in rows]
    assert dims == [4, 6]
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["sem-a-gloss-skip-gram-vectors_810.pt", "sem-a_810.pt"]
    df = tables.table4(out, t)
    assert set(df[df.method == rows[1]].protocol) == set(FACT_PROTOCOLS)
    bare = exp.FactData(dataclasses.replace(t, languages={}), data.images, {})
    assert list(exp.train_sem_rows(cfg, bare, cnn, tmp_path, progress=False, rows=rows)) == ["SEM-A"]


def test_glove_is_the_default_and_the_notes_say_which_vectors(tmp_path):
    assert {p["word_vectors"] for p in exp.PRESETS.values()} == {"glove-6b-50d"}
    notes = exp.word_notes(exp.PRESETS["small"])
    assert notes["text vectors"].startswith("GloVe 6B, 50-d") and "skip-gram" in notes["SEM-A, gloss skip-gram vectors"]
    none = {**exp.PRESETS["small"], "word_vectors": None}
    assert exp.word_notes(none) == {"text vectors": "skip-gram on WordNet 3.0 text (word tokens)"}
    assert exp.gloss_words(none, tmp_path) is None  # the other rows' words are the skip-gram's already


def test_ties_counted_and_table5_side_holds_the_own_order_column(task):
    from orderlib.experiments import sherlock_walkthrough as sw

    img_fact = torch.as_tensor(task.test.fact)
    oracle = torch.rand(len(img_fact), len(task.facts), generator=torch.Generator().manual_seed(4)) + 1.0
    oracle[torch.arange(len(img_fact)), img_fact] = 0.0
    tied = oracle.clone()
    tied[:5, 20:23] = 0.0  # five images: their fact and three others share the best score
    tied[torch.arange(5), img_fact[:5]] = 0.0
    t = tables.top_ties({"oracle": {"dist": oracle}, "tied": {"dist": tied}}, task).set_index(["method", "protocol"])
    assert (t.loc["oracle", "images"] == 0).all() and t.loc[("tied", "strict"), "images"] == 5
    assert t.loc[("tied", "strict"), "most"] == 4
    t5 = tables.table5({"SEM-A": {"dist": oracle}, "MV CCA": {"dist": oracle.flip(1)}}, task)
    side = sw.table5_side(t5)
    assert list(side.columns) == ["method", "metric", "paper", "ours", sw.OWN_ORDER_K10, "ours ran on"]
    assert len(side) == 4 and (side[side.method == "SEM-A"][sw.OWN_ORDER_K10] == 100).all()
