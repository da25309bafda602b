"""Resumable checkpoints.

A checkpoint is keyed by the run's settings, its data's `fingerprint` and the trainer's
`code_version`; only a checkpoint of the same key is resumed. `locked(path)` makes a second run of
the same checkpoint wait, then load the finished model.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import re
import threading
import warnings
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock

from orderlib import freshness
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


# Files in a trainer's import closure that cannot change what it trains, so they stay out of its code key:
NOT_MODEL_CODE = {
    "orderlib/__init__.py": "the package's docstring and version string",
    "orderlib/atomic.py": "writes files whole or not at all",
    "orderlib/checkpoint.py": "saves, loads, locks and keys checkpoints; the key covers what a run trains",
    "orderlib/errors.py": "the exception type bad input raises",
    "orderlib/freshness.py": "fingerprints code; it reads source files, never tensors",
    "orderlib/paths.py": "where runs, data and reports live",
    "orderlib/reports.py": "writes report tables and their provenance (the loop reads only the commit from it)",
}


def key_files(modules, read=None) -> dict[str, str]:
    """{path: fingerprint} of the code that `modules` (module objects or names) run by importing:
    their import closures (`freshness.closure`, the rule report freshness follows), less NOT_MODEL_CODE."""
    read = read or freshness.tree_reader(Path(__file__).resolve().parent.parent)
    out = {}
    for m in modules:
        name = m if isinstance(m, str) else m.__name__
        for source in freshness.module_files(name, read):  # its packages' __init__.py files run too
            out.update(freshness.fingerprints(source, read))
    return {p: fp for p, fp in sorted(out.items()) if p not in NOT_MODEL_CODE}


@functools.cache
def _code_version(names: tuple[str, ...]) -> str:
    return hashlib.sha256(repr(key_files(names)).encode()).hexdigest()[:12]


def code_version(*modules) -> str:
    """sha256 (12 hex digits) of `key_files(modules)`: a trainer passes its own module, so its
    checkpoints are not resumed once any code it imports changes (docstrings, comments and layout
    aside). Computed once per process, from the code on disk when first asked."""
    return _code_version(tuple(m if isinstance(m, str) else m.__name__ for m in modules))


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
