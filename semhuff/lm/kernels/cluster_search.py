"""Generation from a two-level softmax, cluster then word, without the whole
distribution: P(w | h) = P(c(w) | h) P(w | c(w), h), so

* ``cluster_sample``: a cluster drawn from the C cluster probabilities, then a word from the
  softmax over that cluster's words: exact, ~C + the cluster's size dot products a row;
* ``cluster_topk``: the ``m`` most probable clusters' words scored; a cluster's probability
  bounds each of its words', so a row whose k-th word found beats the (m+1)-th cluster is
  exact; the others are marked (the caller takes the whole distribution for them).

The clusters' words are padded to the largest cluster (``member_table``); rows are taken in
chunks so that the gathered (rows, words, D) block stays within ``BLOCK`` numbers.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from .paths import compute_dtype
from .sampling import draw

BLOCK = 1 << 23


def member_table(cluster_of: np.ndarray, n_clusters: int, device=None) -> torch.Tensor:
    """(C, S) the words of each cluster, -1 past its end (S the largest cluster's size)."""
    order = np.argsort(cluster_of, kind="stable")
    sizes = np.bincount(cluster_of, minlength=n_clusters)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    table = np.full((n_clusters, max(int(sizes.max()), 1)), -1, np.int64)
    slot = np.arange(len(order)) - starts[cluster_of[order]]
    table[cluster_of[order], slot] = order
    return torch.as_tensor(table, device=device)


def _in_cluster(hw: torch.Tensor, word_weight: torch.Tensor, words: torch.Tensor
                ) -> torch.Tensor:
    """(N, K) log-softmax of the word logits over each row's ``words`` (-1: none), per block of
    S words (a row's clusters side by side, each normalised alone), in chunks of rows."""
    N, K = words.shape
    ct = compute_dtype(hw.dtype, word_weight.dtype)
    out = torch.empty(N, K, dtype=ct, device=hw.device)
    chunk = max(1, BLOCK // max(K * word_weight.shape[1], 1))
    for a in range(0, N, chunk):
        w = words[a:a + chunk]
        rows = word_weight[w.clamp(min=0)].to(ct)
        out[a:a + chunk] = torch.bmm(rows, hw[a:a + chunk].to(ct).unsqueeze(2)).squeeze(2)
    return out.masked_fill(words < 0, -math.inf)


@torch.no_grad()
def cluster_sample(cluster_lp: torch.Tensor, hw: torch.Tensor, word_weight: torch.Tensor,
                   table: torch.Tensor, generator: Optional[torch.Generator] = None
                   ) -> torch.Tensor:
    """(N,) words drawn: a cluster from ``cluster_lp`` (N, C), then one of its words."""
    cluster = draw(cluster_lp, generator)
    words = table[cluster]
    logits = _in_cluster(hw, word_weight, words)
    return words.gather(1, draw(logits, generator).unsqueeze(1)).squeeze(1)


@torch.no_grad()
def cluster_topk(cluster_lp: torch.Tensor, hw: torch.Tensor, word_weight: torch.Tensor,
                 table: torch.Tensor, k: int, m: int):
    """(values (N, k), indices (N, k), exact (N,)): the best words of the ``m`` best clusters."""
    N, C = cluster_lp.shape
    m = min(m, C)
    top, clusters = cluster_lp.topk(min(m + 1, C), dim=1)
    S = table.shape[1]
    words = table[clusters[:, :m]].reshape(N, m * S)
    logits = _in_cluster(hw, word_weight, words).view(N, m, S)
    lp = (top[:, :m].unsqueeze(2).to(logits.dtype) + torch.log_softmax(logits, dim=2))
    lp = lp.reshape(N, m * S).masked_fill(words < 0, -math.inf)
    values, at = lp.topk(min(k, m * S), dim=1)
    indices = words.gather(1, at)
    if values.shape[1] < k:  # fewer words than k in these clusters: the whole rows
        pad = k - values.shape[1]
        values = torch.cat([values, values.new_full((N, pad), -math.inf)], dim=1)
        indices = torch.cat([indices, indices.new_zeros(N, pad)], dim=1)
    if m == C:
        exact = values[:, -1] > -math.inf
    else:
        exact = values[:, -1] >= top[:, m].to(values.dtype)
    return values, indices, exact
