"""Install the datasets this project can reach: `python -m orderlib.setup_data [wordnet ...]`."""

from __future__ import annotations

import argparse
import sys

from orderlib.data.entailment import ensure_entailment
from orderlib.data.fashion_mnist import ensure_fashion_mnist, load_fashion_mnist
from orderlib.data.wordnet import ensure_wordnet, load_noun_graph
from orderlib.paths import DataError, data_root


def setup_wordnet() -> list[str]:
    lines = []
    for version in ("3.0", "3.1"):
        path = ensure_wordnet(version)
        g = load_noun_graph(version)  # builds the cached graph once
        lines.append(f"WordNet {version}: {path} ({len(g.names):,} noun synsets, {g.n_edges:,} edges, from {g.source})")
    return lines


def setup_fashion_mnist() -> list[str]:
    path, source = ensure_fashion_mnist()
    n = {s: len(load_fashion_mnist(s)) for s in ("train", "test")}
    return [f"Fashion-MNIST: {path} ({n['train']:,} train + {n['test']:,} test images, from {source})"]


TARGETS = {"wordnet": setup_wordnet, "fashion-mnist": setup_fashion_mnist, "entailment": ensure_entailment}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "targets", nargs="*", metavar="TARGET", help=f"what to install: {', '.join(TARGETS)} (default: all)"
    )
    args = ap.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {unknown}; expected {list(TARGETS)}")
    print(f"data root: {data_root()}  (set ORDERLIB_DATA to change it)")
    try:
        for t in args.targets or list(TARGETS):
            for line in TARGETS[t]():
                print(line)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
