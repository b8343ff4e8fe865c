"""Maximum-weight matching on a sparse symmetric graph given as CSR (``indptr, indices,
weights``, both directions stored, no self-loops, weights > 0).

* ``approximate_matching`` — Numba: greedy by weight, in the form of Maue & Sanders' Global Paths
  Algorithm (edges heaviest first into paths and even cycles, each then matched optimally by
  dynamic programming; a ½-approximation like plain greedy, 1-2% better on our levels), then
  local search until no move gains: for a vertex ``u`` and a neighbour ``v`` not its mate, match ``u–v``, free
  their old mates ``mu`` and ``mv``, and re-match those at their best: to each other (a 2-opt
  swap) or to currently free neighbours (augmenting paths of up to five edges).
* ``exact_matching`` — rustworkx's blossom algorithm (networkx's as a fallback) on integer
  weights scaled from the floats; O(n³) in the worst case, so only for small levels.
* The same approximation written naively in pure Python over dicts lives with the tests
  (``tests/naive_matching.py``), which check the Numba kernel against it move for move.

A matching is returned as ``mate``: ``mate[v]`` is ``v``'s partner or -1.
"""
from __future__ import annotations

import logging

import numpy as np

from ..numba_cache import numba

logger = logging.getLogger(__name__)

DEFAULT_MAX_PASSES = 50
# Alternating-path search from free vertices: up to AUGMENT_DEPTH broken matched edges, the
# AUGMENT_BRANCH best steps at each. Measured on the sparsest real levels (docs/semhuff.md):
# depth 6 / branch 4 lifts them from 0.96-0.98 of the optimum to 0.985-0.998 for 0.2 s.
AUGMENT_DEPTH = 6
AUGMENT_BRANCH = 4
# A move must gain more than this (relative to the largest weight) to count, so float noise
# cannot make the local search cycle.
_GAIN_TOLERANCE = 1e-12


@numba.njit(cache=True, nogil=True)
def _upper_edges_by_weight(indptr, indices, weights):
    # Each undirected edge once (u < v), heaviest first; ties keep CSR order (stable sort).
    n = indptr.shape[0] - 1
    src = np.empty(indices.shape[0], dtype=np.int64)
    for u in range(n):
        src[indptr[u]:indptr[u + 1]] = u
    upper = np.flatnonzero(src < indices)
    order = upper[np.argsort(-weights[upper], kind="mergesort")]
    return src[order], indices[order], weights[order]


@numba.njit(cache=True, nogil=True)
def _path_table(chain_w, length):
    # best[i]: maximum-weight matching of a path's first i edges (dynamic programming).
    best = np.zeros(length + 1)
    for i in range(1, length + 1):
        take = chain_w[i - 1] + (best[i - 2] if i >= 2 else 0.0)
        best[i] = take if take > best[i - 1] else best[i - 1]
    return best


@numba.njit(cache=True, nogil=True)
def _match_path(chain, chain_w, length, mate, matched_weight):
    # Apply the optimal matching of the path chain[0] - chain[1] - ... - chain[length].
    best = _path_table(chain_w, length)
    i = length
    while i >= 1:
        if best[i] != best[i - 1]:
            a, b = chain[i - 1], chain[i]
            mate[a], mate[b] = b, a
            matched_weight[a] = matched_weight[b] = chain_w[i - 1]
            i -= 2
        else:
            i -= 1


@numba.njit(cache=True, nogil=True)
def _match_cycle(chain, chain_w, length, mate, matched_weight):
    # Optimal matching of the cycle chain[0] - ... - chain[length] == chain[0] (length >= 3):
    # leave out its first edge, or take it and leave out both of its neighbours.
    without_first = _path_table(chain_w[1:length], length - 1)[length - 1]
    with_first = chain_w[0] + _path_table(chain_w[2:length - 1], length - 3)[length - 3]
    if with_first > without_first:
        mate[chain[0]], mate[chain[1]] = chain[1], chain[0]
        matched_weight[chain[0]] = matched_weight[chain[1]] = chain_w[0]
        _match_path(chain[2:length], chain_w[2:length - 1], length - 3, mate, matched_weight)
    else:
        _match_path(chain[1:length + 1], chain_w[1:length], length - 1, mate, matched_weight)


