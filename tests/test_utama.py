"""Utama's experiment on the real-data path: MIT-States natural split with precomputed features."""

import numpy as np
import pandas as pd
import torch

from orderlib.experiments import utama as exp

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
    rows = ("visual product", exp.MAIN, "VSE++, RNN (LSTM) + finetune")
    trained = exp.train_rows(cfg, task, vectors, tmp_path, progress=False, rows=rows)
    assert list(trained) == ["visual product", exp.MAIN]  # nothing to finetune from features
    rec = exp.model_records(trained)  # no stand-in CNN on MIT-States features
    assert list(rec) == ["visual product", exp.MAIN] and not rec[exp.MAIN]["loaded_from_checkpoint"]
    assert rec[exp.MAIN]["epochs_run"] >= 1 and rec[exp.MAIN]["trained_at"] == trained[exp.MAIN]["trained_at"]
    df1 = exp.table1(trained, task)
    closed = df1[(df1.protocol == "closed world") & (df1.metric == "top-1")].set_index("method").ours
    assert closed["chance"] == 25.0 and closed.between(0, 100).all()
    assert {"best seen", "best unseen", "best hm", "auc", "best hm (sampled biases)", "auc (sampled biases)"} <= set(
        df1.metric
    )
    df3, _ = exp.table3(trained, task)
    assert set(df3.modification) == {"attribute", "object"} and df3.ours.between(0, 100).all()
    assert isinstance(df3, pd.DataFrame) and (df3.method == exp.MAIN).all()


def test_rows_trained_by_workers_equal_rows_trained_here_on_one_thread(tmp_path, one_thread):
    """Utama's rows side by side in two one-thread processes: the models this process would train on
    one thread, counted as trained in this run."""
    words = _mit_states(tmp_path)
    cfg = {**exp.PRESETS["small"], "word_vectors": str(words)}
    task, vectors = exp.mit_states_task(cfg, tmp_path, tmp_path / "features.npz", tmp_path)
    rows = ("visual product", exp.MAIN, "order-embeddings, RNN (LSTM)")
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
