"""Sentence encoder of Vendrov et al. (Sections 4.2 and 5.1): f(s) = |GRU(s)|, the absolute
value of a GRU's last hidden state over learned word embeddings, and its vocabulary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

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
    def build(cls, sentences: Iterable[list[str]], min_count: int = 1) -> Vocab:
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
            tokens[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        return tokens, lengths


class GRUSentenceEncoder(nn.Module):
    """Embed token sequences as the last GRU hidden state, then |.| (order-embeddings) and/or
    L2 normalisation (the paper's unit-norm constraint, Section 4.4)."""

    def __init__(
        self, vocab_size: int, word_dim: int = 300, dim: int = 1024, absolute: bool = True, normalize: bool = False
    ):
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

    The input projection is one matmul over the packed tokens; the recurrence is `GRURecurrence`,
    whose backward forms the hidden-to-hidden weight gradient as one matmul over all steps (PyTorch's
    packed GRU on CPU zero-fills and accumulates input- and weight-sized gradients at every step).
    """
    if gru.num_layers != 1 or gru.bidirectional or not gru.batch_first:
        raise ValueError("gru_last_hidden: expected a one-layer, one-direction, batch_first GRU")
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    sizes = packed.batch_sizes.tolist()  # rows still running at each step, longest sequences first
    gi = F.linear(packed.data, gru.weight_ih_l0, gru.bias_ih_l0)  # (sum(sizes), 3D)
    w, b = gru.weight_hh_l0, gru.bias_hh_l0
    if torch.is_grad_enabled() and (gi.requires_grad or w.requires_grad or b.requires_grad):
        h = GRURecurrence.apply(gi, w, b, sizes)
    else:
        h = _recurrence(gi, w, b, sizes, None)
    return h.index_select(0, packed.unsorted_indices.to(h.device))  # back to the input order


def _recurrence(
    gi: torch.Tensor, w: torch.Tensor, b: torch.Tensor, sizes: list[int], saved: dict | None
) -> torch.Tensor:
    """Forward of `GRURecurrence`: final states (B, D) in length order; fill `saved` (packed rows)
    with the previous state, r, z, the candidate n and W_hn h + b_hn of every step."""
    d = w.shape[1]
    h = gi.new_zeros(sizes[0], d)  # (B, D)
    if saved is not None:
        for k in ("h", "r", "z", "n", "hn"):
            saved[k] = gi.new_empty(gi.shape[0], d)  # (sum(sizes), D)
    start = 0
    for n in sizes:
        rows = slice(start, start + n)
        hp = h[:n]  # (n, D)
        i_r, i_z, i_n = gi[rows].chunk(3, 1)
        h_r, h_z, h_n = torch.addmm(b, hp, w.t()).chunk(3, 1)  # (n, D) each
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        cand = torch.tanh(torch.addcmul(i_n, r, h_n))
        if saved is not None:
            for k, v in (("h", hp), ("r", r), ("z", z), ("n", cand), ("hn", h_n)):
                saved[k][rows] = v
        h = torch.cat([torch.lerp(cand, hp, z), h[n:]])  # (1 - z) * n + z * h for the running rows
        start += n
    return h


class GRURecurrence(torch.autograd.Function):
    """h_t = GRU cell(gi_t, h_{t-1}) over a packed batch (PyTorch's gate equations), with gi the
    packed input projection (sum(sizes), 3D) and W_hh (3D, D), b_hh (3D,); returns the final states
    (B, D) in length order. Backward: one pass back over the steps for the state gradient, then the
    W_hh gradient as one (3D, sum(sizes)) x (sum(sizes), D) matmul."""

    @staticmethod
    def forward(ctx, gi, w, b, sizes):
        saved = {}
        h = _recurrence(gi, w, b, sizes, saved)
        ctx.sizes = sizes
        ctx.save_for_backward(w, saved["h"], saved["r"], saved["z"], saved["n"], saved["hn"])
        return h

    @staticmethod
    def backward(ctx, dh):
        w, hs, rs, zs, ns, hns = ctx.saved_tensors
        sizes = ctx.sizes
        total, d = hs.shape
        dgi = hs.new_empty(total, 3 * d)  # gradient of the input projection, packed rows
        dgh = hs.new_empty(total, 3 * d)  # gradient of W_hh h + b_hh, packed rows
        g = dh.contiguous().clone()  # (B, D) gradient of each row's current state
        end = total
        for n in reversed(sizes):
            rows = slice(end - n, end)
            gt, hp, r, z, cand, h_n = g[:n], hs[rows], rs[rows], zs[rows], ns[rows], hns[rows]
            d_cand = gt * (1 - z)
            d_an = d_cand * (1 - cand * cand)  # through tanh
            d_ar = d_an * h_n * r * (1 - r)  # through r's sigmoid
            d_az = gt * (hp - cand) * z * (1 - z)
            gi_t, gh_t = dgi[rows], dgh[rows]
            gi_t[:, :d], gi_t[:, d : 2 * d], gi_t[:, 2 * d :] = d_ar, d_az, d_an
            gh_t[:, : 2 * d] = gi_t[:, : 2 * d]
            torch.mul(d_an, r, out=gh_t[:, 2 * d :])
            g[:n] = torch.addmm(gt * z, gh_t, w)  # (n, D): through z * h and W_hh h
            end -= n
        dw = dgh.t().mm(hs) if ctx.needs_input_grad[1] else None  # (3D, D)
        db = dgh.sum(0) if ctx.needs_input_grad[2] else None
        return dgi, dw, db, None
