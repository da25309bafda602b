"""Options every command shares, and small helpers for the subcommand modules."""

from __future__ import annotations

import argparse
import textwrap

import numpy as np

from orderlib.cli.inputs import InputError

KINDS = ("distance", "similarity")  # a matrix: low = match, or high = match


def add_parser(sub, name: str, help: str, description: str, example: str) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with a runnable example (run from the repository root)."""
    epilog = "example (from the repository root; files in tests/data/cli/):\n" + example.rstrip() + "\n"
    return sub.add_parser(
        name,
        help=help,
        description=textwrap.fill(description, 100),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_output(p: argparse.ArgumentParser, default_id: str, method: bool = True) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--out", required=True, help="folder for <id>.csv, <id>.md, <id>.meta.json (made if absent)")
    g.add_argument("--id", default=default_id, help=f"report id, the files' stem (default: {default_id})")
    if method:
        g.add_argument("--method", default="yours", help="the `method` column of the table (default: yours)")


def add_kind(p, required: bool = True) -> None:
    p.add_argument(
        "--kind",
        choices=KINDS,
        required=required,
        help="what the matrix holds: distance (penalty, energy; low = match) or similarity (high = match)",
    )


def as_score(matrix: np.ndarray, kind: str) -> np.ndarray:
    """High = match."""
    return -matrix if kind == "distance" else matrix


def parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(k) for k in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"k must be >= 1, got {text!r}")
    return ks


def check_rows(path, n: int, expected: int, what: str) -> None:
    if n != expected:
        raise InputError(path, f"{n} {what}, expected {expected}")
