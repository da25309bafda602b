"""The package's layers (pyproject.toml's [tool.importlinter] contracts) and no import cycles."""

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent


def import_cycles(package: str) -> list[list[str]]:
    """The strongly connected groups of more than one module in `package`'s import graph (Tarjan)."""
    graph = grimp.build_graph(package, cache_dir=None)
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in sorted(graph.find_modules_directly_imported_by(m)):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_orderlib_has_no_import_cycle():
    assert import_cycles("orderlib") == []


def test_a_planted_cycle_is_found(tmp_path, monkeypatch):
    pkg = tmp_path / "plantedpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from plantedpkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from plantedpkg.a import x\n")  # a function-level import counts
    (pkg / "c.py").write_text("import plantedpkg.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("plantedpkg") == [["plantedpkg.a", "plantedpkg.b"]]


def lint_imports(cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """lint-imports on the package and pyproject.toml in `cwd` (`env`: which package it imports)."""
    exe = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env)


def test_layers_contract_holds():
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    "module,line",
    [
        ("orderlib/data/_planted.py", "from orderlib.eval import threshold\n"),  # data reads an upper layer
        ("orderlib/paths_planted.py", "from orderlib.data import wordnet\n"),  # a leaf utility reads a layer
        ("orderlib/training/_planted.py", "from orderlib.concepts import models\n"),  # training over concepts
    ],
)
def test_layers_contract_fails_on_an_upward_import(tmp_path, module, line):
    """A copy of the package with one upward import planted: lint-imports must refuse it."""
    shutil.copytree(ROOT / "orderlib", tmp_path / "orderlib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / module).write_text(line)
    if module == "orderlib/paths_planted.py":  # make it one of the contract's leaves
        text = (tmp_path / "pyproject.toml").read_text()
        (tmp_path / "pyproject.toml").write_text(
            text.replace('"orderlib.viz",\n', '"orderlib.viz",\n    "orderlib.paths_planted",\n')
        )
    r = lint_imports(tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": ""})
    assert r.returncode != 0 and "BROKEN" in r.stdout, r.stdout + r.stderr
