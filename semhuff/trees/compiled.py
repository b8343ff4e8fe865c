"""The trees' Numba helpers, in one module that the functions using them import when they run:
``Tree`` (``base.py``), the clusterings and their trees (``clusters.py``) and the self-organizer's
row keys (``organizer.py``) are then importable without Numba, which the PyTorch side
(``semhuff.lm``) needs (``tests/test_structure.py``). The kernels are as they were in those
modules (moved, not changed): ``njit(cache=True, nogil=True)``.
"""
from __future__ import annotations

import numpy as np

from ..numba_cache import numba

# -- the Tree's derived layout (base.py) -------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _paths_from_parents(parent, branch, n_words, max_depth):
    points = np.zeros((n_words, max_depth), dtype=np.int32)
    codes = np.zeros((n_words, max_depth), dtype=np.int8)
    lengths = np.zeros(n_words, dtype=np.int32)
    for w in range(n_words):
        depth = 0
        node = w
        while parent[node] >= 0:
            depth += 1
            node = parent[node]
        lengths[w] = depth
        node = w
        d = depth - 1
        while parent[node] >= 0:
            codes[w, d] = branch[node]
            points[w, d] = parent[node] - n_words
            node = parent[node]
            d -= 1
    return points, codes, lengths


@numba.njit(cache=True, nogil=True)
def _depths(parent, n_words):
    # Depth of every node, computed top-down: a parent's id may be smaller or larger than its
    # child's, so walk each leaf up once and memoise.
    n = parent.shape[0]
    depth = np.full(n, -1, dtype=np.int32)
    for start in range(n):
        if depth[start] >= 0:
            continue
        # find the nearest ancestor with a known depth
        node = start
        steps = 0
        while node >= 0 and depth[node] < 0:
            node = parent[node]
            steps += 1
            if steps > n:
                return depth  # a cycle: left at -1 for validate() to report
        base = -1 if node < 0 else depth[node]
        # second walk assigns depths
        d = base + steps
        node = start
        while node >= 0 and depth[node] < 0:
            depth[node] = d
            d -= 1
            node = parent[node]
    return depth


# -- clusterings and their trees (clusters.py) -------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _frequency_bins(counts, n_clusters):
    out = np.empty(counts.shape[0], np.int32)
    total = counts.sum()
    mass = 0.0
    c = 0
    for w in range(counts.shape[0]):
        mass += counts[w] / total
        out[w] = c
        if mass > (c + 1) / n_clusters and c < n_clusters - 1:
            c += 1
    return out


@numba.njit(cache=True, nogil=True)
def _greedy_assign(q, counts, n_clusters, max_words, budget):
    # Algorithm 1 of Shen et al. (``clusters.greedy_assign`` says what it does)
    V = q.shape[0]
    total = 0.0
    for w in range(V):
        total += counts[w]
    size = np.zeros(n_clusters, np.int64)
    share = np.zeros(n_clusters, np.float64)
    out = np.empty(V, np.int32)
    fallback = 0
    for w in range(V):
        best = -1
        for c in range(n_clusters):
            if size[c] < max_words and share[c] < budget:
                if best < 0 or q[w, c] > q[w, best]:
                    best = c
        if best < 0:
            fallback += 1
            for c in range(n_clusters):
                if size[c] < max_words and (best < 0 or share[c] < share[best]):
                    best = c
        out[w] = best
        size[best] += 1
        share[best] += counts[w] / total
    return out, fallback


@numba.njit(cache=True, nogil=True)
def _balanced_parents(order):
    # A complete binary tree, leaves left to right in ``order``: first the leading
    # 2 (V - 2^floor(log2 V)) leaves are paired, which leaves a power of two of nodes, then
    # neighbours are paired level by level. Every depth is floor or ceil of log2 V.
    V = order.shape[0]
    parent = np.full(2 * V - 1, -1, np.int32)
    branch = np.zeros(2 * V - 1, np.int8)
    level = order.astype(np.int64).copy()
    full = 1
    while full * 2 <= V:
        full *= 2
    new = V
    first = V - full  # pairs to make before the level is a power of two
    n = V
    while n > 1:
        pairs = first if first > 0 else n // 2
        m = 0
        for i in range(pairs):
            a, b = level[2 * i], level[2 * i + 1]
            parent[a] = new
            parent[b] = new
            branch[b] = 1
            level[m] = new
            m += 1
            new += 1
        for i in range(2 * pairs, n):  # the rest move up unpaired (first round only)
            level[m] = level[i]
            m += 1
        n = m
        first = 0
    return parent, branch


# -- a cluster tree's subtrees and split keys (clusters.py, organizer.py) ----------------------


@numba.njit(cache=True, nogil=True)
def _subtree_roots(parent, depth, cluster_depth):
    # ``clusters.subtree_roots``
    V = cluster_depth.shape[0]
    out = np.empty(V, np.int64)
    for w in range(V):
        node = w
        for _ in range(depth[w] - cluster_depth[w]):
            node = parent[node]
        out[w] = node
    return out


@numba.njit(cache=True, nogil=True)
def _split_keys(parent, branch, n_words, word_key, root_key, n_top):
    # Children before parents: every node's key sums are complete when its parent is reached.
    # Inner nodes V .. V + n_top - 1 are the cluster part (cluster_tree's layout): their sums
    # run over cluster keys (entered at the subtree roots), the others' over word keys.
    n = parent.shape[0]
    depth = np.zeros(n, np.int64)
    for v in range(n):
        node = v
        while parent[node] >= 0:
            depth[v] += 1
            node = parent[node]
    word_sum = np.zeros(n, np.uint64)
    cluster_sum = root_key.copy()
    word_sum[:n_words] = word_key
    keys = np.zeros((n_words - 1, 2), np.uint64)
    for v in np.argsort(-depth):
        p = parent[v]
        if p < 0:
            continue
        row = p - n_words
        keys[row, branch[v]] = cluster_sum[v] if row < n_top else word_sum[v]
        word_sum[p] += word_sum[v]
        if root_key[p] == 0:
            cluster_sum[p] += cluster_sum[v]
    return keys
