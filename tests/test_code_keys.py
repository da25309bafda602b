"""Checkpoint code keys come from the trainers' import closures (orderlib.checkpoint.code_version)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from orderlib.checkpoint import NOT_MODEL_CODE, key_files
from orderlib.freshness import closure, module_files, tree_reader

ROOT = Path(__file__).resolve().parent.parent


def keyed_modules() -> dict[str, list[str]]:
    """{calling module: the modules it passes to code_version}, from every call in orderlib/."""
    out = {}
    for path in sorted((ROOT / "orderlib").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "code_version":
                names = []
                for arg in node.args:
                    if isinstance(arg, ast.Name) and arg.id == "__name__":
                        names.append(module)
                    elif isinstance(arg, ast.Constant):
                        names.append(arg.value)
                    else:  # e.g. train_skipgram.__module__: the module that defines the name
                        names.append(None)
                out.setdefault(module, []).append(names)
    return out


KEYED = keyed_modules()
TRAINERS = sorted({n for calls in KEYED.values() for names in calls for n in names if n})


def test_the_trainers_are_found_and_name_their_own_module():
    for trainer in ("orderlib.training.retrieval", "orderlib.concepts.train", "orderlib.training.item_cnn"):
        assert [trainer] in KEYED[trainer]
    assert len(TRAINERS) >= 10


def test_no_hand_list_names_more_than_two_modules():
    """Keys come from closures: a call names the module that trains (or two that build a cache)."""
    for module, calls in KEYED.items():
        assert all(len(names) <= 2 for names in calls), module


@pytest.mark.parametrize("trainer", TRAINERS)
def test_every_module_a_trainer_loads_is_in_its_key_or_the_exclusion_list(trainer):
    """What importing the trainer really loads (a fresh interpreter), not just what the static
    closure reads: a module outside both the key and NOT_MODEL_CODE could change a model unseen."""
    code = (
        f"import importlib, json, sys; importlib.import_module({trainer!r}); "
        "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items() "
        "if n.split('.')[0] == 'orderlib' and getattr(m, '__file__', None))))"
    )
    loaded = json.loads(
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    )
    loaded = {str(Path(f).resolve().relative_to(ROOT)) for f in loaded}
    keyed = set(key_files([trainer]))
    assert not loaded - keyed - set(NOT_MODEL_CODE), f"{trainer} loads modules outside its key"


def test_the_exclusion_list_is_short_live_and_says_why():
    read = tree_reader(ROOT)
    reached = set()
    for trainer in TRAINERS:
        reached.update(closure(module_files(trainer, read)[-1], read))
    assert len(NOT_MODEL_CODE) <= 10
    for path, why in NOT_MODEL_CODE.items():
        assert (ROOT / path).is_file() and path in reached and len(why.split()) >= 4, path


def test_a_code_change_in_the_closure_changes_the_key_and_an_excluded_one_does_not():
    read = tree_reader(ROOT)

    def edited(target: str, edit: str):
        return lambda p: read(p) + edit if p == target and read(p) is not None else read(p)

    trainer = "orderlib.training.retrieval"
    base = key_files([trainer], read)
    assert "orderlib/training/loop.py" in base and "orderlib/penalties.py" in base
    assert key_files([trainer], edited("orderlib/penalties.py", "\nX = 1\n")) != base
    assert key_files([trainer], edited("orderlib/penalties.py", "\n# a comment\n")) == base
    assert key_files([trainer], edited("orderlib/atomic.py", "\nX = 1\n")) == base
    assert not set(base) & set(NOT_MODEL_CODE)
