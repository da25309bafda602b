"""Readers of the command's plain input files; every problem is an `InputError` naming the file.

Formats: `.npy`, `.npz`, delimited text (`.csv` comma, anything else tab; blank lines and lines
starting with `#` skipped) and JSON lines (`.jsonl`, one object a line). Text is UTF-8 (a leading
byte-order mark is dropped). NumPy files load without pickle (`allow_pickle=False`): object arrays
are refused, and a file's header is checked against its size before any array is allocated.
"""

from __future__ import annotations

import json
import math
import re
import tokenize
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from orderlib.errors import InputError
from orderlib.paths import sha256_files


@dataclass
class Embeddings:
    """Rows of vectors from one file: `names` (None where the file has none) and other per-row fields."""

    path: str
    vectors: np.ndarray  # (N, D) float32 or float64
    names: list[str] | None = None
    fields: dict[str, list] = field(default_factory=dict)
    where: list[str] = field(default_factory=list)  # "line 3" / "row 2" per row, for messages


def file_record(path) -> dict:
    """{"path", "sha256", "bytes"} of an input file, for a report's provenance."""
    p = Path(path)
    return {"path": str(path), "sha256": sha256_files([p]), "bytes": p.stat().st_size}


_NPY_MAGIC = b"\x93NUMPY"  # what every .npy file (and every array inside a .npz) starts with
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive (a .npz), or an empty one
_NPY_VERSIONS = ((1, 0), (2, 0), (3, 0))
# What numpy's .npy header parser raises on a damaged header (it evaluates the header as a Python literal).
_HEADER_ERRORS = (ValueError, TypeError, SyntaxError, RecursionError, tokenize.TokenError)
# What reading a damaged zip archive raises: bad or truncated archive, bad CRC, bad deflate stream,
# unsupported compression or encryption (RuntimeError: "password required").
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError, OSError)
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.IGNORECASE | re.ASCII)
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_INT64 = np.iinfo(np.int64)


def _exists(path) -> Path:
    p = Path(path)
    if not p.is_file():
        raise InputError(path, "no such file" if not p.exists() else "is not a file")
    return p


def _why(exc: BaseException) -> str:
    """An exception's message in one line, for the parenthesis of an error."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(text.split())[:200]


def _read_text(path) -> str:
    """A text file's contents: UTF-8 (a leading byte-order mark dropped), no NUL bytes."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({_why(exc)})") from None
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = start + exc.start
        line = data.count(b"\n", 0, at) + 1
        raise InputError(path, f"not UTF-8 text (line {line}: byte {data[at : at + 1]!r}); save it as UTF-8") from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise InputError(path, f"line {line}: a NUL byte, so a binary file, not text")
    return text


def _suffix(path) -> str:
    return Path(path).suffix.lower()


def delimiter(path) -> str:
    return "," if _suffix(path) == ".csv" else "\t"


def read_rows(path, columns: tuple[str, ...] | None = None) -> list[tuple[int, list[str]]]:
    """(line number, fields) of a delimited text file; with `columns`, every row must have that many."""
    p = _exists(path)
    text = _read_text(p)
    rows = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(delimiter(path))]
        if columns is not None and len(cells) != len(columns):
            raise InputError(path, f"line {no}: {len(cells)} columns, expected {len(columns)} ({', '.join(columns)})")
        rows.append((no, cells))
    if not rows:
        raise InputError(path, "holds no rows")
    return rows


def read_lines(path) -> list[str]:
    """One name a line (a vocabulary), no duplicates."""
    rows = read_rows(path, ("name",))
    names = [cells[0] for _, cells in rows]
    check_unique(path, names, [f"line {no}" for no, _ in rows])
    return names


def check_unique(path, names: list[str], where: list[str], what: str = "name") -> None:
    seen: dict[str, str] = {}
    for name, at in zip(names, where):
        if name in seen:
            raise InputError(path, f"duplicate {what} {name!r} ({seen[name]} and {at})")
        seen[name] = at


def check_finite(path, x: np.ndarray, where: list[str] | None = None) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.argwhere(bad)[0][0])
        at = where[i] if where else f"row {i}"
        n = int(bad.any(-1).sum()) if x.ndim > 1 else int(bad.sum())
        raise InputError(path, f"{n} {'row holds' if n == 1 else 'rows hold'} NaN or inf (first: {at})")