@numba.njit(cache=True, nogil=True)
def _path_growing(indptr, indices, weights, mate, matched_weight):
    # Maue & Sanders' Global Paths Algorithm: take edges heaviest first into a set of paths and
    # even cycles (every vertex degree <= 2, no odd cycle), then match each path or cycle
    # optimally. Keeps greedy's 1/2 guarantee and is usually a few per cent better.
    n = indptr.shape[0] - 1
    eu, ev, ew = _upper_edges_by_weight(indptr, indices, weights)
    degree = np.zeros(n, dtype=np.int64)
    link = np.full((n, 2), -1, dtype=np.int64)
    link_w = np.zeros((n, 2))
    other_end = np.arange(n)            # valid at path endpoints
    path_edges = np.zeros(n, dtype=np.int64)
    for e in range(eu.shape[0]):
        u, v = eu[e], ev[e]
        if degree[u] >= 2 or degree[v] >= 2:
            continue
        if other_end[u] == v:           # closes a cycle: keep only even ones
            if path_edges[u] % 2 == 0:
                continue
        else:
            a, b = other_end[u], other_end[v]
            other_end[a], other_end[b] = b, a
            path_edges[a] = path_edges[b] = path_edges[u] + path_edges[v] + 1
        link[u, degree[u]], link_w[u, degree[u]] = v, ew[e]
        link[v, degree[v]], link_w[v, degree[v]] = u, ew[e]
        degree[u] += 1
        degree[v] += 1
    visited = np.zeros(n, dtype=np.bool_)
    chain = np.empty(n + 1, dtype=np.int64)
    chain_w = np.empty(n + 1)
    for cycles in range(2):             # paths from an endpoint first, then the cycles left
        for start in range(n):
            if visited[start] or degree[start] != (2 if cycles else 1):
                continue
            visited[start] = True
            chain[0] = start
            length, prev, cur = 0, -1, start
            while True:
                nxt, nw = -1, 0.0
                for k in range(degree[cur]):
                    if link[cur, k] != prev:
                        nxt, nw = link[cur, k], link_w[cur, k]
                        break
                if nxt < 0:
                    break
                chain_w[length] = nw
                length += 1
                chain[length] = nxt
                if nxt == start:
                    break
                visited[nxt] = True
                prev, cur = cur, nxt
            if not cycles:
                _match_path(chain, chain_w, length, mate, matched_weight)
                continue
            _match_cycle(chain, chain_w, length, mate, matched_weight)


@numba.njit(cache=True, nogil=True)
def _edge_weight(indptr, indices, weights, a, b):
    # Weight of edge a-b (0 if absent) by binary search: rows are sorted by column.
    lo, hi = indptr[a], indptr[a + 1]
    j = lo + np.searchsorted(indices[lo:hi], b)
    return weights[j] if j < hi and indices[j] == b else 0.0


@numba.njit(cache=True, nogil=True)
def _best_two_free(indptr, indices, weights, mate, free_neighbours, x, skip_a, skip_b):
    # Two best free neighbours of x other than skip_a / skip_b; skipped outright when x has no
    # free neighbour at all (the common case once the matching is nearly perfect).
    t1, t2 = -1, -1
    w1, w2 = 0.0, 0.0
    if free_neighbours[x] == 0:
        return t1, w1, t2, w2
    for j in range(indptr[x], indptr[x + 1]):
        y = indices[j]
        if mate[y] >= 0 or y == skip_a or y == skip_b:
            continue
        w = weights[j]
        if w > w1:
            t2, w2 = t1, w1
            t1, w1 = y, w
        elif w > w2:
            t2, w2 = y, w
    return t1, w1, t2, w2


@numba.njit(cache=True, nogil=True)
def _best_rematch(t1u, w1u, t2u, w2u, t1v, w1v, t2v, w2v, w_mates, both):
    # Best way to re-match the freed mates: (gain, target of mu, target of mv); a target of -2
    # means "each other", -1 means "stays free".
    best, target_u, target_v = 0.0, -1, -1
    if both and w_mates > best:
        best, target_u, target_v = w_mates, -2, -2
    if t1u >= 0 and t1v >= 0 and t1u != t1v:
        if w1u + w1v > best:
            best, target_u, target_v = w1u + w1v, t1u, t1v
    elif t1u >= 0 and t1u == t1v:
        if t2v >= 0 and w1u + w2v > best:
            best, target_u, target_v = w1u + w2v, t1u, t2v
        if t2u >= 0 and w2u + w1v > best:
            best, target_u, target_v = w2u + w1v, t2u, t1v
    if t1u >= 0 and w1u > best:
        best, target_u, target_v = w1u, t1u, -1
    if t1v >= 0 and w1v > best:
        best, target_u, target_v = w1v, -1, t1v
    return best, target_u, target_v


