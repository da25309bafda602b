"""Composition functions (Section 2 of Utama): an (attribute, object) word pair -> one phrase vector.

Each composer owns a word table (attributes, then objects) initialised from word vectors and
trained with the rest, and maps index pairs (B, 2) -> (B, out_dim):
- "lstm" / "gru": the two words as a sequence, the last hidden state (VSE++'s text encoder);
- "mlp": LeakyReLU layers 2d -> 3d -> 1.5d -> d (Eq. 6);
- "mlp_interaction": the same on [a, o, a*o, |a - o|] (Conneau et al.'s features);
- "tensor": h_i = [a; o]^T V_i [a; o], then LeakyReLU(h + W [a; o]) (Eqs. 4-5);
- "linear": W [a; o] (the label-embedding baselines).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Composer(nn.Module):
    """Base: a trainable word table (A + O, d) initialised from a copy of `vectors` (training it
    leaves the caller's array, which the next row starts from, as it was)."""

    def __init__(self, vectors: np.ndarray, n_attrs: int):
        super().__init__()
        self.words = nn.Embedding.from_pretrained(torch.tensor(vectors, dtype=torch.float32), freeze=False)
        self.n_attrs = n_attrs
        self.dim = self.words.embedding_dim

    def pair_words(self, pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, 2) (attr, obj) indices -> word vectors a, o, each (B, d)."""
        pairs = pairs.to(self.words.weight.device)
        return self.words(pairs[:, 0]), self.words(pairs[:, 1] + self.n_attrs)


class RNNComposer(Composer):
    def __init__(self, vectors, n_attrs, out_dim: int, cell: str = "lstm"):
        super().__init__(vectors, n_attrs)
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](self.dim, out_dim, batch_first=True)

    def _run(self, seq: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(seq)  # (B, T, out)
        return out[:, -1]

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        a, o = self.pair_words(pairs)
        return self._run(torch.stack([a, o], 1))  # (B, out)

    def encode_words(self, words: torch.Tensor) -> torch.Tensor:
        """Encode single words (B,) (indices into the table: attributes, then objects) -> (B, out)."""
        return self._run(self.words(words.to(self.words.weight.device))[:, None])


class MLPComposer(Composer):
    def __init__(self, vectors, n_attrs, out_dim: int, interaction: bool = False):
        super().__init__(vectors, n_attrs)
        d, self.interaction = self.dim, interaction
        act = lambda: nn.LeakyReLU(0.1)
        self.mlp = nn.Sequential(
            nn.Linear((4 if interaction else 2) * d, 3 * d),
            act(),
            nn.Linear(3 * d, 3 * d // 2),
            act(),
            nn.Linear(3 * d // 2, d),
            act(),
        )
        self.proj = nn.Linear(d, out_dim)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        a, o = self.pair_words(pairs)
        x = torch.cat([a, o, a * o, (a - o).abs()] if self.interaction else [a, o], 1)  # (B, 2d or 4d)
        return self.proj(self.mlp(x))


class TensorComposer(Composer):
    def __init__(self, vectors, n_attrs, out_dim: int, tensor_dim: int | None = None):
        super().__init__(vectors, n_attrs)
        k, two_d = tensor_dim or self.dim, 2 * self.dim
        self.V = nn.Parameter(torch.randn(k, two_d, two_d) / two_d)  # (k, 2d, 2d)
        self.W = nn.Linear(two_d, k)
        self.proj = nn.Linear(k, out_dim)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        a, o = self.pair_words(pairs)
        x = torch.cat([a, o], 1)  # (B, 2d)
        h = (torch.bmm(x.expand(len(self.V), *x.shape), self.V) * x).sum(-1).T  # (B, k): x^T V_i x, Eq. 4
        return self.proj(F.leaky_relu(h + self.W(x), 0.1))  # Eq. 5


class LinearComposer(Composer):
    def __init__(self, vectors, n_attrs, out_dim: int):
        super().__init__(vectors, n_attrs)
        self.proj = nn.Linear(2 * self.dim, out_dim)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.cat(self.pair_words(pairs), 1))


COMPOSERS = {
    "lstm": lambda v, n, out, **kw: RNNComposer(v, n, out, "lstm"),
    "gru": lambda v, n, out, **kw: RNNComposer(v, n, out, "gru"),
    "mlp": lambda v, n, out, **kw: MLPComposer(v, n, out),
    "mlp_interaction": lambda v, n, out, **kw: MLPComposer(v, n, out, interaction=True),
    "tensor": lambda v, n, out, tensor_dim=None, **kw: TensorComposer(v, n, out, tensor_dim),
    "linear": lambda v, n, out, **kw: LinearComposer(v, n, out),
}


def build_composer(name: str, vectors: np.ndarray, n_attrs: int, out_dim: int, **kw) -> Composer:
    """The composer `name` (a key of COMPOSERS) over word vectors (A + O, d), attributes first."""
    if name not in COMPOSERS:
        raise ValueError(f"unknown composer {name!r}; expected one of {list(COMPOSERS)}")
    return COMPOSERS[name](vectors, n_attrs, out_dim, **kw)