_KIND_NAMES = {
    "b": "True/False",
    "c": "complex",
    "U": "text",
    "S": "bytes",
    "V": "structured",
    "M": "date",
    "m": "time",
}


def _float_array(path, a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind not in "fiu":
        kind = _KIND_NAMES.get(a.dtype.kind, "non-numeric")
        raise InputError(path, f"holds {kind} values ({a.dtype}), expected real numbers (float or int)")
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float64)


def _sniff(path, p: Path, suffix: str) -> None:
    """Check the file's first bytes are what a `suffix` (.npy / .npz) file starts with."""
    try:
        with open(p, "rb") as fp:
            head = fp.read(len(_NPY_MAGIC))
    except OSError as exc:
        raise InputError(path, f"cannot be read ({_why(exc)})") from None
    if not head:
        raise InputError(path, f"is empty (0 bytes), expected a {suffix} file")
    is_npy = head.startswith(_NPY_MAGIC) or _NPY_MAGIC.startswith(head)
    is_zip = head[:4] in _ZIP_MAGICS
    if suffix == ".npy" and is_zip:
        raise InputError(path, "is a .npz archive (a zip file), not a .npy array: rename it to .npz")
    if suffix == ".npz" and is_npy:
        raise InputError(path, "is a .npy array, not a .npz archive: rename it to .npy")
    if suffix == ".npy" and not is_npy:
        raise InputError(path, "is not a .npy file (it lacks the header np.save writes); write it with np.save")
    if suffix == ".npz" and not is_zip:
        raise InputError(path, "is not a .npz file (not a zip archive as np.savez writes); write it with np.savez")


def _check_header(path, fp, size: int, where: str = "") -> None:
    """Read a .npy header from `fp` (at the start of `size` bytes): a damaged header, an object
    array (pickled Python objects) or fewer bytes than the header's shape needs is an InputError,
    raised before numpy would allocate the array."""
    try:
        version = npy_format.read_magic(fp)
        if version not in _NPY_VERSIONS:
            raise ValueError(f"unknown .npy format version {version[0]}.{version[1]}")
        read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
        shape, _, dtype = read(fp)
    except _HEADER_ERRORS as exc:
        raise InputError(path, f"{where}truncated or damaged .npy header ({_why(exc)})") from None
    if dtype.hasobject:
        raise InputError(
            path,
            f"{where}holds Python objects (a pickled object array); orderlib reads numbers and text only and "
            "never unpickles (that can run code): save a numeric array, e.g. np.save(f, x.astype(np.float32))",
        )
    if any(d < 0 for d in shape):
        raise InputError(path, f"{where}damaged .npy header (shape {shape})")
    need, have = math.prod(shape) * dtype.itemsize, size - fp.tell()
    if need > have:
        raise InputError(
            path,
            f"{where}truncated: its header declares a {dtype} array of shape {shape} ({need} bytes), "
            f"but only {have} bytes follow the header",
        )


def _load_npy(path) -> np.ndarray:
    p = Path(path)
    _sniff(path, p, ".npy")
    try:
        with open(p, "rb") as fp:
            _check_header(path, fp, p.stat().st_size)
            fp.seek(0)
            return npy_format.read_array(fp, allow_pickle=False)
    except InputError:
        raise
    except (ValueError, EOFError, OSError) as exc:
        raise InputError(path, f"damaged .npy file ({_why(exc)})") from None


def _load_npz(path) -> dict[str, np.ndarray]:
    """Every array of a .npz archive by name (its member's name less `.npy`)."""
    p = Path(path)
    _sniff(path, p, ".npz")
    arrays = {}
    try:
        with zipfile.ZipFile(p) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                if not info.filename.endswith(".npy"):
                    raise InputError(path, f"holds {info.filename!r}, which is not a NumPy array (.npy)")
                key = info.filename[: -len(".npy")]
                with zf.open(info) as fp:
                    _check_header(path, fp, info.file_size, f"array `{key}`: ")
                with zf.open(info) as fp:
                    arrays[key] = npy_format.read_array(fp, allow_pickle=False)
    except InputError:
        raise
    except _ZIP_ERRORS as exc:
        raise InputError(path, f"truncated or damaged .npz archive ({_why(exc)})") from None
    if not arrays:
        raise InputError(path, "is an empty .npz archive (no arrays)")
    return arrays


