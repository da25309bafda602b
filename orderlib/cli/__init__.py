"""The `orderlib` command: the papers' evaluation protocols on your own embeddings and scores.

    orderlib eval retrieval | hypernymy | compositional | facts ...
    orderlib train hypernymy --edges FILE ...

Each command reads plain files and writes `<out>/<id>.csv` (long format), `<id>.md` and
`<id>.meta.json` (protocol, tie rule, input hashes, versions) atomically; bad input is one line on
stderr, `orderlib: error: <file>: <what>`, exit status 2, and nothing written. docs/your_data.md.
"""

from __future__ import annotations

import argparse
import sys
import time

from orderlib.cli import compositional, facts, hypernymy, retrieval
from orderlib.cli.inputs import InputError
from orderlib.cli.report import check_id, check_out, meta, write


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orderlib",
        description="The evaluation protocols of Order-Embeddings, DeViSE/Utama, VSE++/MIT-States and "
        "Sherlock on your own files (docs/your_data.md).",
    )
    top = parser.add_subparsers(dest="group", required=True, metavar="{eval,train}")
    ev = top.add_parser("eval", help="evaluate embeddings or scores").add_subparsers(
        dest="what", required=True, metavar="{retrieval,hypernymy,compositional,facts}"
    )
    retrieval.add(ev)
    hypernymy.add_eval(ev)
    compositional.add(ev)
    facts.add(ev)
    tr = top.add_parser("train", help="train a model on your data").add_subparsers(
        dest="what", required=True, metavar="{hypernymy}"
    )
    hypernymy.add_train(tr)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status (2: bad input, nothing written)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    try:
        check_id(args.id)
        check_out(args.out)  # absent or a folder, and writable (tried for real); nothing is left behind
        if getattr(args, "checkpoints", None):  # train: a folder too, checked before any training
            check_out(args.checkpoints)
        report = args.run(args)
        record = meta(report, args.id, f"orderlib {args.command}", argv, time.perf_counter() - t0)
        paths = write(report, args.out, args.id, record)
    except InputError as exc:
        print(f"orderlib: error: {exc.path}: {exc.what}", file=sys.stderr)
        return 2
    for line in report.info:
        print(line, file=sys.stderr)
    print(paths[1].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return 0
