"""`orderlib eval retrieval`: hand-worked ranks and tie rules, numpy ranks, Table 2's own functions
(oe_retrieval.long_rows over evaluate_retrieval with the joint model's penalty), and bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from orderlib import cli
from orderlib.eval.retrieval import TIES, evaluate_retrieval
from orderlib.experiments import oe_retrieval
from orderlib.penalties import ENERGIES

RULES = ["ours", "ties against", "ties for", "ties by index"]


def run(tmp_path, *argv, out="out") -> pd.DataFrame:
    assert cli.main(["eval", "retrieval", *map(str, argv), "--out", str(tmp_path / out)]) == 0
    return pd.read_csv(tmp_path / out / "retrieval.csv")


def value(df, metric, direction, protocol="all", fold="all", col="ours"):
    sel = (df.metric == metric) & (df.direction == direction) & (df.protocol == protocol) & (df.fold == fold)
    assert sel.sum() == 1
    return float(df.loc[sel, col].iloc[0])


def fails(tmp_path, capsys, argv, path, what):
    """Exit status 2, one `orderlib: error: <path>: ...` line naming `what`, nothing written."""
    out = tmp_path / "bad"
    assert cli.main(["eval", "retrieval", *map(str, argv), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"orderlib: error: {path}: ") and what in err, err
    assert err.count("\n") == 1
    assert not out.exists() or not list(out.iterdir())


def synthetic(n=10, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    ims = torch.rand(n, d, generator=g, dtype=torch.float64)
    caps = ims.repeat_interleave(5, 0) * (0.6 + 0.4 * torch.rand(5 * n, d, generator=g, dtype=torch.float64))
    return ims, (caps + 0.1 * torch.randn(5 * n, d, generator=g, dtype=torch.float64)).clamp(min=0)


# 2 images x 2 captions. t2i: caption 1 ties its image with the other (0.4, 0.4).
HAND = np.array([[0.1, 0.4, 0.3, 0.9], [0.2, 0.4, 0.6, 0.05]])


def test_hand_worked_matrix_and_tie_rules(tmp_path):
    np.save(tmp_path / "m.npy", HAND)
    df = run(tmp_path, "--matrix", tmp_path / "m.npy", "--kind", "distance", "--captions-per-image", 2)
    # image -> text: both images find a true caption first
    assert value(df, "R@1", "image→text") == 100
    # text -> image ranks: 1, tie (expected 1.5; against 2, for 1, by index 1: the true image is index 0), 2, 1
    assert [value(df, "R@1", "text→image", col=c) for c in RULES] == [62.5, 50, 75, 75]
    assert [value(df, "mean rank", "text→image", col=c) for c in RULES] == [1.38, 1.5, 1.25, 1.25]  # rounded
    assert value(df, "median rank", "text→image") == 1  # floor(median(1, 1.5, 2, 1))
    assert value(df, "rsum", "both") == 100 + 100 + 100 + 62.5 + 100 + 100
    np.save(tmp_path / "s.npy", -HAND)
    sim = run(tmp_path, "--matrix", tmp_path / "s.npy", "--kind", "similarity", "--captions-per-image", 2, out="c")
    pd.testing.assert_frame_equal(df, sim)


def numpy_recalls(p: np.ndarray, per: int = 5) -> dict:
    """R@1/5/10, median and mean rank of both directions from a penalty matrix by a stable argsort
    (ties by index)."""
    n = p.shape[0]
    rank = lambda row, targets: min(np.argsort(row, kind="stable").tolist().index(t) for t in targets) + 1
    i2t = np.array([rank(p[i], range(per * i, per * i + per)) for i in range(n)])
    t2i = np.array([rank(p[:, j], [j // per]) for j in range(per * n)])
    out = {}
    for name, r in (("image→text", i2t), ("text→image", t2i)):
        out.update({(name, f"R@{k}"): 100.0 * np.mean(r <= k) for k in (1, 5, 10)})
        out[(name, "mean rank")] = r.mean()
        out[(name, "median rank")] = np.floor(np.median(r))
    return out


@pytest.mark.parametrize("score", ["order", "cosine"])
def test_embeddings_against_numpy_ranks(tmp_path, score):
    ims, caps = synthetic()
    np.save(tmp_path / "i.npy", ims.numpy())
    np.save(tmp_path / "c.npy", caps.numpy())
    df = run(tmp_path, "--images", tmp_path / "i.npy", "--captions", tmp_path / "c.npy", "--score", score)
    expected = numpy_recalls(ENERGIES[score].matrix(ims, caps).numpy())
    for (direction, metric), v in expected.items():
        assert value(df, metric, direction, col="ties by index") == pytest.approx(v, abs=0.006), (direction, metric)


def test_parity_with_table2_functions(tmp_path):
    """1k (folds of 2 here) per fold and mean, and 5k, against Table 2's evaluate_retrieval +
    long_rows on the same embeddings; the matrix route gives the same numbers."""
    ims, caps = synthetic(n=10)
    np.save(tmp_path / "i.npy", ims.numpy())
    np.save(tmp_path / "c.npy", caps.numpy())
    argv = ["--protocol", "1k", "5k", "--fold-size", 2]
    df = run(tmp_path, "--images", tmp_path / "i.npy", "--captions", tmp_path / "c.npy", "--score", "order", *argv)
    penalty = ENERGIES["order"].matrix  # what JointEmbedding("order").penalty_matrix computes
    for size, folds in (("1k", 5), ("5k", 1)):
        rows = oe_retrieval.long_rows("m", size, evaluate_retrieval(ims, caps, penalty, 5, folds, ties=TIES))
        fold = "mean" if size == "1k" else "all"
        for r in rows:
            if r["metric"] == f"{size} rsum":
                direction, metric = "both", "rsum"
            else:
                side, metric = r["metric"].split(" ", 2)[1:]
                metric = {"med r": "median rank", "mean r": "mean rank"}.get(metric, metric)
                direction = {"caption": "image→text", "image": "text→image"}[side]
            for col in RULES:
                assert value(df, metric, direction, size, fold, col) == pytest.approx(r[col], abs=0.006)
    # the 1k row is the mean of the fold rows, not the best fold
    r1 = [value(df, "R@1", "text→image", "1k", str(f)) for f in range(1, 6)]
    assert value(df, "R@1", "text→image", "1k", "mean") == pytest.approx(np.mean(r1), abs=0.01)
    assert max(r1) > np.mean(r1)
    np.save(tmp_path / "m.npy", penalty(ims, caps).numpy())
    m = run(tmp_path, "--matrix", tmp_path / "m.npy", "--kind", "distance", *argv, out="m")
    pd.testing.assert_frame_equal(df, m)


def test_captions_grouped_by_image_from_json_lines(tmp_path):
    ims, caps = synthetic(n=4)
    np.save(tmp_path / "i.npy", ims.numpy())
    np.save(tmp_path / "c.npy", caps.numpy())
    order = np.random.default_rng(0).permutation(20)
    (tmp_path / "i.jsonl").write_text(
        "".join(json.dumps({"name": f"im{i}", "embedding": v.tolist()}) + "\n" for i, v in enumerate(ims))
    )
    (tmp_path / "c.jsonl").write_text(
        "".join(
            json.dumps({"id": f"c{j}", "image": f"im{j // 5}", "embedding": caps[j].tolist()}) + "\n" for j in order
        )
    )
    a = run(tmp_path, "--images", tmp_path / "i.npy", "--captions", tmp_path / "c.npy", out="a")
    b = run(tmp_path, "--images", tmp_path / "i.jsonl", "--captions", tmp_path / "c.jsonl", out="b")
    pd.testing.assert_frame_equal(a, b)


def test_bad_input(tmp_path, capsys):
    ims, caps = synthetic(n=10)
    i, c = tmp_path / "i.npy", tmp_path / "c.npy"
    np.save(i, ims.numpy())
    np.save(c, caps.numpy())
    fails(
        tmp_path,
        capsys,
        ["--images", i, "--captions", c, "--protocol", "1k", "--fold-size", 3],
        i,
        "10 images do not split into folds of 3",
    )
    fails(tmp_path, capsys, ["--images", i, "--captions", c, "--protocol", "5k", "--fold-size", 3], i, "5k protocol")
    short = tmp_path / "short.npy"
    np.save(short, caps.numpy()[:-1])
    fails(tmp_path, capsys, ["--images", i, "--captions", short], short, "49 captions for 10 images")
    thin = tmp_path / "thin.npy"
    np.save(thin, caps.numpy()[:, :4])
    fails(tmp_path, capsys, ["--images", i, "--captions", thin], thin, "4-d captions, but 6-d images")
    nan = tmp_path / "nan.npy"
    bad = ims.numpy().copy()
    bad[3, 2] = np.nan
    np.save(nan, bad)
    fails(tmp_path, capsys, ["--images", nan, "--captions", c], nan, "NaN or inf (first: row 3)")
    m = tmp_path / "m.npy"
    np.save(m, np.zeros((10, 40)))
    fails(tmp_path, capsys, ["--matrix", m, "--kind", "distance"], m, "40 captions for 10 images")
    fails(tmp_path, capsys, ["--matrix", m], m, "--kind")
    lines = [json.dumps({"name": f"im{k}", "embedding": [1.0, 2.0]}) for k in range(2)]
    (tmp_path / "i.jsonl").write_text("\n".join(lines) + "\n")
    caps_lines = [json.dumps({"id": f"c{j}", "image": f"im{j // 5}", "embedding": [1.0, 1.0]}) for j in range(10)]
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join(caps_lines[:9] + [caps_lines[3]]) + "\n")
    fails(tmp_path, capsys, ["--images", tmp_path / "i.jsonl", "--captions", dup], dup, "duplicate caption id 'c3'")
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text("\n".join(caps_lines[:9] + [caps_lines[9].replace('"im1"', '"im9"')]) + "\n")
    fails(
        tmp_path,
        capsys,
        ["--images", tmp_path / "i.jsonl", "--captions", unknown],
        unknown,
        "line 10: unknown image id 'im9'",
    )
