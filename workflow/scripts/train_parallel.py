"""Train a notebook's models data-parallel over the processes torchrun starts (one per GPU), into the
checkpoints the notebook reads; the notebook, run afterwards with the same parameters, loads them.

    torchrun --nproc_per_node=4 workflow/scripts/train_parallel.py retrieval --preset full
    torchrun --nproc_per_node=4 workflow/scripts/train_parallel.py snli --preset full

`retrieval` is notebooks/03 (Table 2), `snli` notebooks/02 (Table 3); the options are the
notebooks' parameters. Without torchrun it trains in one process (docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from orderlib import distributed as ddp
from orderlib import precision
from orderlib.params import ParameterError, validate
from orderlib.runs import run_paths


def _first() -> bool:
    """Whether this is torchrun's process 0 (or the only process), group or no group yet."""
    return os.environ.get("RANK", "0") == "0"


def retrieval(args, device, distributed: bool) -> dict:
    """Notebook 03's models: {method: result}."""
    from orderlib.experiments import oe_retrieval as exp

    rows = exp.check_parameters(
        PRESET=args.preset, MATMUL=args.matmul, DATA=args.data, DATA_DIR=args.data_dir, ROWS=args.rows
    )["ROWS"]
    cfg = {**exp.PRESETS[args.preset], "data": args.data, **({"rows": rows} if rows else {})}  # as notebook 03
    cfg["matmul"] = precision.use(args.matmul, device)
    paths = run_paths(f"oe_retrieval_{args.data}", args.preset)
    ex = exp.run(cfg, device, paths.checkpoints, args.data_dir, rows=[], progress=_first())
    with ddp.process_group(device) if distributed else contextlib.nullcontext():
        trained = exp.train_rows(ex.data, cfg, device, paths.checkpoints, progress=_first(), distributed=distributed)
        return {m: (r, paths.checkpoints) for m, r in trained.results.items()}


def snli(args, device, distributed: bool) -> dict:
    """Notebook 02's models: {"dataset: model": result}."""
    from orderlib.experiments import oe_snli as exp

    validate(exp.PARAMETERS, PRESET=args.preset, MATMUL=args.matmul, DATA=args.data, DATA_DIR=args.data_dir)
    cfg = {**exp.PRESETS[args.preset], "data": args.data}  # as notebook 02
    cfg["matmul"] = precision.use(args.matmul, device)
    if args.data == "official":
        cfg["datasets"] = ["snli"]
    paths = run_paths("oe_table3_snli", args.preset)
    out = {}
    with ddp.process_group(device) if distributed else contextlib.nullcontext():
        for ds in cfg["datasets"]:
            run = exp.run_dataset(ds, cfg, device, paths.checkpoints, args.data_dir, _first(), distributed)
            out.update({f"{ds}: {m}": (r, paths.checkpoints) for m, r in run["results"].items()})
    return out


NOTEBOOKS = {
    "retrieval": (retrieval, "scenes", ["scenes", "precomp"], "notebooks/03_oe_table2_retrieval.ipynb"),
    "snli": (snli, "embedded", ["embedded", "official"], "notebooks/02_oe_table3_snli.ipynb"),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node=N workflow/scripts/train_parallel.py", description=__doc__.split("\n\n")[0]
    )
    sub = p.add_subparsers(dest="notebook", required=True)
    for name, (_, data, choices, notebook) in NOTEBOOKS.items():
        s = sub.add_parser(name, help=f"the models of {notebook}")
        s.add_argument("--preset", default="small", help="the notebook's PRESET: small or full (default small)")
        s.add_argument("--data", default=data, choices=choices, help=f"the notebook's DATA (default {data})")
        s.add_argument("--data-dir", default=None, help="the notebook's DATA_DIR")
        s.add_argument(
            "--device",
            default="auto",
            choices=["auto", "cpu", "cuda"],
            help="cuda: each process takes cuda:LOCAL_RANK (NCCL); cpu: gloo (default: cuda if available)",
        )
        s.add_argument(
            "--matmul", default="fp32", help="the notebook's MATMUL: fp32, bf16, tf32 or auto (default fp32)"
        )
        if name == "retrieval":
            s.add_argument("--rows", default=None, help="the notebook's ROWS: methods to train, 'a,b' (default all)")
    return p


def main(argv=None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    distributed = ddp.launched()
    try:
        results = NOTEBOOKS[args.notebook][0](args, ddp.local_device(args.device), distributed)
    except ParameterError as exc:  # a bad option, found before any work
        cli.error(str(exc))
    if _first():
        processes = os.environ["WORLD_SIZE"] if distributed else "1"
        for name, (r, folder) in results.items():
            how = "loaded, already trained" if r.resumed else f"trained on {processes} process(es)"
            print(f"{name}: {how}; best epoch {r.best_epoch}, {r.seconds / 60:.1f} min; checkpoint in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
