"""Closed-form two-view baselines of Sherlock's Table 4, on frozen image features X (N, F) and fact
vectors ([S | P | O] word vectors, zeros for wild-cards).

- ESZSL (Romera-Paredes and Torr, ICML 2015, Eq. 5): V = (X^T X + g I)^-1 X^T Y S (S^T S + l I)^-1,
  Y (N, Z) the {-1, 1} labels over the Z training facts, S (Z, A) their vectors;
  score(x, s) = x V s^T.
- Multiview CCA (Gong et al., IJCV 2014): regularised CCA; each view projected on the top k
  canonical directions, scaled by the canonical correlations to the power p (4 in the paper),
  compared by cosine.
Both return distances (low = match), so the retrieval code treats every method alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def _sym_inv_sqrt(c: np.ndarray) -> np.ndarray:
    w, u = np.linalg.eigh(c)
    return (u / np.sqrt(np.maximum(w, 1e-12))) @ u.T


@dataclass
class ESZSL:
    V: np.ndarray  # (F, A)
    mean: np.ndarray  # (F,)

    @classmethod
    def fit(
        cls, x: np.ndarray, labels: np.ndarray, signatures: np.ndarray, gamma: float = 1.0, lam: float = 1.0
    ) -> ESZSL:
        """x (N, F) features, labels (N,) indices into signatures (Z, A)."""
        x = np.asarray(x, np.float64)
        mean = x.mean(0)
        x = x - mean
        s = np.asarray(signatures, np.float64)
        y = -np.ones((len(x), len(s)))
        y[np.arange(len(x)), labels] = 1.0
        left = np.linalg.solve(x.T @ x + gamma * np.eye(x.shape[1]), x.T @ y @ s)  # (F, A)
        V = np.linalg.solve((s.T @ s + lam * np.eye(s.shape[1])).T, left.T).T  # left (S^T S + l I)^-1
        return cls(V, mean)

    def distance(self, x: np.ndarray, signatures: np.ndarray) -> torch.Tensor:
        """(N, Z') negative scores of images x against language vectors."""
        return torch.as_tensor(
            -((np.asarray(x, np.float64) - self.mean) @ self.V @ np.asarray(signatures, np.float64).T)
        )


@dataclass
class MultiviewCCA:
    Wx: np.ndarray  # (F, k)
    Wy: np.ndarray  # (A, k)
    mx: np.ndarray
    my: np.ndarray
    corr: np.ndarray  # (k,) canonical correlations
    power: float = 4.0

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, k: int, reg: float = 1e-3, power: float = 4.0) -> MultiviewCCA:
        """Paired views x (N, F), y (N, A); `reg` is added to each covariance (times its trace / dim)."""
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        mx, my = x.mean(0), y.mean(0)
        x, y = x - mx, y - my
        n = len(x)
        cxx, cyy, cxy = x.T @ x / n, y.T @ y / n, x.T @ y / n
        cxx += reg * np.trace(cxx) / len(cxx) * np.eye(len(cxx))
        cyy += reg * np.trace(cyy) / len(cyy) * np.eye(len(cyy))
        kx, ky = _sym_inv_sqrt(cxx), _sym_inv_sqrt(cyy)
        u, sig, vt = np.linalg.svd(kx @ cxy @ ky)
        k = min(k, len(sig))
        return cls(kx @ u[:, :k], ky @ vt[:k].T, mx, my, sig[:k], power)

    def _embed(self, z, w, m):
        e = (np.asarray(z, np.float64) - m) @ w * self.corr**self.power
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)

    def distance(self, x: np.ndarray, y: np.ndarray) -> torch.Tensor:
        """(N, M) 1 - cosine between images x and language vectors y in the scaled CCA space."""
        return torch.as_tensor(1.0 - self._embed(x, self.Wx, self.mx) @ self._embed(y, self.Wy, self.my).T)
