"""Fashion-MNIST Attributes (`fmnist-attributes-v1`): real Fashion-MNIST items rendered under 20
attributes named by WordNet 3.0 adjectives, a stand-in for MIT-States in Utama's study
(docs/utama.md).

As in Misra et al. (`split_pairs`), unseen pairs never occur in training, yet every attribute and
every object does. Deterministic in (version, split, seed, size).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from orderlib.data.fashion_mnist import CLASSES, FashionMNIST
from orderlib.data.scenes import SOURCES, source_range

VERSION = "fmnist-attributes-v1"
CANVAS, ITEM = 32, 28
MAX_JITTER = 2  # the item's centre moves by up to this many pixels each way

# word -> (WordNet 3.0 adjective synset, family)
ATTRIBUTES = {
    "red": ("red.s.01", "colour"),
    "green": ("green.s.01", "colour"),
    "blue": ("blue.s.01", "colour"),
    "yellow": ("yellow.s.01", "colour"),
    "striped": ("striped.s.01", "pattern"),
    "dotted": ("dotted.s.01", "pattern"),
    "checkered": ("checkered.s.02", "pattern"),
    "inverted": ("inverted.s.01", "geometry"),
    "rotated": ("rotated.s.01", "geometry"),
    "small": ("small.a.01", "geometry"),
    "large": ("large.a.01", "geometry"),
    "elongated": ("elongated.s.01", "geometry"),
    "faded": ("bleached.s.01", "photometry"),
    "dark": ("dark.a.01", "photometry"),
    "blurred": ("blurred.s.02", "photometry"),
    "grainy": ("farinaceous.s.02", "photometry"),
    "outlined": ("defined.s.01", "photometry"),
    "bright": ("bright.a.01", "context"),
    "worn": ("worn.a.01", "context"),
    "wet": ("wet.a.01", "context"),
}
ATTRS = tuple(ATTRIBUTES)
# Object words: one WordNet lemma per class (the first of its synset that reads as the class).
OBJECTS = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot")
# Object groups that context-dependent attributes render differently.
GROUP = {0: "top", 1: "long", 2: "top", 3: "long", 4: "top", 5: "foot", 6: "top", 7: "foot", 8: "bag", 9: "foot"}
COLOURS = {"red": (1.0, 0.15, 0.15), "green": (0.2, 0.9, 0.2), "blue": (0.25, 0.4, 1.0), "yellow": (1.0, 0.9, 0.1)}
BRIGHT = {"foot": (1.0, 0.5, 0.0), "top": (0.1, 0.95, 0.95), "long": (1.0, 0.2, 0.8), "bag": None}  # bag: glare


def _place(m: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """Paste a (h, w) map centred on the canvas, moved by (dy, dx), cropping what falls off."""
    out = np.zeros((CANVAS, CANVAS), np.float32)
    h, w = m.shape
    y0, x0 = (CANVAS - h) // 2 + dy, (CANVAS - w) // 2 + dx
    ys, xs = slice(max(0, y0), min(CANVAS, y0 + h)), slice(max(0, x0), min(CANVAS, x0 + w))
    out[ys, xs] = m[ys.start - y0 : ys.stop - y0, xs.start - x0 : xs.stop - x0]
    return out


def _geometry(m: np.ndarray, attr: str) -> np.ndarray:
    if attr == "inverted":
        return m[::-1]
    if attr == "rotated":
        return np.rot90(m, -1)
    zoom = {"small": (0.6, 0.6), "large": (1.3, 1.3), "elongated": (1.3, 0.7)}.get(attr)
    return np.clip(ndimage.zoom(m, zoom, order=1), 0, 1) if zoom else m


def _stripes(group: str, phase: int) -> np.ndarray:
    y, x = np.mgrid[:CANVAS, :CANVAS]
    coord = {"long": x, "top": y}.get(group, x + y)  # vertical / horizontal / diagonal
    return np.where((coord + phase) % 4 < 2, 1.0, 0.25).astype(np.float32)


def _blotches(rng: np.random.Generator, sil: np.ndarray, n: int, radius: float) -> np.ndarray:
    """A mask of n discs centred on random silhouette pixels."""
    ys, xs = np.nonzero(sil)
    out = np.zeros_like(sil)
    if len(ys) == 0:
        return out
    y, x = np.mgrid[:CANVAS, :CANVAS]
    for k in rng.choice(len(ys), n):
        out |= (y - ys[k]) ** 2 + (x - xs[k]) ** 2 <= radius**2
    return out & sil


def render_item(
    item: np.ndarray, attr: str | None, obj: int, jitter=(0, 0), phase: int = 0, seed: int = 0, tint=None
) -> np.ndarray:
    """Render a uint8 (28, 28) item of class `obj` under `attr` (None: plain grey, or `tint`ed) as
    a uint8 (32, 32, 3) image; `jitter`, `phase` and `seed` fix the per-image variation."""
    if attr is not None and attr not in ATTRIBUTES:
        raise ValueError(f"unknown attribute {attr!r}; expected one of {ATTRS}")
    rng = np.random.default_rng(seed)
    group = GROUP[int(obj)]
    lum = _place(_geometry(item.astype(np.float32) / 255.0, attr), *jitter)  # (32, 32) in [0, 1]
    sil = lum > 0.08
    colour = np.asarray(tint if tint is not None else (1.0, 1.0, 1.0), np.float32)
    shade = 0.85 + 0.15 * rng.random()  # per-image variation of the colour's strength
    if attr in COLOURS:
        colour = np.asarray(COLOURS[attr], np.float32) * shade
    elif attr == "striped":
        lum = lum * np.where(sil, _stripes(group, phase), 1.0)
    elif attr in ("dotted", "checkered"):
        y, x = np.mgrid[:CANVAS, :CANVAS] + phase
        on = ((y % 4 < 2) & (x % 4 < 2)) if attr == "dotted" else ((y // 4 + x // 4) % 2 == 0)
        lum = lum * np.where(sil & ~on, 0.25 if attr == "dotted" else 0.3, 1.0)
    elif attr == "faded":
        lum = np.where(sil, 0.3 + 0.4 * lum, lum)
    elif attr == "dark":
        lum = 0.35 * lum
    elif attr == "outlined":
        lum = np.clip(ndimage.grey_dilation(lum, 3) - ndimage.grey_erosion(lum, 3), 0, 1) * 1.5
    elif attr == "bright":
        if BRIGHT[group] is None:
            lum = np.clip(1.7 * lum, 0, 1)
        else:
            colour = np.asarray(BRIGHT[group], np.float32) * shade
    elif attr == "worn":
        if group == "foot":  # scuffs
            lum = np.where(_blotches(rng, sil, 4, 2.0), 0.15 * lum, 0.8 * lum)
        elif group == "bag":  # scratches: thin bright diagonals
            y, x = np.mgrid[:CANVAS, :CANVAS]
            lines = np.zeros_like(sil)
            for c in rng.integers(0, 2 * CANVAS, 3):
                lines |= np.abs(y + x - c) < 1
            lum = np.where(lines & sil, 1.0, lum)
        else:  # holes
            lum = np.where(_blotches(rng, sil, 4, 2.0), 0.0, lum)
    elif attr == "wet":
        lum = 0.6 * lum
        if group in ("foot", "bag"):  # a glossy highlight band
            y = np.mgrid[:CANVAS, :CANVAS][0]
            top = np.argmax(sil.any(1)) if sil.any() else 0
            lum = np.where(sil & (y >= top + 2) & (y < top + 5), 1.0, lum)
        else:  # drips: dark vertical streaks
            cols = rng.choice(CANVAS, 5, replace=False)
            drip = np.zeros_like(sil)
            drip[:, cols] = True
            lum = np.where(drip & sil, 0.1 * lum, lum)
    rgb = lum[..., None] * colour  # (32, 32, 3)
    if attr == "blurred":
        rgb = ndimage.gaussian_filter(rgb, sigma=(1.3, 1.3, 0))
    elif attr == "grainy":
        rgb = rgb + rng.normal(0, 0.25, rgb.shape).astype(np.float32)
    return (np.clip(rgb, 0, 1) * 255 + 0.5).astype(np.uint8)


def all_pairs(n_attrs: int = len(ATTRS), n_objs: int = len(CLASSES)) -> np.ndarray:
    """(n_attrs * n_objs, 2) int64 every (attr, obj) pair, attribute-major."""
    return np.array([(a, o) for a in range(n_attrs) for o in range(n_objs)], np.int64)


def split_pairs(
    n_val_unseen: int,
    n_test_unseen: int,
    seed: int = 0,
    n_attrs: int = len(ATTRS),
    n_objs: int = len(CLASSES),
    min_seen: tuple[int, int] = (3, 6),
) -> dict[str, np.ndarray]:
    """Split all (attribute, object) pairs into "seen" (training pairs), "val_unseen" and
    "test_unseen", each (P, 2) int64 (attr, obj) in sorted order. Every attribute keeps at least
    min_seen[0] seen objects and every object min_seen[1] seen attributes (Misra et al.'s rule:
    unseen pairs are new compositions of seen primitives); a seed gives one split."""
    pairs = all_pairs(n_attrs, n_objs)
    n_unseen = n_val_unseen + n_test_unseen
    if n_unseen >= len(pairs):
        raise ValueError(f"{n_unseen} unseen pairs leave nothing to train on ({len(pairs)} pairs)")
    rng = np.random.default_rng([seed, n_val_unseen, n_test_unseen])
    for _ in range(1000):
        perm = rng.permutation(len(pairs))
        seen = pairs[perm[n_unseen:]]
        if (
            np.bincount(seen[:, 0], minlength=n_attrs).min() >= min_seen[0]
            and np.bincount(seen[:, 1], minlength=n_objs).min() >= min_seen[1]
        ):
            order = lambda p: p[np.lexsort((p[:, 1], p[:, 0]))]
            return {
                "seen": order(seen),
                "val_unseen": order(pairs[perm[:n_val_unseen]]),
                "test_unseen": order(pairs[perm[n_val_unseen:n_unseen]]),
            }
    raise ValueError(f"no split of {len(pairs)} pairs with {n_unseen} unseen keeps every attribute and object seen")


@dataclass
class AttributeImages:
    """One split of Fashion-MNIST Attributes: image k is Fashion-MNIST item `items[k]` (of split
    `source.split`) of class `objs[k]` under attribute `attrs[k]`, with per-image variation
    (`jitter[k]`, `phase[k]`, `seeds[k]`)."""

    split: str
    seed: int
    items: np.ndarray  # (n,) int64
    attrs: np.ndarray  # (n,) int64 into ATTRS
    objs: np.ndarray  # (n,) int64 into OBJECTS
    jitter: np.ndarray  # (n, 2) int64
    phase: np.ndarray  # (n,) int64
    seeds: np.ndarray  # (n,) int64
    source: FashionMNIST = field(repr=False)
    version: str = VERSION

    def __len__(self) -> int:
        return len(self.items)

    @property
    def labels(self) -> np.ndarray:
        return np.stack([self.attrs, self.objs], 1)  # (n, 2)

    def render(self, idx=None) -> np.ndarray:
        """Return images idx (default all) as uint8 (n, 32, 32, 3)."""
        idx = np.arange(len(self)) if idx is None else np.atleast_1d(idx)
        out = np.zeros((len(idx), CANVAS, CANVAS, 3), np.uint8)
        for k, i in enumerate(idx):
            out[k] = render_item(
                self.source.images[self.items[i]],
                ATTRS[self.attrs[i]],
                int(self.objs[i]),
                tuple(self.jitter[i]),
                int(self.phase[i]),
                int(self.seeds[i]),
            )
        return out

    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.version}|{self.split}|{self.seed}".encode())
        for a in (self.items, self.attrs, self.objs, self.jitter, self.phase, self.seeds):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()


def _items_by_class(source: FashionMNIST, split: str) -> list[np.ndarray]:
    lo, hi = source_range(source, split, "images")
    return [lo + np.flatnonzero(source.labels[lo:hi] == c) for c in range(len(CLASSES))]


def make_attribute_images(
    source: FashionMNIST, split: str, pairs: np.ndarray, per_pair: int, seed: int = 0
) -> AttributeImages:
    """Generate `per_pair` images of each (attr, obj) row of `pairs` for `split` ("train", "dev"
    or "test": Fashion-MNIST items as in SOURCES), deterministically from (split, pairs, seed)."""
    pools = _items_by_class(source, split)
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    rng = np.random.default_rng(
        [
            seed,
            list(SOURCES).index(split),
            per_pair,
            len(pairs),
            int(np.ravel_multi_index(pairs.T, (len(ATTRS), len(OBJECTS))).sum()),
        ]
    )
    n = len(pairs) * per_pair
    attrs, objs = np.repeat(pairs[:, 0], per_pair), np.repeat(pairs[:, 1], per_pair)
    items = (
        np.concatenate([rng.choice(pools[o], per_pair, replace=False) for o in pairs[:, 1]])
        if n
        else np.zeros(0, np.int64)
    )
    jitter = rng.integers(-MAX_JITTER, MAX_JITTER + 1, (n, 2))
    return AttributeImages(
        split,
        seed,
        items.astype(np.int64),
        attrs,
        objs,
        jitter,
        rng.integers(0, 4, n),
        rng.integers(0, 2**31, n),
        source,
    )


def plain_images(source: FashionMNIST, items: np.ndarray, seed: int = 0, tint: bool = True) -> np.ndarray:
    """Items without an attribute as uint8 (n, 32, 32, 3): grey, or (tint=True) each in a random
    colour drawn from a continuous range (not an attribute's palette), with random jitter: the
    input of the object-classification pre-training that stands in for ImageNet."""
    rng = np.random.default_rng([seed, len(items)])
    out = np.zeros((len(items), CANVAS, CANVAS, 3), np.uint8)
    for k, i in enumerate(items):
        colour = rng.uniform(0.3, 1.0, 3) if tint else None
        out[k] = render_item(
            source.images[i],
            None,
            int(source.labels[i]),
            tuple(rng.integers(-MAX_JITTER, MAX_JITTER + 1, 2)),
            tint=colour,
        )
    return out
