"""`orderlib eval compositional`: hand-worked closed world, a brute-force bias sweep, Utama's own
Table 1 (utama.table1 over a model that returns the same matrix), and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from orderlib import cli
from orderlib.experiments import utama
from orderlib.experiments.utama_tables import utama_table1


def run(tmp_path: Path, scores, labels, seen, *extra, out="out") -> pd.DataFrame:
    np.save(tmp_path / "s.npy", np.asarray(scores))
    (tmp_path / "labels.txt").write_text("".join(f"{v}\n" for v in labels))
    (tmp_path / "seen.txt").write_text("".join(f"{v}\n" for v in seen))
    argv = [
        "eval",
        "compositional",
        "--scores",
        tmp_path / "s.npy",
        "--labels",
        tmp_path / "labels.txt",
        "--seen",
        tmp_path / "seen.txt",
        *extra,
        "--out",
        tmp_path / out,
    ]
    assert cli.main([str(a) for a in argv]) == 0
    return pd.read_csv(tmp_path / out / "compositional.csv")


def ours(df, metric, protocol="generalised", method=None) -> float:
    sel = (df.metric == metric) & (df.protocol == protocol) & (df.method == (method or df.method.iloc[0]))
    assert sel.sum() == 1, metric
    return float(df.loc[sel, "ours"].iloc[0])


def test_closed_world_by_hand(tmp_path):
    # pairs 0, 1 seen; 2, 3, 4 unseen. Images 2-4 are of unseen pairs; among columns 2-4:
    # image 2 (pair 2): best of its row -> hit; image 3 (pair 3): second; image 4 (pair 4): third.
    scores = [
        [0.9, 0.1, 0.2, 0.3, 0.0],
        [0.1, 0.8, 0.0, 0.2, 0.1],
        [0.9, 0.9, 0.7, 0.1, 0.2],
        [0.0, 0.0, 0.9, 0.5, 0.1],
        [0.0, 0.0, 0.9, 0.8, 0.1],
    ]
    df = run(tmp_path, scores, [0, 1, 2, 3, 4], [0, 1], "--kind", "similarity")
    assert [ours(df, f"top-{k}", "closed world") for k in (1, 2, 3)] == [
        pytest.approx(100 / 3, abs=0.01),
        pytest.approx(200 / 3, abs=0.01),
        100,
    ]
    assert ours(df, "top-1", "closed world", "chance") == pytest.approx(100 / 3, abs=0.01)
    # generalised, no bias needed for seen: images 0, 1 win among all; best seen = 100
    assert ours(df, "best seen") == 100
    dist = run(tmp_path, -np.asarray(scores), [0, 1, 2, 3, 4], [0, 1], "--kind", "distance", out="d")
    pd.testing.assert_frame_equal(df, dist)


def brute_force_sweep(scores, labels, unseen):
    """Seen / unseen top-1 (%) at biases between every change of any image's prediction."""
    s_best = np.where(unseen, -np.inf, scores).max(1)
    u_best = np.where(unseen, scores, -np.inf).max(1)
    flips = np.unique(s_best - u_best)
    biases = np.r_[flips[0] - 1, (flips[:-1] + flips[1:]) / 2, flips[-1] + 1]
    is_unseen = unseen[labels]
    seen_acc, unseen_acc = [], []
    for b in biases:
        hit = (scores + b * unseen).argmax(1) == labels
        seen_acc.append(100 * hit[~is_unseen].mean())
        unseen_acc.append(100 * hit[is_unseen].mean())
    s, u = np.array(seen_acc), np.array(unseen_acc)
    hm = np.where(s + u > 0, 2 * s * u / np.maximum(s + u, 1e-12), 0)
    return dict(seen=s.max(), unseen=u.max(), hm=hm.max(), auc=np.trapezoid(u[::-1], s[::-1]) / 100)


def test_generalised_sweep_against_brute_force(tmp_path):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(60, 9))
    seen = [0, 1, 2, 3, 4]
    labels = rng.integers(0, 9, 60)
    unseen = ~np.isin(np.arange(9), seen)
    scores[np.arange(60), labels] += 1.0
    df = run(tmp_path, scores, labels, seen, "--kind", "similarity")
    bf = brute_force_sweep(scores, labels, unseen)
    assert ours(df, "best seen") == pytest.approx(bf["seen"], abs=0.006)
    assert ours(df, "best unseen") == pytest.approx(bf["unseen"], abs=0.006)
    assert ours(df, "best hm") == pytest.approx(bf["hm"], abs=0.006)
    assert ours(df, "auc") == pytest.approx(bf["auc"], abs=0.006)
    assert ours(df, "best hm (sampled biases)") <= ours(df, "best hm") + 1e-9


