"""`orderlib eval hypernymy` and `orderlib train hypernymy`: sklearn's AP and ROC, a brute-force
dev threshold, Table 1's own trainer (oe_wordnet.train_row) on the same split, resume, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from orderlib import cli
from orderlib.cli.hypernymy import read_edges, split_data, train_table1_row
from orderlib.concepts.rows import row_config, train_row
from orderlib.penalties import order_violation

EXAMPLES = Path(__file__).resolve().parent / "data" / "cli"


def fails(argv, path, what, tmp_path, capsys):
    out = tmp_path / "bad"
    assert cli.main([*map(str, argv), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"orderlib: error: {path}: ") and what in err, err
    assert not out.exists() or not list(out.iterdir())


def table(out: Path, stem: str) -> pd.DataFrame:
    return pd.read_csv(out / f"{stem}.csv")


def ours(df, metric, split="test", method=None) -> float:
    sel = (df.metric == metric) & (df.split == split) & (df.method == (method or df.method.iloc[0]))
    assert sel.sum() == 1, (metric, split)
    return float(df.loc[sel, "ours"].iloc[0])


def write_pairs(path: Path, names, pairs, labels) -> Path:
    path.write_text("".join(f"{names[u]}\t{names[v]}\t{int(y)}\n" for (u, v), y in zip(pairs, labels)))
    return path


def brute_force_accuracy(e_dev, y_dev, e_test, y_test) -> float:
    """Try every cut between distinct dev energies (and below / above all); lowest best cut; on test."""
    u = np.unique(e_dev)
    cuts = np.r_[u[0] - 1, (u[:-1] + u[1:]) / 2, u[-1] + 1]
    acc = [((e_dev <= c) == y_dev).mean() for c in cuts]
    tau = cuts[int(np.argmax(acc))]
    return 100 * ((e_test <= tau) == y_test).mean()


def test_eval_against_sklearn_and_a_brute_force_threshold(tmp_path):
    rng = np.random.default_rng(1)
    names = [f"w{i}" for i in range(12)]
    x = rng.uniform(0, 1, (12, 3))
    x[5] = x[2]  # a tie in energies
    (tmp_path / "emb.tsv").write_text(
        "".join(n + "\t" + "\t".join(f"{v:.17g}" for v in row) + "\n" for n, row in zip(names, x))
    )
    splits = {}
    for split, seed in (("dev", 2), ("test", 3)):
        r = np.random.default_rng(seed)
        pairs = r.integers(0, 12, (40, 2))
        labels = r.random(40) < 0.5
        writes = write_pairs(tmp_path / f"{split}.tsv", names, pairs, labels)
        e = order_violation(torch.as_tensor(x[pairs[:, 0]]), torch.as_tensor(x[pairs[:, 1]])).numpy()
        splits[split] = (writes, e, labels)
    out = tmp_path / "out"
    argv = ["eval", "hypernymy", "--embeddings", tmp_path / "emb.tsv", "--dev", splits["dev"][0]]
    assert cli.main([*map(str, argv), "--test", str(splits["test"][0]), "--out", str(out)]) == 0
    df = table(out, "hypernymy")
    (_, e_dev, y_dev), (_, e_test, y_test) = splits["dev"], splits["test"]
    assert ours(df, "accuracy (%)") == pytest.approx(brute_force_accuracy(e_dev, y_dev, e_test, y_test), abs=0.006)
    for split, (_, e, y) in splits.items():
        assert ours(df, "AP (%)", split) == pytest.approx(100 * average_precision_score(y, -e), abs=0.006)
        assert ours(df, "ROC AUC (%)", split) == pytest.approx(100 * roc_auc_score(y, -e), abs=0.006)
    roc = pd.read_csv(out / "hypernymy_roc.csv")
    fpr, tpr, thr = roc_curve(y_test, -e_test, drop_intermediate=False)
    test_roc = roc[roc.split == "test"]
    np.testing.assert_allclose(test_roc["false positive rate"], fpr)
    np.testing.assert_allclose(test_roc["true positive rate"], tpr)
    np.testing.assert_allclose(test_roc["threshold"].iloc[1:], -thr[1:])
    meta = json.loads((out / "hypernymy.meta.json").read_text())
    assert set(meta["inputs"]) == {"embeddings", "dev", "test"} and "tau" in meta["protocol"]


def test_eval_parity_with_the_table1_trainer(tmp_path):
    """Train order-embeddings with Table 1's own functions on a split of the example DAG; the
    command, given the trained table and the split's pairs, reports the trainer's tau and accuracies."""
    names, parents = read_edges(EXAMPLES / "hypernymy_edges.tsv")
    args = type("A", (), dict(protocol="clean", n_test=12, n_dev=12, split_seed=0, edges="e"))()
    data, _ = split_data(args, parents)
    config = row_config("order-embeddings", 0, dim=10, batch=25, epochs=8, lr=0.1)
    result = train_row(data, config, "cpu", None, False)
    np.savez(tmp_path / "emb.npz", names=np.asarray(names), embeddings=result.model.emb.weight.detach().numpy())
    dev = write_pairs(tmp_path / "dev.tsv", names, data.dev, data.dev_labels)
    test = write_pairs(tmp_path / "test.tsv", names, data.test, data.test_labels)
    argv = ["eval", "hypernymy", "--embeddings", tmp_path / "emb.npz", "--dev", dev, "--test", test]
    assert cli.main([*map(str, argv), "--out", str(tmp_path / "out")]) == 0
    df = table(tmp_path / "out", "hypernymy")
    assert ours(df, "accuracy (%)", "test") == pytest.approx(result.test_accuracy, abs=0.006)
    assert ours(df, "accuracy (%)", "dev") == pytest.approx(result.dev_accuracy, abs=0.006)
    assert ours(df, "threshold (chosen on dev)", "dev") == pytest.approx(result.tau, rel=0.002, abs=1e-3)


def test_eval_bad_input(tmp_path, capsys):
    emb, dev, test = (EXAMPLES / f for f in ("hypernymy_embeddings.npz", "hypernymy_dev.tsv", "hypernymy_test.tsv"))
    base = ["eval", "hypernymy", "--embeddings", emb, "--dev", dev]
    unknown = tmp_path / "unknown.tsv"
    unknown.write_text(test.read_text() + "dog\tunicorn\t0\n")
    n = len(test.read_text().splitlines()) + 1
    fails([*base, "--test", unknown], unknown, f"line {n}: unknown id 'unicorn' (not in {emb})", tmp_path, capsys)
    cols = tmp_path / "cols.tsv"
    cols.write_text("dog\tmammal\n")
    fails([*base, "--test", cols], cols, "line 1: 2 columns, expected 3 (hyponym, hypernym, label)", tmp_path, capsys)
    label = tmp_path / "label.tsv"
    label.write_text("dog\tmammal\tmaybe\n")
    fails([*base, "--test", label], label, "label 'maybe'", tmp_path, capsys)
    z = np.load(emb)
    bad = z["embeddings"].copy()
    bad[4, 1] = np.inf
    np.savez(tmp_path / "inf.npz", names=z["names"], embeddings=bad)
    fails(
        ["eval", "hypernymy", "--embeddings", tmp_path / "inf.npz", "--dev", dev, "--test", test],
        tmp_path / "inf.npz",
        "NaN or inf (first: row 4)",
        tmp_path,
        capsys,
    )
    np.save(tmp_path / "plain.npy", z["embeddings"])
    fails(
        ["eval", "hypernymy", "--embeddings", tmp_path / "plain.npy", "--dev", dev, "--test", test],
        tmp_path / "plain.npy",
        "--vocab",
        tmp_path,
        capsys,
    )
    (tmp_path / "vocab.txt").write_text("\n".join(z["names"][:-1]) + "\n")
    fails(
        [
            "eval",
            "hypernymy",
            "--embeddings",
            tmp_path / "plain.npy",
            "--vocab",
            tmp_path / "vocab.txt",
            "--dev",
            dev,
            "--test",
            test,
        ],
        tmp_path / "vocab.txt",
        "31 names for 32 rows",
        tmp_path,
        capsys,
    )


def train_argv(out: Path, edges=EXAMPLES / "hypernymy_edges.tsv") -> list[str]:
    return [
        "train",
        "hypernymy",
        "--edges",
        str(edges),
        "--protocol",
        "clean",
        "--n-test",
        "12",
        "--n-dev",
        "12",
        "--epochs",
        "3",
        "--batch",
        "25",
        "--dim",
        "10",
        "--lr",
        "0.1",
        "--quiet",
        "--out",
        str(out),
    ]


def test_train_writes_embeddings_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(train_argv(out)) == 0
    first = capsys.readouterr().err
    assert "order-embeddings: trained, 3 epochs" in first
    z = np.load(out / "hypernymy_train_embeddings.npz")
    names, _ = read_edges(EXAMPLES / "hypernymy_edges.tsv")
    assert list(z["names"]) == names and z["embeddings"].shape == (32, 10) and (z["embeddings"] >= 0).all()
    df = table(out, "hypernymy_train")
    meta = json.loads((out / "hypernymy_train.meta.json").read_text())
    assert meta["settings"]["loaded_from_checkpoint"] is False and meta["settings"]["epochs"] == 3
    assert (out / "checkpoints" / "order-embeddings-seed0.pt").exists()
    # the trainer itself, loading the same checkpoint: the command's numbers are its numbers
    args = type("A", (), dict(protocol="clean", n_test=12, n_dev=12, split_seed=None, edges="e"))()
    data, _ = split_data(args, read_edges(EXAMPLES / "hypernymy_edges.tsv")[1])
    settings = dict(dim=10, batch=25, epochs=3, patience=None, lr=0.1, margin=None)
    result, *_ = train_table1_row(
        data,
        "order-embeddings",
        settings,
        0,
        torch.device("cpu"),
        out / "checkpoints" / "order-embeddings-seed0.pt",
        False,
    )
    assert result.resumed
    assert ours(df, "accuracy (%)", "test", "order-embeddings") == pytest.approx(result.test_accuracy, abs=0.006)
    assert ours(df, "accuracy (%)", "dev", "order-embeddings") == pytest.approx(result.dev_accuracy, abs=0.006)
    # rerun: loaded from the checkpoint, not retrained; the same report
    assert cli.main(train_argv(out)) == 0
    assert "loaded from the checkpoint (not retrained)" in capsys.readouterr().err
    assert json.loads((out / "hypernymy_train.meta.json").read_text())["settings"]["loaded_from_checkpoint"] is True
    pd.testing.assert_frame_equal(df, table(out, "hypernymy_train"))


@pytest.mark.parametrize(
    "edges, what",
    [
        ("a\tb\nb\tc\nc\ta\n", "cycle 'a' -> 'b' -> 'c' -> 'a'"),
        ("a\tb\nb\tb\n", "line 2: self-loop 'b' -> 'b'"),
        ("a\tb\tc\n", "line 1: 3 columns, expected 2 (child, parent)"),
        ("a\tb\nb\tc\n", "positive pairs in the closure"),
    ],
    ids=["cycle", "self-loop", "columns", "too small"],
)
def test_train_bad_edges(tmp_path, capsys, edges, what):
    path = tmp_path / "edges.tsv"
    path.write_text(edges)
    argv = train_argv(tmp_path / "bad", path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"orderlib: error: {path}: ") and what in err, err
    assert not (tmp_path / "bad").exists()
