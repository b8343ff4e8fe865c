"""``reference_approximate_matching``: ``semhuff.trees.matching.approximate_matching`` written
naively in pure Python over dicts, no bound pruning, every candidate move evaluated in full.
Test code: ``test_matching.py`` checks the Numba kernel against it move for move."""
import numpy as np

from semhuff.trees.matching import (
    _GAIN_TOLERANCE,
    AUGMENT_BRANCH,
    AUGMENT_DEPTH,
    DEFAULT_MAX_PASSES,
)


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
    candidate move evaluated in full. Same visiting order (rows sorted by column) and tie rules,
    so the same result."""
    n = len(indptr) - 1
    neighbours = [sorted((int(indices[j]), float(weights[j])) for j in range(indptr[u], indptr[u + 1]))
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

    def local_search(dirty):
        dirty_next = set()
        for _ in range(max_passes):
            moved = False
            for u in range(n):
                if u not in dirty:
                    continue
                for v, w_uv in neighbours[u]:
                    mu, mv = mate[u], mate[v]
                    if v == mu:
                        continue
                    base = w_uv - current(u) - current(v)
                    has_free = [x >= 0 and any(mate[y] < 0 for y, _ in neighbours[x]) for x in (mu, mv)]
                    if mu >= 0 and mv >= 0 and not any(has_free) and 2.0 * w_uv <= current(u) + current(v):
                        continue  # a swap is only tried from the side of its heavier new edge
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
                    for x in (u, v, mu, mv, target_u, target_v):
                        if x >= 0:
                            dirty_next.add(x)
                            dirty_next.update(y for y, _ in neighbours[x])
                    moved = True
            if not moved:
                break
            dirty, dirty_next = dirty_next, set()

    def augment_from_free(dirty):
        found = 0
        for f in range(n):
            if mate[f] >= 0:
                continue
            best = [tolerance, []]
            on_path = {f}

            def search(x, gain, path):
                steps = sorted(((y, w - current(y)) for y, w in neighbours[x] if y not in on_path),
                               key=lambda step: -step[1])[:AUGMENT_BRANCH]
                for y, local_gain in steps:
                    if gain + local_gain > best[0]:
                        best[:] = [gain + local_gain, path + [y]]
                    z = mate[y]
                    if z >= 0 and len(path) + 1 < AUGMENT_DEPTH:
                        on_path.update((y, z))
                        search(z, gain + local_gain, path + [y])
                        on_path.difference_update((y, z))

            search(f, 0.0, [])
            x = f
            for y in best[1]:
                z = mate[y]
                if z >= 0:
                    mate[z] = -1
                mate[x], mate[y] = y, x
                for v in (x, y, z):
                    if v >= 0:
                        dirty.add(v)
                        dirty.update(t for t, _ in neighbours[v])
                x = z
            found += bool(best[1])
        return found

    dirty = set(range(n))
    for _ in range(max_passes):
        local_search(dirty)
        dirty = set()
        if not augment_from_free(dirty):
            break
    return np.array(mate, dtype=np.int64)
