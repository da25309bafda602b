"""Bad input to the `orderlib` command, generated (Hypothesis): empty, truncated and garbage NumPy
files, wrong dtypes and shapes, NaN/inf, ragged or non-numeric CSV/TSV, broken JSON lines, duplicate
names, bad index lists, and output folders that cannot be written.

Every generated case runs `orderlib.cli.main` end to end with the example files of tests/data/cli/
for the other inputs, and must give exit status 2, one stderr line `orderlib: error: <the file>: ...`
and nothing written; the reader (or writer) function alone must raise `InputError` naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from orderlib import cli
from orderlib.cli import facts, hypernymy, report
from orderlib.cli.inputs import read_embeddings, read_ints, read_lines, read_matrix, read_rows
from orderlib.errors import InputError

EX = Path(__file__).resolve().parents[1] / "tests" / "data" / "cli"
CHECK = settings(
    max_examples=5,  # per kind of damage (each a test parameter)
    deadline=None,
    derandomize=True,  # the same cases on every run and machine
    database=None,  # no .hypothesis/ folder in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# --- the commands, with the example files as the valid inputs --------------------------------------

COMPOSITIONAL = ["eval", "compositional", "--scores", EX / "compositional_scores.npy", "--kind", "similarity"]
COMPOSITIONAL += ["--labels", EX / "compositional_labels.txt", "--seen", EX / "compositional_seen.txt"]
FACTS = ["eval", "facts", "--matrix", EX / "facts_distances.npy", "--kind", "distance", "--facts", EX / "facts.tsv"]
FACTS += ["--labels", EX / "facts_labels.txt"]
HYPERNYMY = ["eval", "hypernymy", "--embeddings", EX / "hypernymy_embeddings.npz", "--test", EX / "hypernymy_test.tsv"]
HYPERNYMY += ["--dev", EX / "hypernymy_dev.tsv"]
RETRIEVAL = ["eval", "retrieval", "--images", EX / "retrieval_images.npy", "--captions", EX / "retrieval_captions.npy"]
RETRIEVAL += ["--protocol", "1k", "--fold-size", "4"]
RETRIEVAL_MATRIX = ["eval", "retrieval", "--matrix", EX / "facts_distances.npy", "--kind", "distance"]
TRAIN = ["train", "hypernymy", "--edges", EX / "hypernymy_edges.tsv", "--protocol", "clean", "--n-test", "15"]
TRAIN += ["--n-dev", "15", "--epochs", "1", "--quiet"]
EVALS = {"compositional": COMPOSITIONAL, "facts": FACTS, "hypernymy": HYPERNYMY, "retrieval": RETRIEVAL}

N_PAIRS = np.load(EX / "compositional_scores.npy").shape[1]
N_FACTS = np.load(EX / "facts_distances.npy").shape[1]
with np.load(EX / "hypernymy_embeddings.npz") as _z:
    VOCAB = {str(n): i for i, n in enumerate(_z["names"])}


@dataclass(frozen=True)
class Target:
    """One input of one command, and the reader that command calls on it."""

    name: str
    argv: list
    flag: str
    reader: Callable[[str], object]
    n_max: int = 0  # index lists: the number of columns the indices point into

    def __repr__(self) -> str:
        return self.name


MATRICES = [
    Target("compositional --scores", COMPOSITIONAL, "--scores", read_matrix),
    Target("facts --matrix", FACTS, "--matrix", read_matrix),
    Target("retrieval --matrix", RETRIEVAL_MATRIX, "--matrix", read_matrix),
]
EMBEDDINGS = [
    Target("hypernymy --embeddings", HYPERNYMY, "--embeddings", read_embeddings),
    Target("retrieval --images", RETRIEVAL, "--images", lambda p: read_embeddings(p, "image id")),
    Target("retrieval --captions", RETRIEVAL, "--captions", lambda p: read_embeddings(p, "caption id")),
]
INDICES = [
    Target("compositional --labels", COMPOSITIONAL, "--labels", lambda p: read_ints(p, N_PAIRS, "pair"), N_PAIRS),
    Target("compositional --seen", COMPOSITIONAL, "--seen", lambda p: read_ints(p, N_PAIRS, "pair"), N_PAIRS),
    Target("facts --labels", FACTS, "--labels", lambda p: read_ints(p, N_FACTS, "fact"), N_FACTS),
]
VOCAB_TARGET = Target("hypernymy --vocab", HYPERNYMY, "--vocab", read_lines)
PAIRS = "hyponym-hypernym pairs"
TABLES = {  # delimited files with a fixed set of columns: the target, its valid example
    "facts": (Target("facts --facts", FACTS, "--facts", facts.read_facts), EX / "facts.tsv"),
    "test": (
        Target(
            "hypernymy --test",
            HYPERNYMY,
            "--test",
            lambda p: hypernymy.read_pairs(p, VOCAB, str(EX / "hypernymy_embeddings.npz")),
        ),
        EX / "hypernymy_test.tsv",
    ),
    "dev": (
        Target(
            "hypernymy --dev",
            HYPERNYMY,
            "--dev",
            lambda p: hypernymy.read_pairs(p, VOCAB, str(EX / "hypernymy_embeddings.npz")),
        ),
        EX / "hypernymy_dev.tsv",
    ),
    "edges": (Target("train hypernymy --edges", TRAIN, "--edges", hypernymy.read_edges), EX / "hypernymy_edges.tsv"),
}


@dataclass
class Case:
    """A bad file: how it is bad, its suffix and its bytes."""

    how: str
    suffix: str
    data: bytes


# --- building blocks ------------------------------------------------------------------------------


def npy_bytes(a, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=allow_pickle)
    return buf.getvalue()


def npz_bytes(arrays: dict, allow_pickle: bool = False) -> bytes:
    """A .npz archive as np.savez writes it (members `<key>.npy`), object arrays allowed if asked."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for key, a in arrays.items():
            zf.writestr(f"{key}.npy", npy_bytes(a, allow_pickle))
    return buf.getvalue()


