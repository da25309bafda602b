"""Freshness: would the code in this tree still produce a report?

A report's provenance holds `fingerprints`: one per file of code that made it, the report's source
(a notebook's code cells, or a script) and every file of `orderlib/` that source imports, followed
through the imports of those files (function-level imports too: a superset of what one run
loaded), and the data's fingerprint. A file's fingerprint is that of its code, as checkpoint keys
take it (`code_fingerprint`): comments, docstrings and layout leave it unchanged. The
report is current when every recorded file has the same fingerprint in the tree now.

The import closure is read statically, so that the same rule can be applied to a report written
before fingerprints were recorded, at the commit its provenance names (`commit_reader`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from orderlib.paths import repo_root

Reader = Callable[[str], "str | None"]  # repo-relative path -> its text, or None where it does not exist
PACKAGE = "orderlib"
CSRC = "orderlib/csrc"
KERNELS = "orderlib/kernels.py"  # compiles every source under csrc/
SOURCE_FOLDERS = ("notebooks", "benchmarks", "orderlib")  # where a report's source lives (not .venv/)


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


def _skip_magic(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def _code_cells(nb: dict) -> list[str]:
    """The sources of a notebook's code cells, IPython magics dropped and papermill's injected
    parameters left out: what a run of it executes."""
    return [
        _skip_magic("".join(cell.get("source", "")))
        for cell in nb.get("cells", [])
        if cell.get("cell_type") == "code" and "injected-parameters" not in cell.get("metadata", {}).get("tags", [])
    ]


def notebook_code(nb: dict) -> list[str]:
    """A notebook's code cells as code (`code_fingerprint`), whatever its outputs."""
    cells = []
    for source in _code_cells(nb):
        try:
            cells.append(code_fingerprint(source))
        except SyntaxError:
            cells.append(source.strip())
    return cells


@functools.lru_cache(maxsize=4096)  # an index reads the same files for every report
def file_fingerprint(path: str, text: str) -> str:
    """sha256 (12 hex digits) of the code in `text`, read by the kind of file `path` names."""
    if path.endswith(".ipynb"):
        code = "\n\0".join(notebook_code(json.loads(text)))
    elif path.endswith(".py"):
        try:
            code = code_fingerprint(text)
        except SyntaxError:
            code = text
    elif path.endswith((".cpp", ".h", ".cu")):
        code = cpp_code(text)
    else:
        code = text
    return hashlib.sha256(code.encode()).hexdigest()[:12]


def module_files(name: str, read: Reader) -> list[str]:
    """The files importing module `name` runs: its own and its packages' __init__.py files."""
    parts = name.split(".")
    files = [f"{'/'.join(parts[:i])}/__init__.py" for i in range(1, len(parts))]
    own = "/".join(parts)
    for candidate in (own + ".py", own + "/__init__.py"):
        if read(candidate) is not None:
            files.append(candidate)
            break
    return [f for f in files if read(f) is not None]


@functools.lru_cache(maxsize=4096)  # a workflow plans every notebook from the same files
def _imported_modules(path: str, text: str) -> frozenset[str]:
    """Names of the orderlib modules `text` imports (for `from orderlib.x import y`, both
    `orderlib.x` and `orderlib.x.y`: y may be a module)."""
    if path.endswith(".ipynb"):
        text = "\n".join(_code_cells(json.loads(text)))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return frozenset()
    names = set()
    for node in ast.walk(tree):  # orderlib imports absolutely (ruff's TID252 holds it to that)
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return frozenset(n for n in names if n == PACKAGE or n.startswith(PACKAGE + "."))


def closure(source: str, read: Reader) -> list[str]:
    """`source` and every orderlib file it runs by importing, followed through their imports; the
    C++ sources under csrc/ where orderlib.kernels is among them. Sorted, `source` first."""
    seen, todo = set(), [source]
    while todo:
        path = todo.pop()
        text = read(path)
        if path in seen or text is None:
            continue
        seen.add(path)
        for name in _imported_modules(path, text):
            todo.extend(f for f in module_files(name, read) if f not in seen)
    if KERNELS in seen:
        seen.update(p for p in _list_csrc(read) if read(p) is not None)
    return [source] + sorted(seen - {source})