@numba.njit(cache=True, nogil=True)
def _top_two(indptr, indices, weights):
    # Static per-vertex best and second-best incident edge: bounds what a freed vertex can regain.
    n = indptr.shape[0] - 1
    best_to = np.full(n, -1, dtype=np.int64)
    best_w = np.zeros(n)
    second_w = np.zeros(n)
    for x in range(n):
        for j in range(indptr[x], indptr[x + 1]):
            w = weights[j]
            if w > best_w[x]:
                second_w[x] = best_w[x]
                best_w[x] = w
                best_to[x] = indices[j]
            elif w > second_w[x]:
                second_w[x] = w
    return best_to, best_w, second_w


@numba.njit(cache=True, nogil=True)
def _pair(mate, matched_weight, a, b, w):
    mate[a], mate[b] = b, a
    matched_weight[a] = matched_weight[b] = w


@numba.njit(cache=True, nogil=True)
def _local_search(indptr, indices, weights, mate, matched_weight, dirty, max_passes, tolerance):
    # Passes over the "dirty" vertices (given; later those within one edge of a vertex a move
    # changed) until a pass finds no improving move.
    n = indptr.shape[0] - 1
    best_to, best_w, second_w = _top_two(indptr, indices, weights)
    free_neighbours = np.zeros(n, dtype=np.int64)
    for x in range(n):
        for j in range(indptr[x], indptr[x + 1]):
            free_neighbours[x] += mate[indices[j]] < 0
    dirty_next = np.zeros(n, dtype=np.bool_)
    touched = np.empty(6, dtype=np.int64)
    was_free = np.empty(6, dtype=np.bool_)
    moves = 0
    for _ in range(max_passes):
        moved = False
        for u in range(n):
            if not dirty[u]:
                continue
            for j in range(indptr[u], indptr[u + 1]):
                v = indices[j]
                mu, mv = mate[u], mate[v]
                if v == mu:
                    continue
                base = weights[j] - matched_weight[u] - matched_weight[v]
                if ((mu < 0 or free_neighbours[mu] == 0) and (mv < 0 or free_neighbours[mv] == 0)
                        and mu >= 0 and mv >= 0):
                    # Only a 2-opt swap is possible. It gains only if one of its two new edges
                    # beats the average of the two it replaces; it is tried from that edge's side.
                    if 2.0 * weights[j] <= matched_weight[u] + matched_weight[v]:
                        continue
                else:
                    # Upper bound on the gain: a freed mate regains at most its best other edge.
                    bound = base
                    if mu >= 0:
                        bound += second_w[mu] if best_to[mu] == u else best_w[mu]
                    if mv >= 0:
                        bound += second_w[mv] if best_to[mv] == v else best_w[mv]
                    if bound <= tolerance:
                        continue
                t1u, w1u, t2u, w2u = -1, 0.0, -1, 0.0
                t1v, w1v, t2v, w2v = -1, 0.0, -1, 0.0
                w_mates = 0.0
                if mu >= 0:
                    t1u, w1u, t2u, w2u = _best_two_free(
                        indptr, indices, weights, mate, free_neighbours, mu, u, v)
                if mv >= 0:
                    t1v, w1v, t2v, w2v = _best_two_free(
                        indptr, indices, weights, mate, free_neighbours, mv, u, v)
                    if mu >= 0:
                        w_mates = _edge_weight(indptr, indices, weights, mu, mv)
                extra, target_u, target_v = _best_rematch(
                    t1u, w1u, t2u, w2u, t1v, w1v, t2v, w2v, w_mates, mu >= 0 and mv >= 0)
                if base + extra <= tolerance:
                    continue
                touched[:] = (u, v, mu, mv, target_u, target_v)
                for k in range(6):
                    was_free[k] = touched[k] >= 0 and mate[touched[k]] < 0
                for x in (mu, mv):
                    if x >= 0:
                        mate[x] = -1
                        matched_weight[x] = 0.0
                _pair(mate, matched_weight, u, v, weights[j])
                if target_u == -2:
                    _pair(mate, matched_weight, mu, mv, w_mates)
                else:
                    if target_u >= 0:
                        _pair(mate, matched_weight, mu, target_u, w1u if target_u == t1u else w2u)
                    if target_v >= 0:
                        _pair(mate, matched_weight, mv, target_v, w1v if target_v == t1v else w2v)
                for k in range(6):
                    x = touched[k]
                    if x < 0:
                        continue
                    # keep the free-neighbour counts right, and revisit x's neighbourhood
                    change = 0
                    if was_free[k] != (mate[x] < 0):
                        change = 1 if mate[x] < 0 else -1
                    dirty_next[x] = True
                    for i in range(indptr[x], indptr[x + 1]):
                        free_neighbours[indices[i]] += change
                        dirty_next[indices[i]] = True
                moves += 1
                moved = True
        if not moved:
            break
        dirty[:] = dirty_next
        dirty_next[:] = False
    return moves


