"""Issue 10: same inputs give the same tables; changed inputs never reuse stale models; concurrent
runs never share a half-trained checkpoint; damaged files and bad parameters get messages that
name the file or value and say what to do."""

import copy
import io
import os
import shlex
import stat
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_train_entailment import write_snli_1_0
from toys import toy_pairs, toy_split

from orderlib.checkpoint import (
    CheckpointError,
    cached,
    code_version,
    fingerprint,
    load_checkpoint,
    locked,
    save_checkpoint,
)
from orderlib.freshness import code_fingerprint
from orderlib.paths import DataError
from orderlib.training import fit

# ---------------------------------------------------------------- same inputs, same tables


def _precomp(folder, n_test=1000, seed=0):
    folder.mkdir(parents=True)
    for split, n, s in (("train", 200, seed), ("dev", 100, seed + 1), ("test", n_test, seed + 2)):
        feats, caps = toy_split(n, s)
        (folder / f"{split}_caps.txt").write_text("\n".join(" ".join(c) for c in caps) + "\n")
        np.save(folder / f"{split}_ims.npy", feats.numpy())
    return folder


def test_table2_library_path_twice_gives_the_same_table(tmp_path):
    from orderlib.experiments import oe_retrieval as X

    folder = _precomp(tmp_path / "coco_precomp")
    cfg = {
        **X.PRESETS["small"],
        "data": "precomp",
        "word_dim": 4,
        "dim": 8,
        "epochs": 2,
        "batch": 100,
        "rows": ["order-embeddings", "order-embeddings (symm.)"],
    }
    tables = []
    for run in ("a", "b"):
        torch.manual_seed(len(run) + ord(run))  # whatever the global generator holds
        ex = X.run(cfg, "cpu", tmp_path / run, folder, progress=False)
        tables.append(X.test_table(ex.trained, cfg))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    rec = X.model_records(ex)  # precomp data: no item CNN, one record per row
    assert list(rec) == cfg["rows"] and all(r["epochs_run"] == 2 and r["train_seconds"] > 0 for r in rec.values())
    assert not any(c in tables[0].columns for c in ("seconds", "minutes"))  # no wall clock in a table


def test_table3_library_path_twice_gives_the_same_table(tmp_path):
    from orderlib.experiments import oe_snli as X

    write_snli_1_0(tmp_path, toy_pairs(80, 3))
    cfg = dict(X.PRESETS["small"], data="official", word_dim=8, dim=8, epochs=1)
    runs = [{"snli": X.run_dataset("snli", cfg, "cpu", tmp_path / run, tmp_path, progress=False)} for run in ("a", "b")]
    tables = [X.table(r) for r in runs]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    rec = X.model_records(runs[1])
    assert set(rec) == {f"snli/{m}" for m in runs[1]["snli"]["results"]} and len(rec) >= 2
    assert all(r["trained_at"] is not None and not r["loaded_from_checkpoint"] for r in rec.values())
    assert "seconds" not in tables[0].columns


def test_table1_library_path_twice_gives_the_same_table(tmp_path):
    from test_train_hypernymy import chain_forest

    from orderlib.data.wordnet import NounGraph
    from orderlib.experiments import oe_wordnet as X
    from orderlib.experiments import oe_wordnet_tables

    parents = chain_forest(5, 10)
    graph = NounGraph([f"n{i}" for i in range(len(parents))], parents, "toy", "fp", "toy")
    small = X.PRESETS["small"]
    cfg = {
        **small,
        "n_test": 20,
        "n_dev": 20,
        "dim": 5,
        "batch": 20,
        "train_fraction": 1.0,
        "models": {k: {**v, "epochs": 2, "patience": 2} for k, v in small["models"].items()},
        "grids": [{**g, "run": {**g["run"], "train_fraction": 1.0} if g["run"] else {}} for g in small["grids"]],
    }
    tables = [
        oe_wordnet_tables.table(X.run_table1(graph, cfg, ["clean"], "cpu", tmp_path / run, progress=False), "clean")
        for run in ("a", "b")
    ]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert "train time (s)" not in set(tables[0].metric)


