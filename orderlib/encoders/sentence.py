"""Sentence encoder of Vendrov et al. (Sections 4.2 and 5.1): f(s) = |GRU(s)|, the absolute
value of a GRU's last hidden state over learned word embeddings, and its vocabulary."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

PAD, UNK = 0, 1


class Vocab:
    """Word -> index with 0 = padding, 1 = unknown; words seen fewer than min_count times are unknown."""

    def __init__(self, words: list[str]):
        self.words = ["<pad>", "<unk>", *words]
        self.index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_count: int = 1) -> "Vocab":
        counts = Counter(w for s in sentences for w in s)
        return cls(sorted(w for w, c in counts.items() if c >= min_count))

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, sentences: list[list[str]], max_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (tokens (B, T) long, lengths (B,) long); empty sentences become one <unk>."""
        ids = [[self.index.get(w, UNK) for w in s][:max_len] or [UNK] for s in sentences]
        lengths = torch.tensor([len(s) for s in ids], dtype=torch.long)
        tokens = torch.full((len(ids), int(lengths.max()) if ids else 0), PAD, dtype=torch.long)
        for i, s in enumerate(ids):
            tokens[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        return tokens, lengths


class GRUSentenceEncoder(nn.Module):
    """Embed token sequences as the last GRU hidden state, then |.| (order-embeddings) and/or
    L2 normalisation (the paper's unit-norm constraint, Section 4.4)."""

    def __init__(self, vocab_size: int, word_dim: int = 300, dim: int = 1024, absolute: bool = True,
                 normalize: bool = False):
        super().__init__()
        self.words = nn.Embedding(vocab_size, word_dim, padding_idx=PAD)
        self.gru = nn.GRU(word_dim, dim, batch_first=True)
        self.absolute, self.normalize = absolute, normalize

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.words(tokens)  # (B, T, W)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)  # (1, B, D), in the input order
        h = h[0]  # (B, D)
        if self.normalize:
            h = F.normalize(h, dim=-1)
        return h.abs() if self.absolute else h
