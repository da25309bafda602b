"""The Python examples of docs/your_data.md and the docstring examples of orderlib.eval run as written."""

import doctest
import importlib

import pytest

from orderlib.paths import repo_root

MODULES = ["orderlib.eval.retrieval", "orderlib.eval.hypernymy", "orderlib.eval.compositional", "orderlib.eval.facts"]


def test_your_data_python_examples(monkeypatch):
    monkeypatch.chdir(repo_root())  # the examples read tests/data/cli/
    result = doctest.testfile(str(repo_root() / "docs" / "your_data.md"), module_relative=False, verbose=False)
    assert result.attempted >= 20, result  # the page's examples were found
    assert result.failed == 0, result


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), verbose=False)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0, result
