"""Write a command's report: `<id>.csv` (long format, as rounded in reports/), `<id>.md`,
`<id>.meta.json` and any extra files, all renamed into place together or not at all."""

from __future__ import annotations

import json
import os
import platform
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import orderlib
from orderlib.atomic import atomic_write_files
from orderlib.cli.inputs import InputError, file_record
from orderlib.paths import repo_root
from orderlib.reports import REQUIRED_COLUMNS, git_commit, rounded, to_markdown

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class Report:
    """What a command produced: the long table, provenance and extra files (name -> bytes)."""

    table: pd.DataFrame
    protocol: str
    ties: str
    inputs: dict[str, str]  # role -> path
    settings: dict = field(default_factory=dict)
    title: str = ""
    notes: str = ""
    extra: dict[str, bytes] = field(default_factory=dict)  # suffix ("_roc.csv", ".npz") -> contents
    info: list[str] = field(default_factory=list)  # lines the command prints to stderr


def check_id(report_id: str) -> str:
    if not SAFE_ID.match(report_id):
        raise InputError(report_id, "a report id is letters, digits, '.', '_' and '-' only")
    return report_id


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _missing_folders(out: Path) -> tuple[list[Path], Path]:
    """(the folders of `out` that do not exist yet, outermost first; the nearest one that exists)."""
    missing, p = [], out
    while not os.path.exists(p) and p != p.parent:
        if os.path.lexists(p):
            raise InputError(out, f"cannot be made: {p} is a broken symbolic link")
        missing.append(p)
        p = p.parent
    if not os.path.isdir(p):
        raise InputError(
            out, f"cannot be made: {p} is a file, not a folder" if p != out else "exists and is not a folder"
        )
    return missing[::-1], p


def check_out(out) -> Path:
    """The output folder: absent (made when writing) or a folder, and writable, which is tried for
    real (os.access says yes to root even on /proc): a temp file in it, or a temp folder in its
    nearest existing parent, made and removed at once. Nothing is left behind."""
    p = Path(out)
    missing, existing = _missing_folders(p)
    try:
        if missing:
            os.rmdir(tempfile.mkdtemp(prefix=".orderlib-probe-", dir=existing))
        else:
            fd, tmp = tempfile.mkstemp(prefix=".orderlib-probe-", dir=existing)
            os.close(fd)
            os.unlink(tmp)
    except OSError as exc:
        what = f"cannot be made in {existing}" if missing else "is not writable"
        raise InputError(out, f"{what} ({_why(exc)}); choose a writable folder") from None
    return p


def _make_folders(out: Path) -> list[Path]:
    """Make `out` and its missing parents; return those made (outermost first)."""
    missing, _ = _missing_folders(out)
    made = []
    try:
        for p in missing:
            p.mkdir()
            made.append(p)
    except OSError as exc:
        _remove_folders(made)
        raise InputError(out, f"cannot be made ({_why(exc)}); choose a writable folder") from None
    return made


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders `_make_folders` made, innermost first, where still empty."""
    for p in reversed(made):
        try:
            p.rmdir()
        except OSError:
            return


def source_commit() -> str | None:
    """The orderlib checkout's commit where the package runs from one (an editable install), else None."""
    root = repo_root()
    return git_commit(root) if (root / ".git").exists() and (root / "pyproject.toml").exists() else None


def meta(report: Report, report_id: str, command: str, argv: list[str], seconds: float) -> dict:
    """The .meta.json: protocol, tie rule, input hashes, versions."""
    import torch

    return {
        "id": report_id,
        "command": command,
        "argv": list(argv),
        "protocol": report.protocol,
        "tie_rule": report.ties,
        "inputs": {role: file_record(path) for role, path in report.inputs.items()},
        "settings": report.settings,
        "orderlib_version": orderlib.__version__,
        "orderlib_commit": source_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "wall_time_s": round(seconds, 3),
    }


def csv_bytes(df: pd.DataFrame) -> bytes:
    return rounded(df).to_csv(index=False).encode()


def write(report: Report, out, report_id: str, meta_record: dict) -> list[Path]:
    """Write the report's files into `out` atomically; return their paths."""
    missing = [c for c in REQUIRED_COLUMNS if c not in report.table.columns]
    if missing:
        raise ValueError(f"report {report_id!r} lacks columns {missing}")
    out = Path(out)
    files = {
        out / f"{report_id}.csv": csv_bytes(report.table),
        out / f"{report_id}.md": to_markdown(report.table, report.title, report.notes).encode(),
        out / f"{report_id}.meta.json": (json.dumps(meta_record, indent=2, default=str) + "\n").encode(),
        **{out / f"{report_id}{suffix}": data for suffix, data in report.extra.items()},
    }
    for path in files:
        if os.path.lexists(path) and not path.is_file():
            raise InputError(path, "exists and is not a file, so the report cannot replace it")
    made = _make_folders(out)
    try:
        atomic_write_files(files)  # every temp file first, then the renames; a failure removes the temps
    except OSError as exc:
        _remove_folders(made)
        raise InputError(out, f"cannot write the report here ({_why(exc)})") from None
    except BaseException:
        _remove_folders(made)
        raise
    return list(files)
