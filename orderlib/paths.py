"""Where data lives: one data-root setting for the whole project."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

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


def sha256_files(paths: Iterable[Path]) -> str:
    """sha256 over the bytes of `paths`, in the order given, read in 1 MiB blocks."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()
