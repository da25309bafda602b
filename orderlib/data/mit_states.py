"""MIT-States (Isola et al., 2015) with the compositional zero-shot splits of Misra et al.
(`split="misra"`) and Purushwalkam et al. (`split="natural"`); docs/data.md gives the layout.

The natural split's `.t7` metadata is read weights-only: no code from the file runs, and a file
that names a function or class is refused with a DataError.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orderlib.paths import DataError, text_lines

SPLITS = {
    "misra": ("compositional-split", ("train", "test")),
    "natural": ("compositional-split-natural", ("train", "val", "test")),
}
NATURAL_METADATA = "metadata_compositional-split-natural.t7"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
NO_ATTRIBUTE = ("adj", "NA")  # folder prefix / metadata attr of images without an attribute
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Pair = tuple[str, str]


@dataclass
class CompositionalData:
    attrs: list[str]  # sorted vocabulary of attributes used by any split pair
    objs: list[str]  # sorted objects
    pairs: dict[str, list[Pair]]  # split -> pairs in file order
    images: dict[str, list[str]]  # split -> image paths relative to <root>/images (posix)
    labels: dict[str, np.ndarray]  # split -> (n, 2) int64 (attr index, obj index)
    root: Path

    def pair_index(self, split: str) -> np.ndarray:
        """Return the (P, 2) int64 attr/obj indices of `split`'s pairs."""
        return _index(self.pairs[split], self.attrs, self.objs)

    def image_paths(self, split: str) -> list[Path]:
        """Return the absolute paths of `split`'s images."""
        return [self.root / "images" / p for p in self.images[split]]


def _index(pairs: Sequence[Pair], attrs: list[str], objs: list[str]) -> np.ndarray:
    a, o = {w: i for i, w in enumerate(attrs)}, {w: i for i, w in enumerate(objs)}
    return np.asarray([(a[x], o[y]) for x, y in pairs], dtype=np.int64).reshape(-1, 2)


# ---- pair lists -------------------------------------------------------------------------------


