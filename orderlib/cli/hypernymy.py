"""`orderlib eval hypernymy` and `orderlib train hypernymy`: Table 1 of Vendrov et al. (hypernym
prediction by an energy threshold chosen on dev) on your embeddings or your own DAG."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from orderlib.cli.common import add_output, add_parser
from orderlib.cli.inputs import index_names, read_embeddings, read_lines, read_rows
from orderlib.cli.report import Report
from orderlib.data.hypernymy import SPLIT_PROTOCOLS, closure_pairs, listed_pairs, make_splits
from orderlib.errors import InputError
from orderlib.eval.hypernymy import TIE_RULE, hypernymy_metrics, pair_energies, transitive_closure_accuracy
from orderlib.paths import slug

# The energies of orderlib.penalties.ENERGIES a hypernymy table's rows are scored by (low = "is a"):
# order (Eq. (2) of Vendrov et al.), cosine (the symmetric row), poincare (Table 1's Poincaré row,
# alpha 1) and cone (hyperbolic entailment cones, K = 0.1).
HYPERNYMY_ENERGIES = ("order", "cosine", "poincare", "cone")
LABELS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
PAIR_COLUMNS = ("hyponym", "hypernym", "label")
PROTOCOL = "positive iff E(hyponym, hypernym) <= tau, tau chosen on dev (best_threshold), applied to test"
EVAL_EXAMPLE = """\
  orderlib eval hypernymy --embeddings tests/data/cli/hypernymy_embeddings.npz \\
      --test tests/data/cli/hypernymy_test.tsv --dev tests/data/cli/hypernymy_dev.tsv \\
      --energy order --out /tmp/orderlib-report
"""
TRAIN_EXAMPLE = """\
  orderlib train hypernymy --edges tests/data/cli/hypernymy_edges.tsv --protocol clean \\
      --n-test 15 --n-dev 15 --epochs 30 --patience 30 --lr 0.1 --batch 25 --out /tmp/orderlib-train
"""


def add_eval(sub) -> None:
    p = add_parser(
        sub,
        "hypernymy",
        "hypernym prediction: accuracy at the dev-chosen threshold, AP, ROC",
        "Score labelled (hyponym, hypernym) pairs by an energy of their embeddings; choose the threshold "
        "on dev, report test accuracy, AP and ROC AUC, and the ROC points in <id>_roc.csv.",
        EVAL_EXAMPLE,
    )
    g = p.add_argument_group("input")
    g.add_argument("--embeddings", required=True, help="(V, D): .npz with `embeddings` and `names`, TSV, .jsonl, .npy")
    g.add_argument("--vocab", help="one name a line, row order of --embeddings (where it has no names)")
    g.add_argument("--test", required=True, help="TSV/CSV: hyponym, hypernym, label (1/0 or true/false)")
    g.add_argument("--dev", required=True, help="the same layout; chooses the threshold")
    g.add_argument("--energy", choices=sorted(HYPERNYMY_ENERGIES), default="order", help="(default order)")
    add_output(p, "hypernymy")
    p.set_defaults(run=run_eval, command="eval hypernymy")


def load_vocab(args) -> tuple[torch.Tensor, dict[str, int], str]:
    """(embeddings (V, D), name -> row, the file naming the rows)."""
    emb = read_embeddings(args.embeddings)
    if args.vocab:
        names, where = read_lines(args.vocab), args.vocab
        if len(names) != len(emb.vectors):
            raise InputError(args.vocab, f"{len(names)} names for {len(emb.vectors)} rows of {args.embeddings}")
    elif emb.names is not None:
        names, where = emb.names, args.embeddings
    else:
        raise InputError(args.embeddings, "has no names: give --vocab (one name a line)")
    return torch.as_tensor(emb.vectors), {n: i for i, n in enumerate(names)}, where


def read_pairs(path, vocab: dict[str, int], vocab_path: str) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (P, 2) rows of vocab, labels (P,) bool) of a labelled pairs file."""
    pairs, labels = [], []
    for no, (u, v, label) in read_rows(path, PAIR_COLUMNS):
        if label.lower() not in LABELS:
            raise InputError(path, f"line {no}: label {label!r}, expected 1/0 or true/false")
        pairs.append(index_names(path, [u, v], vocab, f"line {no}", vocab_path))
        labels.append(LABELS[label.lower()])
    return np.asarray(pairs, np.int64), np.asarray(labels, bool)


def _check_labels(path, labels: np.ndarray) -> None:
    if labels.all() or not labels.any():
        raise InputError(
            path, f"all {len(labels)} pairs are {'positive' if labels.all() else 'negative'}; needs both labels"
        )


