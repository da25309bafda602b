"""Sentence pairs for textual entailment (Section 5 of Vendrov et al.): SNLI and SICK.

Reads the official releases (SNLI 1.0's jsonl, SICK.txt) and TSV copies (`premise<TAB>hypothesis<TAB>label`,
0/1/2 = entailment/neutral/contradiction). Entailment is the positive class (Section 5.2). Pairs whose
gold label is '-' (no annotator consensus) are dropped by default, as the official evaluations do; the
authors' code kept them as negatives (`no_consensus="negative"`). Downloads are refused unless the
archive's SHA-256 is the published one.
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
    "sick_official": "SICK.txt",  # one file, splits in its SemEval_set column
}
OFFICIAL = {"snli": "snli_1.0", "sick": "sick_official"}  # the release each TSV copy was made from
RELEASES = {  # name -> (URL, the archive's SHA-256, members to extract, by their path in the archive)
    "snli_1.0": (
        "https://nlp.stanford.edu/projects/snli/snli_1.0.zip",
        # 94,550,081 bytes; the same hash in ParlAI (parlai/tasks/snli/build.py) and HuggingFace
        # datasets (datasets/snli/urls_checksums/checksums.txt)
        "sha256:afb3d70a5af5d8de0d9d81e2637e0fb8c22d1235c2749d83125ca43dab0dbd3e",
        [f"snli_1.0/snli_1.0_{s}.jsonl" for s in ("train", "dev", "test")],
    ),
    "sick_official": (
        "https://zenodo.org/records/2787612/files/SICK.zip",
        # 217,584 bytes; from HuggingFace datasets (datasets/sick/dataset_infos.json, download_checksums)
        "sha256:da272af924399fc2de4889ed55383e38822c10d16c4a949a89d597d09a0b7912",
        ["SICK.txt"],
    ),
}
SICK_SPLITS = {"train": "TRAIN", "dev": "TRIAL", "test": "TEST"}  # SemEval-2014's names
SOURCES = {
    "snli": "SNLI 1.0 (Bowman et al., 2015), CC BY-SA 4.0: https://nlp.stanford.edu/projects/snli/",
    "sick": "SICK (Marelli et al., 2014), CC BY-NC-SA 3.0: SemEval-2014 task 1",
    "snli_1.0": "SNLI 1.0 official release: https://nlp.stanford.edu/projects/snli/snli_1.0.zip",
    "sick_official": "SICK official release (SICK.txt): https://zenodo.org/records/2787612/files/SICK.zip",
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

    def subset(self, idx) -> PairSet:
        idx = np.asarray(idx)
        return PairSet(
            [self.premises[i] for i in idx], [self.hypotheses[i] for i in idx], self.labels[idx], self.source
        )

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


def read_sick_txt(path: str | Path, split: str) -> PairSet:
    """Read one split of SICK's release file `SICK.txt` (tab-separated with a header: sentence_A,
    sentence_B, entailment_label, ..., SemEval_set of TRAIN / TRIAL / TEST), as released."""
    if split not in SICK_SPLITS:
        raise ValueError(f"unknown SICK split {split!r}; expected one of {sorted(SICK_SPLITS)}")
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    lines = text_lines(path, "SICK.txt lines")
    head = lines[0].split("\t") if lines else []
    need = ("sentence_A", "sentence_B", "entailment_label", "SemEval_set")
    missing = [c for c in need if c not in head]
    if missing:
        raise DataError(f"{path}:1: header lacks column(s) {', '.join(missing)} (is this SICK.txt?)")
    col = {c: head.index(c) for c in need}
    prem, hyp, lab = [], [], []
    for no, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < len(head):
            raise DataError(f"{path}:{no}: expected {len(head)} tab-separated fields, found {len(parts)}")
        if parts[col["SemEval_set"]] != SICK_SPLITS[split]:
            continue
        label = parts[col["entailment_label"]].lower()
        if label not in LABELS[:3]:
            raise DataError(f"{path}:{no}: unknown entailment_label {parts[col['entailment_label']]!r}")
        prem.append(parts[col["sentence_A"]])
        hyp.append(parts[col["sentence_B"]])
        lab.append(LABELS.index(label))
    if not lab:
        raise DataError(f"{path}: no sentence pairs in split {SICK_SPLITS[split]}")
    return PairSet(prem, hyp, np.asarray(lab, dtype=np.int8), f"{path}[{SICK_SPLITS[split]}]")


def dataset_dir(name: str, root: str | Path | None = None) -> Path:
    """Return the directory of dataset `name`: <root>/<name> when a root is given, else
    <data root>/<name>, $ORDERLIB_SHARED_DATA/<name>, or a read-only
    `shared/data/<name>` folder beside the checkout. Never copies anything."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    candidates = [Path(root) / name] if root else [data_root() / name, repo_root().parent / "shared" / "data" / name]
    env = os.environ.get("ORDERLIB_SHARED_DATA")
    if env and not root:
        candidates.insert(1, Path(env) / name)
    for c in candidates:
        if c.is_dir():
            return c
    raise DataError(
        f"dataset {name!r} not found; looked in: {', '.join(map(str, candidates))}. {how_to_get(name, root=root)}"
    )


