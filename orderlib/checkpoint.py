"""Resumable checkpoints.

A checkpoint is keyed by the run's settings, its data's `fingerprint` and the trainer's
`code_version`; only a checkpoint of the same key is resumed. `locked(path)` makes a second run of
the same checkpoint wait, then load the finished model.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import pickle
import re
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock

from orderlib.atomic import write_temp
from orderlib.paths import runs_root


def save_checkpoint(path: Path, state: dict) -> None:
    """torch.save `state` atomically."""
    path = Path(path)
    os.replace(write_temp(path, lambda tmp: torch.save(state, tmp)), path)


class CheckpointError(ValueError):
    """A checkpoint left unloaded: it names a function or class outside SAFE_GLOBALS."""


try:
    from numpy._core import multiarray as _multiarray
except ImportError:  # numpy 1
    from numpy.core import multiarray as _multiarray

# What a checkpoint may name beyond torch's weights-only defaults (tensors, state dicts, containers, numbers,
# strings): only what the project saves. Each rebuilds data from the file's values and calls no other code.
SAFE_GLOBALS = (
    np.ndarray,  # devise's and utama's cached arrays; its state is a shape, a dtype and raw bytes
    np.dtype,  # the element type of an array or numpy number, made from a type code such as "f4"
    type(np.dtype(np.float32)),  # the class of float32's dtype (cached arrays), its state byte order and sizes
    type(np.dtype(np.float64)),  # the class of float64's dtype (numpy numbers such as the item CNN's lr)
    (_multiarray._reconstruct, "numpy._core.multiarray._reconstruct"),  # an empty ndarray of a shape and dtype
    (_multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),  # the same, as numpy 1 names it
    (_multiarray.scalar, "numpy._core.multiarray.scalar"),  # a numpy number from dtype and bytes (the item CNN's lr)
    (_multiarray.scalar, "numpy.core.multiarray.scalar"),  # the same, as numpy 1 names it
)
_LOADING = threading.Lock()  # safe_globals edits torch's process-wide allowlist: one load at a time
# torch names a refused function or class in one of two wordings: a GLOBAL opcode it will not resolve, or a
# class it resolved (an allowlisted dtype's own class, e.g. numpy.dtypes.StrDType) but will not build.
_REFUSED = re.compile(
    r"GLOBAL (\S+) (?:was not an allowed global|whose module \S+ is blocked)"
    r"|Can only build .*? but got <class '([^']+)'>",
    re.S,
)


def refused_global(exc: BaseException) -> str | None:
    """The function or class (`module.name`) a weights-only torch.load refused, or None for other errors."""
    m = _REFUSED.search(str(exc)) if isinstance(exc, pickle.UnpicklingError) else None
    return (m.group(1) or m.group(2)) if m else None


def load_checkpoint(path: Path) -> dict | None:
    """Return the saved state, or None when there is none. Loading runs no code: a file naming a
    function or class outside torch's defaults and SAFE_GLOBALS raises CheckpointError and stays
    where it is. A damaged file (truncated, empty, not a checkpoint) is moved aside to
    `<name>.damaged` with a warning naming it, and None returned, so the run trains anew instead
    of failing on it forever."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with (
            _LOADING,
            torch.serialization.safe_globals(
                [g for g in SAFE_GLOBALS if g not in torch.serialization.get_safe_globals()]
            ),
        ):
            state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict):
            raise ValueError(f"holds a {type(state).__name__}, not a checkpoint dict")
        return state
    except Exception as exc:  # zip reader errors, EOFError, unpickling errors, ...
        refused = refused_global(exc)
        if refused is not None:
            raise CheckpointError(
                f"checkpoint {path} was not loaded: it names {refused}, which is not a type "
                f"a checkpoint may hold, and loading it could run code. It is left in place: "
                f"remove it to train anew"
            ) from None
        damaged = path.with_name(path.name + ".damaged")
        os.replace(path, damaged)
        warnings.warn(
            f"checkpoint {path} is damaged ({type(exc).__name__}: {str(exc).strip()[:200]}); "
            f"moved it to {damaged} and training from scratch",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def fingerprint(*parts) -> str:
    """sha256 over tensors, arrays, strings, numbers and (nested) lists, tuples and dicts of them,
    dtypes and shapes included: the identity of a run's data."""
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().contiguous().numpy()
        if isinstance(x, np.ndarray):
            if x.dtype == object:
                return feed(x.tolist())
            x = np.ascontiguousarray(x)
            h.update(f"nd{x.dtype.str}{x.shape}".encode())
            h.update(x.tobytes())
        elif isinstance(x, dict):
            h.update(b"{")
            for k in sorted(x, key=repr):
                feed(k)
                feed(x[k])
            h.update(b"}")
        elif isinstance(x, (list, tuple)):
            h.update(b"[%d" % len(x))
            for v in x:
                feed(v)
            h.update(b"]")
        else:
            h.update(f"{type(x).__name__}:{x!r};".encode())

    for p in parts:
        feed(p)
    return h.hexdigest()


def code_fingerprint(source: str) -> str:
    """The code of a Python source as its syntax tree without docstrings: comments, docstrings and
    layout (a reformat) leave it unchanged, any change to what runs does not."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def cpp_code(text: str) -> str:
    """C++ without comments and with white space folded: a comment edit changes no build."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    return " ".join(text.split())


def code_version(*modules) -> str:
    """sha256 (12 hex digits) of the code of `modules` (module objects or names; `code_fingerprint`):
    changes whenever the code that trains a model does, so its checkpoints are not resumed, but not
    when only its docstrings, comments or layout do."""
    h = hashlib.sha256()
    for m in modules:
        m = sys.modules[m] if isinstance(m, str) else m
        h.update(code_fingerprint(Path(m.__file__).read_text()).encode())
    return h.hexdigest()[:12]


def lock_path(path: Path) -> Path:
    """Where the lock of `path` lives: one folder for every lock of the runs (`<runs>/.locks`), named
    by the path's name and a hash of its absolute path, so that no `.lock` file sits beside a
    checkpoint and `make clean` (or removing `runs/`) removes them all."""
    path = Path(path).absolute()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return runs_root() / ".locks" / f"{path.name}.{digest}.lock"


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock for `path` (blocking until another process or thread holding it lets
    go): filelock's FileLock on `lock_path(path)`, an OS lock that ends with the process holding it."""
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock):
        yield


def cached(path: Path, key: str, build):
    """build(), cached in `path` under `key` (which must name the inputs and the code version):
    a stored value of another key is rebuilt over."""
    with locked(path):
        state = load_checkpoint(path)
        if state is not None and state.get("key") == key:
            return state["value"]
        value = build()
        save_checkpoint(path, {"key": key, "value": value})
        return value
