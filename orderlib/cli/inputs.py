"""Readers of the command's plain input files; every problem is an `InputError` naming the file.

Formats: `.npy`, `.npz`, delimited text (`.csv` comma, anything else tab; blank lines and lines
starting with `#` skipped) and JSON lines (`.jsonl`, one object a line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from orderlib.paths import sha256_files


class InputError(Exception):
    """A bad input file: `path` and what is wrong with it."""

    def __init__(self, path, what: str):
        super().__init__(f"{path}: {what}")
        self.path = str(path)
        self.what = what


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


def _exists(path) -> Path:
    p = Path(path)
    if not p.is_file():
        raise InputError(path, "no such file")
    return p


def _suffix(path) -> str:
    return Path(path).suffix.lower()


def delimiter(path) -> str:
    return "," if _suffix(path) == ".csv" else "\t"


def read_rows(path, columns: tuple[str, ...] | None = None) -> list[tuple[int, list[str]]]:
    """(line number, fields) of a delimited text file; with `columns`, every row must have that many."""
    p = _exists(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
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
        raise InputError(
            path, f"{int(bad.any(-1).sum()) if x.ndim > 1 else int(bad.sum())} rows hold NaN or inf (first: {at})"
        )


def _float_array(path, a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind not in "fiub":
        raise InputError(path, f"holds {a.dtype} values, expected numbers")
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float64)


def _load_npz(path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError) as exc:
        raise InputError(path, f"not a readable .npz ({exc})") from None


def _load_npy(path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputError(path, f"not a readable .npy ({exc})") from None


def read_matrix(path, keys=("matrix", "scores", "distances")) -> np.ndarray:
    """A 2-D numeric array: .npy, .npz (one array, or one of `keys`), or delimited numbers."""
    p = _exists(path)
    if _suffix(p) == ".npy":
        a = _load_npy(p)
    elif _suffix(p) == ".npz":
        arrays = _load_npz(p)
        named = [k for k in keys if k in arrays]
        if len(arrays) != 1 and not named:
            raise InputError(path, f"holds arrays {sorted(arrays)}; expected one array or one of {list(keys)}")
        a = arrays[named[0]] if named else next(iter(arrays.values()))
    else:
        rows = read_rows(p)
        widths = {len(c) for _, c in rows}
        if len(widths) != 1:
            raise InputError(path, f"rows have different column counts {sorted(widths)}")
        a = _numbers(path, [(no, c) for no, c in rows])
    a = _float_array(path, a)
    if a.ndim != 2 or 0 in a.shape:
        raise InputError(path, f"shape {tuple(a.shape)}, expected a non-empty 2-D matrix")
    check_finite(path, a)
    return a


def _numbers(path, rows: list[tuple[int, list[str]]]) -> np.ndarray:
    out = []
    for no, cells in rows:
        try:
            out.append([float(c) for c in cells])
        except ValueError:
            raise InputError(path, f"line {no}: not a number in {cells[:4]}") from None
    return np.asarray(out, np.float64)


def read_ints(path, n_max: int | None = None, what: str = "index") -> np.ndarray:
    """A 1-D array of integer indices: .npy / .npz, or one integer a line; each in [0, n_max)."""
    p = _exists(path)
    if _suffix(p) in (".npy", ".npz"):
        a = _load_npy(p) if _suffix(p) == ".npy" else next(iter(_load_npz(p).values()))
        where = [f"row {i}" for i in range(len(a.reshape(-1)))]
        if a.dtype.kind not in "iu" or a.ndim != 1:
            raise InputError(path, f"{a.dtype} array of shape {tuple(a.shape)}, expected 1-D integers")
        a = a.astype(np.int64)
    else:
        rows = read_rows(p, (what,))
        where = [f"line {no}" for no, _ in rows]
        try:
            a = np.array([int(c[0]) for _, c in rows], np.int64)
        except ValueError:
            bad = next(no for no, c in rows if not c[0].lstrip("-").isdigit())
            raise InputError(path, f"line {bad}: not an integer {what}") from None
    if len(a) == 0:
        raise InputError(path, "holds no rows")
    if n_max is not None:
        out = np.flatnonzero((a < 0) | (a >= n_max))
        if len(out):
            raise InputError(path, f"{where[out[0]]}: {what} {a[out[0]]} out of range 0..{n_max - 1}")
    return a


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
    where = [f"row {i}" for i in range(len(x))]
    fields = {k: [str(v) for v in a.reshape(-1)] for k, a in arrays.items() if a.ndim == 1}
    for k, v in fields.items():
        if len(v) != len(x):
            raise InputError(path, f"`{k}` has {len(v)} entries for {len(x)} embeddings")
    names = fields.pop("names", None)
    return Embeddings(str(path), x, names, fields, where)


def _from_text(path) -> Embeddings:
    rows = read_rows(path)
    widths = {len(c) for _, c in rows}
    if len(widths) != 1:
        no = next(no for no, c in rows if len(c) != len(rows[0][1]))
        raise InputError(
            path, f"line {no}: {len(dict(rows)[no])} columns, expected {len(rows[0][1])} (a name, then the vector)"
        )
    if widths.pop() < 2:
        raise InputError(path, "1 column, expected a name then the vector's numbers")
    x = _numbers(path, [(no, c[1:]) for no, c in rows])
    return Embeddings(str(path), x, [c[0] for _, c in rows], {}, [f"line {no}" for no, _ in rows])


def _from_jsonl(path) -> Embeddings:
    records, vectors, where = [], [], []
    for no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            vec = [float(v) for v in obj.pop("embedding")]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            raise InputError(path, f"line {no}: expected an object with an `embedding` list of numbers") from None
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
