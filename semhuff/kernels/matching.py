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
* ``max_weight_matching`` — picks one by the number of edges (``EXACT_MAX_EDGES``, measured:
  see docs/semhuff.md).
* ``reference_approximate_matching`` — the same algorithm written naively in pure Python over
  dicts; the tests check the Numba kernel against it move for move.

A matching is returned as ``mate``: ``mate[v]`` is ``v``'s partner or -1.
"""
from __future__ import annotations

import logging

import numba
import numpy as np

logger = logging.getLogger(__name__)

# Levels with at most this many (undirected) edges are matched exactly. Measured on the real
# levels of the 56k-word corpus vocabulary (docs/semhuff.md): rustworkx needs ~0.05 s at 5k
# edges but seconds beyond ~50k, while the approximation stays within 0.1% of the optimum.
EXACT_MAX_EDGES = 20_000
DEFAULT_MAX_PASSES = 50
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
            # a cycle of `length` edges: leave out its first edge, or take it and leave out
            # both of its neighbours
            without_first = _path_table(chain_w[1:length], length - 1)[length - 1]
            with_first = chain_w[0] + _path_table(chain_w[2:length - 1], length - 3)[length - 3]
            if with_first > without_first:
                mate[chain[0]], mate[chain[1]] = chain[1], chain[0]
                matched_weight[chain[0]] = matched_weight[chain[1]] = chain_w[0]
                _match_path(chain[2:length], chain_w[2:length - 1], length - 3, mate, matched_weight)
            else:
                _match_path(chain[1:length + 1], chain_w[1:length], length - 1, mate, matched_weight)


@numba.njit(cache=True, nogil=True)
def _best_two_free(indptr, indices, weights, mate, x, skip_a, skip_b, partner):
    # Two best free neighbours of x (not skip_a / skip_b), and the weight of edge x-partner.
    t1, t2 = -1, -1
    w1, w2 = 0.0, 0.0
    w_partner = 0.0
    for j in range(indptr[x], indptr[x + 1]):
        y = indices[j]
        w = weights[j]
        if y == partner:
            w_partner = w
        if mate[y] >= 0 or y == skip_a or y == skip_b:
            continue
        if w > w1:
            t2, w2 = t1, w1
            t1, w1 = y, w
        elif w > w2:
            t2, w2 = y, w
    return t1, w1, t2, w2, w_partner


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
def _local_search(indptr, indices, weights, mate, matched_weight, max_passes, tolerance):
    n = indptr.shape[0] - 1
    best_to, best_w, second_w = _top_two(indptr, indices, weights)
    moves = 0
    for _ in range(max_passes):
        moved = False
        for u in range(n):
            for j in range(indptr[u], indptr[u + 1]):
                v = indices[j]
                mu, mv = mate[u], mate[v]
                if v == mu:
                    continue
                base = weights[j] - matched_weight[u] - matched_weight[v]
                # Upper bound on the gain: a freed mate regains at most its best other edge.
                bound = base
                if mu >= 0:
                    bound += second_w[mu] if best_to[mu] == u else best_w[mu]
                if mv >= 0:
                    bound += second_w[mv] if best_to[mv] == v else best_w[mv]
                if bound <= tolerance:
                    continue
                t1u, w1u, t2u, w2u, w_mates = -1, 0.0, -1, 0.0, 0.0
                t1v, w1v, t2v, w2v = -1, 0.0, -1, 0.0
                if mu >= 0:
                    t1u, w1u, t2u, w2u, w_mates = _best_two_free(
                        indptr, indices, weights, mate, mu, u, v, mv)
                if mv >= 0:
                    t1v, w1v, t2v, w2v, _w = _best_two_free(
                        indptr, indices, weights, mate, mv, u, v, mu)
                extra, target_u, target_v = _best_rematch(
                    t1u, w1u, t2u, w2u, t1v, w1v, t2v, w2v, w_mates, mu >= 0 and mv >= 0)
                if base + extra <= tolerance:
                    continue
                if mu >= 0:
                    mate[mu] = -1
                    matched_weight[mu] = 0.0
                if mv >= 0:
                    mate[mv] = -1
                    matched_weight[mv] = 0.0
                mate[u], mate[v] = v, u
                matched_weight[u] = matched_weight[v] = weights[j]
                if target_u == -2:
                    mate[mu], mate[mv] = mv, mu
                    matched_weight[mu] = matched_weight[mv] = w_mates
                else:
                    if target_u >= 0:
                        mate[mu], mate[target_u] = target_u, mu
                        matched_weight[mu] = matched_weight[target_u] = w1u if target_u == t1u else w2u
                    if target_v >= 0:
                        mate[mv], mate[target_v] = target_v, mv
                        matched_weight[mv] = matched_weight[target_v] = w1v if target_v == t1v else w2v
                moves += 1
                moved = True
        if not moved:
            break
    return moves


def _as_csr(indptr, indices, weights):
    return (np.ascontiguousarray(indptr, dtype=np.int64),
            np.ascontiguousarray(indices, dtype=np.int64),
            np.ascontiguousarray(weights, dtype=np.float64))


def approximate_matching(indptr, indices, weights, max_passes: int = DEFAULT_MAX_PASSES) -> np.ndarray:
    """Greedy matching improved by local search (see the module docstring)."""
    indptr, indices, weights = _as_csr(indptr, indices, weights)
    n = indptr.shape[0] - 1
    mate = np.full(n, -1, dtype=np.int64)
    matched_weight = np.zeros(n)
    _path_growing(indptr, indices, weights, mate, matched_weight)
    tolerance = _GAIN_TOLERANCE * (weights.max() if weights.size else 1.0)
    _local_search(indptr, indices, weights, mate, matched_weight, max_passes, tolerance)
    return mate


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


def max_weight_matching(indptr, indices, weights, method: str = "auto",
                        exact_max_edges: int = EXACT_MAX_EDGES) -> np.ndarray:
    """``method``: ``"exact"``, ``"approx"`` or ``"auto"`` (exact up to ``exact_max_edges``
    undirected edges)."""
    if method not in ("auto", "exact", "approx"):
        raise ValueError(f"unknown matching method {method!r}")
    n_edges = len(indices) // 2
    if method == "exact" or (method == "auto" and n_edges <= exact_max_edges):
        return exact_matching(indptr, indices, weights)
    return approximate_matching(indptr, indices, weights)


# -- naive reference -------------------------------------------------------------------------------

def _reference_path_matching(path, path_w):
    """Optimal matching of a path (vertex list, edge weights) by dynamic programming."""
    best = [0.0] * (len(path_w) + 1)
    for i in range(1, len(path_w) + 1):
        best[i] = max(best[i - 1], path_w[i - 1] + (best[i - 2] if i >= 2 else 0.0))
    pairs, i = [], len(path_w)
    while i >= 1:
        if best[i] != best[i - 1]:
            pairs.append((path[i - 1], path[i]))
            i -= 2
        else:
            i -= 1
    return best[-1], pairs


def _reference_path_growing(n, neighbours, mate):
    edges = sorted(((u, v, w) for u in range(n) for v, w in neighbours[u] if u < v),
                   key=lambda e: -e[2])  # stable: ties keep CSR order
    links = [[] for _ in range(n)]  # chosen (neighbour, weight), in the order chosen

    def walk(start):
        """Vertices and edge weights from ``start`` along chosen edges, to the end or round."""
        path, path_w, prev, cur = [start], [], None, start
        while True:
            step = next(((y, w) for y, w in links[cur] if y != prev), None)
            if step is None:
                return path, path_w
            path.append(step[0])
            path_w.append(step[1])
            if step[0] == start:
                return path, path_w
            prev, cur = cur, step[0]

    for u, v, w in edges:
        if len(links[u]) >= 2 or len(links[v]) >= 2:
            continue
        path, path_w = walk(u)
        if path[-1] == v and len(path_w) % 2 == 0:
            continue  # would close an odd cycle
        links[u].append((v, w))
        links[v].append((u, w))
    seen = [False] * n
    for cycles in (False, True):  # paths from an endpoint first, then the cycles left
        for u in range(n):
            if seen[u] or len(links[u]) != (2 if cycles else 1):
                continue
            path, path_w = walk(u)
            for x in path:
                seen[x] = True
            if not cycles:
                pairs = _reference_path_matching(path, path_w)[1]
            else:
                m = len(path_w)
                without_first, pairs = _reference_path_matching(path[1:], path_w[1:])
                mid, pairs_mid = _reference_path_matching(path[2:m], path_w[2:m - 1])
                if path_w[0] + mid > without_first:
                    pairs = [(path[0], path[1])] + pairs_mid
            for a, b in pairs:
                mate[a], mate[b] = b, a


def reference_approximate_matching(indptr, indices, weights, max_passes: int = DEFAULT_MAX_PASSES):
    """Pure-Python version of ``approximate_matching``: plain dicts, no bound pruning, every
    candidate move evaluated in full. Same visiting order and tie rules, so the same result."""
    n = len(indptr) - 1
    neighbours = [[(int(indices[j]), float(weights[j])) for j in range(indptr[u], indptr[u + 1])]
                  for u in range(n)]
    weight_of = {(u, v): w for u in range(n) for v, w in neighbours[u]}
    mate = [-1] * n

    def w_of(a, b):
        return weight_of.get((a, b), 0.0)

    def current(x):
        return w_of(x, mate[x]) if mate[x] >= 0 else 0.0

    _reference_path_growing(n, neighbours, mate)
    tolerance = _GAIN_TOLERANCE * (max(weights) if len(weights) else 1.0)

    def free_targets(x, exclude):
        # free neighbours of x, best first (ties: CSR order)
        cands = [(y, w) for y, w in neighbours[x] if mate[y] < 0 and y not in exclude]
        return sorted(cands, key=lambda c: -c[1])[:2]

    for _ in range(max_passes):
        moved = False
        for u in range(n):
            for v, w_uv in neighbours[u]:
                mu, mv = mate[u], mate[v]
                if v == mu:
                    continue
                base = w_uv - current(u) - current(v)
                options = [(0.0, -1, -1)]
                if mu >= 0 and mv >= 0 and (mu, mv) in weight_of:
                    options.append((w_of(mu, mv), -2, -2))
                free_u = free_targets(mu, {u, v}) if mu >= 0 else []
                free_v = free_targets(mv, {u, v}) if mv >= 0 else []
                for tu, wu in free_u:
                    for tv, wv in free_v:
                        if tu != tv:
                            options.append((wu + wv, tu, tv))
                options += [(wu, tu, -1) for tu, wu in free_u[:1]]
                options += [(wv, -1, tv) for tv, wv in free_v[:1]]
                extra = max(o[0] for o in options)
                if base + extra <= tolerance:
                    continue
                _, target_u, target_v = next(o for o in options if o[0] == extra)
                if mu >= 0:
                    mate[mu] = -1
                if mv >= 0:
                    mate[mv] = -1
                mate[u], mate[v] = v, u
                if target_u == -2:
                    mate[mu], mate[mv] = mv, mu
                else:
                    if target_u >= 0:
                        mate[mu], mate[target_u] = target_u, mu
                    if target_v >= 0:
                        mate[mv], mate[target_v] = target_v, mv
                moved = True
        if not moved:
            break
    return np.array(mate, dtype=np.int64)
