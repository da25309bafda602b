"""`orderlib eval retrieval`: caption-image retrieval (Table 2 of Vendrov et al.; VSE++'s protocol)
from embeddings or a precomputed (images x captions) matrix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from orderlib.cli.common import add_kind, add_output, add_parser
from orderlib.cli.inputs import Embeddings, read_embeddings, read_matrix
from orderlib.cli.report import Report
from orderlib.errors import InputError
from orderlib.eval.retrieval import (
    PRIMARY_TIES,
    RETRIEVAL_PROTOCOLS,
    TIE_COLUMNS,
    retrieval_metrics,
    retrieval_metrics_of_embeddings,
)
from orderlib.penalties import MATRIX_ENERGIES

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
    g.add_argument(
        "--score", choices=sorted(MATRIX_ENERGIES), default="order", help="penalty of embeddings (default order)"
    )
    g.add_argument("--matrix", help="precomputed (N images, captions-per-image x N captions) matrix")
    add_kind(g, required=False)
    g.add_argument("--captions-per-image", type=int, default=5, help="(default 5)")
    e = p.add_argument_group("protocol")
    e.add_argument(
        "--protocol",
        nargs="+",
        choices=RETRIEVAL_PROTOCOLS,
        default=["all"],
        help="1k: folds of --fold-size images, each and their mean; 5k: 5 x --fold-size images at once; "
        "all: every image at once (default all)",
    )
    e.add_argument("--fold-size", type=int, default=1000, help="images per 1k fold (default 1000)")
    add_output(p, "retrieval")
    p.set_defaults(run=run, command="eval retrieval")


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


def load_matrix(args) -> tuple[np.ndarray, dict]:
    if args.kind is None:
        raise InputError(args.matrix, "--matrix needs --kind distance or --kind similarity")
    m = read_matrix(args.matrix)
    n, per = m.shape[0], args.captions_per_image
    if m.shape[1] != per * n:
        raise InputError(
            args.matrix, f"shape {tuple(m.shape)}: {m.shape[1]} captions for {n} images, expected {per} x {n}"
        )
    return m, {"matrix": args.matrix}


def results(args) -> tuple[list, dict, str]:
    """The RetrievalResult of each protocol asked for, the inputs and how the pairs were scored."""
    where = args.matrix or args.images
    if args.fold_size < 1:
        raise InputError(where, f"--fold-size must be >= 1, got {args.fold_size}")
    if args.matrix:
        m, inputs = load_matrix(args)
        scoring = f"precomputed {args.kind} matrix"
        evaluate = lambda protocol: retrieval_metrics(m, args.kind, args.captions_per_image, protocol, args.fold_size)
    else:
        images, captions, inputs = load_embeddings(args)
        scoring = f"{args.score} penalty of the embeddings (orderlib.encoders.joint)"
        evaluate = lambda protocol: retrieval_metrics_of_embeddings(
            images, captions, args.score, args.captions_per_image, protocol, args.fold_size
        )
    out = []
    for protocol in dict.fromkeys(args.protocol):
        try:
            out.append(evaluate(protocol))
        except InputError as exc:  # the protocol does not fit the images: name the file and the option
            raise InputError(where, f"{exc.what} (--fold-size {args.fold_size}, --protocol {protocol})") from None
    return out, inputs, scoring


def run(args) -> Report:
    if bool(args.images) == bool(args.matrix):
        raise InputError("--images/--matrix", "give either --images and --captions, or --matrix")
    if args.captions_per_image < 1:
        raise InputError("--captions-per-image", f"must be >= 1, got {args.captions_per_image}")
    protocols, inputs, scoring = results(args)
    rows = [row for r in protocols for row in r.rows(args.method)]
    return Report(
        table=pd.DataFrame(rows),
        protocol=f"{', '.join(r.protocol for r in protocols)} (fold size {args.fold_size}); "
        f"{args.captions_per_image} captions per image; scored by the {scoring}",
        ties=f"{PRIMARY_TIES} (ours); also {', '.join(TIE_COLUMNS.values())}",
        inputs=inputs,
        settings={
            "score": None if args.matrix else args.score,
            "kind": args.kind,
            "fold_size": args.fold_size,
            "captions_per_image": args.captions_per_image,
            "protocols": [r.protocol for r in protocols],
        },
        title=f"Caption-image retrieval: {args.method}",
        notes=TIES_NOTE,
    )
