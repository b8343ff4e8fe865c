"""Noise words for negative sampling on the GPU: a counter-based draw instead of word2vec's LCG.

The CPU kernels draw noise words from one sequential random stream per chunk; thousands of GPU
threads cannot share a stream. Here the ``k``-th noise word of pair ``p`` of a chunk is a pure
function of ``(chunk seed, p * negative + k)``: two 32-bit uniforms from a small integer hash,
then one alias-table draw (``kernels.ns.build_alias_table``: word ``i`` uniformly, kept when the
second uniform is below ``alias_thr[i]``, else ``alias_idx[i]``). So the draws do not depend on
the batch size, the thread layout or the backend, and a test can compute them on the host.

The arithmetic is written once, on ``uint64`` values that never exceed 64 bits (every product
is a 32-bit value times a 32-bit constant), so the same function runs on NumPy arrays, CuPy
arrays, NumPy scalars (the CUDA simulator) and as a ``numba.cuda`` device function, without
overflow warnings and with identical results.
"""
from __future__ import annotations

import numpy as np

M32 = np.uint64(0xFFFFFFFF)
_S15, _S16, _S32 = np.uint64(15), np.uint64(16), np.uint64(32)
_C1, _C2 = np.uint64(0x7FEB352D), np.uint64(0x846CA68B)  # Wellons' "lowbias32" constants
_GOLDEN = np.uint64(0x9E3779B9)


def mix32(x):
    """A 32-bit integer hash (``x < 2**32``, held in uint64)."""
    x = x ^ (x >> _S16)
    x = (x * _C1) & M32
    x = x ^ (x >> _S15)
    x = (x * _C2) & M32
    return x ^ (x >> _S16)


def seed_keys(seed) -> tuple:
    """The two 32-bit keys of a chunk's 64-bit seed."""
    seed = np.uint64(seed)
    return seed & M32, seed >> _S32


def noise_words(xp, counters, key_lo, key_hi, alias_thr, alias_idx):
    """Vectorised draw (NumPy or CuPy ``xp``): the noise word for each counter
    ``p * negative + k`` (uint64 array); the device kernels draw the same words one at a time
    (``numba_kernels``)."""
    u = mix32((mix32((counters ^ key_lo) & M32) + key_hi) & M32)
    v = mix32((u + _GOLDEN) & M32)
    i = ((u * np.uint64(alias_idx.shape[0])) >> _S32).astype(xp.int64)
    return xp.where(v < alias_thr[i], i, alias_idx[i]).astype(xp.int32)


def noise_matrix(xp, first_pair, n_pairs, negative, seed, alias_thr, alias_idx):
    """``(n_pairs, negative)`` noise words of pairs ``first_pair ..`` of a chunk."""
    key_lo, key_hi = seed_keys(seed)
    p = xp.arange(first_pair, first_pair + n_pairs, dtype=xp.uint64)[:, None]
    k = xp.arange(negative, dtype=xp.uint64)[None, :]
    return noise_words(xp, p * np.uint64(negative) + k, key_lo, key_hi, alias_thr, alias_idx)
