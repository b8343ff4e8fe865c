"""SemHuff (Yang et al.): a Huffman tree whose levels are re-paired so similar words meet early.

Rearranging nodes within one level keeps every word's depth, so the result is still an optimal
Huffman tree (same code lengths, same expected code length). From the deepest level up:

1. the similarity of two nodes at level ``d`` (leaves or subtrees) is the *average* similarity
   over their leaf pairs: the sum of the sparse leaf edges between them divided by
   ``leaves(a) * leaves(b)`` (pairs without an edge count as 0, as in the paper's average);
2. a maximum-weight matching on that graph decides which nodes become siblings; nodes left
   unmatched are paired in level order (Huffman node id order, i.e. by frequency);
3. the pairs become the children of level ``d - 1``'s inner nodes.

How parents are assigned (the paper's Fig. 1 leaves it open). A Huffman level can mix leaves and
inner nodes; a level ``d`` always has exactly twice as many nodes as level ``d - 1`` has inner
nodes, so the pairs fill those inner nodes one to one and the tree stays full. Which pair goes
under which inner node does not matter: level ``d - 1`` is matched next on the *contents* of its
nodes, so the inner nodes are just slots; pair ``i`` (in order of its first node) goes to the
``i``-th inner node of level ``d - 1`` in id order. In each pair the lower node id gets branch
bit 0.

Leaf similarities are never expanded to node pairs: each level's graph is carried up from the
level below (edge endpoints replaced by their new parents, duplicates summed) plus the edges of
the leaves that first appear at that level, so a level costs time linear in its edges.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..numba_cache import numba
from .base import Tree, TreeError
from .huffman import build_huffman
from .matching import approximate_matching, exact_matching, matching_weight
from .similarity.core import top_k_symmetric

logger = logging.getLogger(__name__)

# "auto" matching: levels of at most EXACT_MAX_NODES nodes are matched exactly (rustworkx's
# blossom) on a candidate graph of each node's EXACT_CANDIDATES best edges, then polished by the
# local search on the full level graph; larger levels use the Numba approximation alone.
# Measured on the 56k-word corpus (docs/semhuff.md): the candidate graph keeps 0.998-0.999 of
# the full optimum at a fraction of the edges; blossom time grows with the node count.
EXACT_MAX_NODES = 5000
EXACT_CANDIDATES = 8
MATCHING_METHODS = ("auto", "exact", "approx")


@dataclass
class LevelStats:
    """One level of the rearrangement, for logging and benchmarks."""

    depth: int
    nodes: int
    leaves: int
    edges: int
    method: str
    matched_pairs: int
    matched_weight: float
    seconds: float
    graph: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]] = None  # CSR of averaged weights


# -- sparse level graphs ---------------------------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _coalesce(a, b, w, n):
    # Sum duplicate undirected edges (a, b) over nodes 0..n-1, dropping self-loops, with a
    # per-row "last seen" marker instead of sorting: O(edges + n).
    m = a.shape[0]
    lo = np.empty(m, dtype=np.int64)
    hi = np.empty(m, dtype=np.int64)
    row_count = np.zeros(n + 1, dtype=np.int64)
    for e in range(m):
        x, y = a[e], b[e]
        lo[e], hi[e] = (x, y) if x < y else (y, x)
        if x != y:
            row_count[lo[e] + 1] += 1
    start = np.cumsum(row_count)
    fill = start[:-1].copy()
    by_row = np.empty(start[-1], dtype=np.int64)
    for e in range(m):
        if lo[e] != hi[e]:
            by_row[fill[lo[e]]] = e
            fill[lo[e]] += 1
    slot = np.full(n, -1, dtype=np.int64)
    out_a = np.empty(start[-1], dtype=np.int64)
    out_b = np.empty(start[-1], dtype=np.int64)
    out_w = np.empty(start[-1], dtype=np.float64)
    k = 0
    for r in range(n):
        row_first = k
        for i in range(start[r], start[r + 1]):
            e = by_row[i]
            c = hi[e]
            if slot[c] >= row_first:
                out_w[slot[c]] += w[e]
            else:
                slot[c] = k
                out_a[k], out_b[k], out_w[k] = r, c, w[e]
                k += 1
    return out_a[:k], out_b[:k], out_w[:k]


@numba.njit(cache=True, nogil=True)
def _symmetric_csr(a, b, values, n):
    # Both directions of every undirected edge, rows in node order.
    indptr = np.zeros(n + 1, dtype=np.int64)
    for e in range(a.shape[0]):
        indptr[a[e] + 1] += 1
        indptr[b[e] + 1] += 1
    indptr = np.cumsum(indptr)
    fill = indptr[:-1].copy()
    indices = np.empty(indptr[-1], dtype=np.int64)
    weights = np.empty(indptr[-1], dtype=np.float64)
    for e in range(a.shape[0]):
        for x, y in ((a[e], b[e]), (b[e], a[e])):
            indices[fill[x]] = y
            weights[fill[x]] = values[e]
            fill[x] += 1
    return indptr, indices, weights


def _pairs_from_mate(mate: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Sibling pairs (first, second) of local node ids, ordered by their first node: matched
    pairs as matched, the unmatched nodes paired in order."""
    n = mate.shape[0]
    ids = np.arange(n)
    matched_first = ids[(mate > ids)]
    unmatched = ids[mate < 0]
    first = np.concatenate([matched_first, unmatched[0::2]])
    second = np.concatenate([mate[matched_first], unmatched[1::2]])
    order = np.argsort(first, kind="stable")
    return first[order], second[order]