def is_plain_number(text: str) -> bool:
    """What Python's float() takes (more than the readers do: '1_0', '١', ' 1 ')."""
    try:
        float(text)
    except ValueError:
        return False
    return True


sizes = st.integers(1, 4)
finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32)
# Line breaks as str.splitlines sees them, which a cell or a name of a line-based file cannot hold.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
cell_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=LINE_BREAKS + "\t,\0"), min_size=1)
not_numbers = st.one_of(
    st.sampled_from(["x", "1.2.3", "--1", "1e", "0x1F", "1_000", "١", "½", "²", "true", "1,5", "NaNa", "inf inf"]),
    cell_text.filter(lambda s: s.strip() and not s.strip().startswith("#") and not is_plain_number(s)),
)
not_integers = st.one_of(
    st.sampled_from(["x", "1.0", "1e3", "0x1", "1_0", "١", "²", "--1", "+-1", "one", "nan", "3 4"]),
    cell_text.filter(lambda s: s.strip() and not s.strip().startswith("#") and not s.strip().lstrip("+-").isdigit()),
)
bad_utf8 = st.sampled_from([b"\xff", b"\xfe", b"\x80", b"\xc3(", b"\xe9", b"\xed\xa0\x80"])  # the last: a surrogate


@st.composite
def damaged_text(draw, text: str) -> Case:
    """Valid text made unreadable: a byte that is not UTF-8, or a NUL byte, at a random place."""
    data = text.encode()
    at = draw(st.integers(0, len(data)))
    how = draw(st.sampled_from(["non-UTF-8", "NUL byte"]))
    insert = draw(bad_utf8) if how == "non-UTF-8" else b"\0"
    return Case(how, "", data[:at] + insert + data[at:])


def no_rows(draw) -> Case:
    return Case("no rows", "", draw(st.sampled_from([b"", b"\n", b"\n\n  \n", b"# only a comment\n\n"])))


@st.composite
def float_rows(draw, min_rows: int = 1) -> list[list[str]]:
    n, d = draw(st.integers(min_rows, 4)), draw(sizes)
    return [[repr(float(draw(finite))) for _ in range(d)] for _ in range(n)]


