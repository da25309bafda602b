import os

import numpy as np
import pytest

from orderlib.data.wordnet import wordnet_dir


@pytest.fixture(scope="session")
def real_wordnet():
    """The installed WordNet 3.1/3.0 dirs; skip if absent unless ORDERLIB_REQUIRE_DATA=1 (make test)."""
    dirs = {v: wordnet_dir(v) for v in ("3.0", "3.1")}
    if not all((d / "data.noun").exists() for d in dirs.values()):
        if os.environ.get("ORDERLIB_REQUIRE_DATA") == "1":
            pytest.fail("WordNet is not installed: run `make data`")
        pytest.skip("WordNet not installed (run `make data`)")
    return dirs


@pytest.fixture
def tiny_parents():
    """A hand-built hierarchy with a diamond (two paths from `dog` to `animal`).

    0 entity; 1 animal -> 0; 2 pet -> 1; 3 canine -> 1; 4 dog -> 2, 3; 5 cat -> 2; 6 rock -> 0
    """
    return [[], [0], [1], [1], [2, 3], [2], [0]]


def _toy_items(n: int, seed: int = 0):
    """Three easy, mirror-invariant image classes (bright top half, bottom half or centre) with
    noise: (uint8 (n, 28, 28), labels (n,))."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    x = rng.integers(0, 40, size=(n, 28, 28)).astype(np.uint8)
    x[labels == 0, :14] += 200
    x[labels == 1, 14:] += 200
    x[labels == 2, 7:21, 7:21] += 200
    return x, labels


@pytest.fixture
def toy_items():
    return _toy_items
