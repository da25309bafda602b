"""`orderlib eval retrieval`: caption-image retrieval (Table 2 of Vendrov et al.; VSE++'s protocol)
from embeddings or a precomputed (images x captions) matrix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from orderlib.cli.common import add_kind, add_output, add_parser, as_distance
from orderlib.cli.inputs import Embeddings, InputError, read_embeddings, read_matrix
from orderlib.cli.report import Report
from orderlib.encoders.joint import PENALTIES
from orderlib.eval.retrieval import PRIMARY_TIES, TIE_COLUMNS, TIES, evaluate_retrieval, tie_columns

PROTOCOLS = ("5k", "1k", "all")
SIDES = {"caption retrieval": "image→text", "image retrieval": "text→image"}
TIES_NOTE = (
    "ours: the expected value under uniformly random tie-breaking; "
    + ", ".join(f"'{col}': {rule}" for rule, col in TIE_COLUMNS.items())
    + " (docs/glossary.md#tie-rules). 1k: one row set per fold and their mean; image→text counts the best-ranked "
    "true caption."
)
EXAMPLE = """\
  orderlib eval retrieval --images tests/data/cli/retrieval_images.npy \\
      --captions tests/data/cli/retrieval_captions.npy --score order \\
      --protocol 1k 5k --fold-size 4 --out /tmp/orderlib-report
"""


def add(sub) -> None:
    p = add_parser(
        sub,
        "retrieval",
        "caption-image retrieval: R@1/5/10, median and mean rank, rsum",
        "Rank captions for each image and images for each caption; caption j belongs to image "
        "j // captions-per-image (the vsepp layout). Give embeddings (--images, --captions, --score) or "
        "a matrix (--matrix, --kind).",
        EXAMPLE,
    )
    g = p.add_argument_group("input")
    g.add_argument("--images", help="image embeddings (N, D): .npy, .npz, TSV/CSV (name, vector) or .jsonl")
    g.add_argument(
        "--captions",
        help="caption embeddings (captions-per-image x N, D) in image order; .jsonl / .npz may carry each "
        "caption's `image` (and `id`) instead",
    )
    g.add_argument("--score", choices=sorted(PENALTIES), default="order", help="penalty of embeddings (default order)")
    g.add_argument("--matrix", help="precomputed (N images, captions-per-image x N captions) matrix")
    add_kind(g, required=False)
    g.add_argument("--captions-per-image", type=int, default=5, help="(default 5)")
    e = p.add_argument_group("protocol")
    e.add_argument(
        "--protocol",
        nargs="+",
        choices=PROTOCOLS,
        default=["all"],
        help="1k: folds of --fold-size images, each and their mean; 5k: 5 x --fold-size images at once; "
        "all: every image at once (default all)",
    )
    e.add_argument("--fold-size", type=int, default=1000, help="images per 1k fold (default 1000)")
    add_output(p, "retrieval")
    p.set_defaults(run=run, command="eval retrieval")


def _matrix_penalty(matrix: torch.Tensor):
    """A penalty function over row-index "embeddings": evaluate_retrieval then reads the matrix."""

    def penalty(images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        rows, cols = images[:, 0].long(), captions[:, 0].long()
        return matrix[rows[:, None], cols[None, :]]

    return penalty


def _grouped_captions(caps: Embeddings, ims: Embeddings, per: int, images_path: str) -> np.ndarray:
    """Caption rows in image order, from captions that name their `image`."""
    if ims.names is None:
        raise InputError(images_path, "has no names, but the captions name their images")
    slot = {name: i for i, name in enumerate(ims.names)}
    groups: list[list[int]] = [[] for _ in ims.names]
    for row, (image, at) in enumerate(zip(caps.fields["image"], caps.where)):
        if image not in slot:
            raise InputError(caps.path, f"{at}: unknown image id {image!r} (not in {images_path})")
        groups[slot[image]].append(row)
    for name, rows in zip(ims.names, groups):
        if len(rows) != per:
            raise InputError(caps.path, f"image {name!r} has {len(rows)} captions, expected {per}")
    return np.concatenate([np.asarray(r, np.int64) for r in groups])


def load_embeddings(args) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(images (N, D), captions (per x N, D), inputs) from --images and --captions."""
    if not args.captions:
        raise InputError("--captions", "--images needs --captions")
    ims, caps = read_embeddings(args.images, "image id"), read_embeddings(args.captions, "caption id")
    per = args.captions_per_image
    if "image" in caps.fields:
        caps.vectors = caps.vectors[_grouped_captions(caps, ims, per, args.images)]
    if caps.vectors.shape[1] != ims.vectors.shape[1]:
        raise InputError(
            args.captions, f"{caps.vectors.shape[1]}-d captions, but {ims.vectors.shape[1]}-d images in {args.images}"
        )
    if len(caps.vectors) != per * len(ims.vectors):
        raise InputError(
            args.captions,
            f"{len(caps.vectors)} captions for {len(ims.vectors)} images in {args.images}: expected "
            f"{per} x {len(ims.vectors)} = {per * len(ims.vectors)}",
        )
    dtype = torch.float64 if np.float64 in (ims.vectors.dtype, caps.vectors.dtype) else torch.float32
    images = torch.as_tensor(ims.vectors).to(dtype)
    captions = torch.as_tensor(caps.vectors).to(dtype)
    return images, captions, {"images": args.images, "captions": args.captions}


