"""Generation from a tree softmax without its whole distribution.

* ``walk_sample``: a word drawn from P(w | h) by walking down from the root, drawing each
  binary decision (the left child with probability sigmoid(s), s = h . W[node]): the product of
  the decisions is the word's probability, so the draw is exact, at ~depth dot products a row
  where the whole distribution costs V - 1. Every row takes one step a level, the finished
  rows kept as they are, ``max_depth`` levels: nothing is read back to the host (on the CPU the
  finished rows are left out, which the read-back there costs nothing for).
* ``beam_topk``: the k most probable words, exactly, by a search with pruning: a node's path
  probability bounds every word below it, so a node below the k-th best word found so far is
  cut; the nodes still open are kept ``beam`` at most a row, the best first. A row whose
  search had to drop an open node better than its k-th word is marked not exact (the caller
  takes the whole distribution for it): the result is exact either way, the search is the
  fast path. On the CPU each level keeps only as many columns as some row still needs.

Both work on ``TreeWalk``: each inner row's two children (node ids: < V a word, else inner
row id - V) and the root.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ...trees.base import Tree
from .paths import compute_dtype


class TreeWalk:
    """``child`` (V - 1, 2): the node on each side of inner row r (branch bit 0, 1); ``root``
    (an inner node id); ``depth``: the longest path."""

    def __init__(self, tree: Tree, device=None):
        V = tree.n_words
        parent = tree.parent.astype(np.int64)
        child = np.zeros((V - 1, 2), np.int64)
        below = np.flatnonzero(parent >= 0)
        child[parent[below] - V, tree.branch[below].astype(np.int64)] = below
        self.n_words = V
        self.root = tree.root
        self.depth = max(tree.max_depth, 1)
        self.child = torch.as_tensor(child, device=device)


@torch.no_grad()
def walk_sample(h: torch.Tensor, weight: torch.Tensor, walk: TreeWalk,
                generator: Optional[torch.Generator] = None,
                start: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(N,) words drawn from the tree's P(w | h), one a row of ``h`` (N, D); with ``start``
    (N,) node ids, from P(w | h, the subtree below each row's start node) (a word as its start:
    that word)."""
    N, V = h.shape[0], walk.n_words
    node = (torch.full((N,), walk.root, dtype=torch.long, device=h.device) if start is None
            else start.to(device=h.device, dtype=torch.long).clone())
    u = torch.rand(walk.depth, N, generator=generator, device=h.device,
                   dtype=compute_dtype(h.dtype, weight.dtype))
    on_cpu = h.device.type == "cpu"
    rows = torch.arange(N, device=h.device)  # the rows still walking (the CPU's compaction)
    if on_cpu and start is not None:
        rows = rows[node >= V]
    for level in range(walk.depth):
        if on_cpu and rows.numel() == 0:
            break
        at = (node[rows] - V).clamp(min=0)
        s = (weight[at].to(u.dtype) * h[rows].to(u.dtype)).sum(dim=1)
        nxt = walk.child[at, (u[level, rows] >= torch.sigmoid(s)).long()]
        if on_cpu:
            node[rows] = nxt
            rows = rows[nxt >= V]
            if rows.numel() == 0:
                break
        else:
            node = torch.where(node >= V, nxt, node)
    return node


@torch.no_grad()
def beam_topk(h: torch.Tensor, weight: torch.Tensor, walk: TreeWalk, k: int, beam: int,
              start: Optional[torch.Tensor] = None, start_lp: Optional[torch.Tensor] = None
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(values (N, k) log P, indices (N, k), exact (N,) bool) of the most probable words a row,
    best first; where ``exact`` is False the row's search was cut short (see the module).
    ``start`` (E,) nodes and ``start_lp`` (N, E) their log-probabilities: the search begins
    there instead of at the root (a flat top's entries: a word, an inner node, or -1 with
    log-probability -inf for an entry without words)."""
    N, V = h.shape[0], walk.n_words
    device = h.device
    ct = compute_dtype(h.dtype, weight.dtype)
    h = h.to(ct)
    beam = max(int(beam), 1)
    best = torch.full((N, k), -math.inf, dtype=ct, device=device)
    best_id = torch.zeros(N, k, dtype=torch.long, device=device)
    dropped = torch.full((N,), -math.inf, dtype=ct, device=device)
    on_cpu = device.type == "cpu"
    active = torch.arange(N, device=device)  # the rows still searching (the CPU's compaction)
    if start is None:
        node = torch.full((N, 1), walk.root, dtype=torch.long, device=device)
        lp = torch.zeros(N, 1, dtype=ct, device=device)
    else:  # the entries: their words found at once, their inner nodes the first frontier
        start = start.to(device).unsqueeze(0).expand(N, -1)
        start_lp = start_lp.to(ct)
        word = start < V
        merged = torch.cat([best, start_lp.masked_fill(~word, -math.inf)], dim=1)
        best, at = merged.topk(k, dim=1)
        best_id = torch.cat([best_id, start.clamp(min=0)], dim=1).gather(1, at)
        open_lp = start_lp.masked_fill(word | (start_lp <= best[:, -1:]), -math.inf)
        keep = min(open_lp.shape[1], beam)
        lp, at = open_lp.topk(keep, dim=1)
        dropped = open_lp.scatter(1, at, -math.inf).amax(dim=1)
        node = start.gather(1, at)
    for _ in range(walk.depth):
        n = active.shape[0]
        live = lp > -math.inf
        rows = torch.where(live, node - V, 0)
        s = torch.bmm(weight[rows].to(ct), h[active].unsqueeze(2)).squeeze(2)
        left = lp + F.logsigmoid(s)
        right = left - s  # log sigmoid(-s) = log sigmoid(s) - s
        cand = walk.child[rows].reshape(n, -1)  # (n, 2K): each entry's two children
        cand_lp = torch.stack([left, right], dim=2).reshape(n, -1)
        cand_lp = cand_lp.masked_fill(~live.repeat_interleave(2, dim=1), -math.inf)
        word = cand < V
        merged = torch.cat([best[active], cand_lp.masked_fill(~word, -math.inf)], dim=1)
        top, at = merged.topk(k, dim=1)
        best[active] = top
        best_id[active] = torch.cat([best_id[active], cand], dim=1).gather(1, at)
        # an inner node no better than the k-th word found cannot lead to a better one
        open_lp = cand_lp.masked_fill(word | (cand_lp <= top[:, -1:]), -math.inf)
        keep = min(open_lp.shape[1], beam)
        if on_cpu:  # only the rows, and as many columns, as still have open nodes
            still = (open_lp > -math.inf).sum(dim=1)
            going = still > 0
            if not bool(going.any()):
                break
            if not bool(going.all()):
                active, open_lp, cand = active[going], open_lp[going], cand[going]
            keep = min(keep, int(still.max()))
        if keep < open_lp.shape[1]:
            lp, at = open_lp.topk(keep, dim=1)
            rest = open_lp.scatter(1, at, -math.inf).amax(dim=1)
            dropped[active] = torch.maximum(dropped[active], rest)
            node = cand.gather(1, at)
        else:
            lp, node = open_lp, cand
    exact = dropped <= best[:, -1]
    return best, best_id, exact
