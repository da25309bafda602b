"""Atomic file writes: a file (or a set of files) is written to temp files beside it and renamed
into place, so a reader never sees half of it and a failure leaves the old files as they were."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_temp(path: Path, write) -> Path:
    """Write through `write(tmp_path)` into a temp file beside `path` with the mode a new file
    would get (mkstemp's is 0600); return the temp path, not yet in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def atomic_write_files(contents: dict[Path, bytes]) -> None:
    """Write several files as a set: every temp file first, then the renames (so a failure while
    producing any of them leaves all the old files in place)."""
    temps = {}
    try:
        for path, data in contents.items():
            temps[Path(path)] = write_temp(Path(path), lambda tmp, d=data: Path(tmp).write_bytes(d))
    except BaseException:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        raise
    for path, tmp in temps.items():
        os.replace(tmp, path)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to a temp file beside `path`, then rename it into place."""
    atomic_write_files({Path(path): data})


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
