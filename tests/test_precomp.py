"""The real-data path of Table 2: `*_precomp` folders and Karpathy's split JSON, on generated fixtures."""

import json

import numpy as np
import pytest

from orderlib.data.precomp import load_karpathy, load_precomp
from orderlib.paths import DataError


def _write_precomp(folder, split, n_images, dim=6, per_caption=False, crop1=False):
    folder.mkdir(exist_ok=True)
    caps = [f"image {i} caption {j}" for i in range(n_images) for j in range(5)]
    (folder / f"{split}_caps.txt").write_text("\n".join(caps) + "\n")
    feats = np.arange(n_images * dim, dtype=np.float32).reshape(n_images, dim)
    np.save(folder / f"{split}_ims.npy", np.repeat(feats, 5, 0) if per_caption else feats)
    if crop1:
        np.save(folder / f"{split}_ims_1crop.npy", -feats)
    return feats, caps


@pytest.mark.parametrize("per_caption", [False, True])
def test_precomp_one_or_five_rows_per_image(tmp_path, per_caption):
    feats, caps = _write_precomp(tmp_path / "coco_precomp", "dev", 4, per_caption=per_caption, crop1=True)
    d = load_precomp(tmp_path / "coco_precomp", "dev")
    assert np.array_equal(d.features, feats) and d.captions == caps and len(d) == 4
    assert np.array_equal(load_precomp(tmp_path / "coco_precomp", "dev", "1crop").features, -feats)


def test_precomp_errors_name_the_file(tmp_path):
    folder = tmp_path / "f30k_precomp"
    with pytest.raises(DataError, match="f30k_precomp: no such folder"):
        load_precomp(folder, "test")
    _write_precomp(folder, "test", 3)
    with pytest.raises(DataError, match="test_ims_1crop.npy: no such file"):
        load_precomp(folder, "test", "1crop")
    np.save(folder / "test_ims.npy", np.zeros((4, 6), np.float32))  # 4 rows for 3 images
    with pytest.raises(DataError, match=r"test_ims.npy: 4 feature rows do not match 15 captions"):
        load_precomp(folder, "test")
    np.save(folder / "test_ims.npy", np.arange(15 * 2, dtype=np.float32).reshape(15, 2))  # 5 rows differ
    with pytest.raises(DataError, match="rows of one image's 5 captions differ"):
        load_precomp(folder, "test")
    (folder / "test_caps.txt").write_text("a\nb\n\nc\nd\n")
    with pytest.raises(DataError, match=r"test_caps.txt:3: empty caption line"):
        load_precomp(folder, "test")
    (folder / "test_caps.txt").write_text("a\nb\nc\n")
    with pytest.raises(DataError, match="not a multiple of 5"):
        load_precomp(folder, "test")


def _karpathy(tmp_path):
    images = []
    for i, split in enumerate(["train", "restval", "val", "test", "train"]):
        sents = [{"raw": f"Image {i} says {j}.", "tokens": ["image", str(i), "says", str(j)]} for j in range(6)]
        images.append({"split": split, "filename": f"im{i}.jpg", "sentences": sents})
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps({"images": images, "dataset": "coco"}))
    return path


def test_karpathy_splits_restval_in_train_and_first_five_captions(tmp_path):
    path = _karpathy(tmp_path)
    np.save(tmp_path / "train.npy", np.eye(3, dtype=np.float32))
    d = load_karpathy(path, tmp_path / "train.npy", "train")
    assert len(d) == 3 and len(d.captions) == 15
    assert d.captions[:6] == [f"Image 0 says {j}." for j in range(5)] + ["Image 1 says 0."]
    assert d.captions[-1] == "Image 4 says 4."
    np.save(tmp_path / "test.npy", np.ones((1, 3), np.float32))
    assert load_karpathy(path, tmp_path / "test.npy", "test").captions[0] == "Image 3 says 0."


def test_karpathy_errors(tmp_path):
    path = _karpathy(tmp_path)
    np.save(tmp_path / "f.npy", np.ones((2, 3), np.float32))
    with pytest.raises(DataError, match="f.npy: 2 feature rows do not match 15 captions"):
        load_karpathy(path, tmp_path / "f.npy", "train")
    bad = tmp_path / "bad.json"
    bad.write_text('{"imgs": []}')
    with pytest.raises(DataError, match="bad.json: not a Karpathy split file"):
        load_karpathy(bad, tmp_path / "f.npy", "train")
    short = json.loads(path.read_text())
    short["images"][2]["sentences"] = short["images"][2]["sentences"][:3]
    path.write_text(json.dumps(short))
    with pytest.raises(DataError, match="im2.jpg has 3 captions"):
        load_karpathy(path, tmp_path / "f.npy", "dev")