def _one_array(path, arrays: dict[str, np.ndarray], keys=()) -> np.ndarray:
    """The array of a .npz with one, or the first of `keys` it holds."""
    named = [k for k in keys if k in arrays]
    if named:
        return arrays[named[0]]
    if len(arrays) != 1:
        also = f" or one of {list(keys)}" if keys else ""
        raise InputError(path, f"holds arrays {sorted(arrays)}; expected one array{also}")
    return next(iter(arrays.values()))


def read_matrix(path, keys=("matrix", "scores", "distances")) -> np.ndarray:
    """A 2-D numeric array: .npy, .npz (one array, or one of `keys`), or delimited numbers."""
    p = _exists(path)
    if _suffix(p) == ".npy":
        a = _load_npy(p)
    elif _suffix(p) == ".npz":
        a = _one_array(path, _load_npz(p), keys)
    else:
        rows = read_rows(p)
        _same_width(path, rows)
        a = _numbers(path, rows)
    a = _float_array(path, a)
    if a.ndim != 2 or 0 in a.shape:
        raise InputError(path, f"shape {tuple(a.shape)}, expected a non-empty 2-D matrix")
    check_finite(path, a)
    return a


def _same_width(path, rows: list[tuple[int, list[str]]], what: str = "") -> None:
    """Every row as many columns as the first (a ragged file is an error naming the first odd line)."""
    first_no, first = rows[0]
    for no, cells in rows:
        if len(cells) != len(first):
            raise InputError(
                path, f"line {no}: {len(cells)} columns, expected {len(first)} (as on line {first_no}){what}"
            )


def _numbers(path, rows: list[tuple[int, list[str]]], first_column: int = 1) -> np.ndarray:
    """Plain decimal numbers (`nan` and `inf` parse, and check_finite refuses them later)."""
    out = []
    for no, cells in rows:
        for j, c in enumerate(cells):
            if not _NUMBER.fullmatch(c):
                raise InputError(path, f"line {no}, column {j + first_column}: {c[:40]!r} is not a number")
        out.append([float(c) for c in cells])
    return np.asarray(out, np.float64)


def read_ints(path, n_max: int | None = None, what: str = "index") -> np.ndarray:
    """A 1-D array of integer indices: .npy / .npz, or one integer a line; each in [0, n_max)."""
    p = _exists(path)
    if _suffix(p) in (".npy", ".npz"):
        a = _load_npy(p) if _suffix(p) == ".npy" else _one_array(path, _load_npz(p))
        if a.dtype.kind not in "iu" or a.ndim != 1:
            raise InputError(path, f"{a.dtype} array of shape {tuple(a.shape)}, expected 1-D integers")
        values, where = a, [f"row {i}" for i in range(len(a))]
    else:
        rows = read_rows(p, (what,))
        for no, (cell,) in rows:
            if not _INTEGER.fullmatch(cell):
                raise InputError(path, f"line {no}: not an integer {what} ({cell[:40]!r})")
        values, where = [int(c) for _, (c,) in rows], [f"line {no}" for no, _ in rows]
    if len(values) == 0:
        raise InputError(path, "holds no rows")
    low, high = (0, n_max - 1) if n_max is not None else (int(_INT64.min), int(_INT64.max))
    if isinstance(values, np.ndarray):  # before the cast to int64, so a huge uint64 cannot wrap around
        bad = (
            np.flatnonzero(values > high)
            if values.dtype.kind == "u"
            else np.flatnonzero((values < low) | (values > high))
        )
        bad = bad[:1].tolist()
    else:
        bad = [i for i, v in enumerate(values) if not low <= v <= high][:1]
    if bad:
        raise InputError(path, f"{where[bad[0]]}: {what} {values[bad[0]]} out of range {low}..{high}")
    return np.asarray(values, np.int64)


