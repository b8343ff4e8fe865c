"""word2vec's Huffman tree, built in O(V) from frequency-sorted counts (two-queue method)."""
from __future__ import annotations

import numpy as np

from ..numba_cache import numba
from .base import Tree, TreeError


@numba.njit(cache=True, nogil=True)
def _huffman_parents(counts_desc):
    # Leaves sorted by descending count are consumed from the end (smallest first); new inner
    # nodes are created in non-decreasing weight order, so a second queue suffices (word2vec.c).
    V = counts_desc.shape[0]
    n = 2 * V - 1
    weight = np.empty(n, dtype=np.int64)
    weight[:V] = counts_desc
    parent = np.full(n, -1, dtype=np.int32)
    branch = np.zeros(n, dtype=np.int8)
    leaf = V - 1      # next leaf to take (smallest remaining)
    inner = V         # next inner node to take
    for new in range(V, n):
        picked0 = -1
        for k in range(2):
            # word2vec takes the leaf only when strictly lighter than the next inner node
            if leaf >= 0 and (inner >= new or weight[leaf] < weight[inner]):
                pick = leaf
                leaf -= 1
            else:
                pick = inner
                inner += 1
            if k == 0:
                picked0 = pick
            else:
                weight[new] = weight[picked0] + weight[pick]
                parent[picked0] = new
                parent[pick] = new
                branch[pick] = 1  # the heavier of the two gets bit 1, as in word2vec.c
    return parent, branch


def build_huffman(counts) -> Tree:
    """Huffman tree over words with the given counts, which must be sorted in descending order
    (as ``Vocab`` keeps them). Inner node ``V + i`` is created i-th; the root is ``2V - 2``."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1 or counts.size < 1:
        raise TreeError("need at least one word to build a tree")
    if np.any(counts[:-1] < counts[1:]):
        raise TreeError("counts must be sorted in descending order")
    if np.any(counts < 0):
        raise TreeError("counts must be non-negative")
    parent, branch = _huffman_parents(counts)
    return Tree(parent, branch, kind="huffman")
