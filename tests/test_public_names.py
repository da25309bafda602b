"""Tests go through the library's public names: no test imports an underscore-prefixed name (from
orderlib or from another test file), and none reads `M._name` of an orderlib module M or of a name
imported from orderlib. Helpers shared between test files live in public modules (tests/toys.py,
tests/guards.py). Dunder names and namedtuple's `_asdict`, `_replace`, `_fields`, `_make` are public."""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
PUBLIC = {"_asdict", "_replace", "_fields", "_make", "_field_defaults"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in PUBLIC


def _watched(module: str, local: set[str]) -> bool:
    return module == "orderlib" or module.startswith("orderlib.") or module.split(".")[0] in local


def violations(source: str, local: set[str] = frozenset(), filename: str = "<test>") -> list[str]:
    """Each private name that `source` imports or reads, as "file:line: what"; `local`: the names of
    the test modules beside it (their private names are theirs alone too)."""
    tree = ast.parse(source, filename)
    bound: set[str] = set()  # names bound to an orderlib module, to something imported from one, or to a test module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _watched(a.name, local):
                    bound.add(a.asname or a.name.split(".")[0])
                    if any(_private(part) for part in a.name.split(".")):
                        found.append(f"{filename}:{node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if _private(a.name):
                    found.append(f"{filename}:{node.lineno}: from {node.module} import {a.name}")
                elif _watched(node.module, local):
                    bound.add(a.asname or a.name)
            if _watched(node.module, local) and any(_private(part) for part in node.module.split(".")):
                found.append(f"{filename}:{node.lineno}: from {node.module} import ...")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return sorted(found)


def test_no_test_reaches_a_private_name():
    files = sorted(TESTS.glob("*.py"))
    local = {p.stem for p in files}
    found = [v for p in files for v in violations(p.read_text(), local, p.name)]
    assert not found, "tests use private names; make the name public or test through a public one:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from orderlib.penalties import _auto_chunk",
        "from orderlib.penalties import order_violation, _auto_chunk as chunk",
        "from test_train_entailment import _toy as toy_pairs",
        "from orderlib import penalties as P\nP._auto_chunk(10, 1, 4)",
        "import orderlib.experiments.oe_wordnet as X\nX._job('train')",
        "import orderlib\norderlib.penalties._auto_chunk(1, 1, 1)",
        "from orderlib.experiments import utama\nf = utama._pair_index",
        "from orderlib import kernels_triton as K\nK._graphs.get(1)",
        "from orderlib.concepts.row_adam import RowAdam\nRowAdam._skipped_factor",
        "import orderlib._private",
        "import guards\nguards._same(1, 1, 'x')",
        "def f():\n    from orderlib.data import wordnet as W\n    return W._read_cache",
    ],
)
def test_checker_finds_a_planted_violation(source):
    assert len(violations(source, {"test_train_entailment", "guards"})) == 1, source


def test_checker_passes_public_names_and_other_libraries():
    source = "\n".join(
        [
            "import numpy as np",
            "import pytest as _pytest",
            "from orderlib import penalties as P",
            "from orderlib.data.attribute_tasks import pair_index as _index",
            "from orderlib.runs import RunPaths",
            "np.random.MT19937(0)._legacy_seeding(1)",
            "P.order_violation.__name__",
            "RunPaths.__doc__",
            "RunPaths(1)._asdict()",
            "class T:",
            "    def f(self):",
            "        return self._x",
        ]
    )
    assert violations(source, {"guards"}) == []