def test_devise_training_twice_gives_the_same_model(toy_items):
    from orderlib.encoders.cnn import CNNConfig
    from orderlib.training.devise import DeViSEConfig, train_devise
    from orderlib.training.item_cnn import train_item_cnn

    x, y = toy_items(200)
    hx, hy = toy_items(60, seed=1)
    labels = torch.nn.functional.normalize(torch.randn(3, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    states = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        cnn, _ = train_item_cnn(x, y, hx, hy, CNNConfig(epochs=1, batch=64, width=4), progress=False)
        model, _ = train_devise(
            cnn, x, y, hx, hy, labels, DeViSEConfig(epochs=1, finetune_epochs=1, batch=64), progress=False
        )
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


# ---------------------------------------------------------------- changed inputs retrain


def test_changed_data_retrains_and_unchanged_data_resumes(tmp_path):
    from orderlib.training.retrieval import RetrievalConfig, prepare, train_retrieval_model

    data = prepare({"train": toy_split(100, 0), "dev": toy_split(50, 1), "test": toy_split(50, 2)})
    cfg = RetrievalConfig(word_dim=4, dim=4, batch=50, epochs=1)
    ckpt = tmp_path / "m.pt"
    assert not train_retrieval_model(data, cfg, checkpoint=ckpt, progress=False).resumed
    key = load_checkpoint(ckpt)["cfg"]
    assert train_retrieval_model(data, cfg, checkpoint=ckpt, progress=False).resumed  # same inputs: load
    changed = prepare({"train": toy_split(100, 7), "dev": toy_split(50, 1), "test": toy_split(50, 2)})
    assert not train_retrieval_model(changed, cfg, checkpoint=ckpt, progress=False).resumed  # a new model
    new_key = load_checkpoint(ckpt)["cfg"]
    assert new_key["data"] != key["data"] and new_key["code"] == key["code"]


def test_smaller_vocabulary_retrains_instead_of_crashing(tmp_path):
    """Table 3 on a different, smaller SNLI file crashed with `size mismatch for
    encoder.words.weight`: now the data key differs and the model trains anew."""
    from orderlib.training.entailment import EntailmentConfig, prepare, train_entailment_model

    big = prepare(toy_pairs(200, 0), toy_pairs(60, 1), toy_pairs(60, 2))
    small = prepare(toy_pairs(200, 0).subset(np.arange(2)), toy_pairs(60, 1), toy_pairs(60, 2))
    assert len(small.vocab) < len(big.vocab)
    cfg = EntailmentConfig(word_dim=4, dim=4, epochs=1)
    first = train_entailment_model(big, cfg, checkpoint=tmp_path / "e.pt", progress=False)
    r = train_entailment_model(small, cfg, checkpoint=tmp_path / "e.pt", progress=False)
    assert not r.resumed
    again = train_entailment_model(small, cfg, checkpoint=tmp_path / "e.pt", progress=False)
    assert again.resumed and again.trained_at == r.trained_at == first.trained_at is not None


def test_checkpoint_keys_follow_the_code_and_the_data():
    import orderlib.training.retrieval as T

    assert code_version(T) == code_version("orderlib.training.retrieval") and len(code_version(T)) == 12
    assert code_version(T) != code_version("orderlib.training.entailment")
    a = np.arange(6, dtype=np.float32)
    assert fingerprint(a) == fingerprint(torch.arange(6, dtype=torch.float32))
    assert fingerprint(a) != fingerprint(a.reshape(2, 3)) != fingerprint(a.astype(np.float64))
    assert fingerprint(["a", 1]) != fingerprint(["a", "1"])


def test_fingerprint_follows_every_value_and_only_the_values():
    """Equal inputs give equal fingerprints (copies, clones, strided views, another dict order);
    one value changed anywhere (an array's, a tensor's, a nested entry's, a string's) gives another."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    nested = {"x": [a, {"y": "abc", "z": 1.0, "t": t}], "w": (1, 2), "s": "split"}
    equal = {"s": "split", "w": (1, 2), "x": [a.copy(), {"t": t.clone(), "z": 1.0, "y": "abc"}]}
    assert fingerprint(a) == fingerprint(a.copy()) == fingerprint(t) == fingerprint(t.clone())
    assert fingerprint(a[:, ::2]) == fingerprint(np.ascontiguousarray(a[:, ::2]))
    assert fingerprint(nested) == fingerprint(equal) == fingerprint(copy.deepcopy(nested))
    assert fingerprint(a, "x") == fingerprint(a.copy(), "x") != fingerprint("x", a)

    def changed(x, where):
        x = copy.deepcopy(x)
        where(x)
        return x

    def bump_array(x):
        x["x"][0][2, 3] += 1

    def bump_tensor(x):
        x["x"][1]["t"][0, 0] = -1.0

    def set_entry(key, value):
        return lambda x: x["x"][1].__setitem__(key, value)

    variants = {
        "an array's value": changed(nested, bump_array),
        "a tensor's value": changed(nested, bump_tensor),
        "a nested string": changed(nested, set_entry("y", "abd")),
        "a nested number": changed(nested, set_entry("z", 1.5)),
        "a tuple entry": changed(nested, lambda x: x.__setitem__("w", (1, 3))),
        "a top-level string": changed(nested, lambda x: x.__setitem__("s", "splat")),
        "a key": changed(nested, lambda x: x.__setitem__("S", x.pop("s"))),
        "a list entry appended": changed(nested, lambda x: x["x"].append(0)),
    }
    prints = {name: fingerprint(v) for name, v in variants.items()}
    for name, p in prints.items():
        assert p != fingerprint(nested), f"changing {name} kept the fingerprint"
    assert len(set(prints.values())) == len(prints)  # and each change its own
    for x, y in ((a, a.copy()), (t, t.clone())):
        y.reshape(-1)[-1] += 1  # the last value: a hash of a prefix misses it
        assert fingerprint(x) != fingerprint(y)


# ---------------------------------------------------------------- concurrent runs


def test_a_second_run_waits_for_the_checkpoint_then_loads_the_finished_model(tmp_path):
    ckpt = tmp_path / "m.pt"
    order, results = [], {}

    def run(name, delay):
        model = torch.nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def epoch(e):
            order.append((name, e))
            time.sleep(delay)
            return 1.0

        results[name] = fit(model, opt, {"k": 1}, epoch, lambda: {"s": 1.0}, "s", 3, 3, ckpt, progress=False)

    first = threading.Thread(target=run, args=("first", 0.2))
    first.start()
    time.sleep(0.1)  # the first run holds the lock, mid-epoch 0
    second = threading.Thread(target=run, args=("second", 0.0))
    second.start()
    first.join(), second.join()
    assert order == [("first", 0), ("first", 1), ("first", 2)]  # the second never trained
    assert results["second"].resumed and len(results["second"].history) == 3


@pytest.mark.parametrize("every,saved_after", [(0.0, [0, 1, 2, 3]), (3600.0, [3]), (0.3, [1, 3])])
def test_checkpoints_at_most_one_per_interval_and_always_the_last_epoch(tmp_path, monkeypatch, every, saved_after):
    from orderlib.training import loop

    monkeypatch.setattr(loop, "CHECKPOINT_EVERY_S", every)
    saves = []
    monkeypatch.setattr(loop, "save_checkpoint", lambda path, state: saves.append(state["epoch"]))
    model = torch.nn.Linear(1, 1)

    def epoch(e):
        time.sleep(0.2)
        return 1.0

    fit(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        {},
        epoch,
        lambda: {"s": 1.0},
        "s",
        4,
        4,
        tmp_path / "m.pt",
        progress=False,
    )
    assert saves == saved_after


def test_lock_is_exclusive(tmp_path):
    events = []

    def hold():
        with locked(tmp_path / "x.pt"):
            events.append("a in")
            time.sleep(0.2)
            events.append("a out")

    t = threading.Thread(target=hold)
    t.start()
    time.sleep(0.05)
    with locked(tmp_path / "x.pt"):
        events.append("b in")
    t.join()
    assert events == ["a in", "a out", "b in"]


def test_locks_live_in_one_folder_of_the_runs_root(tmp_path, monkeypatch):
    from orderlib.checkpoint import lock_path

    monkeypatch.setenv("ORDERLIB_RUNS", str(tmp_path / "runs"))
    for folder in ("a", "b"):
        with locked(tmp_path / folder / "x.pt"):
            pass
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # nothing beside the checkpoints
    locks = sorted(p.name for p in (tmp_path / "runs" / ".locks").iterdir())
    assert locks == sorted(lock_path(tmp_path / f / "x.pt").name for f in ("a", "b")) and locks[0] != locks[1]


# ---------------------------------------------------------------- damaged files


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated zip", b"\x80\x02garbage"])
def test_damaged_checkpoint_is_set_aside_and_training_restarts(tmp_path, content):
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(content)
    model = torch.nn.Linear(1, 1)
    with pytest.warns(RuntimeWarning, match=r"checkpoint .*m\.pt is damaged .* moved it to .*m\.pt\.damaged"):
        r = fit(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            {},
            lambda e: 1.0,
            lambda: {"s": 1.0},
            "s",
            2,
            2,
            ckpt,
            progress=False,
        )
    assert not r.resumed and len(r.history) == 2
    assert (tmp_path / "m.pt.damaged").read_bytes() == content
    assert load_checkpoint(ckpt)["done"]  # a good checkpoint replaced it


# ---------------------------------------------------------------- loading never runs code


def _pwn(path):
    """What a crafted checkpoint calls on load if unpickled: writes `path`."""
    Path(path).write_text("pwned")


class _Payload:
    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _payloads(marker):
    return {"_pwn": _Payload(_pwn, str(marker)), "system": _Payload(os.system, f"touch {shlex.quote(str(marker))}")}


@pytest.mark.parametrize("payload,named", [("_pwn", r"test_reliability\._pwn"), ("system", r"(posix|nt|os)\.system")])
def test_a_checkpoint_that_would_run_code_is_refused_and_left_in_place(tmp_path, monkeypatch, payload, named):
    monkeypatch.setenv("ORDERLIB_RUNS", str(tmp_path / "runs"))  # fit's lock
    marker, ckpt = tmp_path / "pwned", tmp_path / "shared.pt"
    torch.save({"cfg": {}, "model": {}, "x": _payloads(marker)[payload]}, ckpt)
    content = ckpt.read_bytes()
    with pytest.raises(
        CheckpointError,
        match=rf"checkpoint \S*shared\.pt was not loaded: it names {named}\b.*"
        r"loading it could run code",
    ):
        load_checkpoint(ckpt)
    model = torch.nn.Linear(1, 1)
    with pytest.raises(CheckpointError, match=r"shared\.pt"):  # fit stops on it: neither trains over it nor loads it
        fit(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            {},
            lambda e: 1.0,
            lambda: {"s": 1.0},
            "s",
            1,
            1,
            ckpt,
            progress=False,
        )
    assert not marker.exists()  # no code ran
    assert ckpt.read_bytes() == content and not (tmp_path / "shared.pt.damaged").exists()  # left where it was
    torch.load(ckpt, weights_only=False)  # the file is a real exploit: unpickled, it runs its payload
    assert marker.exists()


def test_a_checkpoint_of_a_type_torch_will_not_build_is_refused_not_discarded(tmp_path):
    """numpy str words (torch resolves the dtype's class, then refuses to build it) are a refused type, not
    damage: the file stays where it is and the error names the class."""
    ckpt = tmp_path / "words.pt"
    torch.save({"words": [np.str_("sandal")]}, ckpt)
    content = ckpt.read_bytes()
    with pytest.raises(CheckpointError, match=r"words\.pt was not loaded: it names numpy\.dtypes\.StrDType\b"):
        load_checkpoint(ckpt)
    assert ckpt.read_bytes() == content and not (tmp_path / "words.pt.damaged").exists()


def test_fit_checkpoints_round_trip(tmp_path, monkeypatch):
    """Adam's state, a numpy number in the optimizer (the item CNN's lr), the history and the cfg load back."""
    monkeypatch.setenv("ORDERLIB_RUNS", str(tmp_path / "runs"))
    cfg = {"dim": 2, "classes": (0, 2), "loss": "max-margin", "data": fingerprint(np.ones(2)), "code": None}

    def run():
        torch.manual_seed(0)
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.Adam(model.parameters(), lr=0.1)

        def train_epoch(epoch):
            for g in opt.param_groups:
                g["lr"] = 0.1 * 0.5 * (1 + np.cos(np.pi * epoch / 3))  # np.float64, as encoders/cnn.py
            opt.zero_grad()
            loss = model(torch.ones(4, 2)).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.item()

        return model, fit(
            model,
            opt,
            cfg,
            train_epoch,
            lambda: {"s": -float(model.bias.detach())},
            "s",
            3,
            3,
            tmp_path / "fit.pt",
            progress=False,
        )

    model, first = run()
    state = load_checkpoint(tmp_path / "fit.pt")
    assert state["done"] and state["history"] == first.history
    opt = torch.optim.Adam(torch.nn.Linear(2, 1).parameters(), lr=np.float64(0.1))  # an unfinished run's state
    save_checkpoint(tmp_path / "opt.pt", {"opt": opt.state_dict()})
    assert isinstance(load_checkpoint(tmp_path / "opt.pt")["opt"]["param_groups"][0]["lr"], np.float64)
    again, second = run()
    assert second.resumed and second.history == first.history
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_cached_values_of_every_call_site_round_trip(tmp_path, monkeypatch):
    """What devise, utama and oe_retrieval cache: arrays in dicts, bare arrays, word vectors as their
    words and array, tensors."""
    monkeypatch.setenv("ORDERLIB_RUNS", str(tmp_path / "runs"))
    vec = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    values = {
        "labels": {
            "vectors": vec,
            "corpus_tokens": None,
            "vocabulary": 7,
            "file": "w.txt",
            "seconds": 1.5,
            "trained_at": "abc123",
            "test_accuracy": 87.5,
        },
        "array": vec,
        "word vectors": {"words": ["a", "b", "c"], "vectors": vec},  # encoders.word_vectors.token_vectors' cache
        "features": {"10crop": {"train": torch.ones(2, 3)}, "1crop": {"train": torch.zeros(2, 3)}},
    }
    for name, value in values.items():
        path = tmp_path / f"{name}.pt"
        assert cached(path, "k", lambda: value) is value

        def rebuilt():
            raise AssertionError(f"{name}: rebuilt instead of loaded")

        got = cached(path, "k", rebuilt)
        if name == "word vectors":
            assert got["words"] == value["words"]
            got, value = got["vectors"], value["vectors"]
        if name == "labels":
            rest = [{k: v for k, v in d.items() if k != "vectors"} for d in (got, value)]
            assert rest[0] == rest[1]
            got, value = got["vectors"], value["vectors"]
        if name == "features":
            assert all(torch.equal(got[c][s], value[c][s]) for c in value for s in value[c])
            continue
        assert type(got) is np.ndarray and got.dtype == value.dtype and np.array_equal(got, value), name


def test_a_numpy_1_array_checkpoint_loads(tmp_path):
    """numpy 1 pickled arrays and numbers under numpy.core.multiarray (numpy 2: numpy._core.multiarray)."""
    buf = io.BytesIO()
    torch.save({"v": np.arange(3, dtype=np.float32), "lr": np.float64(0.5)}, buf, _use_new_zipfile_serialization=False)
    old = buf.getvalue().replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    assert b"numpy.core.multiarray" in old
    (tmp_path / "old.pt").write_bytes(old)
    state = load_checkpoint(tmp_path / "old.pt")
    assert np.array_equal(state["v"], np.arange(3, dtype=np.float32)) and state["lr"] == 0.5


def test_report_files_are_written_as_a_set_with_normal_permissions(tmp_path, monkeypatch):
    from orderlib import reports

    meta = dict(preset="small", seed=0, device="cpu", data_source="toy", data_fingerprint="x", wall_time_s=1.0)
    df = pd.DataFrame([dict(method="a", metric="m", paper=None, ours=1.0)])
    paths = reports.write_table("t", df, meta, tmp_path)
    for p in paths.values():
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~_umask()
    before = {k: p.read_bytes() for k, p in paths.items()}

    def broken(*a, **k):
        raise RuntimeError("rendering failed")

    monkeypatch.setattr(reports, "to_markdown", broken)
    with pytest.raises(RuntimeError, match="rendering failed"):
        reports.write_table("t", df.assign(ours=2.0), meta, tmp_path)
    assert {k: p.read_bytes() for k, p in paths.items()} == before  # no new CSV beside an old meta.json
    assert sorted(f.name for f in tmp_path.iterdir()) == ["t.csv", "t.md", "t.meta.json"]  # no temp files left


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("reader", ["tsv", "jsonl", "precomp"])
def test_binary_garbage_names_the_file_and_line(tmp_path, reader):
    from orderlib.data.entailment import read_pairs_tsv, read_snli_jsonl
    from orderlib.data.precomp import read_captions

    f = tmp_path / "bad.txt"
    f.write_bytes(b"a dog\tan animal\t0\n\xff\xfe\x00binary\n")
    read = {"tsv": read_pairs_tsv, "jsonl": read_snli_jsonl, "precomp": read_captions}[reader]
    with pytest.raises(DataError, match=r"bad\.txt:2: not UTF-8 text \(byte 0xff"):
        read(f)


DEBIAN_FMNIST = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(
    not os.path.exists(DEBIAN_FMNIST + "/train-images-idx3-ubyte.gz"), reason="needs dataset-fashion-mnist"
)
def test_fashion_mnist_setup_repairs_a_truncated_file(tmp_path):
    from orderlib.data import fashion_mnist as FM

    path, _ = FM.ensure_fashion_mnist(tmp_path)
    good = FM.fingerprint(tmp_path)
    f = path / "t10k-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:1000])  # truncated
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte has 1,000 bytes.*run `make data`"):
        FM.load_fashion_mnist("test", tmp_path)
    FM.ensure_fashion_mnist(tmp_path)  # what `make data` runs: repairs it
    assert FM.fingerprint(tmp_path) == good
    raw = bytearray(f.read_bytes())  # same size, altered content: the manifest catches it
    raw[5000] ^= 0xFF
    f.write_bytes(bytes(raw))
    assert FM.problems(tmp_path) and not FM.problems(tmp_path, deep=False)
    FM.ensure_fashion_mnist(tmp_path)
    assert FM.fingerprint(tmp_path) == good


@pytest.mark.skipif(not os.path.exists("/usr/share/wordnet/data.noun"), reason="needs Debian's wordnet-base")
def test_wordnet_setup_repairs_missing_and_truncated_files(tmp_path):
    from orderlib.data import wordnet as W

    path = W.ensure_wordnet("3.0", tmp_path)
    (path / "index.noun").unlink()
    with pytest.raises(DataError, match="missing index.noun"):
        W.check_wordnet_dir(path, "3.0")
    assert W.ensure_wordnet("3.0", tmp_path) == path and (path / "index.noun").is_file()  # no loop: repaired
    noun = path / "data.noun"
    noun.write_bytes(noun.read_bytes()[: noun.stat().st_size // 2])  # truncated mid-file
    with pytest.raises(DataError, match=r"WordNet 3.0 at .* is damaged: .*data.noun has .* bytes.*run `make data`"):
        W.open_wordnet("3.0", tmp_path)
    W.ensure_wordnet("3.0", tmp_path)
    assert not W.manifest_problems(path)


# ---------------------------------------------------------------- parameters, before any work


def test_notebook_parameters_are_checked_before_any_work(tmp_path, monkeypatch):
    from orderlib.experiments import devise, oe_retrieval, oe_snli, oe_toy2d, oe_wordnet
    from orderlib.params import ParameterError, validate

    with pytest.raises(ParameterError, match=r"PRESET='bogus' is not one of \['full', 'small'\]"):
        validate(oe_wordnet.PARAMETERS, PRESET="bogus")
    with pytest.raises(ParameterError, match=r"DATA='offical' is not one of \['embedded', 'official'\]"):
        validate(oe_snli.PARAMETERS, PRESET="small", DATA="offical")
    with pytest.raises(ParameterError, match=r"ROWS='nonsense': unknown \['nonsense'\]; valid: \['order-embeddings'"):
        oe_retrieval.check_parameters(PRESET="small", ROWS="nonsense")
    assert oe_retrieval.check_parameters(ROWS="order-embeddings,")["ROWS"] == ["order-embeddings"]  # trailing comma
    with pytest.raises(ParameterError, match=r"PROTOCOLS=\['paper', 'clen'\]: unknown \['clen'\]"):
        validate(oe_wordnet.PARAMETERS, PROTOCOLS=["paper", "clen"])
    with pytest.raises(ParameterError, match=r"WORD_VECTORS='.*nope.txt': no such file"):
        validate(devise.PARAMETERS, WORD_VECTORS=str(tmp_path / "nope.txt"))
    with pytest.raises(ParameterError, match="WORDNET='3.2' is not one of"):
        validate(oe_toy2d.PARAMETERS, WORDNET="3.2")
    with pytest.raises(ParameterError, match="unknown parameter PRESTE"):
        validate(oe_toy2d.PARAMETERS, PRESTE="small")
    with pytest.raises(ParameterError, match=r"DATA='precomp' needs DATA_DIR"):
        oe_retrieval.check_parameters(DATA="precomp")
    with pytest.raises(ParameterError, match=r"lacks \['train_caps.txt'"):
        oe_retrieval.check_parameters(DATA="precomp", DATA_DIR=str(tmp_path))
    with pytest.raises(ValueError, match="unknown data 'offical'"):
        oe_snli.splits("snli", {**oe_snli.PRESETS["small"], "data": "offical"})


def test_injected_parameter_names_are_read_from_papermills_cell():
    from orderlib.params import assigned_names, injected_parameters

    history = [
        "",
        "import os",
        'PRESET = "small"\nWORDNET = "3.1"',  # the notebook's own parameters cell
        '# Parameters\nPRESTE = "full"\nA, (B, *C) = 1, (2, 3)\nD: int = 4\nx.attr = 5\n',
        "validate(spec)",
        "# Parameters\nE = [1, 2]\nPRESTE = 'small'\n",
    ]
    assert injected_parameters(history) == ["PRESTE", "A", "B", "C", "D", "E"]
    assert injected_parameters(["", "# a comment\nPRESET = 'full'", "# Parameters of the model\nX = 1"]) == []
    assert injected_parameters([]) == [] and injected_parameters() == []  # not in an IPython kernel
    assert assigned_names("# Parameters\nnot python (") == []


def test_an_injected_parameter_the_notebook_does_not_take_is_an_error(monkeypatch):
    from orderlib import params as P
    from orderlib.experiments import oe_retrieval, oe_toy2d

    monkeypatch.setattr(P, "injected_parameters", lambda: ["PRESET", "PRESTE", "WORDNT", "PAPERMILL_INPUT_PATH"])
    with pytest.raises(P.ParameterError) as exc:
        P.validate(oe_toy2d.PARAMETERS, PRESET="small", WORDNET="3.2")
    takes = list(oe_toy2d.PARAMETERS)  # ['PRESET', 'WORDNET', ...]
    assert str(exc.value) == (
        f"bad notebook parameters: unknown parameter PRESTE (this notebook takes {takes}; did you mean PRESET?); "
        f"unknown parameter WORDNT (this notebook takes {takes}; did you mean WORDNET?); "
        "WORDNET='3.2' is not one of ['3.0', '3.1']"
    )
    monkeypatch.setattr(P, "injected_parameters", lambda: ["PRESET", "ROWS"])  # Figure 4's notebook takes no ROWS
    with pytest.raises(P.ParameterError, match=r"unknown parameter ROWS \(this notebook takes \['PRESET', 'DEVICE'\]"):
        oe_retrieval.check_parameters(PRESET="small", DEVICE="auto")
    monkeypatch.setattr(P, "injected_parameters", lambda: ["PRESET", "PAIRS"])
    assert oe_retrieval.check_parameters(PRESET="small", PAIRS=5) == {"PRESET": "small", "PAIRS": 5}


def test_each_notebook_validates_exactly_its_parameters_cell():
    """What a notebook's `validate` / `check_parameters` call checks (and so what `-p NAME` it
    accepts) is the set of names its parameters cell assigns, all of them passed."""
    import ast
    import importlib
    import json

    from orderlib.params import assigned_names
    from orderlib.paths import repo_root

    notebooks = sorted((repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 10
    for nb in notebooks:
        cells = json.loads(nb.read_text())["cells"]
        at = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
        names = set(assigned_names("".join(cells[at]["source"])))
        code = "\n".join("".join(c["source"]) for c in cells[:at] if c["cell_type"] == "code")
        module = next(
            a.name
            for n in ast.walk(ast.parse(code))
            if isinstance(n, ast.ImportFrom)
            for a in n.names
            if a.asname == "exp"
        )
        exp = importlib.import_module(f"orderlib.experiments.{module}")
        calls = [
            n
            for n in ast.walk(ast.parse("".join(cells[at + 1]["source"])))
            if isinstance(n, ast.Call)
            and getattr(n.func, "attr", getattr(n.func, "id", None)) in ("validate", "check_parameters")
        ]
        assert len(calls) == 1, f"{nb.name}: the cell after the parameters cell validates them once"
        passed = {k.arg for k in calls[0].keywords}
        spec = set(exp.PARAMETERS) if isinstance(calls[0].func, ast.Name) else passed & set(exp.PARAMETERS)
        assert names == passed == spec, (nb.name, sorted(names), sorted(passed), sorted(spec))


def test_a_mistyped_papermill_parameter_stops_the_notebook_before_any_work(tmp_path):
    """`papermill -p PRESTE full` (papermill only warns): notebook 00 fails in its validation cell."""
    import json

    import papermill
    from papermill.exceptions import PapermillExecutionError

    from orderlib.experiments import oe_toy2d
    from orderlib.paths import repo_root

    out = tmp_path / "00.ipynb"
    with pytest.raises(PapermillExecutionError) as exc:
        papermill.execute_notebook(
            str(repo_root() / "notebooks" / "00_oe_fig2_toy2d.ipynb"),
            str(out),
            parameters=dict(PRESTE="full"),
            kernel_name="python3",
            cwd=str(tmp_path),
            progress_bar=False,
        )
    e = exc.value
    assert e.ename == "ParameterError" and "unknown parameter PRESTE" in e.evalue, e.evalue
    assert f"this notebook takes {list(oe_toy2d.PARAMETERS)}; did you mean PRESET?)" in e.evalue
    code = [c for c in json.loads(out.read_text())["cells"] if c["cell_type"] == "code"]
    at = next(i for i, c in enumerate(code) if c["execution_count"] == e.exec_count)
    assert "".join(code[at]["source"]).startswith("validate(exp.PARAMETERS") and e.source == "".join(code[at]["source"])
    assert "injected-parameters" in code[at - 1]["metadata"]["tags"]  # the cell right after papermill's
    assert all(c["execution_count"] is None for c in code[at + 1 :])  # nothing ran after it


def test_a_precomp_test_split_too_small_fails_before_training(tmp_path, monkeypatch):
    from orderlib.experiments import oe_retrieval as X

    folder = _precomp(tmp_path / "coco_precomp", n_test=300)
    monkeypatch.setattr(X, "train_rows", lambda *a, **k: pytest.fail("trained before checking the test split"))
    with pytest.raises(ValueError, match="multiple of 1000 images, got 300"):
        X.run({**X.PRESETS["small"], "data": "precomp"}, "cpu", tmp_path / "w", folder, progress=False)


def test_papermill_sees_every_notebook_parameter():
    """`papermill --help-notebook` and parameter type checks read the `parameters` cell with their
    own line parser, which drops a line it cannot parse (an "=" in a comment did): each notebook's
    parameters as papermill infers them must be the names the cell assigns."""
    import ast
    import json
    from pathlib import Path

    from papermill.translators import PythonTranslator

    notebooks = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 10
    for nb in notebooks:
        cells = [c for c in json.loads(nb.read_text())["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(cells) == 1, nb.name
        source = "".join(cells[0]["source"])
        assigned = [t.id for node in ast.parse(source).body for t in node.targets]
        assert [p.name for p in PythonTranslator.inspect({"source": source})] == assigned, nb.name


def test_nbval_waits_for_cell_output_on_a_busy_machine():
    """nbval fails a finished cell whose output arrives more than 5 s late (seen on a loaded 2-core
    machine); notebooks/conftest.py raises that wait for every notebook cell make test runs."""
    import pytest as _pytest

    from orderlib.paths import repo_root

    seen = []

    class Record:
        def pytest_collection_finish(self, session):
            seen.extend(getattr(i, "output_timeout", None) for i in session.items)

    nb = str(repo_root() / "notebooks" / "00_oe_fig2_toy2d.ipynb")
    assert _pytest.main(["-q", "--nbval-lax", "--collect-only", "-p", "no:cacheprovider", nb], plugins=[Record()]) == 0
    assert seen and set(seen) == {120}


def test_code_fingerprint_ignores_docstrings_comments_and_layout_but_not_code():
    a = '"""Module."""\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n'
    b = "def f(x):\n    # a comment\n    return (\n        x + 1\n    )\n"
    c = "def f(x):\n    return x + 2\n"
    d = 'def f(x):\n    """Only a docstring."""\n'
    assert code_fingerprint(a) == code_fingerprint(b) != code_fingerprint(c)
    assert code_fingerprint(d) == code_fingerprint("def f(x):\n    pass\n")