class LookupModel:
    """A recogniser whose scores are rows of a fixed matrix: features are row indices."""

    cnn = None

    def __init__(self, matrix: np.ndarray, pairs: np.ndarray):
        self.matrix = torch.as_tensor(matrix)
        self.column = {tuple(p): i for i, p in enumerate(pairs.tolist())}

    def eval(self):
        return self

    def scores(self, x, pairs):
        cols = torch.tensor([self.column[tuple(p)] for p in pairs.tolist()])
        return self.matrix[x[:, 0].long()][:, cols]


def test_parity_with_utama_table1(tmp_path):
    """utama.table1 (the notebook's function) and the command on the same (images x pairs) matrix."""
    rng = np.random.default_rng(3)
    grid = np.array([(a, o) for a in range(4) for o in range(3)])  # 12 pairs
    pick = rng.permutation(12)
    pairs = {"seen": grid[pick[:6]], "val_unseen": grid[pick[6:9]], "test_unseen": grid[pick[9:]]}
    every = np.concatenate([pairs["seen"], pairs["val_unseen"], pairs["test_unseen"]])
    n_test, n_val = 40, 20
    test_pairs = np.concatenate([pairs["seen"], pairs["test_unseen"]])
    val_pairs = np.concatenate([pairs["seen"], pairs["val_unseen"]])
    test_y = test_pairs[rng.integers(0, 9, n_test)]
    val_y = val_pairs[rng.integers(0, 9, n_val)]
    matrix = rng.normal(size=(n_test + n_val, 12))
    col = {tuple(p): i for i, p in enumerate(every.tolist())}
    for i, y in enumerate(np.concatenate([test_y, val_y])):
        matrix[i, col[tuple(y)]] += 1.2
    idx = lambda a, b: torch.arange(a, b, dtype=torch.float64)[:, None]
    task = utama.Task(
        attrs=list("abcd"),
        objs=list("xyz"),
        pairs=pairs,
        features={"train": idx(0, 0), "val": idx(n_test, n_test + n_val), "test": idx(0, n_test)},
        labels={"train": np.zeros((0, 2), np.int64), "val": val_y, "test": test_y},
    )
    expected = utama_table1({"m": {"model": LookupModel(matrix, every)}}, task)
    cols = [col[tuple(p)] for p in test_pairs.tolist()]
    labels = [test_pairs.tolist().index(list(y)) for y in test_y]
    df = run(tmp_path, matrix[:n_test][:, cols], labels, range(6), "--kind", "similarity", "--method", "m")
    checked = 0
    for r in expected.itertuples():
        if r.method == "m" and "val-chosen" not in r.metric:
            assert ours(df, r.metric, r.protocol, "m") == pytest.approx(r.ours, abs=0.006), r.metric
            checked += 1
        elif r.method == "chance":
            assert ours(df, r.metric, r.protocol, "chance") == pytest.approx(r.ours, abs=0.006)
    assert checked == 10


def test_bad_input(tmp_path, capsys):
    rng = np.random.default_rng(0)
    s = tmp_path / "s.npy"
    np.save(s, rng.normal(size=(6, 4)))
    (tmp_path / "labels.txt").write_text("0\n1\n2\n3\n0\n2\n")
    (tmp_path / "seen.txt").write_text("0\n1\n")
    base = ["eval", "compositional", "--kind", "similarity", "--out", tmp_path / "bad"]

    def fails(path, what, scores=s, labels=tmp_path / "labels.txt", seen=tmp_path / "seen.txt"):
        argv = [*base, "--scores", scores, "--labels", labels, "--seen", seen]
        assert cli.main([str(a) for a in argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"orderlib: error: {path}: ") and what in err, err
        assert not (tmp_path / "bad").exists()

    out_of_range = tmp_path / "range.txt"
    out_of_range.write_text("0\n1\n2\n3\n4\n2\n")
    fails(out_of_range, "line 5: pair 4 out of range 0..3", labels=out_of_range)
    short = tmp_path / "short.txt"
    short.write_text("0\n1\n2\n")
    fails(short, "3 labels for 6 images", labels=short)
    nan = tmp_path / "nan.npy"
    a = rng.normal(size=(6, 4))
    a[2, 1] = np.nan
    np.save(nan, a)
    fails(nan, "NaN or inf", scores=nan)
    twice = tmp_path / "twice.txt"
    twice.write_text("0\n1\n1\n")
    fails(twice, "pair 1 listed twice", seen=twice)
    seen_only = tmp_path / "seen_only.txt"
    seen_only.write_text("0\n1\n0\n1\n0\n1\n")
    fails(seen_only, "no image of a unseen pair", labels=seen_only)
    words = tmp_path / "words.txt"
    words.write_text("zero\n")
    fails(words, "line 1: not an integer pair", seen=words)
