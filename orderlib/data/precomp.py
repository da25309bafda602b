"""The real-data path for caption-image retrieval: COCO or Flickr30k as the order-embedding and VSE++
code ship them (`*_precomp` folders), or Karpathy's split files with an .npy of features
(docs/data.md gives both layouts). Image features come with one row per image or five identical
rows per image; caption k belongs to image k // 5.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orderlib.paths import DataError, text_lines

CAPTIONS_PER_IMAGE = 5
KARPATHY_SPLITS = {"train": ("train", "restval"), "dev": ("val",), "test": ("test",)}  # restval in train
PRECOMP_SPLITS = {"train": "train", "dev": "dev", "test": "test"}


@dataclass
class CaptionedFeatures:
    features: np.ndarray  # (N, F) float32, one row per image
    captions: list[str]  # 5N, image k's captions at 5k..5k+4
    source: str

    def __len__(self) -> int:
        return len(self.features)


def _load_npy(path: Path) -> np.ndarray:
    if not path.is_file():
        raise DataError(f"{path}: no such file (image features of the precomp layout)")
    try:
        arr = np.load(path, mmap_mode="r")
    except ValueError as e:
        raise DataError(f"{path}: not a readable .npy array ({e})") from e
    if arr.ndim != 2:
        raise DataError(f"{path}: expected a 2-D (images, features) array, got shape {arr.shape}")
    return arr


def one_row_per_image(features: np.ndarray, n_captions: int, path: Path) -> np.ndarray:
    """Reduce features with one row per caption (5 per image) to one row per image; check shapes."""
    if features.shape[0] * CAPTIONS_PER_IMAGE == n_captions:
        return np.array(features, dtype=np.float32)
    if features.shape[0] == n_captions and n_captions % CAPTIONS_PER_IMAGE == 0:
        per_image = np.array(features[::CAPTIONS_PER_IMAGE], dtype=np.float32)
        if not np.array_equal(np.repeat(per_image, CAPTIONS_PER_IMAGE, 0), np.asarray(features, np.float32)):
            raise DataError(
                f"{path}: {features.shape[0]} rows for {n_captions} captions, but the rows of "
                "one image's 5 captions differ; expected 5 identical rows per image"
            )
        return per_image
    raise DataError(
        f"{path}: {features.shape[0]} feature rows do not match {n_captions} captions; "
        f"expected {n_captions // CAPTIONS_PER_IMAGE} (one per image) or {n_captions} (one per caption)"
    )


def read_captions(path: Path) -> list[str]:
    if not path.is_file():
        raise DataError(f"{path}: no such file (captions of the precomp layout)")
    lines = text_lines(path, "one caption per line")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            raise DataError(f"{path}:{i}: empty caption line")
    if len(lines) % CAPTIONS_PER_IMAGE:
        raise DataError(f"{path}: {len(lines)} captions is not a multiple of {CAPTIONS_PER_IMAGE}")
    return lines


def load_precomp(folder: str | Path, split: str, crop: str = "10crop") -> CaptionedFeatures:
    """Load `{split}_caps.txt` + `{split}_ims.npy` (crop "1crop": `{split}_ims_1crop.npy`)."""
    folder = Path(folder)
    if split not in PRECOMP_SPLITS:
        raise ValueError(f"split must be one of {list(PRECOMP_SPLITS)}, got {split!r}")
    if not folder.is_dir():
        raise DataError(
            f"{folder}: no such folder; a precomp folder holds {{train,dev,test}}_caps.txt "
            "and {train,dev,test}_ims.npy (e.g. coco_precomp from the VSE++ data release)"
        )
    captions = read_captions(folder / f"{split}_caps.txt")
    npy = folder / (f"{split}_ims.npy" if crop == "10crop" else f"{split}_ims_1crop.npy")
    features = one_row_per_image(_load_npy(npy), len(captions), npy)
    return CaptionedFeatures(features, captions, str(folder))


def load_karpathy(json_path: str | Path, features_path: str | Path, split: str) -> CaptionedFeatures:
    """Captions of `split` from Karpathy's split JSON (first 5 per image, restval in train) with
    features from an .npy whose rows follow the JSON's images of that split."""
    json_path, features_path = Path(json_path), Path(features_path)
    if split not in KARPATHY_SPLITS:
        raise ValueError(f"split must be one of {list(KARPATHY_SPLITS)}, got {split!r}")
    if not json_path.is_file():
        raise DataError(f"{json_path}: no such file (Karpathy split JSON, e.g. dataset_coco.json)")
    try:
        images = json.loads(json_path.read_text(encoding="utf-8"))["images"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(f"{json_path}: not a Karpathy split file (needs a top-level 'images' list): {e}") from e
    captions = []
    for k, im in enumerate(i for i in images if i.get("split") in KARPATHY_SPLITS[split]):
        sents = im.get("sentences") or []
        if len(sents) < CAPTIONS_PER_IMAGE:
            raise DataError(
                f"{json_path}: image {im.get('filename', k)} has {len(sents)} captions; "
                f"every image needs at least {CAPTIONS_PER_IMAGE}"
            )
        captions += [s.get("raw") or " ".join(s["tokens"]) for s in sents[:CAPTIONS_PER_IMAGE]]
    if not captions:
        raise DataError(f"{json_path}: no images in split {split!r} ({'/'.join(KARPATHY_SPLITS[split])})")
    features = one_row_per_image(_load_npy(features_path), len(captions), features_path)
    return CaptionedFeatures(features, captions, f"{json_path} + {features_path}")
