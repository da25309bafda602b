"""Sentence pairs for textual entailment (Section 5 of Vendrov et al.): SNLI and SICK.

Two layouts are read:
- the official SNLI 1.0 release, `snli_1.0_{train,dev,test}.jsonl`, fields `sentence1`
  (premise), `sentence2` (hypothesis), `gold_label`;
- the TSV layout `premise<TAB>hypothesis<TAB>label` with label 0 = entailment, 1 = neutral,
  2 = contradiction (this workplace's `../shared/data/{snli,sick}/{split}.tsv`).

Two-class mapping as in the paper (Section 5.2): entailment is positive; neutral and
contradiction are negative. Pairs whose official gold label is '-' (no annotator consensus)
are dropped by default, as the official evaluations and the shared TSVs do; the authors' code
kept them as negatives (`no_consensus="negative"` does that).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orderlib.paths import DataError, data_root, repo_root, text_lines

LABELS = ("entailment", "neutral", "contradiction", "-")  # codes 0..3; 3 = no consensus
DATASETS = {  # name -> (file pattern, reader)
    "snli": "{split}.tsv",
    "sick": "{split}.tsv",
    "snli_1.0": "snli_1.0_{split}.jsonl",
}
SOURCES = {
    "snli": "SNLI 1.0 (Bowman et al., 2015), CC BY-SA 4.0: https://nlp.stanford.edu/projects/snli/",
    "sick": "SICK (Marelli et al., 2014), CC BY-NC-SA 3.0: SemEval-2014 task 1",
    "snli_1.0": "SNLI 1.0 official release: https://nlp.stanford.edu/projects/snli/snli_1.0.zip",
}
_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens without punctuation ("The man's cart." -> the, man, s, cart), so the
    official jsonl and the preprocessed TSVs tokenize alike."""
    return _TOKEN.findall(text.lower())


@dataclass
class PairSet:
    premises: list[str]
    hypotheses: list[str]
    labels: np.ndarray  # (n,) int8 codes into LABELS
    source: str

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def positive(self) -> np.ndarray:
        """(n,) bool: entailment is the positive class; everything else is negative."""
        return self.labels == 0

    def subset(self, idx) -> "PairSet":
        idx = np.asarray(idx)
        return PairSet([self.premises[i] for i in idx], [self.hypotheses[i] for i in idx],
                       self.labels[idx], self.source)

    def label_counts(self) -> dict[str, int]:
        return {name: int((self.labels == i).sum()) for i, name in enumerate(LABELS) if (self.labels == i).any()}


def read_pairs_tsv(path: str | Path) -> PairSet:
    """Read `premise<TAB>hypothesis<TAB>label` lines (label 0/1/2); errors name file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    prem, hyp, lab = [], [], []
    for no, line in enumerate(text_lines(path, "premise<TAB>hypothesis<TAB>label lines"), 1):
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise DataError(f"{path}:{no}: expected 3 tab-separated fields, found {len(parts)}")
        if parts[2] not in ("0", "1", "2"):
            raise DataError(f"{path}:{no}: label must be 0, 1 or 2, found {parts[2]!r}")
        prem.append(parts[0])
        hyp.append(parts[1])
        lab.append(int(parts[2]))
    if not lab:
        raise DataError(f"{path}: no sentence pairs")
    return PairSet(prem, hyp, np.asarray(lab, dtype=np.int8), str(path))


def read_snli_jsonl(path: str | Path, no_consensus: str = "drop") -> PairSet:
    """Read an official `snli_1.0_*.jsonl` file; no_consensus is "drop" or "negative" for '-' labels."""
    if no_consensus not in ("drop", "negative"):
        raise ValueError(f"no_consensus must be 'drop' or 'negative', got {no_consensus!r}")
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    prem, hyp, lab = [], [], []
    for no, line in enumerate(text_lines(path, "SNLI jsonl records"), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{no}: not a JSON object ({exc.msg})") from None
        missing = [k for k in ("sentence1", "sentence2", "gold_label") if not isinstance(rec, dict) or k not in rec]
        if missing:
            raise DataError(f"{path}:{no}: missing field(s) {', '.join(missing)}")
        if rec["gold_label"] not in LABELS:
            raise DataError(f"{path}:{no}: unknown gold_label {rec['gold_label']!r}")
        code = LABELS.index(rec["gold_label"])
        if code == 3 and no_consensus == "drop":
            continue
        prem.append(rec["sentence1"])
        hyp.append(rec["sentence2"])
        lab.append(code)
    if not lab:
        raise DataError(f"{path}: no sentence pairs")
    return PairSet(prem, hyp, np.asarray(lab, dtype=np.int8), str(path))


def dataset_dir(name: str, root: str | Path | None = None) -> Path:
    """Return the directory of dataset `name`: <root>/<name> when a root is given, else
    <data root>/<name>, $ORDERLIB_SHARED_DATA/<name>, or this workplace's read-only
    `../shared/data/<name>` beside the checkout. Never copies anything."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    candidates = [Path(root) / name] if root else [
        data_root() / name, repo_root().parent / "shared" / "data" / name]
    env = os.environ.get("ORDERLIB_SHARED_DATA")
    if env and not root:
        candidates.insert(1, Path(env) / name)
    for c in candidates:
        if c.is_dir():
            return c
    raise DataError(f"dataset {name!r} not found; looked in: {', '.join(map(str, candidates))}. "
                    f"Get it from {SOURCES[name]} and put it in {data_root() / name} "
                    f"(or set ORDERLIB_SHARED_DATA to a folder that holds {name}/).")


def load_split(name: str, split: str, root: str | Path | None = None, **kw) -> PairSet:
    """Load one split ("train", "dev", "test") of "snli" or "sick" (TSV) or "snli_1.0" (jsonl),
    from <root>/<name>/ when a root is given (see `dataset_dir`)."""
    path = dataset_dir(name, root) / DATASETS[name].format(split=split)
    if not path.is_file():
        raise DataError(f"{path}: no such file (dataset {name!r}, split {split!r})")
    return read_snli_jsonl(path, **kw) if path.suffix == ".jsonl" else read_pairs_tsv(path)


def holdout_split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (train indices, held-out indices): a seeded random `fraction` held out."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    perm = np.random.default_rng(seed).permutation(n)
    k = max(1, int(round(n * fraction)))
    return np.sort(perm[k:]), np.sort(perm[:k])
