import contextlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from orderlib.data.wordnet import wordnet_dir
from orderlib.training import loop

# The project's machinery (report_index, run_tests, ...) lives outside the package, in the workflow's
# scripts, which import one another by name: the tests import them the same way.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))


@pytest.fixture(autouse=True, scope="session")
def _runs_outside_the_checkout(tmp_path_factory):
    """Checkpoint locks and run artefacts of the tests go to a temporary folder (make test sets its
    own), never into the checkout's runs/."""
    if os.environ.get("ORDERLIB_RUNS"):
        yield
        return
    os.environ["ORDERLIB_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    yield
    os.environ.pop("ORDERLIB_RUNS", None)


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


@pytest.fixture
def interrupt_then_resume(tmp_path, monkeypatch):
    """run(module, train, at): call train(checkpoint) with module.train_epoch raising
    KeyboardInterrupt at epoch `at` (its fifth argument), then call it again uninterrupted from the
    same checkpoint; return (resumed result, checkpoint path)."""

    def run(module, train, at: int):
        real = module.train_epoch

        def interrupted(*args, **kwargs):
            if args[4] == at:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        ckpt = tmp_path / "run.pt"
        monkeypatch.setattr(loop, "CHECKPOINT_EVERY_S", 0.0)  # a checkpoint after every epoch
        monkeypatch.setattr(module, "train_epoch", interrupted)
        with pytest.raises(KeyboardInterrupt):
            train(ckpt)
        monkeypatch.setattr(module, "train_epoch", real)
        return train(ckpt), ckpt

    return run


@contextlib.contextmanager
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def one_thread():
    """A context manager: torch on one intra-op thread inside it, the previous count after (rows
    trained here on one thread, to compare with rows trained by one-thread workers)."""
    return _one_thread


@pytest.fixture
def benchmark_module():
    """A loader: benchmark_module("doe_gamma") is benchmarks/investigations/doe_gamma.py as a module
    (found in whichever of benchmarks/' folders holds it; benchmarks/ is not a package)."""
    import importlib.util
    from pathlib import Path

    def load(name: str):
        (path,) = (Path(__file__).resolve().parents[1] / "benchmarks").glob(f"*/{name}.py")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