def lines(rows: list[list[str]], sep: str) -> str:
    return "".join(sep.join(r) + "\n" for r in rows)


# --- NumPy files ----------------------------------------------------------------------------------

ARRAY_KINDS = {  # arrays a reader must refuse, by role
    "matrix": ["text", "bools", "complex", "objects", "structured", "dates", "1-D", "3-D", "0-d", "no rows"]
    + ["no columns", "NaN", "inf"],
    "indices": ["floats", "bools", "text", "objects", "complex", "2-D", "0-d", "no entries", "negative", "too large"]
    + ["uint64"],
}
ARRAY_KINDS["embeddings"] = ARRAY_KINDS["matrix"]
FILE_KINDS = {  # damaged files
    ".npy": ["empty", "truncated", "garbage", "garbage after the magic", "the other format"],
    ".npz": ["empty", "truncated", "garbage", "garbage after the magic", "the other format", "no arrays"]
    + ["a member that is not .npy", "a truncated member", "two arrays, neither named"],
}


@st.composite
def bad_array(draw, role: str, how: str, n_max: int = 0) -> np.ndarray:
    """An array of kind `how` (ARRAY_KINDS) that a reader of `role` must refuse."""
    n, d = draw(sizes), draw(sizes)
    if role == "indices":
        good = draw(st.lists(st.integers(0, n_max - 1), min_size=n, max_size=n))
        i = draw(st.integers(0, n - 1))
        arrays = {
            "floats": lambda: np.asarray(good, draw(st.sampled_from([np.float32, np.float64]))),
            "bools": lambda: np.asarray(good, bool),
            "text": lambda: np.asarray([str(v) for v in good]),
            "objects": lambda: np.asarray(good, object),
            "complex": lambda: np.asarray(good, complex),
            "2-D": lambda: np.asarray(good * 2).reshape(2, n),
            "0-d": lambda: np.int64(good[0]),
            "no entries": lambda: np.zeros(0, draw(st.sampled_from([np.int32, np.int64, np.uint8]))),
            "negative": lambda: np.asarray(good[:i] + [-draw(st.integers(1, 2**40))] + good[i + 1 :]),
            "too large": lambda: np.asarray(good[:i] + [n_max + draw(st.integers(0, 2**40))] + good[i + 1 :]),
            "uint64": lambda: np.asarray(good[:i] + [2**64 - 1 - draw(st.integers(0, 9))] + good[i + 1 :], np.uint64),
        }
        return arrays[how]()
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = np.asarray([[draw(finite) for _ in range(d)] for _ in range(n)], dtype)
    if how in ("NaN", "inf"):
        x[draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))] = np.nan if how == "NaN" else -np.inf
    arrays = {
        "text": lambda: x.astype(str),
        "bools": lambda: x > 0,
        "complex": lambda: x + 1j,
        "objects": lambda: x.astype(object),
        "structured": lambda: np.zeros(n, [("x", "f8"), ("y", "f8")]),
        "dates": lambda: np.zeros((n, d), "datetime64[s]"),
        "1-D": lambda: x[:, 0],
        "3-D": lambda: x[:, :, None],
        "0-d": lambda: x[0, 0],
        "no rows": lambda: x[:0],
        "no columns": lambda: x[:, :0],
        "NaN": lambda: x,
        "inf": lambda: x,
    }
    return arrays[how]()