@numba.njit(cache=True, nogil=True)
def _best_candidates(indptr, indices, weights, mate, matched_weight, on_path, stamp, x,
                     branch, cand, cand_gain):
    # The `branch` neighbours y of x (off the current path) with the best local gain
    # w(x, y) - w(y, mate y); ties keep CSR order. Returns how many were found.
    count = 0
    for j in range(indptr[x], indptr[x + 1]):
        y = indices[j]
        if on_path[y] == stamp:
            continue
        gain = weights[j] - matched_weight[y]
        if count == branch and gain <= cand_gain[count - 1]:
            continue
        k = count if count < branch else branch - 1
        while k > 0 and gain > cand_gain[k - 1]:
            cand[k], cand_gain[k] = cand[k - 1], cand_gain[k - 1]
            k -= 1
        cand[k], cand_gain[k] = y, gain
        if count < branch:
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _augment_from_free(indptr, indices, weights, mate, matched_weight, dirty, max_depth, branch,
                       tolerance):
    # From every free vertex f, a depth-first search over alternating paths
    # f - y0 = z0 - y1 = z1 - ... (new edge, then the matched edge y=z it breaks), trying the
    # `branch` best steps at each of at most `max_depth` levels. A path ends at a free y (an
    # augmenting path) or after freeing some z. The best path with positive gain is applied.
    # These longer paths are what the 2-opt local search cannot see on sparse levels.
    n = indptr.shape[0] - 1
    on_path = np.full(n, -1, dtype=np.int64)
    cand = np.empty((max_depth, branch), dtype=np.int64)
    cand_gain = np.empty((max_depth, branch))
    n_cand = np.zeros(max_depth, dtype=np.int64)
    next_cand = np.zeros(max_depth, dtype=np.int64)
    at = np.empty(max_depth, dtype=np.int64)      # x of each level: f, z0, z1, ...
    gain_at = np.zeros(max_depth)
    chosen = np.empty(max_depth, dtype=np.int64)  # y of each level
    best_path = np.empty(max_depth, dtype=np.int64)
    augmented = 0
    for f in range(n):
        if mate[f] >= 0:
            continue
        on_path[f] = f
        best_gain, best_len = tolerance, 0
        at[0], gain_at[0] = f, 0.0
        n_cand[0] = _best_candidates(indptr, indices, weights, mate, matched_weight, on_path, f,
                                     f, branch, cand[0], cand_gain[0])
        next_cand[0] = 0
        d = 0
        while d >= 0:
            if next_cand[d] == n_cand[d]:
                d -= 1
                if d >= 0:  # step back: y and z of that level leave the path
                    on_path[chosen[d]] = -1
                    on_path[at[d + 1]] = -1
                continue
            y = cand[d, next_cand[d]]
            gain = gain_at[d] + cand_gain[d, next_cand[d]]
            next_cand[d] += 1
            chosen[d] = y
            if gain > best_gain:
                best_gain, best_len = gain, d + 1
                best_path[:d + 1] = chosen[:d + 1]
            z = mate[y]
            if z < 0 or d + 1 == max_depth:
                continue
            on_path[y] = f
            on_path[z] = f
            d += 1
            at[d], gain_at[d] = z, gain
            n_cand[d] = _best_candidates(indptr, indices, weights, mate, matched_weight, on_path,
                                         f, z, branch, cand[d], cand_gain[d])
            next_cand[d] = 0
        on_path[f] = -1
        if best_len == 0:
            continue
        # apply: every y leaves its mate z, then x_i pairs with y_i (x_0 = f, x_i = z_{i-1})
        x = f
        for i in range(best_len):
            y = best_path[i]
            z = mate[y]
            if z >= 0:
                mate[z] = -1
                matched_weight[z] = 0.0
            w = _edge_weight(indptr, indices, weights, x, y)
            _pair(mate, matched_weight, x, y, w)
            for v in (x, y, z):
                if v >= 0:
                    dirty[v] = True
                    for j in range(indptr[v], indptr[v + 1]):
                        dirty[indices[j]] = True
            x = z
        augmented += 1
    return augmented


