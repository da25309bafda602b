"""Where data lives: one data-root setting for the whole project."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from orderlib.atomic import atomic_write_text

DATA_ENV = "ORDERLIB_DATA"
_REPO = Path(__file__).resolve().parents[1]


class DataError(RuntimeError):
    """A dataset is missing or malformed; the message says which file and what to run."""


def data_root() -> Path:
    """Return the data root: $ORDERLIB_DATA, else `<repo>/data` in a checkout, else ~/.cache/orderlib."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser().resolve()
    if (_REPO / "pyproject.toml").exists():
        return _REPO / "data"
    return Path.home() / ".cache" / "orderlib"


def repo_root() -> Path:
    """Return the source checkout this package was imported from."""
    return _REPO


RUNS_ENV = "ORDERLIB_RUNS"
REPORTS_ENV = "ORDERLIB_REPORTS"


def _folder(env: str, default: str) -> Path:
    value = os.environ.get(env)
    return Path(value).expanduser().resolve() if value else _REPO / default


def runs_root() -> Path:
    """Return where runs keep checkpoints, caches, locks and non-full reports: $ORDERLIB_RUNS
    (`make test` points it at a folder it removes afterwards), else `<repo>/runs`."""
    return _folder(RUNS_ENV, "runs")


def reports_root() -> Path:
    """Return where full-preset runs write their reports: $ORDERLIB_REPORTS (a benchmark that reruns
    a notebook keeps the committed reports apart), else `<repo>/reports`."""
    return _folder(REPORTS_ENV, "reports")


def slug(text: str) -> str:
    """Return a file-name-safe ASCII form of a name ("Poincaré embeddings" -> "poincare-embeddings")."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def sha256_files(paths: Iterable[Path]) -> str:
    """sha256 over the bytes of `paths`, in the order given, read in 1 MiB blocks."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


MANIFEST = "MANIFEST.json"


def write_manifest(folder: Path, names: Iterable[str]) -> None:
    """Record the size and sha256 of the files `names` in `folder`/MANIFEST.json (set-up's receipt)."""
    import json

    folder = Path(folder)
    entries = {n: {"bytes": (folder / n).stat().st_size, "sha256": sha256_files([folder / n])} for n in sorted(names)}
    atomic_write_text(folder / MANIFEST, json.dumps(entries, indent=1) + "\n")


def manifest_problems(folder: Path) -> list[str]:
    """What differs from `folder`/MANIFEST.json: missing, resized or altered files; ["no MANIFEST.json"]
    for a folder set up before manifests were written."""
    import json

    folder = Path(folder)
    try:
        entries = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return [f"no readable {MANIFEST}"]
    problems = []
    for name, e in entries.items():
        f = folder / name
        if not f.is_file():
            problems.append(f"{f} is missing")
        elif f.stat().st_size != e["bytes"]:
            problems.append(f"{f} has {f.stat().st_size:,} bytes, set-up wrote {e['bytes']:,}")
        elif sha256_files([f]) != e["sha256"]:
            problems.append(f"{f} differs from what set-up wrote (sha256)")
    return problems


def text_lines(path: Path, what: str = "text") -> list[str]:
    """The lines of a UTF-8 text file (split at \\n, line ends stripped); a file that is not UTF-8 raises
    DataError naming the file, the line and the byte, instead of a bare UnicodeDecodeError."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            f"expected {what}: is this the right file, or is it damaged?"
        ) from None
    lines = [line.rstrip("\r") for line in text.split("\n")]  # not splitlines(): sentences may hold \x85, \u2028
    return lines[:-1] if lines and lines[-1] == "" else lines