@st.composite
def numpy_file(draw, suffix: str, role: str, how: str, n_max: int = 0) -> Case:
    """A bad .npy or .npz file for a reader of `role` (matrix, embeddings or indices): damaged as
    `how` says (FILE_KINDS), or holding an array of kind `how` (ARRAY_KINDS)."""
    if role == "indices":
        valid = np.asarray(draw(st.lists(st.integers(0, n_max - 1), min_size=1, max_size=6)), np.int64)
    else:
        valid = np.asarray(draw(float_rows()), np.float64)
    key = {"matrix": draw(st.sampled_from(["scores", "matrix", "distances"])), "embeddings": "embeddings"}.get(
        role, "labels"
    )
    good = npy_bytes(valid) if suffix == ".npy" else npz_bytes({key: valid})
    if how == "empty":
        return Case(how, suffix, b"")
    if how == "truncated":
        return Case(how, suffix, good[: draw(st.integers(0, len(good) - 1))])
    if how == "garbage":
        return Case(how, suffix, draw(st.binary(min_size=1, max_size=200)))
    if how == "garbage after the magic":
        magic = b"\x93NUMPY" if suffix == ".npy" else b"PK\x03\x04"
        return Case(how, suffix, magic + draw(st.binary(max_size=200)))
    if how == "the other format":
        return Case(how, suffix, npz_bytes({key: valid}) if suffix == ".npy" else npy_bytes(valid))
    if how == "no arrays":
        return Case(how, suffix, npz_bytes({}))
    if how == "a member that is not .npy":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr(draw(st.sampled_from(["readme.txt", "scores.csv", "embeddings"])), b"1,2\n")
        return Case(how, suffix, buf.getvalue())
    if how == "a truncated member":
        member = npy_bytes(valid)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))) as zf:
            zf.writestr(f"{key}.npy", member[: draw(st.integers(0, len(member) - 1))])
        return Case(how, suffix, buf.getvalue())
    if how == "two arrays, neither named":
        return Case(how, suffix, npz_bytes({"a": valid, "b": valid}))
    a = draw(bad_array(role, how, n_max))
    if suffix == ".npy":
        return Case(f"{how} array", suffix, npy_bytes(a, allow_pickle=how == "objects"))
    arrays = {key: a}
    if role == "embeddings" and draw(st.booleans()):
        arrays["names"] = np.asarray([f"w{i}" for i in range(len(a) if a.ndim else 1)])
    return Case(f"{how} array", suffix, npz_bytes(arrays, allow_pickle=how == "objects"))


# --- text files -----------------------------------------------------------------------------------

NUMBER_KINDS = ["ragged", "not a number", "NaN or inf", "no rows", "damaged"]
NAMED_NUMBER_KINDS = NUMBER_KINDS + ["duplicate name", "names only"]


