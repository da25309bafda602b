"""Fashion-MNIST set-up and loader: Debian's gzipped idx files unpacked for torchvision's reader,
clear errors, and the real data where installed."""

import gzip
import os
import struct

import numpy as np
import pytest

from orderlib.data import fashion_mnist as FM
from orderlib.paths import DataError


def _idx(images: np.ndarray) -> bytes:
    code = 0x08  # unsigned byte
    return struct.pack(">HBB", 0, code, images.ndim) + struct.pack(f">{images.ndim}I", *images.shape) + images.tobytes()


@pytest.fixture(autouse=True)
def _fake_sizes(monkeypatch):
    """The fake idx files below are small: the size check expects their sizes."""
    sizes = {"train": 12, "t10k": 5}
    monkeypatch.setattr(
        FM,
        "RAW_BYTES",
        {
            n: sizes[n.split("-")[0]] * (784 if "images" in n else 1) + (16 if "images" in n else 8)
            for n in FM.RAW_FILES
        },
    )


def _fake_debian(folder, n_train=12, n_test=5):
    folder.mkdir()
    rng = np.random.default_rng(0)
    data = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        ims = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labs = (np.arange(n) % 10).astype(np.uint8)
        data[prefix] = (ims, labs)
        for kind, arr in (("images-idx3", ims), ("labels-idx1", labs)):
            with gzip.open(folder / f"{prefix}-{kind}-ubyte.gz", "wb") as fh:
                fh.write(_idx(arr))
    return data


def test_ensure_unpacks_debian_files_once_and_loader_reads_them(tmp_path, monkeypatch):
    data = _fake_debian(tmp_path / "deb")
    monkeypatch.setattr(FM, "DEBIAN_DIR", tmp_path / "deb")
    monkeypatch.setattr(FM, "_apt_install", lambda: pytest.fail("apt must not run when the files are there"))
    root = tmp_path / "root"
    path, source = FM.ensure_fashion_mnist(root)
    assert path == root / "FashionMNIST" / "raw" and source == "debian:dataset-fashion-mnist"
    assert sorted(os.listdir(path)) == sorted([*FM.RAW_FILES, "SOURCE", "MANIFEST.json"])
    mtime = (path / FM.RAW_FILES[0]).stat().st_mtime_ns
    assert FM.ensure_fashion_mnist(root) == (path, source)  # idempotent: nothing rewritten
    assert (path / FM.RAW_FILES[0]).stat().st_mtime_ns == mtime
    train, test = FM.load_fashion_mnist("train", root), FM.load_fashion_mnist("test", root)
    assert np.array_equal(train.images, data["train"][0]) and np.array_equal(test.labels, data["t10k"][1])
    assert train.labels.dtype == np.int64 and len(test) == 5
    fp = FM.fingerprint(root)
    assert len(fp) == 64 and fp == FM.fingerprint(root)


def test_missing_and_corrupt_files_name_the_file(tmp_path, monkeypatch):
    with pytest.raises(DataError, match=r"FashionMNIST/raw/train-images-idx3-ubyte is missing; run `make data`"):
        FM.load_fashion_mnist("train", tmp_path)
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for name in FM.RAW_FILES:
        (raw / name).write_bytes(b"not an idx file")
    with pytest.raises(
        DataError,
        match=r"train-images-idx3-ubyte has 15 bytes, expected 9,424; run `make data`.*"
        r"re-installs missing and damaged files",
    ):
        FM.load_fashion_mnist("train", tmp_path)
    for name in FM.RAW_FILES:  # right sizes, wrong content
        (raw / name).write_bytes(b"\xff" * FM.RAW_BYTES[name])
    with pytest.raises(DataError, match=r"t10k-\*-idx\*-ubyte: not a valid idx file"):
        FM.load_fashion_mnist("test", tmp_path)
    with pytest.raises(ValueError, match="split must be"):
        FM.load_fashion_mnist("dev", tmp_path)


def test_no_debian_and_no_download_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(FM, "DEBIAN_DIR", tmp_path / "nowhere")
    monkeypatch.setattr(FM, "_apt_install", lambda: None)

    class NoNetwork:
        def __init__(self, *a, **k):
            raise RuntimeError("no network")

    import torchvision.datasets

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", NoNetwork)
    with pytest.raises(DataError, match="install Debian's dataset-fashion-mnist .* no network"):
        FM.ensure_fashion_mnist(tmp_path / "root")


@pytest.fixture(scope="module")
def real_fashion_mnist():
    if not (FM.raw_dir() / FM.RAW_FILES[0]).exists():
        if os.environ.get("ORDERLIB_REQUIRE_DATA") == "1":
            pytest.fail("Fashion-MNIST is not installed: run `make data`")
        pytest.skip("Fashion-MNIST not installed (run `make data`)")
    return {s: FM.load_fashion_mnist(s) for s in ("train", "test")}


def test_real_fashion_mnist_is_the_balanced_70k_set(real_fashion_mnist):
    train, test = real_fashion_mnist["train"], real_fashion_mnist["test"]
    assert train.images.shape == (60000, 28, 28) and test.images.shape == (10000, 28, 28)
    assert np.bincount(train.labels).tolist() == [6000] * 10 and np.bincount(test.labels).tolist() == [1000] * 10
    assert len(FM.CLASSES) == len(FM.SYNSETS) == 10