def energies_of(x: torch.Tensor, pairs: np.ndarray, energy: str, path: str) -> np.ndarray:
    try:
        return pair_energies(x, pairs, energy)
    except InputError as exc:
        raise InputError(path, exc.what) from None


def run_eval(args) -> Report:
    x, vocab, vocab_path = load_vocab(args)
    splits = {}
    for split, path in (("dev", args.dev), ("test", args.test)):
        pairs, labels = read_pairs(path, vocab, vocab_path)
        _check_labels(path, labels)
        splits[split] = (energies_of(x, pairs, args.energy, path), labels)
    result = hypernymy_metrics(*splits["dev"], *splits["test"])
    inputs = {"embeddings": args.embeddings, "dev": args.dev, "test": args.test}
    if args.vocab:
        inputs["vocab"] = args.vocab
    return Report(
        table=pd.DataFrame(result.rows(args.method)),
        protocol=f"{PROTOCOL}; energy {args.energy}",
        ties=TIE_RULE,
        inputs=inputs,
        settings={"energy": args.energy},
        title=f"Hypernym prediction: {args.method}",
        notes="ROC points: <id>_roc.csv. AP: precision summed over recall steps, tied energies as one step.",
        extra={"_roc.csv": result.roc.to_csv(index=False).encode()},
    )


# --- train --------------------------------------------------------------------------------------


def add_train(sub) -> None:
    p = add_parser(
        sub,
        "hypernymy",
        "train a Table 1 model (order-embeddings by default) on your DAG",
        "Split the transitive closure of your child -> parent edges as Table 1 does (held-out positives, "
        "negatives by corrupting one side), train, choose the threshold on dev, and write the test "
        "numbers and <id>_embeddings.npz (names, embeddings). Checkpoints resume. Unset settings follow "
        "Table 1's settings, the paper's where it gives them (orderlib.concepts.rows).",
        TRAIN_EXAMPLE,
    )
    g = p.add_argument_group("input")
    g.add_argument("--edges", required=True, help="TSV/CSV of child, parent edges (names), a DAG")
    g.add_argument(
        "--protocol",
        choices=SPLIT_PROTOCOLS,
        default="paper",
        help="paper: listed pairs, unchecked negatives; clean: distinct pairs, verified negatives",
    )
    t = p.add_argument_group("training (default: Table 1's full preset)")
    t.add_argument("--model", default="order-embeddings", help="a Table 1 row (default order-embeddings)")
    for name, kind in (
        ("n-test", int),
        ("n-dev", int),
        ("split-seed", int),
        ("dim", int),
        ("batch", int),
        ("epochs", int),
        ("patience", int),
        ("lr", float),
        ("margin", float),
    ):
        t.add_argument(f"--{name}", type=kind, help="(default: the preset's)")
    t.add_argument("--seed", type=int, default=0, help="initialisation and training negatives (default 0)")
    t.add_argument("--device", default="cpu")
    t.add_argument("--checkpoints", help="checkpoint folder (default <out>/checkpoints)")
    t.add_argument("--quiet", action="store_true", help="no progress bars")
    add_output(p, "hypernymy_train", method=False)
    p.set_defaults(run=run_train, command="train hypernymy")


def read_edges(path) -> tuple[list[str], list[list[int]]]:
    """(names in first-seen order, parents of each) of a child, parent edge list; a DAG, no self-loops."""
    rows = read_rows(path, ("child", "parent"))
    index: dict[str, int] = {}
    for _, cells in rows:
        for name in cells:
            index.setdefault(name, len(index))
    parents: list[list[int]] = [[] for _ in index]
    seen: dict[tuple[int, int], int] = {}
    for no, (child, parent) in rows:
        c, q = index[child], index[parent]
        if c == q:
            raise InputError(path, f"line {no}: self-loop {child!r} -> {parent!r}")
        if (c, q) in seen:
            raise InputError(path, f"line {no}: duplicate edge {child!r} -> {parent!r} (line {seen[c, q]})")
        seen[c, q] = no
        parents[c].append(q)
    cycle = find_cycle(parents)
    if cycle:
        names = list(index)
        raise InputError(path, "cycle " + " -> ".join(repr(names[i]) for i in cycle) + ": the edges must form a DAG")
    return list(index), parents


def find_cycle(parents: list[list[int]]) -> list[int] | None:
    """A cycle of child -> parent steps (first node repeated at the end), or None."""
    state = [0] * len(parents)  # 0 new, 1 on the path, 2 done
    for start in range(len(parents)):
        if state[start]:
            continue
        path, stack = [], [(start, iter(parents[start]))]
        state[start] = 1
        path.append(start)
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state[nxt] == 1:
                return path[path.index(nxt) :] + [nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(parents[nxt])))
    return None