def _list_csrc(read: Reader) -> list[str]:
    listing = read(CSRC + "/")
    return [f"{CSRC}/{name}" for name in (listing or "").split()]


def fingerprints(source: str, read: Reader) -> dict[str, str]:
    """{path: file_fingerprint} over `closure(source)`."""
    return {p: file_fingerprint(p, read(p)) for p in closure(source, read)}


def tree_reader(root: Path | None = None) -> Reader:
    """Read files from the working tree under `root` (default: this checkout)."""
    root = Path(root or repo_root())

    @functools.cache
    def read(path: str) -> str | None:
        p = root / path
        if path.endswith("/"):
            return "\n".join(sorted(c.name for c in p.iterdir() if c.is_file())) if p.is_dir() else None
        return p.read_text() if p.is_file() else None

    return read


def commit_reader(commit: str, root: Path | None = None) -> Reader:
    """Read files as they were at `commit` (git), or raise ValueError where git cannot."""
    root = Path(root or repo_root())

    @functools.cache
    def read(path: str) -> str | None:
        run = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, text=True)
        if run.returncode:
            return None
        if path.endswith("/"):  # a folder: git lists its entries
            return "\n".join(line for line in run.stdout.splitlines()[1:] if line and "/" not in line)
        return run.stdout

    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=root, capture_output=True).returncode:
        raise ValueError(f"commit {commit} is not in this clone's history")
    return read


def run_record(source: str, data_fingerprint: str | None = None, root: Path | None = None) -> dict:
    """The `fingerprints` block a report's provenance holds: its source, the code of every file in
    its closure in the tree now, and its data's fingerprint."""
    return {"source": source, "code": fingerprints(source, tree_reader(root)), "data": data_fingerprint}


def changed(record: dict, read: Reader) -> list[str]:
    """The files of `record["code"]` whose code differs in `read`'s tree (or is gone from it)."""
    out = []
    for path, fp in record["code"].items():
        text = read(path)
        if text is None or file_fingerprint(path, text) != fp:
            out.append(path)
    return out


_NOTEBOOK: list[str] = []  # the notebook this kernel runs, as it named itself (this_notebook)


def this_notebook(name: str) -> str:
    """Name the notebook this kernel runs ("06_devise_table1.ipynb"), so that the reports it writes
    record the same provenance however it runs: papermill alone tells its kernel nothing of its
    input, while JupyterLab and the workflow do. Returns its path in the checkout."""
    path = Path(repo_root()) / "notebooks" / Path(name).name
    if not path.is_file():
        raise ValueError(f"{path}: no such notebook in this checkout (this_notebook names a file of notebooks/)")
    _NOTEBOOK[:] = [path.name]
    return f"notebooks/{path.name}"


def run_source(root: Path | None = None) -> str | None:
    """The notebook or script this process runs, relative to the checkout: the notebook the kernel
    named (`this_notebook`) or the workflow names (ORDERLIB_NOTEBOOK), the one JupyterLab names
    (JPY_SESSION_NAME), or the script run as __main__; None where none of them is a file of the checkout."""
    root = Path(root or repo_root()).resolve()
    candidates = [root / "notebooks" / name for name in _NOTEBOOK]
    if os.environ.get("ORDERLIB_NOTEBOOK"):
        candidates.append(root / "notebooks" / Path(os.environ["ORDERLIB_NOTEBOOK"]).name)
    if os.environ.get("JPY_SESSION_NAME"):
        candidates.append(Path(os.environ["JPY_SESSION_NAME"]))
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main:
        candidates.append(Path(main))
    for path in candidates:
        path = path.resolve()
        if path.is_file() and path.is_relative_to(root) and path.relative_to(root).parts[0] in SOURCE_FOLDERS:
            return str(path.relative_to(root))
    return None