def load_matrix(args) -> tuple[torch.Tensor, torch.Tensor, object, dict]:
    if args.kind is None:
        raise InputError(args.matrix, "--matrix needs --kind distance or --kind similarity")
    m = as_distance(read_matrix(args.matrix), args.kind)
    n, per = m.shape[0], args.captions_per_image
    if m.shape[1] != per * n:
        raise InputError(
            args.matrix, f"shape {tuple(m.shape)}: {m.shape[1]} captions for {n} images, expected {per} x {n}"
        )
    images = torch.arange(n, dtype=torch.float64)[:, None]
    captions = torch.arange(per * n, dtype=torch.float64)[:, None]
    return images, captions, _matrix_penalty(torch.as_tensor(m)), {"matrix": args.matrix}


def folds_of(protocol: str, n: int, fold_size: int, path: str) -> int:
    """How many equal folds `protocol` splits n images into (1 for 5k and all)."""
    if fold_size < 1:
        raise InputError(path, f"--fold-size must be >= 1, got {fold_size}")
    if protocol == "1k" and n % fold_size:
        raise InputError(path, f"{n} images do not split into folds of {fold_size} (--fold-size)")
    if protocol == "5k" and n != 5 * fold_size:
        raise InputError(
            path,
            f"{n} images; the 5k protocol takes 5 x {fold_size} (--fold-size) = {5 * fold_size}; use --protocol all",
        )
    return n // fold_size if protocol == "1k" else 1


def result_rows(method: str, protocol: str, fold: str, images: int, by_rule: dict) -> list[dict]:
    """Long rows of one evaluate_retrieval(..., ties=TIES) result."""
    base = dict(method=method, protocol=protocol, fold=fold, images=images)
    rows = [
        dict(
            base,
            direction=direction,
            metric=metric,
            paper=None,
            **tie_columns({rule: by_rule[rule][side][metric] for rule in TIES}),
        )
        for side, direction in SIDES.items()
        for metric in by_rule[PRIMARY_TIES][side]
    ]
    rows.append(
        dict(
            base,
            direction="both",
            metric="rsum",
            paper=None,
            **tie_columns({rule: by_rule[rule]["rsum"] for rule in TIES}),
        )
    )
    return rows


def evaluate(images, captions, penalty, per: int, protocol: str, folds: int, method: str) -> list[dict]:
    """Rows of one protocol: each fold, then their mean (1k), or all images at once."""
    n = images.shape[0]
    size = n // folds
    if protocol != "1k":
        return result_rows(method, protocol, "all", n, evaluate_retrieval(images, captions, penalty, per, ties=TIES))
    rows = []
    for f in range(folds):
        im, cap = images[f * size : (f + 1) * size], captions[f * size * per : (f + 1) * size * per]
        rows += result_rows(method, protocol, str(f + 1), size, evaluate_retrieval(im, cap, penalty, per, ties=TIES))
    mean = evaluate_retrieval(images, captions, penalty, per, folds, ties=TIES)
    return rows + result_rows(method, protocol, "mean", size, mean)


def run(args) -> Report:
    if bool(args.images) == bool(args.matrix):
        raise InputError("--images/--matrix", "give either --images and --captions, or --matrix")
    if args.captions_per_image < 1:
        raise InputError("--captions-per-image", f"must be >= 1, got {args.captions_per_image}")
    if args.matrix:
        images, captions, penalty, inputs = load_matrix(args)
        scoring = f"precomputed {args.kind} matrix"
    else:
        images, captions, inputs = load_embeddings(args)
        penalty, scoring = PENALTIES[args.score][0], f"{args.score} penalty of the embeddings (orderlib.encoders.joint)"
    where = args.matrix or args.images
    folds = {p: folds_of(p, images.shape[0], args.fold_size, where) for p in dict.fromkeys(args.protocol)}
    rows = []
    for protocol, k in folds.items():
        rows += evaluate(images, captions, penalty, args.captions_per_image, protocol, k, args.method)
    return Report(
        table=pd.DataFrame(rows),
        protocol=f"{', '.join(folds)} (fold size {args.fold_size}); {args.captions_per_image} captions per image; "
        f"scored by the {scoring}",
        ties=f"{PRIMARY_TIES} (ours); also {', '.join(TIE_COLUMNS.values())}",
        inputs=inputs,
        settings={
            "score": None if args.matrix else args.score,
            "kind": args.kind,
            "fold_size": args.fold_size,
            "captions_per_image": args.captions_per_image,
            "protocols": list(folds),
        },
        title=f"Caption-image retrieval: {args.method}",
        notes=TIES_NOTE,
    )