def train_table1_row(data, model: str, settings: dict, seed: int, device, checkpoint: Path, progress: bool):
    """Train one Table 1 row on `data` (orderlib.data.hypernymy.HypernymyData) with its settings
    (orderlib.concepts.rows) overridden by `settings` (None: the row's). Returns (ThresholdResult,
    state dict of the model, energies of data.dev, energies of data.test)."""
    from orderlib.concepts.rows import row_config, train_row  # the training stack loads for `train` only

    config = row_config(model, seed, **{k: v for k, v in settings.items() if v is not None})
    result = train_row(data, config, device, checkpoint, progress)
    energies = [
        result.model.energies(torch.as_tensor(p, device=device)).double().cpu().numpy() for p in (data.dev, data.test)
    ]
    state = {k: v.detach().cpu() for k, v in result.model.state_dict().items()}
    return result, state, *energies


def preset_defaults() -> dict:
    """The split settings of Table 1 (orderlib.concepts.rows.TABLE1_DEFAULTS)."""
    from orderlib.concepts.rows import TABLE1_DEFAULTS

    return {k: TABLE1_DEFAULTS[k] for k in ("n_test", "n_dev", "split_seed")}


def split_data(args, parents: list[list[int]]):
    split = preset_defaults()
    split.update({k: getattr(args, k) for k in split if getattr(args, k) is not None})
    pool = len(listed_pairs(parents)) if args.protocol == "paper" else len(closure_pairs(parents))
    if split["n_test"] < 1 or split["n_dev"] < 1 or split["n_test"] + split["n_dev"] >= pool:
        raise InputError(
            args.edges,
            f"{pool} positive pairs in the closure ({args.protocol} protocol); --n-test {split['n_test']} + "
            f"--n-dev {split['n_dev']} must be positive and leave some to train",
        )
    return make_splits(parents, args.protocol, split["n_test"], split["n_dev"], split["split_seed"]), split


def embeddings_npz(names: list[str], state: dict) -> bytes:
    """names, embeddings (the first per-node table) and every parameter under its own name."""
    arrays = {k: v.numpy() for k, v in state.items()}
    main = next((a for a in arrays.values() if a.ndim == 2 and len(a) == len(names)), None)
    buf = io.BytesIO()
    np.savez(buf, names=np.asarray(names), **({"embeddings": main} if main is not None else {}), **arrays)
    return buf.getvalue()


def run_train(args) -> Report:
    from orderlib.concepts.rows import FROM_SCRATCH

    learned = FROM_SCRATCH
    if args.model not in learned:
        raise InputError("--model", f"{args.model!r} is not one of Table 1's learned rows {learned}")
    names, parents = read_edges(args.edges)
    data, split = split_data(args, parents)
    ckpt_dir = Path(args.checkpoints or Path(args.out) / "checkpoints")
    checkpoint = ckpt_dir / f"{slug(args.model)}-seed{args.seed}.pt"
    settings = {k: getattr(args, k) for k in ("dim", "batch", "epochs", "patience", "lr", "margin")}
    result, state, e_dev, e_test = train_table1_row(
        data, args.model, settings, args.seed, torch.device(args.device), checkpoint, not args.quiet
    )
    metrics = hypernymy_metrics(e_dev, data.dev_labels, e_test, data.test_labels)
    closure = transitive_closure_accuracy(data)
    rows = metrics.rows(args.model) + [
        dict(method=args.model, split="dev", metric="best epoch", paper=None, ours=float(result.best_epoch)),
        dict(method=args.model, split="dev", metric="epochs run", paper=None, ours=float(len(result.history))),
        dict(method="transitive closure", split="test", metric="accuracy (%)", paper=None, ours=closure),
        *[dict(method="split", split="", metric=k, paper=None, ours=float(v)) for k, v in data.stats.items()],
    ]
    verb = "loaded from the checkpoint (not retrained)" if result.resumed else "trained"
    return Report(
        table=pd.DataFrame(rows),
        protocol=f"Table 1 ({args.protocol} protocol) on {args.edges}; {PROTOCOL}",
        ties=TIE_RULE,
        inputs={"edges": args.edges},
        settings={
            "model": args.model,
            "seed": args.seed,
            **split,
            **settings,
            "checkpoint": str(checkpoint),
            "loaded_from_checkpoint": bool(result.resumed),
            "train_seconds": round(result.seconds, 3),
        },
        title=f"Hypernym prediction on {Path(args.edges).name}: {args.model}",
        notes="Embeddings: <id>_embeddings.npz (names, embeddings); ROC points: <id>_roc.csv.",
        extra={"_roc.csv": metrics.roc.to_csv(index=False).encode(), "_embeddings.npz": embeddings_npz(names, state)},
        info=[f"{args.model}: {verb}, {len(result.history)} epochs; checkpoint {checkpoint}"],
    )
