"""Skip-gram word vectors with negative sampling (Mikolov et al., 2013) for the label embeddings of
DeViSE (Section 3.1 of Frome et al.), and a reader for word2vec / GloVe text files.

DeViSE trained skip-gram on Wikipedia, which `make data` does not fetch. The real text it does fetch
is WordNet 3.0 itself: `wordnet_corpus` makes one sentence per synset from its lemmas (multi-word
lemmas as one token, "gym_shoe"), its gloss and its usage examples, so every noun lemma gets a
vector from the words that define it. No hypernym links are given to the model: whatever
hierarchy the vectors hold comes from the definitions' words ("a canvas shoe with ...").
A lemma token occurs in one or a few sentences only, too few for a good vector of its own, so a
synset's label vector is built from its definition (`definition_vectors`), where DeViSE took the
skip-gram vector of the label's first term.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
    words = list(model.wv.index_to_key)
    vec = model.wv.vectors.astype(np.float32)
    return WordVectors(words, vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12))


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


def load_word_vectors(path: str | Path, limit: int | None = None) -> WordVectors:
    """Read a word2vec text file (first line "count dim") or a GloVe file (no header): one word and
    its numbers per line. Vectors are unit-normalised. Errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (word vectors in word2vec or GloVe text format)")
    words, rows, dim = [], [], None
    with open(path, encoding="utf-8", errors="strict") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.rstrip("\n").rstrip().split(" ")
            if n == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                dim = int(parts[1])  # word2vec header
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) != dim + 1:
                raise DataError(f"{path}:{n}: expected a word and {dim} numbers, got {len(parts) - 1} numbers")
            try:
                rows.append(np.array(parts[1:], dtype=np.float32))
            except ValueError as e:
                raise DataError(f"{path}:{n}: not a number in the vector of {parts[0]!r} ({e})") from e
            words.append(parts[0])
            if limit and len(words) >= limit:
                break
    if not words:
        raise DataError(f"{path}: no word vectors")
    vectors = np.stack(rows)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return WordVectors(words, vectors / np.maximum(norms, 1e-12))
