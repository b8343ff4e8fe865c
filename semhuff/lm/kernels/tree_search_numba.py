"""The tree's exact top-k on the CPU: a best-first search per row in Numba.

A node's path probability bounds every word below it, so popping the most probable open node
first gives the words in order of probability: the first k words popped are the k best, found
after scoring only the nodes more probable than the k-th word (a peaked distribution: a few
dozen a row, where the whole distribution scores V - 1). The torch form (``tree_search``'s
``beam_topk``) runs a level at a time with ~20 small operations each, which at V 50k and 256
rows cost more than the arithmetic; here a row is one loop with its own heap. A row whose heap
would pass ``capacity`` entries stops and is marked not exact (the caller takes its whole
distribution). Rows split between torch's intra-op threads (``clusters_numba.run_split``);
float32 and float64.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ...numba_cache import numba
from .clusters_numba import run_split

_FAST = {"nsz", "arcp", "contract", "reassoc"}  # the dot products vectorise


@numba.njit(cache=True, nogil=True, inline="always")
def _push(lps, nodes, size, lp, node):
    i = size
    while i > 0:
        up = (i - 1) >> 1
        if lps[up] >= lp:
            break
        lps[i], nodes[i] = lps[up], nodes[up]
        i = up
    lps[i], nodes[i] = lp, node


@numba.njit(cache=True, nogil=True, inline="always")
def _pop_last_down(lps, nodes, size):
    """Move the heap's last entry (index ``size``, the heap now ``size`` long) down from the
    root."""
    lp, node = lps[size], nodes[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and lps[c + 1] > lps[c]:
            c += 1
        if lps[c] <= lp:
            break
        lps[i], nodes[i] = lps[c], nodes[c]
        i = c
    lps[i], nodes[i] = lp, node


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _best_first(h, weight, child, root, n_words, k, capacity, values, indices, exact, r0, r1):
    lps = np.empty(capacity, np.float64)
    nodes = np.empty(capacity, np.int64)
    D = h.shape[1]
    for r in range(r0, r1):
        size = 1
        lps[0], nodes[0] = 0.0, root
        found = 0
        ok = True
        while found < k:
            if size == 0:
                ok = False
                break
            lp, node = lps[0], nodes[0]
            size -= 1
            if size > 0:
                _pop_last_down(lps, nodes, size)
            if node < n_words:
                values[r, found] = lp
                indices[r, found] = node
                found += 1
                continue
            if size + 2 > capacity:
                ok = False
                break
            row = node - n_words
            s = h[r, 0] * 0
            for d in range(D):
                s += h[r, d] * weight[row, d]
            s = float(s)
            # log sigmoid(s), stably; log sigmoid(-s) = log sigmoid(s) - s
            ls = -math.log1p(math.exp(-s)) if s >= 0 else s - math.log1p(math.exp(s))
            _push(lps, nodes, size, lp + ls, child[row, 0])
            size += 1
            _push(lps, nodes, size, lp + ls - s, child[row, 1])
            size += 1
        exact[r] = ok
        for j in range(found, k):
            values[r, j] = -np.inf
            indices[r, j] = 0


def best_first_wanted(h: torch.Tensor, weight: torch.Tensor) -> bool:
    return (h.device.type == "cpu" and weight.device.type == "cpu" and h.dtype == weight.dtype
            and weight.dtype in (torch.float32, torch.float64))


@torch.no_grad()
def best_first_topk(h: torch.Tensor, weight: torch.Tensor, walk, k: int, capacity: int = 1 << 16):
    """(values (N, k) log P in float64, indices (N, k), exact (N,)): ``tree_search.beam_topk``'s
    contract, by best-first search (``walk``: a ``TreeWalk`` on the CPU)."""
    N = h.shape[0]
    values = np.empty((N, k), np.float64)
    indices = np.empty((N, k), np.int64)
    exact = np.empty(N, np.bool_)
    capacity = int(min(capacity, 2 * walk.n_words + 2))
    args = (h.detach().contiguous().numpy(), weight.detach().contiguous().numpy(),
            walk.child.numpy(), int(walk.root), int(walk.n_words), int(k), capacity, values,
            indices, exact)
    run_split(_best_first, np.ones(N), args)
    return torch.from_numpy(values), torch.from_numpy(indices), torch.from_numpy(exact)
