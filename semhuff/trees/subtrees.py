"""Trees made from parts of other trees, for output layers with a flat top (a softmax over some
entries) and trees below it (``semhuff/lm/layers/head_tree.py``):

* ``restrict``: a tree over some of its words, the others cut out (a node left with one child
  is spliced out, so the kept words keep their order and their groupings);
* ``frontier``: the T heaviest subtrees hanging from the top of a tree (the top's heaviest
  subtree split in two until there are T);
* ``join``: two trees under a new root.

Everything is level-by-level numpy (no loop over nodes in Python): at V 50k a tree is cut in a
few tens of milliseconds.
"""
from __future__ import annotations

import heapq
from typing import Tuple

import numpy as np

from ..errors import TreeError
from .base import Tree


def _children(tree: Tree) -> np.ndarray:
    """(2V - 1, 2): each node's child on branch 0 and on branch 1 (-1 for a leaf)."""
    child = np.full((tree.parent.shape[0], 2), -1, np.int64)
    below = np.flatnonzero(tree.parent >= 0)
    child[tree.parent[below], tree.branch[below]] = below
    return child


def _levels(tree: Tree):
    """(depth of every node, the nodes of each depth, root first)."""
    depth = tree.node_depths().astype(np.int64)
    order = np.argsort(depth, kind="stable")
    starts = np.searchsorted(depth[order], np.arange(depth.max() + 2))
    return depth, [order[starts[d]:starts[d + 1]] for d in range(len(starts) - 1)]


def subtree_mass(tree: Tree, weights) -> np.ndarray:
    """The sum of ``weights`` (one a word) over the leaves below each node."""
    mass = np.zeros(tree.parent.shape[0], np.float64)
    mass[:tree.n_words] = weights
    _, levels = _levels(tree)
    for nodes in reversed(levels[1:]):
        np.add.at(mass, tree.parent[nodes], mass[nodes])
    return mass


def restrict(tree: Tree, keep, kind: str = None) -> Tree:
    """``tree`` over the words ``keep`` only (ids into ``tree``; leaf i of the result is word
    ``keep[i]``): the other leaves cut out and every inner node left with one child replaced by
    that child, so two kept words part where they parted in ``tree``."""
    keep = np.asarray(keep, np.int64)
    V = tree.n_words
    if keep.ndim != 1 or keep.size < 1 or np.unique(keep).size != keep.size \
            or keep.min() < 0 or keep.max() >= V:
        raise TreeError(f"restrict needs distinct word ids in 0..{V - 1}")
    kept_leaves = np.zeros(V, np.float64)
    kept_leaves[keep] = 1
    below = subtree_mass(tree, kept_leaves)  # kept words under each node
    child = _children(tree)
    inner = np.arange(V, tree.parent.shape[0])
    kept = np.zeros(tree.parent.shape[0], bool)
    kept[keep] = True
    kept[inner] = (below[child[inner, 0]] > 0) & (below[child[inner, 1]] > 0)
    # each node's nearest kept proper ancestor and the branch taken from it, top-down
    up = np.full(tree.parent.shape[0], -1, np.int64)
    up_branch = np.zeros(tree.parent.shape[0], np.int8)
    _, levels = _levels(tree)
    for nodes in levels[1:]:
        p = tree.parent[nodes]
        up[nodes] = np.where(kept[p], p, up[p])
        up_branch[nodes] = np.where(kept[p], tree.branch[nodes], up_branch[p])
    new_id = np.full(tree.parent.shape[0], -1, np.int64)
    new_id[keep] = np.arange(keep.size)
    kept_inner = inner[kept[inner]]
    new_id[kept_inner] = keep.size + np.arange(kept_inner.size)
    nodes = np.concatenate([keep, kept_inner])
    parent = np.full(2 * keep.size - 1, -1, np.int32)
    branch = np.zeros(2 * keep.size - 1, np.int8)
    has_up = up[nodes] >= 0
    parent[new_id[nodes[has_up]]] = new_id[up[nodes[has_up]]]
    branch[new_id[nodes[has_up]]] = up_branch[nodes[has_up]]
    return Tree(parent, branch, kind=kind or tree.kind)


def frontier(tree: Tree, weights, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """The ``n`` subtrees at the top of ``tree``: from the root, the heaviest subtree (by the
    sum of ``weights`` over its words) that is not a leaf is replaced by its two children until
    there are ``n``. Returns (the group of each word in 0..n-1, the subtrees numbered in the
    order of their root's node id; the depth of its group's root, i.e. how many of its path's nodes lie above
    the subtree)."""
    V = tree.n_words
    if not 1 <= n <= V:
        raise TreeError(f"a tree of {V:,} words has 1 to {V:,} subtrees at its top, not {n}")
    mass = subtree_mass(tree, weights)
    child = _children(tree)
    heap = [(-mass[tree.root], 0, tree.root)]  # (-mass, tie-break, node): the heaviest first
    leaves, tie = [], 1
    while len(heap) + len(leaves) < n:
        _, _, node = heapq.heappop(heap)
        for c in child[node]:
            if c < V:
                leaves.append(int(c))
            else:
                heapq.heappush(heap, (-mass[c], tie, int(c)))
                tie += 1
    roots = sorted(leaves + [node for _, _, node in heap])
    depth, levels = _levels(tree)
    group = np.full(tree.parent.shape[0], -1, np.int64)
    group[roots] = np.arange(len(roots))
    for nodes in levels[1:]:
        unset = nodes[group[nodes] < 0]
        group[unset] = group[tree.parent[unset]]
    words = group[:V]
    return words, depth[np.asarray(roots, np.int64)[words]]


def join(first: Tree, second: Tree, kind: str) -> Tree:
    """A tree whose root has ``first`` on branch 0 and ``second`` on branch 1: the words of
    ``first`` keep their ids, those of ``second`` come after them; inner rows: ``first``'s, then
    ``second``'s, then the new root."""
    a, b = first.n_words, second.n_words
    V = a + b
    parent = np.full(2 * V - 1, -1, np.int32)
    branch = np.zeros(2 * V - 1, np.int8)

    def place(tree, leaf0, inner0):
        n = tree.n_words
        ids = np.concatenate([leaf0 + np.arange(n), inner0 + np.arange(n - 1)])
        has = tree.parent >= 0
        mapped = np.where(tree.parent < n, leaf0 + tree.parent, inner0 + tree.parent - n)
        parent[ids[has]] = mapped[has]
        branch[ids[has]] = tree.branch[has]
        return ids[tree.root] if n > 1 else ids[0]

    root = 2 * V - 2
    for tree, leaf0, inner0, bit in ((first, 0, V, 0), (second, a, V + a - 1, 1)):
        top = place(tree, leaf0, inner0)
        parent[top], branch[top] = root, bit
    return Tree(parent, branch, kind=kind)


__all__ = ["frontier", "join", "restrict", "subtree_mass"]