def read_pairs(path: Path) -> list[Pair]:
    """Read one "attr obj" pair per line (blank lines skipped, duplicates dropped), in file order."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (pair list, one 'attr obj' per line)")
    pairs: dict[Pair, None] = {}
    for i, line in enumerate(text_lines(path, "one 'attr obj' pair per line"), 1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 2:
            raise DataError(f"{path}:{i}: expected two space-separated tokens 'attr obj', got {line!r}")
        pairs[(tokens[0], tokens[1])] = None
    return list(pairs)


def _read_split_pairs(split_dir: Path, names: Sequence[str]) -> dict[str, list[Pair]]:
    if not split_dir.is_dir():
        raise DataError(f"{split_dir}: no such folder (split pair lists {', '.join(n + '_pairs.txt' for n in names)})")
    return {n: read_pairs(split_dir / f"{n}_pairs.txt") for n in names}


def _check_disjoint(train: list[Pair], test: list[Pair], train_file: Path, test_file: Path) -> None:
    seen = set(train)
    shared = [p for p in test if p in seen]
    if shared:
        raise DataError(
            f"{test_file}: {len(shared)} pair(s) also in {train_file} (e.g. {' '.join(shared[0])!r}); "
            "the Misra split has disjoint train and test pairs"
        )


# ---- images -----------------------------------------------------------------------------------


def folder_pair(name: str) -> Pair | None:
    """Split an image folder name into (attr, obj): at the first space, else the first underscore."""
    sep = " " if " " in name else "_"
    attr, _, obj = name.partition(sep)
    return (attr, obj) if attr and obj else None


def _is_image(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_EXTENSIONS


def scan_images(images_dir: Path) -> dict[Pair, list[str]]:
    """Map each pair folder under `images_dir` to its image paths (relative, sorted); skip 'adj' folders."""
    if not images_dir.is_dir():
        raise DataError(f"{images_dir}: no such folder (MIT-States images, one folder per 'attr obj' pair)")
    out: dict[Pair, list[str]] = {}
    for folder in sorted(p for p in images_dir.iterdir() if p.is_dir()):
        pair = folder_pair(folder.name)
        if pair is None or pair[0] in NO_ATTRIBUTE:
            continue
        files = sorted(f"{folder.name}/{f.name}" for f in folder.iterdir() if _is_image(f))
        out.setdefault(pair, []).extend(files)
    return out


def _resolve_image(images_dir: Path, rel: str) -> str | None:
    """Return `rel` as it exists under images_dir, trying the folder with spaces and underscores swapped."""
    folder, _, name = rel.replace("\\", "/").rpartition("/")
    for f in dict.fromkeys((folder, folder.replace("_", " "), folder.replace(" ", "_"))):
        cand = f"{f}/{name}" if f else name
        if (images_dir / cand).is_file():
            return cand
    return None


# ---- natural-split metadata -------------------------------------------------------------------


def read_metadata(path: Path) -> list[dict]:
    """Read the per-image metadata: a .json list of dicts, or a .t7/.pt torch file read weights-only
    (no code runs; a file naming a function or class beyond torch's defaults raises DataError)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (per-image metadata of the natural split)")
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise DataError(f"{path}: not valid JSON ({e})") from e
    elif suffix in (".t7", ".pt"):
        import torch

        from orderlib.checkpoint import refused_global

        try:
            entries = torch.load(path, weights_only=True, map_location="cpu")  # containers, strings, numbers
        except Exception as e:  # noqa: BLE001 - torch's errors do not name the file
            refused = refused_global(e)
            if refused is not None:
                raise DataError(
                    f"{path}: not loaded: it names {refused}, which metadata (a list of dicts of "
                    f"strings) never holds, and loading it would run code"
                ) from None
            raise DataError(f"{path}: not a readable torch file ({type(e).__name__}: {e})") from e
    else:
        raise DataError(f"{path}: unknown metadata format {suffix!r}; expected .t7, .pt or .json")
    if not isinstance(entries, (list, tuple)):
        raise DataError(f"{path}: expected a list of dicts, got {type(entries).__name__}")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not {"image", "attr", "obj", "set"} <= set(e):
            raise DataError(f"{path}: entry {i} is not a dict with keys 'image', 'attr', 'obj', 'set': {e!r}")
    return list(entries)


def _assign_natural(
    entries: list[dict], pairs: dict[str, list[Pair]], images_dir: Path, meta_path: Path
) -> dict[str, list[tuple[str, Pair]]]:
    """Keep each entry whose pair is in its set's pair list; resolve its path when images/ exists."""
    allowed = {s: set(p) for s, p in pairs.items()}
    check = images_dir.is_dir()
    out: dict[str, list[tuple[str, Pair]]] = {s: [] for s in pairs}
    for i, e in enumerate(entries):
        s, pair = e["set"], (str(e["attr"]), str(e["obj"]))
        if s == "NA" or pair[0] in NO_ATTRIBUTE:
            continue
        if s not in allowed:
            raise DataError(f"{meta_path}: entry {i} has set {s!r}; expected one of {sorted(allowed)} or 'NA'")
        if pair not in allowed[s]:
            continue
        rel = str(e["image"])
        if check:
            found = _resolve_image(images_dir, rel)
            if found is None:
                raise DataError(f"{meta_path}: entry {i}: image {rel!r} not found under {images_dir}")
            rel = found
        out[s].append((rel, pair))
    return out


# ---- loader -----------------------------------------------------------------------------------


def _vocab(pairs: dict[str, list[Pair]]) -> tuple[list[str], list[str]]:
    every = [p for ps in pairs.values() for p in ps]
    return sorted({a for a, _ in every}), sorted({o for _, o in every})


def _build(root: Path, pairs: dict[str, list[Pair]], assigned: dict[str, list[tuple[str, Pair]]]) -> CompositionalData:
    attrs, objs = _vocab(pairs)
    images = {s: [rel for rel, _ in assigned[s]] for s in pairs}
    labels = {s: _index([p for _, p in assigned[s]], attrs, objs) for s in pairs}  # (n, 2)
    return CompositionalData(attrs, objs, pairs, images, labels, root)


def load_mit_states(
    root: str | Path, split: str = "misra", split_dir: str | Path | None = None, metadata: str | Path | None = None
) -> CompositionalData:
    """Load MIT-States under `root` with the "misra" (train/test) or "natural" (train/val/test) split.

    `split_dir` defaults to `<root>/compositional-split` or `<root>/compositional-split-natural`;
    `metadata` (natural only) to `<root>/metadata_compositional-split-natural.t7`. Without an
    `images/` folder the natural split keeps the metadata's paths unchecked (for precomputed features).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if metadata is not None and split != "natural":
        raise ValueError("metadata is only used by the natural split")
    root = Path(root)
    default_dir, names = SPLITS[split]
    split_dir = Path(split_dir) if split_dir is not None else root / default_dir
    pairs = _read_split_pairs(split_dir, names)
    images_dir = root / "images"
    if split == "misra":
        _check_disjoint(pairs["train"], pairs["test"], split_dir / "train_pairs.txt", split_dir / "test_pairs.txt")
        by_pair = scan_images(images_dir)
        assigned = {s: [(rel, p) for p in ps for rel in by_pair.get(p, [])] for s, ps in pairs.items()}
    else:
        meta_path = Path(metadata) if metadata is not None else root / NATURAL_METADATA
        assigned = _assign_natural(read_metadata(meta_path), pairs, images_dir, meta_path)
    return _build(root, pairs, assigned)


def unseen_mask(data: CompositionalData, split: str) -> np.ndarray:
    """Return (P,) bool: which of `split`'s pairs are not train pairs."""
    train = set(data.pairs["train"])
    return np.asarray([p not in train for p in data.pairs[split]], dtype=bool).reshape(-1)


def coverage_problems(data: CompositionalData) -> list[str]:
    """List attributes/objects of val/test pairs that no train pair has, and pairs with no images."""
    train = data.pairs["train"]
    seen_a, seen_o = {a for a, _ in train}, {o for _, o in train}
    problems = []
    for s, ps in data.pairs.items():
        if s != "train":
            problems += [f"{s} attribute {a!r} occurs in no train pair" for a in sorted({a for a, _ in ps} - seen_a)]
            problems += [f"{s} object {o!r} occurs in no train pair" for o in sorted({o for _, o in ps} - seen_o)]
        used = {(data.attrs[a], data.objs[o]) for a, o in data.labels[s]}
        problems += [f"{s} pair {' '.join(p)!r} has no images" for p in ps if p not in used]
    return problems


# ---- features ---------------------------------------------------------------------------------


def _norm(rel: str) -> str:
    return rel.replace("\\", "/").replace(" ", "_")


def load_features(path: str | Path, files: Sequence[str]) -> np.ndarray:
    """Return the (len(files), F) float32 rows of an .npz (`files`, `features`) in the order of `files`.

    A name matches exactly, else with spaces read as underscores (czsl's renamed folders).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (precomputed MIT-States features, .npz with 'files' and 'features')")
    try:
        with np.load(path, allow_pickle=False) as z:
            if "files" not in z or "features" not in z:
                raise DataError(f"{path}: expected arrays 'files' and 'features', found {sorted(z.files)}")
            names, feats = [str(f) for f in z["files"]], z["features"]  # (N,), (N, F)
    except ValueError as e:
        raise DataError(f"{path}: not a readable .npz of plain arrays (save 'files' as a str array; {e})") from e
    if feats.ndim != 2:
        raise DataError(f"{path}: 'features' should be 2-D (images, features), got shape {feats.shape}")
    if len(names) != len(feats):
        raise DataError(f"{path}: {len(names)} files but {len(feats)} feature rows")
    exact = {n: i for i, n in enumerate(names)}
    loose = {_norm(n): i for i, n in enumerate(names)}
    rows = []
    for f in files:
        i = exact.get(f, loose.get(_norm(f)))
        if i is None:
            raise DataError(f"{path}: no features for image {f!r}")
        rows.append(i)
    return np.asarray(feats[np.asarray(rows, dtype=np.int64)], dtype=np.float32).reshape(len(rows), feats.shape[1])


def default_model():
    """Return torchvision's ResNet-101 with ImageNet weights (IMAGENET1K_V1, downloaded on first use)."""
    import torchvision

    return torchvision.models.resnet101(weights=torchvision.models.ResNet101_Weights.IMAGENET1K_V1)


def _preprocess():
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.Resize(256),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def _load_image(path: Path, tf):
    from PIL import Image

    try:
        with Image.open(path) as im:
            return tf(im.convert("RGB"))  # (3, 224, 224)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: unreadable image ({type(e).__name__}: {e})") from e


def image_features(paths: Sequence[str | Path], model=None, batch: int = 32) -> np.ndarray:
    """Return (n, F) float32 penultimate-layer features of the images (F = 2048 for ResNet-101).

    Resize 256, centre-crop 224, ImageNet normalisation. A model with an `fc` head (torchvision
    ResNets) is read before it: `fc` is bypassed during the call and put back after. Runs on the
    device of the model's parameters, in eval mode (the model's mode is restored).
    """
    import torch

    if not len(paths):
        raise ValueError("image_features: no image paths given")
    model = default_model() if model is None else model
    device = next(model.parameters()).device
    tf, head, was_training = _preprocess(), getattr(model, "fc", None), model.training
    out = []
    try:
        if head is not None:
            model.fc = torch.nn.Identity()
        model.eval()
        with torch.inference_mode():
            for lo in range(0, len(paths), batch):
                x = torch.stack([_load_image(Path(p), tf) for p in paths[lo : lo + batch]])  # (b, 3, 224, 224)
                out.append(model(x.to(device)).flatten(1).float().cpu().numpy())  # (b, F)
    finally:
        if head is not None:
            model.fc = head
        model.train(was_training)
    return np.concatenate(out)
