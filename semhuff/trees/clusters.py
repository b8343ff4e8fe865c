"""Word clusters, and binary trees built from them.

A clustering is an int32 array ``cluster_of[w]`` over the frequency-sorted vocabulary (word id
0 = the most frequent word), clusters numbered ``0 .. C-1``.

* ``frequency_binning``: Mikolov et al. (2011): words in descending frequency fill the clusters
  in turn, each cluster taking about 1/C of the token mass (frequent words get small clusters);
* ``random_clusters``: the self-organized HSM paper's starting point;
* ``greedy_assign``: the paper's Algorithm 1 (self-organization);
* ``cluster_tree``: the binary form of a clustering (a Huffman tree over the clusters by token
  mass, a Huffman tree inside each cluster over its words), so that hierarchical softmax over
  it costs about what Huffman's does; ``subtree_roots``: where each cluster's subtree hangs;
* ``balanced_tree`` (+ the ``random`` and ``alphabetical`` tree builders): the p-tHSM poster's
  baselines, the words in a random or alphabetical order under a balanced binary tree.

Their Numba kernels are in ``compiled.py``, imported when they run: this module (and the
PyTorch side, which uses it) imports without Numba.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from ..errors import OptionError
from ..options import Option, positive_int
from ..vocab import frequency_order
from .base import Tree


CLUSTERS = Option("clusters", int, None, "number of clusters (default: about sqrt(V))",
                  check=positive_int)


def default_clusters(n_words: int) -> int:
    """About sqrt(V) clusters (the paper's choice; cost O(sqrt V) per level)."""
    return max(1, int(round(math.sqrt(n_words))))


def check_clusters(n_clusters: Optional[int], n_words: int) -> int:
    """The number of clusters to use: ``n_clusters``, or about sqrt(V) when not given (None
    only: 0 is an error, never the default)."""
    if n_clusters is None:
        return default_clusters(n_words)
    if not isinstance(n_clusters, (int, np.integer)) or not 1 <= n_clusters <= n_words:
        raise OptionError(f"the number of clusters must be in 1..{n_words} (the vocabulary), "
                          f"got {n_clusters!r}")
    return int(n_clusters)


def frequency_binning(counts, n_clusters: int) -> np.ndarray:
    """The RNNLM toolkit's classes (Mikolov et al. 2011): words in descending frequency fill
    class after class, a class closing once the token mass so far passes its share (c + 1) / C;
    a word moves the class on by one at most, so no class is empty and the most frequent words
    get classes of their own."""
    from .compiled import _frequency_bins
    return _frequency_bins(np.asarray(counts, np.float64), int(n_clusters))


def random_clusters(n_words: int, n_clusters: int, seed: int) -> np.ndarray:
    """A uniformly random assignment with the clusters as equal in size as possible."""
    rng = np.random.default_rng(seed)
    return rng.permutation(np.arange(n_words) % n_clusters).astype(np.int32)


def greedy_assign(q, counts, n_clusters, max_words, budget):
    """Algorithm 1 of Shen et al.: words in descending frequency (their id order) pick the
    cluster of highest ``q[w, c]`` among those that still have room: fewer than ``max_words``
    words and a token share below ``budget`` *before* the word joins (as the algorithm is
    printed; a cluster may end a little over the budget). Ties go to the lower cluster id. A
    word that finds no cluster passing both tests (only the budget can fail: there are
    ``C x max_words >= V`` places) takes the cluster with room whose share is smallest.
    Returns (cluster_of, n_fallback)."""
    from .compiled import _greedy_assign
    return _greedy_assign(q, counts, n_clusters, max_words, budget)


def cluster_capacity(n_words: int, n_clusters: int, gamma: float) -> int:
    """At most gamma x sqrt(V) words a cluster (the paper), but never fewer places than words."""
    return max(int(math.ceil(gamma * math.sqrt(n_words))), -(-n_words // n_clusters))


# -- binary trees ------------------------------------------------------------------------------

def _huffman_block(weights: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Parents/branches of a Huffman tree over ``weights`` in any order, as local node ids
    (leaves 0..n-1 in the given order, inner nodes n..2n-2, root 2n-2)."""
    from .huffman import _huffman_parents
    n = weights.shape[0]
    order = np.argsort(-weights, kind="stable")
    parent, branch = _huffman_parents(weights[order].astype(np.int64))
    # _huffman_parents numbers leaves in sorted order: map them back to the given order
    leaf_parent = np.empty(n, np.int32)
    leaf_branch = np.empty(n, np.int8)
    leaf_parent[order] = parent[:n]
    leaf_branch[order] = branch[:n]
    return (np.concatenate([leaf_parent, parent[n:]]), np.concatenate([leaf_branch, branch[n:]]))


def cluster_tree(cluster_of: np.ndarray, counts, n_clusters: int,
                 kind: str = "clusters") -> Tuple[Tree, np.ndarray]:
    """The binary form of a clustering: a Huffman tree over the non-empty clusters by token mass
    on top, a Huffman tree over each cluster's words (by count) below, so its expected code
    length stays close to Huffman's. Returns the ``Tree`` and, per word, the number of its path
    nodes that belong to the cluster part (``cluster_depth``: the path's first
    ``cluster_depth[w]`` nodes predict the cluster, the rest the word in it).

    Inner-node ids are laid out cluster part first (rows ``0 .. n_used - 2``), then each
    cluster's own nodes in cluster-id order, so a cluster's rows stay together."""
    cluster_of = np.asarray(cluster_of, np.int64)
    counts = np.maximum(np.asarray(counts, np.int64), 1)
    V = cluster_of.shape[0]
    parent = np.full(2 * V - 1, -1, np.int32)
    branch = np.zeros(2 * V - 1, np.int8)
    cluster_depth = np.zeros(V, np.int32)
    if V == 1:
        return Tree(parent, branch, kind=kind), cluster_depth
    mass = np.bincount(cluster_of, weights=counts, minlength=n_clusters)
    used = np.flatnonzero(np.bincount(cluster_of, minlength=n_clusters) > 0)
    top_root = -1  # the node (global id) that each cluster's subtree hangs from
    next_inner = V + max(used.size - 1, 0)
    sub_root = np.empty(n_clusters, np.int64)  # global id of each cluster's subtree root
    order = np.argsort(cluster_of, kind="stable")
    starts = np.searchsorted(cluster_of[order], np.arange(n_clusters + 1))
    for c in used:
        words = order[starts[c]:starts[c + 1]]
        if words.size == 1:
            sub_root[c] = words[0]
            continue
        p, b = _huffman_block(counts[words])
        n = words.size
        ids = np.concatenate([words, next_inner + np.arange(n - 1)])
        inner = p >= 0
        parent[ids[inner]] = ids[p[inner]]
        branch[ids[inner]] = b[inner]
        sub_root[c] = ids[-1]
        next_inner += n - 1
    if used.size == 1:
        # a single cluster: its subtree is the whole tree
        top_root = sub_root[used[0]]
    else:
        p, b = _huffman_block(mass[used].astype(np.int64))
        n = used.size
        ids = np.concatenate([sub_root[used], V + np.arange(n - 1)])
        inner = p >= 0
        parent[ids[inner]] = ids[p[inner]]
        branch[ids[inner]] = b[inner]
        top_root = ids[-1]
    tree = Tree(parent, branch, kind=kind)
    # the cluster part of a path is the part above the cluster's subtree root
    depth = tree.node_depths()
    cluster_depth[:] = depth[sub_root[cluster_of]]
    assert top_root == tree.root
    return tree, cluster_depth


def subtree_roots(parent, depth, cluster_depth) -> np.ndarray:
    """Per word, the node ``cluster_depth[w]`` levels below the root on its path (``depth[w]``
    long: the tree's code lengths): the root of its cluster's subtree."""
    from .compiled import _subtree_roots
    return _subtree_roots(parent, depth, cluster_depth)


def balanced_tree(order, kind: str) -> Tree:
    """A balanced binary tree whose leaves, left to right, are the word ids in ``order``."""
    from .compiled import _balanced_parents
    parent, branch = _balanced_parents(np.asarray(order, np.int64))
    return Tree(parent, branch, kind=kind)


def cluster_members(cluster_of: np.ndarray, n_clusters: int) -> Tuple[np.ndarray, np.ndarray]:
    """(members, starts): the word ids of cluster c are ``members[starts[c]:starts[c+1]]``, in
    id (frequency) order."""
    cluster_of = np.asarray(cluster_of)
    members = np.argsort(cluster_of, kind="stable").astype(np.int32)
    starts = np.searchsorted(cluster_of[members], np.arange(n_clusters + 1)).astype(np.int64)
    return members, starts


def agreement(labels_a, labels_b) -> float:
    """Adjusted Rand index of two clusterings (1 = identical up to renaming, ~0 = chance)."""
    from sklearn.metrics import adjusted_rand_score
    return float(adjusted_rand_score(labels_a, labels_b))


def initial_clusters(how: str, counts, n_clusters: int, seed: int) -> np.ndarray:
    """A fixed clustering of the frequency-sorted words: ``frequency_binning`` or
    ``random_clusters``."""
    if how == "frequency":
        return frequency_binning(counts, n_clusters)
    if how == "random":
        return random_clusters(len(counts), n_clusters, seed)
    raise OptionError(f"cluster initialisation must be 'random' or 'frequency', got {how!r}")


def word_clusters(how: str, counts, clusters: Optional[int] = None, seed: int = 1
                  ) -> Tuple[np.ndarray, int]:
    """(the cluster of each word id, the number of clusters): ``initial_clusters(how)`` over
    words whose ``counts`` may be in any id order, made over the frequency-sorted ids and
    relabelled to the caller's own, as trees are (``spec.resolve_tree``)."""
    counts = np.asarray(counts)
    n = check_clusters(clusters, counts.size)
    order = frequency_order(counts)
    cluster_of = initial_clusters(how, counts if order is None else counts[order], n, seed)
    if order is not None:
        relabelled = np.empty_like(cluster_of)
        relabelled[order] = cluster_of
        cluster_of = relabelled
    return cluster_of, n
