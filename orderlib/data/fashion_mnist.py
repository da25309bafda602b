"""Fashion-MNIST (Xiao et al., 2017): 70,000 real 28x28 grey images of 10 clothing classes, each
mapped to a WordNet 3.0 noun synset so the image side meets the real hypernym hierarchy.

Set-up unpacks Debian's `dataset-fashion-mnist` into `<data root>/FashionMNIST/raw/`, the layout
torchvision reads; without apt, torchvision downloads the files there.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orderlib.paths import DataError, data_root, manifest_problems, sha256_files, write_manifest

DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
RAW_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
RAW_BYTES = dict(zip(RAW_FILES, (47_040_016, 60_008, 7_840_016, 10_008)))  # 16/8-byte header + data
SOURCE_URL = "https://github.com/zalandoresearch/fashion-mnist"

CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
# Each class as a WordNet 3.0 noun synset (checked against WordNet by the tests). Shirt is a
# hypernym of T-shirt (jersey.n.03), so even the ten labels are not flat.
SYNSETS = (
    "jersey.n.03",
    "trouser.n.01",
    "pullover.n.01",
    "dress.n.01",
    "coat.n.01",
    "sandal.n.01",
    "shirt.n.01",
    "gym_shoe.n.01",
    "bag.n.04",
    "boot.n.01",
)


def raw_dir(root: Path | None = None) -> Path:
    return Path(root or data_root()) / "FashionMNIST" / "raw"


def _apt_install() -> None:
    if not shutil.which("apt-get"):
        return
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if sudo is None:
        return
    quiet = dict(check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    install = sudo + ["apt-get", "install", "-y", "-q", DEBIAN_PACKAGE]
    if subprocess.run(install, **quiet).returncode != 0:  # stale package lists: refresh once
        subprocess.run(sudo + ["apt-get", "update", "-q"], **quiet)
        subprocess.run(install, **quiet)


def _unpack_debian(dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for name in RAW_FILES:
        src = DEBIAN_DIR / f"{name}.gz"
        tmp = dst / f".{name}.{os.getpid()}.tmp"
        with gzip.open(src, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        os.replace(tmp, dst / name)


def problems(root: Path | None = None, deep: bool = True) -> list[str]:
    """What is wrong with the installed idx files: missing or wrongly sized files; with `deep`,
    also files that differ from what set-up wrote (its MANIFEST.json)."""
    dst = raw_dir(root)
    out = []
    for n in RAW_FILES:
        f = dst / n
        if not f.is_file():
            out.append(f"{f} is missing")
        elif f.stat().st_size != RAW_BYTES[n]:
            out.append(f"{f} has {f.stat().st_size:,} bytes, expected {RAW_BYTES[n]:,}")
    return out or (manifest_problems(dst) if deep else [])


def ensure_fashion_mnist(root: Path | None = None) -> tuple[Path, str]:
    """Install Fashion-MNIST's idx files under `<root>/FashionMNIST/raw/` where missing or damaged
    (checked against their sizes and set-up's MANIFEST.json); return (raw dir, source description)."""
    dst = raw_dir(root)
    source_file = dst / "SOURCE"
    if not problems(root):
        return dst, source_file.read_text().strip() if source_file.exists() else "unknown"
    for n in RAW_FILES:  # a damaged file is replaced, never trusted (torchvision skips existing ones)
        (dst / n).unlink(missing_ok=True)
    if not (DEBIAN_DIR / f"{RAW_FILES[0]}.gz").exists():
        _apt_install()
    if (DEBIAN_DIR / f"{RAW_FILES[0]}.gz").exists():
        _unpack_debian(dst)
        source = f"debian:{DEBIAN_PACKAGE}"
    else:
        try:
            from torchvision.datasets import FashionMNIST

            FashionMNIST(str(dst.parent.parent), train=True, download=True)
            FashionMNIST(str(dst.parent.parent), train=False, download=True)
        except Exception as e:  # noqa: BLE001 - re-raised as a clear set-up error
            raise DataError(
                f"could not install Fashion-MNIST into {dst}: install Debian's "
                f"{DEBIAN_PACKAGE} (apt-get install {DEBIAN_PACKAGE}) or let torchvision "
                f"download it ({SOURCE_URL}); torchvision said: {e}"
            ) from e
        source = "torchvision download"
    bad = problems(root, deep=False)
    if bad:
        raise DataError(f"Fashion-MNIST from {source} is damaged after installing: {'; '.join(bad)}")
    write_manifest(dst, RAW_FILES)
    source_file.write_text(source + "\n")
    return dst, source


def fingerprint(root: Path | None = None) -> str:
    """sha256 over the four unpacked idx files."""
    return sha256_files(raw_dir(root) / name for name in RAW_FILES)


@dataclass
class FashionMNIST:
    images: np.ndarray  # (N, 28, 28) uint8
    labels: np.ndarray  # (N,) int64 class index into CLASSES
    split: str  # "train" (60,000) or "test" (10,000)

    def __len__(self) -> int:
        return len(self.labels)


def load_fashion_mnist(split: str, root: Path | None = None) -> FashionMNIST:
    """Load the "train" or "test" split with torchvision's reader (no download here)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    folder = raw_dir(root)
    bad = problems(root, deep=False)  # sizes only: cheap on every load
    if bad:
        raise DataError(
            f"Fashion-MNIST is missing or damaged: {bad[0]}; run `make data` (or `python -m "
            "orderlib.setup_data fashion-mnist`), which re-installs missing and damaged files"
        )
    from torchvision.datasets.mnist import read_image_file, read_label_file

    prefix = "train" if split == "train" else "t10k"
    try:
        images = read_image_file(str(folder / f"{prefix}-images-idx3-ubyte")).numpy()
        labels = read_label_file(str(folder / f"{prefix}-labels-idx1-ubyte")).numpy().astype(np.int64)
    except Exception as e:  # noqa: BLE001 - torchvision's errors do not name the file
        raise DataError(f"{folder}/{prefix}-*-idx*-ubyte: not a valid idx file ({e})") from e
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        raise DataError(
            f"{folder}/{prefix}-*: {images.shape[0]} images of shape {images.shape[1:]} "
            f"for {labels.shape[0]} labels; expected N x 28 x 28 and N labels"
        )
    return FashionMNIST(images, labels, split)
