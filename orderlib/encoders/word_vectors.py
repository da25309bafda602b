"""Word vectors of the stand-ins' words, built once and cached: the words' own vectors (`token_vectors`)
or their WordNet 3.0 synsets' (`synset_vectors`), from WORD_VECTORS or a skip-gram on WordNet's text.
Shared by notebooks 08 (Utama) and 09 (Sherlock)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from orderlib.checkpoint import cached, code_version
from orderlib.data.attributes import ATTRIBUTES, ATTRS
from orderlib.data.fashion_mnist import SYNSETS
from orderlib.encoders.skipgram import (
    NAMED_VECTORS,
    SkipGramConfig,
    WordVectors,
    definition_vectors,
    load_word_vectors,
    sense_vectors,
    train_skipgram,
    wordnet_corpus,
)


def describe_vectors(word_vectors: str | None) -> str:
    """What WORD_VECTORS (a name of NAMED_VECTORS, a word2vec / GloVe file, or None) are, for notes."""
    if not word_vectors:
        return "skip-gram on WordNet 3.0 glosses, trained here"
    return NAMED_VECTORS[word_vectors][3] if word_vectors in NAMED_VECTORS else f"word vectors from {word_vectors}"


def vector_note(word_vectors: str | None, tokens: bool) -> str:
    """Which vectors the rows read and how: of each word's synset, or the words' own (`tokens`)."""
    if not word_vectors:
        return (
            "skip-gram on WordNet 3.0 text (word tokens)"
            if tokens
            else "skip-gram on WordNet 3.0 glosses (definition vectors of each word's synset)"
        )
    how = "the words' own vectors" if tokens else "each word from its WordNet 3.0 synset's lemmas and gloss"
    return f"{describe_vectors(word_vectors)}; {how}"


def synset_vectors(cfg: dict, workdir: Path) -> np.ndarray:
    """(A + O, d) vectors of the attribute adjectives then the object nouns, from their WordNet 3.0
    synsets: with cfg["word_vectors"], `sense_vectors` (all lemmas and the gloss: grainy's synset,
    farinaceous.s.02, is not its first lemma); without, the definition vectors of a skip-gram on
    WordNet 3.0 glosses (as DeViSE's labels in notebook 06), cached in workdir."""
    from orderlib.data.wordnet import ensure_wordnet, open_wordnet

    ensure_wordnet("3.0")
    names = [ATTRIBUTES[a][0] for a in ATTRS] + list(SYNSETS)
    if cfg.get("word_vectors"):
        wv = load_word_vectors(cfg["word_vectors"])
        wn = open_wordnet("3.0")
        return sense_vectors(wv, [wn.synset(n) for n in names])

    def build():
        wn = open_wordnet("3.0")
        corpus = wordnet_corpus(wn)
        wv = train_skipgram(corpus, SkipGramConfig(**cfg["skipgram"], seed=cfg["seed"]))
        counts = Counter(w for sentence in corpus for w in sentence)
        return definition_vectors(wv, [wn.synset(n) for n in names], counts)

    key = f"{names}|{sorted(cfg['skipgram'].items())}|{cfg['seed']}|{code_version(train_skipgram.__module__)}"
    return cached(Path(workdir) / "word_vectors.pt", key, build)


def token_vectors(cfg: dict, words: list[str], workdir: Path) -> np.ndarray:
    """(len(words), d) unit vectors of the words themselves (a word the vectors lack, like
    "ancient_building", takes its first known part split at "_" or "-"), from WORD_VECTORS or a
    skip-gram on WordNet 3.0's text; words with no known part get zeros."""
    from orderlib.data.wordnet import ensure_wordnet, open_wordnet

    if cfg.get("word_vectors"):
        wv = load_word_vectors(cfg["word_vectors"])
    else:
        ensure_wordnet("3.0")

        def build():  # plain words and array: a checkpoint names no class of ours
            wv = train_skipgram(
                wordnet_corpus(open_wordnet("3.0")), SkipGramConfig(**cfg["skipgram"], seed=cfg["seed"])
            )
            return {"words": wv.words, "vectors": wv.vectors}

        stored = cached(
            Path(workdir) / "skipgram_token_vectors.pt",
            f"{sorted(cfg['skipgram'].items())}|{cfg['seed']}|{code_version(train_skipgram.__module__)}",
            build,
        )
        wv = WordVectors(stored["words"], stored["vectors"])
    rows = []
    for w in words:
        parts = [p for p in [w.lower(), *w.lower().replace("-", "_").split("_")] if p in wv]
        rows.append(wv[parts[0]] if parts else np.zeros(wv.vectors.shape[1], np.float32))
    return np.stack(rows).astype(np.float32)