def read_embeddings(path, what: str = "name") -> Embeddings:
    """Vectors with optional names: .npy (N, D); .npz with `embeddings` (or one array) and optional
    `names`; delimited text `name, x1, ..., xD`; JSON lines {"name" (or "id"), "embedding", ...}."""
    p = _exists(path)
    kind = _suffix(p)
    if kind == ".npy":
        emb = _from_arrays(path, {"embeddings": _load_npy(p)})
    elif kind == ".npz":
        emb = _from_arrays(path, _load_npz(p))
    elif kind == ".jsonl":
        emb = _from_jsonl(path)
    else:
        emb = _from_text(path)
    if emb.vectors.ndim != 2 or 0 in emb.vectors.shape:
        raise InputError(path, f"shape {tuple(emb.vectors.shape)}, expected (N, D) vectors")
    check_finite(path, emb.vectors, emb.where)
    if emb.names is not None:
        check_unique(path, emb.names, emb.where, what)
    return emb


def _from_arrays(path, arrays: dict[str, np.ndarray]) -> Embeddings:
    if "embeddings" in arrays:
        x = arrays.pop("embeddings")
    elif len([k for k in arrays if k != "names"]) == 1:
        x = arrays.pop(next(k for k in arrays if k != "names"))
    else:
        raise InputError(path, f"holds arrays {sorted(arrays)}; expected `embeddings` (and optional `names`)")
    x = _float_array(path, x)
    if x.ndim != 2 or 0 in x.shape:
        raise InputError(path, f"shape {tuple(x.shape)}, expected (N, D) vectors")
    where = [f"row {i}" for i in range(len(x))]
    fields = {k: [str(v) for v in a.reshape(-1)] for k, a in arrays.items() if a.ndim == 1}
    for k, v in fields.items():
        if len(v) != len(x):
            raise InputError(path, f"`{k}` has {len(v)} entries for {len(x)} embeddings")
    names = fields.pop("names", None)
    return Embeddings(str(path), x, names, fields, where)


def _from_text(path) -> Embeddings:
    rows = read_rows(path)
    _same_width(path, rows, ": a name, then the vector")
    if len(rows[0][1]) < 2:
        raise InputError(path, "1 column, expected a name then the vector's numbers")
    x = _numbers(path, [(no, c[1:]) for no, c in rows], first_column=2)
    return Embeddings(str(path), x, [c[0] for _, c in rows], {}, [f"line {no}" for no, _ in rows])


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _json_record(path, no: int, line: str) -> tuple[dict, list[float]]:
    """(the other keys, the `embedding`) of one line of a .jsonl file."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise InputError(path, f"line {no}: not valid JSON ({_why(exc)})") from None
    if not isinstance(obj, dict):
        raise InputError(
            path, f"line {no}: a JSON {type(obj).__name__}, expected an object {{...}} with an `embedding`"
        )
    if "embedding" not in obj:
        raise InputError(path, f"line {no}: no `embedding` key (keys: {sorted(obj)[:6]})")
    vec = obj.pop("embedding")
    if not isinstance(vec, list) or not all(_is_number(v) for v in vec):
        raise InputError(path, f"line {no}: `embedding` is not a list of numbers")
    try:
        return obj, [float(v) for v in vec]
    except OverflowError:  # an integer too large for a float
        raise InputError(path, f"line {no}: `embedding` holds a number too large for a float") from None


def _from_jsonl(path) -> Embeddings:
    records, vectors, where = [], [], []
    for no, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        obj, vec = _json_record(path, no, line)
        if vectors and len(vec) != len(vectors[0]):
            raise InputError(path, f"line {no}: {len(vec)} numbers, expected {len(vectors[0])}")
        if "name" not in obj and "id" in obj:
            obj["name"] = obj.pop("id")
        records.append({k: str(v) for k, v in obj.items()})
        vectors.append(vec)
        where.append(f"line {no}")
    if not vectors:
        raise InputError(path, "holds no rows")
    keys = sorted({k for r in records for k in r})
    for k in keys:
        missing = [i for i, r in enumerate(records) if k not in r]
        if missing:
            raise InputError(path, f"{where[missing[0]]}: no `{k}`, where other lines have one")
    fields = {k: [r[k] for r in records] for k in keys}
    names = fields.pop("name", None)
    return Embeddings(str(path), np.asarray(vectors, np.float64), names, fields, where)


def index_names(path, names: list[str], vocab: dict[str, int], where: str, vocab_path) -> list[int]:
    """Indices of `names` in `vocab`; an unknown one is an error naming `path` and `where`."""
    out = []
    for name in names:
        if name not in vocab:
            raise InputError(path, f"{where}: unknown id {name!r} (not in {vocab_path})")
        out.append(vocab[name])
    return out