@numba.njit(cache=True, nogil=True)
def _rows_sorted(indptr, indices):
    for r in range(indptr.shape[0] - 1):
        for j in range(indptr[r] + 1, indptr[r + 1]):
            if indices[j - 1] >= indices[j]:
                return False
    return True


@numba.njit(cache=True, nogil=True)
def _sort_rows(indptr, indices, weights):
    # Sort every row by column (what the binary-search edge lookup needs).
    out_i = indices.copy()
    out_w = weights.copy()
    for r in range(indptr.shape[0] - 1):
        lo, hi = indptr[r], indptr[r + 1]
        order = np.argsort(indices[lo:hi], kind="mergesort")
        out_i[lo:hi] = indices[lo:hi][order]
        out_w[lo:hi] = weights[lo:hi][order]
    return out_i, out_w


def _as_csr(indptr, indices, weights):
    return (np.ascontiguousarray(indptr, dtype=np.int64),
            np.ascontiguousarray(indices, dtype=np.int64),
            np.ascontiguousarray(weights, dtype=np.float64))


def approximate_matching(indptr, indices, weights, initial=None,
                         max_passes: int = DEFAULT_MAX_PASSES) -> np.ndarray:
    """Greedy (path-growing) matching improved by local search, see the module docstring; with
    ``initial`` (a mate array, e.g. an exact matching of a sparser candidate graph) only the
    local search runs, starting from it. Rows are sorted by column first if they are not."""
    indptr, indices, weights = _as_csr(indptr, indices, weights)
    if not _rows_sorted(indptr, indices):
        indices, weights = _sort_rows(indptr, indices, weights)
    n = indptr.shape[0] - 1
    if initial is None:
        mate = np.full(n, -1, dtype=np.int64)
        matched_weight = np.zeros(n)
        _path_growing(indptr, indices, weights, mate, matched_weight)
    else:
        mate = np.array(initial, dtype=np.int64)
        matched_weight = _matched_weights(indptr, indices, weights, mate)
    tolerance = _GAIN_TOLERANCE * (weights.max() if weights.size else 1.0)
    dirty = np.ones(n, dtype=np.bool_)
    for _ in range(max_passes):
        _local_search(indptr, indices, weights, mate, matched_weight, dirty, max_passes, tolerance)
        dirty[:] = False
        if not _augment_from_free(indptr, indices, weights, mate, matched_weight, dirty,
                                  AUGMENT_DEPTH, AUGMENT_BRANCH, tolerance):
            break
    return mate


@numba.njit(cache=True, nogil=True)
def _matched_weights(indptr, indices, weights, mate):
    out = np.zeros(mate.shape[0])
    for x in range(mate.shape[0]):
        if mate[x] >= 0:
            out[x] = _edge_weight(indptr, indices, weights, x, mate[x])
    return out


def matching_weight(indptr, indices, weights, mate) -> float:
    """Total weight of the matched edges (each counted once)."""
    indptr, indices, weights = _as_csr(indptr, indices, weights)
    src = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    chosen = (np.asarray(mate)[src] == indices) & (src < indices)
    return float(weights[chosen].sum())


def exact_matching(indptr, indices, weights) -> np.ndarray:
    """Maximum-weight matching (blossom): rustworkx on integer weights, networkx if missing."""
    indptr, indices, weights = _as_csr(indptr, indices, weights)
    n = indptr.shape[0] - 1
    src = np.repeat(np.arange(n), np.diff(indptr))
    upper = src < indices
    us, vs, ws = src[upper], indices[upper], weights[upper]
    mate = np.full(n, -1, dtype=np.int64)
    if us.size == 0:
        return mate
    try:
        import rustworkx as rx
    except ImportError:  # pragma: no cover - rustworkx is a declared dependency
        rx = None
    if rx is not None:
        # rustworkx wants integer weights: scale so the largest is 2**40 (float rounding ~1e-12)
        scaled = np.rint(ws * (2.0 ** 40 / ws.max())).astype(np.int64)
        graph = rx.PyGraph(multigraph=False)
        graph.add_nodes_from(range(n))
        graph.add_edges_from(list(zip(us.tolist(), vs.tolist(), scaled.tolist())))
        pairs = rx.max_weight_matching(graph, weight_fn=int)
    else:
        import networkx as nx
        graph = nx.Graph()
        graph.add_weighted_edges_from(zip(us.tolist(), vs.tolist(), ws.tolist()))
        pairs = nx.max_weight_matching(graph)
    for a, b in pairs:
        mate[a], mate[b] = b, a
    return mate
