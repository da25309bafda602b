"""`orderlib eval facts`: Sherlock's bi-directional fact retrieval (Table 4 of Elhoseiny et al.),
`strict` and `implied`, from an (images x facts) distance or score matrix."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orderlib.cli.common import add_kind, add_output, add_parser
from orderlib.cli.inputs import read_ints, read_matrix, read_rows
from orderlib.cli.report import Report
from orderlib.data.facts import Fact
from orderlib.errors import InputError
from orderlib.eval.facts import fact_retrieval

WILDCARD = ("", "*", "-")
FACT_COLUMNS = ("order", "S", "P", "O")
EXAMPLE = """\
  orderlib eval facts --matrix tests/data/cli/facts_distances.npy --kind distance \\
      --facts tests/data/cli/facts.tsv --labels tests/data/cli/facts_labels.txt --out /tmp/orderlib-report
"""


def add(sub) -> None:
    p = add_parser(
        sub,
        "facts",
        "structured facts: K1/K5/K10, mAP and mAP@100, strict and implied",
        "Image -> fact K@k and fact -> image mAP under Sherlock's two scripts: strict (the annotated fact "
        "only) and implied (an image's implied lower-order facts true too; per-fact scores).",
        EXAMPLE,
    )
    g = p.add_argument_group("input")
    g.add_argument("--matrix", required=True, help="(N images, F facts): .npy, .npz or CSV/TSV numbers")
    add_kind(g)
    g.add_argument("--facts", required=True, help="TSV/CSV, one fact a line: order (1-3), S, P, O; '*' = no slot")
    g.add_argument("--labels", required=True, help="each image's fact (row of --facts), one a line, or .npy")
    add_output(p, "facts")
    p.set_defaults(run=run, command="eval facts")


def read_facts(path) -> list[Fact]:
    """Facts of order 1 (<S>), 2 (<S,P>), 3 (<S,P,O>): the slots up to the order filled, the rest '*'."""
    facts, seen = [], {}
    for no, (order, *slots) in read_rows(path, FACT_COLUMNS):
        if order not in ("1", "2", "3"):
            raise InputError(path, f"line {no}: order {order!r}, expected 1, 2 or 3")
        k = int(order)
        filled = [s not in WILDCARD for s in slots]
        if filled != [i < k for i in range(3)]:
            raise InputError(path, f"line {no}: order {k} needs the first {k} of S, P, O filled and the rest '*'")
        fact = Fact(*[s if f else None for s, f in zip(slots, filled)])
        if fact in seen:
            raise InputError(path, f"line {no}: duplicate fact {fact} (line {seen[fact]})")
        seen[fact] = no
        facts.append(fact)
    return facts


def load(args) -> tuple[np.ndarray, list[Fact], np.ndarray]:
    """(matrix (N, F), facts, each image's fact (N,))."""
    facts = read_facts(args.facts)
    m = read_matrix(args.matrix)
    if m.shape[1] != len(facts):
        raise InputError(
            args.matrix, f"shape {tuple(m.shape)}: {m.shape[1]} columns for {len(facts)} facts in {args.facts}"
        )
    labels = read_ints(args.labels, len(facts), "fact")
    if len(labels) != m.shape[0]:
        raise InputError(args.labels, f"{len(labels)} labels for {m.shape[0]} images (rows of {args.matrix})")
    if args.kind == "distance" and (m < 0).any():
        raise InputError(
            args.matrix,
            f"{int((m < 0).sum())} negative distances; `implied` reads distances as squared distances (>= 0): "
            "give scores with --kind similarity",
        )
    return m, facts, labels


def run(args) -> Report:
    m, facts, labels = load(args)
    # `implied` scores similarities as they are (the script's `dot`), distances by its per-fact `euc`.
    scoring = "dot" if args.kind == "similarity" else "euc"
    table = pd.DataFrame(fact_retrieval(m, facts, labels, args.kind, scoring=scoring).rows(args.method))
    n_images = np.bincount(labels, minlength=len(facts))
    return Report(
        table=table,
        protocol="Sherlock's strict (GetSherlockResults.m) and implied (GetSherlockResults_notharsh_v2.m); "
        "image -> fact K1/K5/K10 among all facts and among the image's order; fact -> image mAP, mAP@100; "
        f"implied scores: {'the similarities (dot)' if args.kind == 'similarity' else 'per-fact euc of the distances'}",
        ties="strict K@k: expected (a target tied with j others is 1 / (j + 1) of a hit); implied K@k and AP: "
        "by index (a stable sort)",
        inputs={"matrix": args.matrix, "facts": args.facts, "labels": args.labels},
        settings={
            "kind": args.kind,
            "facts": len(facts),
            "images": int(len(labels)),
            "facts with test images": int((n_images > 0).sum()),
        },
        title=f"Fact retrieval: {args.method}",
        notes="Percentages (docs/glossary.md#kk, #map-and-ap100, #strict-and-implied).",
    )
