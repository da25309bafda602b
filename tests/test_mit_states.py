"""MIT-States compositional splits (Misra, natural), features and their errors, on generated fixtures."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from orderlib.data.mit_states import coverage_problems, image_features, load_features, load_mit_states, unseen_mask
from orderlib.paths import DataError

# folder -> image files; "old car" is in no pair list, "adj building" has no attribute
FOLDERS = {
    "ancient building": ["a.jpg", "b.PNG"],
    "ancient house": ["c.jpeg"],
    "new building": ["d.jpg"],
    "new house": ["e.png", "f.JPG"],
    "old car": ["g.jpg"],
    "adj building": ["h.jpg"],
}


def _image(path, seed=0, size=8):
    rgb = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(path, format="PNG" if path.suffix.lower() == ".png" else "JPEG")


def _write_pairs(folder, name, lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_pairs.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def root(tmp_path):
    for k, (folder, files) in enumerate(FOLDERS.items()):
        (tmp_path / "images" / folder).mkdir(parents=True)
        for j, f in enumerate(files):
            _image(tmp_path / "images" / folder / f, seed=10 * k + j)
    (tmp_path / "images" / "ancient building" / "notes.txt").write_text("not an image")
    split = tmp_path / "compositional-split"
    _write_pairs(split, "train", ["ancient building", "", "new house"])
    _write_pairs(split, "test", ["ancient house", "new building", ""])
    return tmp_path


def _pair_of(data, split):
    return [(data.attrs[a], data.objs[o]) for a, o in data.labels[split]]


def test_misra_assigns_images_by_pair(root):
    d = load_mit_states(root)
    assert d.attrs == ["ancient", "new"] and d.objs == ["building", "house"]
    assert d.pairs == {
        "train": [("ancient", "building"), ("new", "house")],
        "test": [("ancient", "house"), ("new", "building")],
    }
    assert d.images["train"] == [
        "ancient building/a.jpg",
        "ancient building/b.PNG",
        "new house/e.png",
        "new house/f.JPG",
    ]
    assert d.images["test"] == ["ancient house/c.jpeg", "new building/d.jpg"]
    for s in ("train", "test"):  # labels index attrs/objs and agree with the folder of each image
        assert d.labels[s].dtype == np.int64 and d.labels[s].shape == (len(d.images[s]), 2)
        assert _pair_of(d, s) == [tuple(p.split("/")[0].split(" ")) for p in d.images[s]]
    every = d.images["train"] + d.images["test"]
    assert not any(p.startswith(("adj ", "old car")) or p.endswith(".txt") for p in every)
    assert all(p.is_file() for p in d.image_paths("test"))
    assert np.array_equal(d.pair_index("test"), [[0, 1], [1, 0]])
    assert unseen_mask(d, "test").tolist() == [True, True] and unseen_mask(d, "train").tolist() == [False, False]
    assert coverage_problems(d) == []


def test_misra_reads_czsl_underscore_folders(root):
    (root / "images" / "ancient house").rename(root / "images" / "ancient_house")
    d = load_mit_states(root)
    assert d.images["test"][0] == "ancient_house/c.jpeg" and _pair_of(d, "test")[0] == ("ancient", "house")


def test_malformed_line_names_path_and_line(root):
    _write_pairs(root / "compositional-split", "train", ["ancient building", "new", "new house"])
    with pytest.raises(DataError, match=r"train_pairs\.txt:2: expected two"):
        load_mit_states(root)
    _write_pairs(root / "compositional-split", "train", ["ancient building", "new big house"])
    with pytest.raises(DataError, match=r"train_pairs\.txt:2:"):
        load_mit_states(root)


def test_missing_files_and_folders_are_named(root, tmp_path):
    (root / "compositional-split" / "test_pairs.txt").unlink()
    with pytest.raises(DataError, match=r"compositional-split/test_pairs\.txt: no such file"):
        load_mit_states(root)
    with pytest.raises(DataError, match=r"elsewhere: no such folder"):
        load_mit_states(root, split_dir=root / "elsewhere")
    _write_pairs(root / "compositional-split", "test", ["ancient house"])
    (root / "images").rename(root / "pictures")
    with pytest.raises(DataError, match=r"images: no such folder"):
        load_mit_states(root)
    with pytest.raises(ValueError, match="split must be"):
        load_mit_states(root, split="random")


def test_overlapping_misra_train_and_test_raise(root):
    _write_pairs(root / "compositional-split", "test", ["ancient house", "new house"])
    with pytest.raises(DataError, match=r"test_pairs\.txt: 1 pair\(s\) also in .*train_pairs\.txt.*'new house'"):
        load_mit_states(root)


def test_coverage_problems_lists_unseen_words_and_empty_pairs(root):
    _write_pairs(root / "compositional-split", "test", ["ancient house", "old car", "old tree"])
    probs = coverage_problems(load_mit_states(root))
    assert "test attribute 'old' occurs in no train pair" in probs
    assert "test object 'car' occurs in no train pair" in probs
    assert "test object 'tree' occurs in no train pair" in probs
    assert "test pair 'old tree' has no images" in probs and len(probs) == 4


# ---- natural split ----------------------------------------------------------------------------

META = [
    {"image": "ancient_building/a.jpg", "attr": "ancient", "obj": "building", "set": "train"},
    {"image": "new_house/e.png", "attr": "new", "obj": "house", "set": "train"},
    {"image": "ancient building/b.PNG", "attr": "ancient", "obj": "building", "set": "val"},
    {"image": "new_building/d.jpg", "attr": "new", "obj": "building", "set": "val"},
    {"image": "ancient_house/c.jpeg", "attr": "ancient", "obj": "house", "set": "test"},
    {"image": "new_house/f.JPG", "attr": "new", "obj": "house", "set": "test"},
    {"image": "ancient_house/c.jpeg", "attr": "ancient", "obj": "house", "set": "train"},  # not a train pair
    {"image": "old_car/g.jpg", "attr": "old", "obj": "car", "set": "test"},  # in no list
    {"image": "adj_building/h.jpg", "attr": "NA", "obj": "building", "set": "NA"},
]


@pytest.fixture
def natural(root):
    split = root / "compositional-split-natural"
    _write_pairs(split, "train", ["ancient building", "new house"])
    _write_pairs(split, "val", ["ancient building", "new building"])
    _write_pairs(split, "test", ["ancient house", "new house"])
    torch.save(META, root / "metadata_compositional-split-natural.t7")
    (root / "meta.json").write_text(json.dumps(META))
    return root


def test_natural_split_from_torch_and_json_metadata(natural):
    d = load_mit_states(natural, "natural")
    j = load_mit_states(natural, "natural", metadata=natural / "meta.json")
    assert d.images == j.images and all(np.array_equal(d.labels[s], j.labels[s]) for s in d.labels)
    assert set(d.pairs) == {"train", "val", "test"}
    # paths resolved to the folders on disk (spaces here), pairs outside their set's list dropped
    assert d.images == {
        "train": ["ancient building/a.jpg", "new house/e.png"],
        "val": ["ancient building/b.PNG", "new building/d.jpg"],
        "test": ["ancient house/c.jpeg", "new house/f.JPG"],
    }
    assert _pair_of(d, "val") == [("ancient", "building"), ("new", "building")]
    assert _pair_of(d, "test") == [("ancient", "house"), ("new", "house")]
    assert unseen_mask(d, "val").tolist() == [False, True]
    assert unseen_mask(d, "test").tolist() == [True, False]
    assert d.attrs == ["ancient", "new"] and d.objs == ["building", "house"]


def test_natural_without_images_keeps_metadata_paths(natural):
    (natural / "images").rename(natural / "pictures")
    d = load_mit_states(natural, "natural", metadata=natural / "meta.json")
    assert d.images["train"] == ["ancient_building/a.jpg", "new_house/e.png"]


def test_natural_metadata_errors(natural):
    with pytest.raises(DataError, match=r"nope\.t7: no such file"):
        load_mit_states(natural, "natural", metadata=natural / "nope.t7")
    bad = natural / "bad.json"
    bad.write_text(json.dumps([{"image": "x.jpg", "attr": "a"}]))
    with pytest.raises(DataError, match=r"bad\.json: entry 0 is not a dict with keys"):
        load_mit_states(natural, "natural", metadata=bad)
    bad.write_text(json.dumps(META + [{"image": "new_house/zz.jpg", "attr": "new", "obj": "house", "set": "test"}]))
    with pytest.raises(DataError, match=r"bad\.json: entry 9: image 'new_house/zz\.jpg' not found"):
        load_mit_states(natural, "natural", metadata=bad)
    bad.write_text(json.dumps(META + [{"image": "new_house/e.png", "attr": "new", "obj": "house", "set": "dev"}]))
    with pytest.raises(DataError, match=r"bad\.json: entry 9 has set 'dev'"):
        load_mit_states(natural, "natural", metadata=bad)


def _pwn(path):
    """What a crafted metadata file calls on load if unpickled: writes `path`."""
    with open(path, "w") as fh:
        fh.write("pwned")


class _Payload:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return _pwn, (self.path,)


@pytest.mark.parametrize("zipfile", [True, False])  # czsl's .t7 is the older, non-zip torch format
def test_natural_metadata_that_would_run_code_is_refused(natural, tmp_path, zipfile):
    marker, evil = tmp_path / "pwned", natural / "evil.t7"
    torch.save(META[:-1] + [{**META[-1], "image": _Payload(str(marker))}], evil, _use_new_zipfile_serialization=zipfile)
    with pytest.raises(DataError, match=r"evil\.t7: not loaded: it names \S*_pwn,.*loading it would run code"):
        load_mit_states(natural, "natural", metadata=evil)
    assert not marker.exists() and evil.exists()  # no code ran, the file is where it was
    torch.load(evil, weights_only=False)  # the file is a real exploit: unpickled, it runs its payload
    assert marker.exists()


def test_natural_metadata_in_the_older_torch_format(natural):
    torch.save(META, natural / "old.t7", _use_new_zipfile_serialization=False)
    old = load_mit_states(natural, "natural", metadata=natural / "old.t7")
    assert old.images == load_mit_states(natural, "natural").images


# ---- features ---------------------------------------------------------------------------------


def test_load_features_follows_requested_order(tmp_path):
    files = np.array(["a b/1.jpg", "a b/2.jpg", "c_d/3.jpg"])
    feats = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.savez(tmp_path / "f.npz", files=files, features=feats)
    got = load_features(tmp_path / "f.npz", ["c d/3.jpg", "a b/1.jpg", "a_b/2.jpg"])
    assert got.dtype == np.float32 and np.array_equal(got, feats[[2, 0, 1]])
    with pytest.raises(DataError, match=r"f\.npz: no features for image 'x y/9\.jpg'"):
        load_features(tmp_path / "f.npz", ["a b/1.jpg", "x y/9.jpg", "z/8.jpg"])
    np.savez(tmp_path / "g.npz", files=files, features=feats.ravel())
    with pytest.raises(DataError, match=r"g\.npz: 'features' should be 2-D"):
        load_features(tmp_path / "g.npz", ["a b/1.jpg"])
    np.savez(tmp_path / "h.npz", names=files, features=feats)
    with pytest.raises(DataError, match=r"h\.npz: expected arrays 'files' and 'features'"):
        load_features(tmp_path / "h.npz", ["a b/1.jpg"])


def test_image_features_resnet18_tiny_images(root, tmp_path):
    import torchvision

    model = torchvision.models.resnet18(weights=None)
    model.train()
    paths = [root / "images" / "ancient building" / "a.jpg", root / "images" / "new house" / "e.png"]
    f = image_features(paths, model=model, batch=2)
    assert f.shape == (2, 512) and f.dtype == np.float32 and np.isfinite(f).all()
    assert np.allclose(image_features(paths[::-1], model=model, batch=1), f[::-1], atol=1e-4)  # eval mode: batch-free
    assert isinstance(model.fc, torch.nn.Linear) and model.training  # head and mode restored
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(b"not a jpeg at all")
    with pytest.raises(DataError, match=r"corrupt\.jpg: unreadable image"):
        image_features([paths[0], corrupt], model=model)