def how_to_get(*names: str, root: str | Path | None = None) -> str:
    """Where to download each dataset's official release and where to put it (in `root`, default the
    data root), then the shared-folder variable: for messages to users outside the project."""
    where = Path(root) if root else data_root()
    releases = list(dict.fromkeys(OFFICIAL.get(n, n) for n in names))
    steps = [
        f"get SNLI 1.0 (snli_1.0.zip) from https://nlp.stanford.edu/projects/snli/ and unzip it in {where} "
        f"(it holds snli_1.0/)"
        if r == "snli_1.0"
        else f"get SICK (SemEval-2014 Task 1: SICK.zip from https://zenodo.org/records/2787612) and put its "
        f"SICK.txt in {where / r}/"
        for r in releases
    ]
    get = "; ".join(steps)
    get = f"{get[0].upper()}{get[1:]}."
    if root:  # a folder given explicitly: neither `make data` nor the variable applies
        return get
    tsv = ", ".join(f"{n}/" for n in dict.fromkeys(n for n in names if n in OFFICIAL))
    return (
        f"{get} `make data` does this where the network allows (data root: $ORDERLIB_DATA, "
        f"else data/). Or set ORDERLIB_SHARED_DATA to a folder that already holds "
        f"{', '.join(f'{r}/' for r in releases)}{f' or the {tsv} TSV copies' if tsv else ''}."
    )


def load_split(name: str, split: str, root: str | Path | None = None, **kw) -> PairSet:
    """Load one split ("train", "dev", "test") of "snli" or "sick" (TSV) or "snli_1.0" (jsonl),
    from <root>/<name>/ when a root is given (see `dataset_dir`)."""
    path = dataset_dir(name, root) / DATASETS[name].format(split=split)
    if not path.is_file():
        raise DataError(f"{path}: no such file (dataset {name!r}, split {split!r})")
    if name == "sick_official":
        return read_sick_txt(path, split)
    return read_snli_jsonl(path, **kw) if path.suffix == ".jsonl" else read_pairs_tsv(path)


def available(name: str, root: str | Path | None = None) -> str | None:
    """Return which copy of "snli" or "sick" is present (the TSV name or its official release's), or None."""
    for candidate in (name, OFFICIAL[name]):
        try:
            dataset_dir(candidate, root)
            return candidate
        except DataError:
            continue
    return None


def load_pairs(name: str, split: str, root: str | Path | None = None) -> PairSet:
    """Load a split of "snli" (dev, test) or "sick" (train, dev, test) from the TSV copies where they
    are, else from the official release as released (same pairs: '-' labels dropped, SICK's TRIAL
    set as dev); the tokenizer treats both alike."""
    found = available(name, root)
    if found is None:
        raise DataError(
            f"{name}: neither the TSV copies ({name}/) nor the official release "
            f"({OFFICIAL[name]}/) found. {how_to_get(name, root=root)}"
        )
    return load_split(found, split, root)


def download_release(name: str, dest_root: Path, url: str | None = None, timeout: float = 60.0) -> Path:
    """Download an official release's zip with pooch, refuse it unless its SHA-256 is the one in
    RELEASES, and extract its data files into `dest_root/<name>/`; return that folder. Everything is
    staged in a temporary folder under dest_root, so a failure leaves nothing behind. `url` may name
    a mirror or a local copy (file://) of the same archive."""
    import shutil
    import tempfile
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    import pooch

    official, known_hash, members = RELEASES[name]
    url = url or official
    if url.startswith("file:"):  # pooch fetches http(s), ftp and doi only
        downloader = lambda u, out, _: shutil.copyfile(url2pathname(urlparse(u).path), out)
    else:
        downloader = pooch.HTTPDownloader(timeout=timeout)
    dest_root = Path(dest_root)
    dest_root.mkdir(parents=True, exist_ok=True)
    log, level = pooch.get_logger(), pooch.get_logger().level
    log.setLevel("WARNING")  # pooch logs every download to stderr
    try:
        with tempfile.TemporaryDirectory(dir=dest_root, prefix=f".{name}-") as tmp:
            try:
                pooch.retrieve(
                    url,
                    known_hash,
                    fname=Path(official).name,
                    path=tmp,
                    processor=pooch.Unzip(members=members, extract_dir="unzipped"),
                    downloader=downloader,
                )
            except ValueError as exc:  # pooch: the hash does not match
                raise DataError(f"{url}: {exc}") from None
            lacking = [m for m in members if not (Path(tmp) / "unzipped" / m).is_file()]
            if lacking:
                raise DataError(f"{url}: the archive lacks {', '.join(lacking)}")
            out_dir = Path(tmp) / name
            out_dir.mkdir()
            for m in members:
                (Path(tmp) / "unzipped" / m).rename(out_dir / Path(m).name)
            if (dest_root / name).exists():
                shutil.rmtree(dest_root / name)
            out_dir.rename(dest_root / name)
    finally:
        log.setLevel(level)
    return dest_root / name


def ensure_entailment(root: Path | None = None) -> list[str]:
    """Find SNLI and SICK (TSV copies or official releases), downloading the official releases into
    the data root where the network allows; return one line per dataset (never fails: Table 3's
    notebook is skipped by `make test` without them)."""
    lines = []
    for name in ("snli", "sick"):
        found = available(name)
        if found is None:
            try:
                download_release(OFFICIAL[name], Path(root or data_root()))
                found = available(name)
            except Exception as exc:  # noqa: BLE001 - offline, blocked, moved: say so and go on
                lines.append(
                    f"{name.upper()}: not found and not downloaded ({type(exc).__name__}: {exc}); "
                    f"Table 3's notebook will be skipped. {how_to_get(name, root=root)}"
                )
                continue
        kind = "TSV copies" if found == name else "official release"
        lines.append(f"{name.upper()}: {dataset_dir(found)} ({kind})")
    return lines


def holdout_split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (train indices, held-out indices): a seeded random `fraction` held out."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    perm = np.random.default_rng(seed).permutation(n)
    k = max(1, int(round(n * fraction)))
    return np.sort(perm[k:]), np.sort(perm[:k])
