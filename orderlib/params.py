"""Validate a notebook's parameters before any work, every problem in one message.

`validate(exp.PARAMETERS, PRESET=PRESET, ...)` returns the normalised values or raises a
ParameterError listing each bad value with the valid ones. Under papermill it also rejects
injected names the notebook does not take, which papermill only warns about.
"""

from __future__ import annotations

import ast
import difflib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

Validator = Callable[[str, object], object]  # (name, value) -> normalised value, or raise ValueError


class ParameterError(ValueError):
    """A notebook parameter has a value the notebook cannot run with."""


def one_of(valid: Iterable) -> Validator:
    valid = list(valid)

    def check(name, value):
        if value not in valid:
            raise ValueError(f"{name}={value!r} is not one of {valid}")
        return value

    return check


def subset_of(valid: Iterable, allow_none: bool = False) -> Validator:
    """A list, or a comma-separated string, of values from `valid` (blanks ignored, order kept)."""
    valid = list(valid)

    def check(name, value):
        if value is None and allow_none:
            return None
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"{name}={value!r} must be a list or a comma-separated string of {valid}")
        items = [str(v).strip() for v in items if str(v).strip()]
        unknown = [v for v in items if v not in valid]
        if unknown or not items:
            raise ValueError(
                f"{name}={value!r}: " + (f"unknown {unknown}" if unknown else "nothing chosen") + f"; valid: {valid}"
            )
        return items

    return check


def existing(kind: str = "path", optional: bool = True) -> Validator:
    """None (if optional) or an existing file ("file"), folder ("dir") or either ("path")."""

    def check(name, value):
        if value is None and optional:
            return None
        if not isinstance(value, (str, Path)) or not str(value):
            raise ValueError(f"{name}={value!r} must be a {kind}")
        p = Path(value).expanduser()
        ok = p.is_file() if kind == "file" else p.is_dir() if kind == "dir" else p.exists()
        if not ok:
            raise ValueError(f"{name}={str(value)!r}: no such {kind}")
        return str(p)

    return check


def positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return value


def workers(name, value):
    """ "auto" or a positive int: processes that train a notebook's independent rows (training.workers)."""
    if value != "auto" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name}={value!r} must be 'auto' or a positive integer")
    return value


def matmul(name, value):
    """A matrix-product precision (orderlib.precision.MODES): "fp32", "bf16", "tf32" or "auto"."""
    from orderlib.precision import MODES  # here, not at the top: precision imports torch

    return one_of(MODES)(name, value)


def boolean(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"{name}={value!r} must be True or False")
    return value


def device(name, value):
    """ "auto", "cpu", "cuda" or "cuda:N" (CUDA only where a device is there)."""
    import torch

    try:
        d = None if value == "auto" else torch.device(value)
    except (RuntimeError, TypeError):
        raise ValueError(f"{name}={value!r} is not a device; use 'auto', 'cpu' or 'cuda'") from None
    if d is not None and d.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={value!r} but no CUDA device is available; use 'auto' or 'cpu'")
    if d is not None and d.type not in ("cpu", "cuda"):
        raise ValueError(f"{name}={value!r}: only 'cpu' and 'cuda' devices are supported")
    return value


PAPERMILL_HEADER = "# Parameters"  # the first line of the cell papermill injects (its python translator)
PAPERMILL_BUILTINS = ("PAPERMILL_INPUT_PATH", "PAPERMILL_OUTPUT_PATH")  # `papermill --inject-paths`, any notebook


def assigned_names(source: str) -> list[str]:
    """Names a cell's top-level assignments bind, in order ("a = 1; b, c = 2, 3" -> a, b, c)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return []
    names: list[str] = []

    def collect(target):
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, ast.Starred):
            collect(target.value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                collect(t)

    for node in body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                collect(target)
        elif isinstance(node, ast.AnnAssign):
            collect(node.target)
    return list(dict.fromkeys(names))


def injected_parameters(history: list[str] | None = None) -> list[str]:
    """Names papermill injected into this IPython kernel (its "# Parameters" cells in `In`); [] outside
    IPython or when nothing was injected. `history` stands in for `In` (tests)."""
    if history is None:
        ipython = sys.modules.get("IPython")  # a kernel has imported it; elsewhere, don't
        shell = ipython.get_ipython() if ipython is not None else None
        history = getattr(shell, "user_ns", {}).get("In", []) if shell is not None else []
    names: list[str] = []
    for source in history:
        if isinstance(source, str) and source.lstrip().split("\n", 1)[0].strip() == PAPERMILL_HEADER:
            names += assigned_names(source)
    return list(dict.fromkeys(names))


def _unknown(name: str, spec: dict) -> str:
    close = difflib.get_close_matches(name, list(spec), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown parameter {name} (this notebook takes {list(spec)}{hint})"


def validate(spec: dict[str, Validator], **params) -> dict:
    """Return {name: normalised value}; raise ParameterError listing every bad or unknown one,
    including names papermill injected (`-p NAME value`) that `spec` does not take."""
    out, problems = {}, []
    for name in injected_parameters():
        if name not in spec and name not in params and name not in PAPERMILL_BUILTINS:
            problems.append(_unknown(name, spec))
    for name, value in params.items():
        if name not in spec:
            problems.append(_unknown(name, spec))
            continue
        try:
            out[name] = spec[name](name, value)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ParameterError("bad notebook parameters: " + "; ".join(problems))
    return out