@st.composite
def delimited_numbers(draw, suffix: str, names: bool, how: str) -> Case:
    """A bad CSV/TSV of numbers; with `names`, each row starts with a name (embeddings)."""
    sep = "," if suffix == ".csv" else "\t"
    rows = draw(float_rows(min_rows=2))
    if names:
        rows = [[f"w{i}", *r] for i, r in enumerate(rows)]
    first = 1 if names else 0  # the first column of numbers
    i = draw(st.integers(1, len(rows) - 1))
    if how == "ragged":  # one cell less (where that leaves one) or one more
        rows[i] = rows[i][:-1] if len(rows[i]) > 1 and draw(st.booleans()) else rows[i] + [rows[i][-1]]
    elif how == "not a number":
        rows[i][draw(st.integers(first, len(rows[i]) - 1))] = draw(not_numbers)
    elif how == "NaN or inf":
        token = draw(st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e400"]))
        rows[i][draw(st.integers(first, len(rows[i]) - 1))] = token
    elif how == "no rows":
        return Case(how, suffix, no_rows(draw).data)
    elif how == "damaged":
        case = draw(damaged_text(lines(rows, sep)))
        return Case(case.how, suffix, case.data)
    elif how == "duplicate name":
        rows[i][0] = rows[draw(st.integers(0, i - 1))][0]
    elif how == "names only":
        rows = [[r[0]] for r in rows]
    return Case(how, suffix, lines(rows, sep).encode())


JSONL_KINDS = ["invalid JSON", "no embedding", "embedding not numbers", "different lengths", "duplicate name"]
JSONL_KINDS += ["not an object", "a name missing", "NaN", "a huge integer", "no rows", "damaged"]


@st.composite
def jsonl_embeddings(draw, how: str) -> Case:
    n, d = draw(st.integers(2, 4)), draw(sizes)
    key = draw(st.sampled_from(["name", "id"]))
    records = [{key: f"w{j}", "embedding": [float(draw(finite)) for _ in range(d)]} for j in range(n)]
    i = draw(st.integers(1, n - 1))
    text = [json.dumps(r) for r in records]
    if how == "invalid JSON":
        text[i] = text[i][: draw(st.integers(1, len(text[i]) - 1))]
    elif how == "no embedding":
        del records[i]["embedding"]
    elif how == "embedding not numbers":
        bad = st.sampled_from(["1 2", "12", {"a": 1.0}, [True, False], ["1"], [[1.0]], None, 3.0, [None]])
        records[i]["embedding"] = draw(bad)
    elif how == "different lengths":
        records[i]["embedding"] = [1.0] * draw(st.integers(0, 5).filter(lambda k: k != d))
    elif how == "duplicate name":
        records[i][key] = records[draw(st.integers(0, i - 1))][key]
    elif how == "not an object":
        text[i] = json.dumps(draw(st.sampled_from([[1.0, 2.0], "w1", 3, None, True])))
    elif how == "a name missing":
        del records[i][key]
    elif how == "NaN":
        records[i]["embedding"][0] = float("nan")
    elif how == "a huge integer":
        records[i]["embedding"][0] = 10 ** draw(st.integers(309, 400))
    elif how == "no rows":
        return Case(how, ".jsonl", draw(st.sampled_from([b"", b"\n", b"\n\n  \n"])))
    if how not in ("invalid JSON", "not an object", "damaged"):
        text[i] = json.dumps(records[i])
    body = "\n".join(text) + "\n"
    if how == "damaged":
        case = draw(damaged_text(body))
        return Case(case.how, ".jsonl", case.data)
    return Case(how, ".jsonl", body.encode())


INDEX_KINDS = ["not an integer", "out of range", "two columns", "no rows", "damaged"]


@st.composite
def index_list(draw, n_max: int, how: str) -> Case:
    values = draw(st.lists(st.integers(0, n_max - 1), min_size=1, max_size=6).map(lambda v: [str(x) for x in v]))
    i = draw(st.integers(0, len(values) - 1))
    if how == "not an integer":
        values[i] = draw(not_integers)
    elif how == "out of range":
        values[i] = str(draw(st.one_of(st.integers(n_max, 10**30), st.integers(-(10**30), -1))))
    elif how == "two columns":
        values[i] += "\t" + values[i]
    elif how == "no rows":
        return Case(how, ".txt", no_rows(draw).data)
    elif how == "damaged":
        case = draw(damaged_text("\n".join(values) + "\n"))
        return Case(case.how, ".txt", case.data)
    return Case(how, ".txt", ("\n".join(values) + "\n").encode())


names = cell_text.map(str.strip).filter(lambda s: s and not s.startswith("#"))
NAME_KINDS = ["duplicate name", "two columns", "no rows", "damaged"]


@st.composite
def name_list(draw, how: str) -> Case:
    """A bad vocabulary (one name a line)."""
    vocab = draw(st.lists(names, min_size=2, max_size=6, unique=True))
    i = draw(st.integers(1, len(vocab) - 1))
    if how == "duplicate name":
        vocab[i] = vocab[draw(st.integers(0, i - 1))]
    elif how == "two columns":
        vocab[i] += "\t" + draw(names)
    elif how == "no rows":
        return Case(how, ".txt", no_rows(draw).data)
    elif how == "damaged":
        case = draw(damaged_text("\n".join(vocab) + "\n"))
        return Case(case.how, ".txt", case.data)
    return Case(how, ".txt", ("\n".join(vocab) + "\n").encode())


TABLE_KINDS = {
    "facts": ["duplicate fact", "bad order"],
    "test": ["unknown id", "bad label"],
    "dev": ["unknown id", "bad label"],
    "edges": ["duplicate edge", "self-loop", "cycle"],
}


@st.composite
def table_file(draw, kind: str, how: str) -> Case:
    """A bad TSV of a fixed layout (facts, labelled pairs, edges), from the valid example."""
    rows = [line.split("\t") for line in TABLES[kind][1].read_text().splitlines() if line.strip()]
    i = draw(st.integers(0, len(rows) - 1))
    if how == "ragged":  # every row has 2 or more columns
        rows[i] = rows[i][:-1] if draw(st.booleans()) else rows[i] + [draw(names)]
    elif how in ("duplicate fact", "duplicate edge"):
        rows.insert(draw(st.integers(i + 1, len(rows))), list(rows[i]))
    elif how == "bad order":
        rows[i][0] = draw(st.sampled_from(["0", "4", "1.0", "one", "-1"]))
    elif how == "unknown id":
        rows[i][draw(st.integers(0, 1))] = draw(names.filter(lambda s: s not in VOCAB))
    elif how == "bad label":
        rows[i][2] = draw(st.sampled_from(["maybe", "2", "-1", "0.5", "y", "t"]))
    elif how == "self-loop":
        rows[i][1] = rows[i][0]
    elif how == "cycle":  # an edge from a parent back down to its child
        rows.append([rows[i][1], rows[i][0]])
    elif how == "no rows":
        return Case(how, ".tsv", no_rows(draw).data)
    text = lines(rows, "\t")
    if how == "damaged":
        case = draw(damaged_text(text))
        return Case(case.how, ".tsv", case.data)
    return Case(how, ".tsv", text.encode())


# --- running a case -------------------------------------------------------------------------------


def run_cli(argv: list) -> tuple[int, str]:
    """(exit status, stderr) of `orderlib ARGV`, stdout discarded."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main([str(a) for a in argv])
    return status, err.getvalue()


def with_input(argv: list, flag: str, value) -> list:
    argv = list(argv)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_refused(argv: list, named, out: Path, before: dict | None) -> str:
    """The command exits 2 with one line naming `named`, writing nothing (and not making `out`)."""
    status, err = run_cli([*argv, "--out", out])
    note(f"stderr: {err!r}")
    assert status == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"orderlib: error: {named}: "), err
    if before is None:
        assert not out.exists(), sorted(out.rglob("*"))
    else:
        assert listing(out) == before
    return err


def check_input(target: Target, case: Case, keep_earlier: bool) -> None:
    """Write the bad file, run the command on it, then its reader."""
    event(f"{target.name}: {case.how}{case.suffix}")
    note(f"{target.name} {case.how}: {case.data[:300]!r}")
    with tempfile.TemporaryDirectory() as tmp:
        bad, out = Path(tmp) / f"bad{case.suffix}", Path(tmp) / "out"
        bad.write_bytes(case.data)
        before = None
        if keep_earlier:  # an earlier report stays as it was
            out.mkdir()
            (out / f"{target.argv[1]}.csv").write_text("earlier\n")
            before = listing(out)
        err = assert_refused(with_input(target.argv, target.flag, bad), bad, out, before)
        with pytest.raises(InputError) as exc:
            target.reader(str(bad))
        assert exc.value.path == str(bad)
        assert err == f"orderlib: error: {bad}: {exc.value.what}\n"  # the reader's own message


# --- the tests: every kind of damage is a parameter; Hypothesis varies sizes, places, tokens, targets ---


def kinds(suffixes_kinds: dict) -> list:
    return [pytest.param(s, k, id=f"{s}-{k}") for s, ks in suffixes_kinds.items() for k in ks]


@pytest.mark.parametrize(
    "suffix, how",
    kinds(
        {
            ".npy": FILE_KINDS[".npy"] + ARRAY_KINDS["matrix"],
            ".npz": FILE_KINDS[".npz"] + ARRAY_KINDS["matrix"],
            ".csv": NUMBER_KINDS,
            ".tsv": NUMBER_KINDS,
        }
    ),
)
@CHECK
@given(data=st.data(), keep_earlier=st.booleans())
def test_a_bad_matrix(suffix, how, data, keep_earlier):
    target = data.draw(st.sampled_from(MATRICES))
    if suffix in (".npy", ".npz"):
        case = data.draw(numpy_file(suffix, "matrix", how))
    else:
        case = data.draw(delimited_numbers(suffix, False, how))
    check_input(target, case, keep_earlier)


@pytest.mark.parametrize(
    "suffix, how",
    kinds(
        {
            ".npy": FILE_KINDS[".npy"] + ARRAY_KINDS["embeddings"],
            ".npz": FILE_KINDS[".npz"] + ARRAY_KINDS["embeddings"],
            ".csv": NAMED_NUMBER_KINDS,
            ".tsv": NAMED_NUMBER_KINDS,
            ".jsonl": JSONL_KINDS,
        }
    ),
)
@CHECK
@given(data=st.data(), keep_earlier=st.booleans())
def test_bad_embeddings(suffix, how, data, keep_earlier):
    target = data.draw(st.sampled_from(EMBEDDINGS))
    if suffix in (".npy", ".npz"):
        case = data.draw(numpy_file(suffix, "embeddings", how))
    elif suffix == ".jsonl":
        case = data.draw(jsonl_embeddings(how))
    else:
        case = data.draw(delimited_numbers(suffix, True, how))
    check_input(target, case, keep_earlier)


@pytest.mark.parametrize(
    "suffix, how",
    kinds(
        {
            ".txt": INDEX_KINDS,
            ".npy": FILE_KINDS[".npy"] + ARRAY_KINDS["indices"],
            ".npz": FILE_KINDS[".npz"] + ARRAY_KINDS["indices"],
        }
    ),
)
@CHECK
@given(data=st.data(), keep_earlier=st.booleans())
def test_a_bad_index_list(suffix, how, data, keep_earlier):
    target = data.draw(st.sampled_from(INDICES))
    if suffix == ".txt":
        case = data.draw(index_list(target.n_max, how))
    else:
        case = data.draw(numpy_file(suffix, "indices", how, target.n_max))
    check_input(target, case, keep_earlier)


@pytest.mark.parametrize("how", NAME_KINDS)
@CHECK
@given(data=st.data(), keep_earlier=st.booleans())
def test_a_bad_vocabulary(how, data, keep_earlier):
    check_input(VOCAB_TARGET, data.draw(name_list(how)), keep_earlier)


@pytest.mark.parametrize(
    "kind, how", kinds({kind: ["ragged", "no rows", "damaged", *extra] for kind, extra in TABLE_KINDS.items()})
)
@CHECK
@given(data=st.data(), keep_earlier=st.booleans())
def test_a_bad_table(kind, how, data, keep_earlier):
    check_input(TABLES[kind][0], data.draw(table_file(kind, how)), keep_earlier)


# --- output folders -------------------------------------------------------------------------------


def small_report() -> report.Report:
    table = pd.DataFrame([dict(method="m", metric="x", paper=None, ours=1.0)])
    return report.Report(table=table, protocol="p", ties="t", inputs={})


ENOSPC = OSError(errno.ENOSPC, "No space left on device")
segment = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=8)


OUT_KINDS = ["an existing file", "below a file", "below /proc", "read-only /proc or /sys"]
OUT_KINDS += ["a report file is a folder", "the disk fills up"]  # these two fail after the evaluation, when writing


@st.composite
def bad_out(draw, how: str, tmp: Path) -> tuple[Path, Path]:
    """(the --out folder, the path the error must name), with whatever makes it bad in place."""
    below = [draw(segment) for _ in range(draw(st.integers(0, 2)))]
    if how == "an existing file":
        out = tmp / "taken"
        out.write_text("a file, not a folder\n")
        return out, out
    if how == "below a file":
        (tmp / "file").write_text("a file, not a folder\n")
        out = Path(tmp / "file" / draw(segment), *below)
        return out, out
    if how == "below /proc":
        out = Path("/proc", "orderlib-test-" + draw(segment), *below)
        assert not out.exists()
        return out, out
    if how == "read-only /proc or /sys":
        out = Path(draw(st.sampled_from(["/proc", "/sys", "/sys/kernel"])))
        return out, out
    out = tmp / "out"
    if how == "a report file is a folder":
        out.mkdir()
        return out, out  # the named path is fixed by the caller, which knows the report's id
    if draw(st.booleans()):
        out.mkdir()
        (out / "earlier.txt").write_text("kept\n")
    return Path(out, *below), Path(out, *below)


@pytest.mark.parametrize("how", OUT_KINDS)
@settings(CHECK, max_examples=10)  # the late kinds run a whole evaluation each
@given(data=st.data())
def test_an_unwritable_out_folder(how, data):
    """--out (or train's --checkpoints) that cannot be written: refused before any work where that
    can be known, else when writing; either way nothing is left behind."""
    late = how in ("a report file is a folder", "the disk fills up")
    command = data.draw(st.sampled_from(list(EVALS) if late else [*EVALS, "train"]))  # train only fails early
    argv = TRAIN if command == "train" else EVALS[command]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        out, named = data.draw(bad_out(how, tmp))
        stem = "hypernymy_train" if command == "train" else command
        files = [f"{stem}.csv", f"{stem}.md", f"{stem}.meta.json"]
        fail_at = None
        if how == "a report file is a folder":
            named = out / data.draw(st.sampled_from(files))
            named.mkdir()
        if how == "the disk fills up":
            fail_at = data.draw(st.integers(1, len(files)))
        before_tmp = listing(tmp)
        before = listing(out) if out.is_dir() and not str(out).startswith(("/proc", "/sys")) else None
        existed = out.exists()
        calls = {"n": 0}
        real_write_bytes = Path.write_bytes

        def write_bytes(self, data):
            calls["n"] += 1
            if calls["n"] == fail_at:
                raise ENOSPC
            return real_write_bytes(self, data)

        args = ["--out", out]
        if command == "train" and data.draw(st.booleans()):  # the checkpoint folder instead; --out is fine
            args = ["--checkpoints", out, "--out", tmp / "report"]
        event(f"{command} {args[0]}: {how}")
        with mock.patch.object(Path, "write_bytes", write_bytes):
            status, err = run_cli([*argv, *args])
        note(f"stderr: {err!r}")
        assert status == 2, err
        assert err.count("\n") == 1 and err.startswith(f"orderlib: error: {named}: "), err
        assert listing(tmp) == before_tmp  # nothing written, no temp file left behind
        assert out.exists() == existed
        if before is not None:
            assert listing(out) == before
        if str(out).startswith(("/proc", "/sys")) and out.exists():
            assert not [f for f in files if (out / f).exists()]
        # The writer alone, called from Python: InputError naming the folder (or the file in the way).
        calls["n"] = 0
        with pytest.raises(InputError) as exc, mock.patch.object(Path, "write_bytes", write_bytes):
            if late:
                report.write(small_report(), out, stem, {})
            else:
                report.check_out(out)
        assert exc.value.path == str(named)
        assert listing(tmp) == before_tmp and out.exists() == existed


def test_the_readers_never_unpickle(tmp_path):
    """An object array is refused before numpy would unpickle it (allow_pickle stays False)."""

    class Boom:
        def __reduce__(self):
            return (pytest.fail, ("unpickled!",))

    path = tmp_path / "objects.npy"
    path.write_bytes(npy_bytes(np.asarray([Boom(), Boom()], object), allow_pickle=True))
    for read in (read_matrix, read_embeddings, lambda p: read_ints(p, 3)):
        with pytest.raises(InputError, match="pickled object array") as exc:
            read(str(path))
        assert exc.value.path == str(path)


def test_a_header_that_declares_a_huge_array_is_refused_before_allocating(tmp_path):
    """A damaged or hostile header ('shape': (10**12, 4)) must not reach numpy's allocation."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 4)})
    path = tmp_path / "huge.npy"
    path.write_bytes(buf.getvalue() + np.ones(4).tobytes())
    with pytest.raises(InputError, match="truncated") as exc:
        read_matrix(str(path))
    assert exc.value.path == str(path) and str(math.prod((10**12, 4)) * 8) in exc.value.what


def test_rows_keep_their_line_numbers_past_a_byte_order_mark(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes(b"\xef\xbb\xbf1,2\n3,4\n")  # what spreadsheet programs write
    np.testing.assert_array_equal(read_matrix(str(path)), [[1, 2], [3, 4]])
    assert read_rows(str(path))[0] == (1, ["1", "2"])
