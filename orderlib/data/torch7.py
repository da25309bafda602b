"""Torch7's default random generator, draw for draw, to regenerate the splits that Vendrov et al.'s
createDatasets.lua made with Lua Torch.

Follows torch/torch7 as of 2015-11-09 (commit cecaadfc1ff093987eb0906d80efcfdfd75e0e2d):
MT19937 as in lib/TH/THRandom.c, one 32-bit draw per uniform double, and `randperm` as in
THTensorMath.c (for i < n - 1, swap r[i] with r[i + random() % (n - i)]).
"""

from __future__ import annotations

import numpy as np

MT_N = 624
TWO_POW_32 = 4294967296.0


def init_genrand(seed: int) -> np.ndarray:
    """Return the MT19937 key that the reference `init_genrand(seed)` (and THRandom_manualSeed) sets."""
    key = [seed & 0xFFFFFFFF]
    for j in range(1, MT_N):
        prev = key[-1]
        key.append((1812433253 * (prev ^ (prev >> 30)) + j) & 0xFFFFFFFF)
    return np.asarray(key, dtype=np.uint32)  # (624,)


class Torch7Generator:
    """Torch7's THGenerator: `torch.manualSeed`, `random`, `torch.rand`, `torch.randperm`."""

    def __init__(self, seed: int = 0):
        self._bits = np.random.MT19937(0)
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> None:
        """Reset the state as `torch.manualSeed(seed)` does (THRandom_manualSeed)."""
        if not 0 <= int(seed) < 2**64:
            raise ValueError(f"seed must be a non-negative integer below 2**64, got {seed!r}")
        # pos = 624: the first draw regenerates the whole state, as THRandom's left = 1 does
        self._bits.state = {"bit_generator": "MT19937", "state": {"key": init_genrand(int(seed)), "pos": MT_N}}

    def random(self, n: int) -> np.ndarray:
        """Draw `n` tempered 32-bit outputs of THRandom_random, in order: uint32 (n,)."""
        if n < 0:
            raise ValueError(f"cannot draw a negative number of values ({n})")
        return self._bits.random_raw(int(n)).astype(np.uint32)

    def rand(self, *shape: int) -> np.ndarray:
        """Return `torch.rand(*shape)` (a DoubleTensor): each element random() * 2**-32, row-major."""
        size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        u = self.random(size).astype(np.float64) * (1.0 / TWO_POW_32)
        return u.reshape(shape)

    def randperm(self, n: int) -> np.ndarray:
        """Return `torch.randperm(n) - 1`: THTensor_(randperm)'s Fisher-Yates pass, int64 (n,), 0-based."""
        if n <= 0:
            raise ValueError(f"randperm needs n > 0 (THArgCheck 'must be strictly positive'), got {n}")
        z = (self.random(n - 1).astype(np.int64) % np.arange(n, 1, -1, dtype=np.int64)).tolist()
        r = list(range(n))
        for i, zi in enumerate(z):  # sequential swaps: each depends on the ones before
            j = i + zi
            r[i], r[j] = r[j], r[i]
        return np.asarray(r, dtype=np.int64)