def _leaf_edges(similarity, n_words: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected leaf edges (u < v) of the symmetrised similarity (maximum of both directions)."""
    sim = sp.csr_matrix(similarity, dtype=np.float64)
    if sim.shape != (n_words, n_words):
        raise TreeError(f"similarity matrix is {sim.shape[0]}x{sim.shape[1]}, "
                        f"the vocabulary has {n_words} words")
    sim = sim.maximum(sim.T).tocoo()
    keep = (sim.row < sim.col) & np.isfinite(sim.data) & (sim.data > 0)
    return sim.row[keep].astype(np.int64), sim.col[keep].astype(np.int64), sim.data[keep]


def match_level(indptr, indices, weights, method: str = "auto",
                exact_max_nodes: int = EXACT_MAX_NODES) -> Tuple[np.ndarray, str]:
    """Maximum-weight matching of one level graph (symmetric CSR); returns (mate, how)."""
    n = indptr.shape[0] - 1
    if method == "exact":
        return exact_matching(indptr, indices, weights), "exact"
    if method == "approx" or n > exact_max_nodes:
        return approximate_matching(indptr, indices, weights), "approx"
    full = sp.csr_matrix((weights, indices, indptr), shape=(n, n))
    candidates = top_k_symmetric(full, EXACT_CANDIDATES)
    mate = exact_matching(candidates.indptr, candidates.indices, candidates.data)
    return approximate_matching(indptr, indices, weights, initial=mate), "exact+polish"


# -- the builder -----------------------------------------------------------------------------------

def build_semhuff(vocab_or_counts, similarity, matching: str = "auto",
                  exact_max_nodes: int = EXACT_MAX_NODES,
                  on_level: Optional[Callable[[LevelStats], None]] = None) -> Tree:
    """SemHuff tree (``kind="semhuff"``) over a ``Vocab`` or frequency-sorted counts.

    ``similarity``: ``(V, V)`` sparse matrix of non-negative word similarities over vocabulary
    ids (see ``semhuff.trees.similarity``; symmetrised here by maximum). ``matching``:
    ``"auto"`` (levels up to ``exact_max_nodes`` nodes: blossom on each node's best edges, then
    polished on the full level graph; larger levels: the Numba approximation), ``"exact"``
    (blossom on every full level graph: minutes on large dense levels) or ``"approx"``.
    ``on_level`` receives a ``LevelStats`` per level.
    """
    if matching not in MATCHING_METHODS:
        raise TreeError(f"unknown matching {matching!r} "
                        f"(expected one of: {', '.join(MATCHING_METHODS)})")
    counts = getattr(vocab_or_counts, "counts", vocab_or_counts)
    huffman = build_huffman(counts)
    V = huffman.n_words
    if V <= 2:
        # nothing to rearrange; a one-word tree has no inner node at all
        (logger.warning if V == 1 else logger.info)(
            "vocabulary of %d word(s): the SemHuff tree is the Huffman tree%s", V,
            " (hierarchical softmax needs at least two words)" if V == 1 else "")
        return Tree(huffman.parent, huffman.branch, kind="semhuff")
    depth = huffman.node_depths()
    u, v, w = _leaf_edges(similarity, V)
    leaf_depth = depth[:V]
    # a leaf edge joins the level graphs at the depth of its shallower endpoint
    joins_at = np.minimum(leaf_depth[u], leaf_depth[v])
    order = np.argsort(-joins_at, kind="stable")
    u, v, w, joins_at = u[order], v[order], w[order], joins_at[order]

    by_depth = np.argsort(depth, kind="stable")  # node ids grouped by depth, ascending ids
    level_start = np.searchsorted(depth[by_depth], np.arange(depth.max() + 2))
    parent = np.full(2 * V - 1, -1, dtype=np.int32)
    branch = np.zeros(2 * V - 1, dtype=np.int8)
    size = np.zeros(2 * V - 1, dtype=np.int64)
    size[:V] = 1
    group = np.full(V, -1, dtype=np.int64)  # each placed leaf's node at the current level
    local = np.full(2 * V - 1, -1, dtype=np.int64)  # node id -> index within its level
    carried = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))  # summed, node ids
    edge_at = 0
    for d in range(int(depth.max()), 0, -1):
        started = time.perf_counter()
        nodes = by_depth[level_start[d]:level_start[d + 1]]
        slots = by_depth[level_start[d - 1]:level_start[d]]
        slots = slots[slots >= V]  # the inner nodes of level d - 1
        new_leaves = nodes[nodes < V]
        group[new_leaves] = new_leaves
        local[nodes] = np.arange(nodes.size)
        edge_end = edge_at + int(np.searchsorted(-joins_at[edge_at:], -d, side="right"))
        a = np.concatenate([carried[0], group[u[edge_at:edge_end]]])
        b = np.concatenate([carried[1], group[v[edge_at:edge_end]]])
        sums = np.concatenate([carried[2], w[edge_at:edge_end]])
        edge_at = edge_end
        la, lb, sums = _coalesce(local[a], local[b], sums, nodes.size)
        sizes = size[nodes]
        averaged = sums / (sizes[la] * sizes[lb])
        indptr, indices, weights = _symmetric_csr(la, lb, averaged, nodes.size)
        mate, method = match_level(indptr, indices, weights, matching, exact_max_nodes)
        first, second = _pairs_from_mate(mate)
        if first.size != slots.size:
            raise TreeError(f"level {d}: {nodes.size} nodes for {slots.size} parents")
        for side, bit in ((first, 0), (second, 1)):
            parent[nodes[side]] = slots
            branch[nodes[side]] = bit
        size[slots] = sizes[first] + sizes[second]
        placed = group >= 0
        group[placed] = parent[group[placed]]
        carried = (parent[nodes[la]].astype(np.int64), parent[nodes[lb]].astype(np.int64), sums)
        if on_level is not None or logger.isEnabledFor(logging.DEBUG):
            stats = LevelStats(d, nodes.size, new_leaves.size, la.size, method,
                               int(np.count_nonzero(mate >= 0) // 2),
                               matching_weight(indptr, indices, weights, mate),
                               time.perf_counter() - started, (indptr, indices, weights))
            logger.debug("level %d: %d nodes (%d leaves), %d edges, %s matching, %d pairs, "
                         "weight %.4g, %.3f s", d, stats.nodes, stats.leaves, stats.edges, method,
                         stats.matched_pairs, stats.matched_weight, stats.seconds)
            if on_level is not None:
                on_level(stats)
    tree = Tree(parent, branch, kind="semhuff")
    if not np.array_equal(tree.node_depths()[:V], depth[:V]):
        raise TreeError("internal error: SemHuff changed a word's depth")
    return tree


# -- tree statistics -------------------------------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _lca_sums(parent, depth, u, v, w, n_words):
    # Add every leaf edge's weight to the lowest common ancestor of its two leaves.
    total = np.zeros(parent.shape[0], dtype=np.float64)
    for e in range(u.shape[0]):
        a, b = u[e], v[e]
        while depth[a] > depth[b]:
            a = parent[a]
        while depth[b] > depth[a]:
            b = parent[b]
        while a != b:
            a = parent[a]
            b = parent[b]
        total[a] += w[e]
    return total[n_words:]


@numba.njit(cache=True, nogil=True)
def _leaf_counts(parent, depth, n_words):
    # Leaves under each node, accumulated deepest node first.
    size = np.zeros(parent.shape[0], dtype=np.int64)
    size[:n_words] = 1
    for node in np.argsort(-depth):
        if parent[node] >= 0:
            size[parent[node]] += size[node]
    return size


def sibling_similarity(tree: Tree, similarity) -> np.ndarray:
    """For every inner node (output row), the average similarity between the leaves of its two
    children — the quantity SemHuff maximises level by level. Their sum is the tree's "total
    sibling similarity"."""
    V = tree.n_words
    if V < 2:
        return np.zeros(0)
    u, v, w = _leaf_edges(similarity, V)
    depth = tree.node_depths().astype(np.int64)
    parent = tree.parent.astype(np.int64)
    sums = _lca_sums(parent, depth, u, v, w, V)
    size = _leaf_counts(parent, depth, V)
    child_sizes = np.ones((V - 1, 2), dtype=np.float64)
    children = np.flatnonzero(parent >= 0)
    child_sizes[parent[children] - V, tree.branch[children]] = size[children]
    return sums / (child_sizes[:, 0] * child_sizes[:, 1])
