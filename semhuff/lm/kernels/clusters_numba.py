"""Numba kernels for the two-level softmax's in-cluster part on the CPU (``class_softmax``): the
CPU twin of ``triton_clusters``.

The torch form (``InClusterLogProb``'s loop) runs ~8 small operations per cluster present in a
batch each way; with a few hundred clusters and a handful of tokens each, those calls, not the
arithmetic, were the layer's cost (V 44k, 210 clusters, 640 tokens: ~50 ms a batch on one
core, docs/lm.md "Speed of the layers alone"). Here one call does every cluster:

* forward, per present cluster c (its n tokens, sorted by cluster, and its m words): the scores
  s[i, j] = h[i] . W[members[start_c + j]], each token's log-softmax over its row, the target's
  entry out; the probabilities kept (n x m a cluster, ~N x V/C in all) for backward;
* backward: d s[i, j] = g[i] (onehot(at[i]) - p[i, j]); dh[i] = sum_j d s[i, j] W[j] and
  dW[j] = sum_i d s[i, j] h[i]. A cluster owns its tokens' rows of dh and its words' rows of dW,
  so clusters split between threads without any shared write.

A word's row is read once per cluster (the j loop outside, the cluster's few tokens inside), as
the torch loop's matrix product reads it. Threads: the calling thread and ``threads - 1`` pool
threads (torch's intra-op count), each a contiguous run of clusters of about equal work (n x m);
the kernels hold no GIL. float32 and float64 (NumPy has no bfloat16: half-precision weights keep
the torch loop). Compiled on first use (~4 s on this project's 2-core guest, logged), then
loaded from semhuff's Numba cache (~1 s with Numba's import). Tested against a dense float64
reference written in the test (a masked full score matrix and autograd) in
tests/test_lm_numba_clusters.py.
"""
from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import numpy as np
import torch

from ...numba_cache import numba
from .clusters_torch import tokens_by_cluster

logger = logging.getLogger(__name__)

_FAST = {"nsz", "arcp", "contract", "reassoc"}  # the dot products vectorise; no inf/NaN promises


@numba.njit(cache=True, nogil=True, inline="always")
def _span(u, present, starts, tok_starts, prob_starts):
    """Present cluster u's first member and word count, first token and token count, and the
    offset of its (tokens x words) probabilities."""
    c = present[u]
    return (starts[c], starts[c + 1] - starts[c], tok_starts[u], tok_starts[u + 1] - tok_starts[u],
            prob_starts[u])


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _forward(h, weight, members, starts, present, tok_starts, prob_starts, at, out, probs,
             u0, u1):
    D = h.shape[1]
    for u in range(u0, u1):
        w0, m, t0, n, p0 = _span(u, present, starts, tok_starts, prob_starts)
        for j in range(m):
            row = members[w0 + j]
            for i in range(n):
                s = h[t0 + i, 0] * 0
                for d in range(D):
                    s += h[t0 + i, d] * weight[row, d]
                probs[p0 + i * m + j] = s
        for i in range(n):
            base = p0 + i * m
            top = probs[base]
            for j in range(1, m):
                top = max(top, probs[base + j])
            total = probs[base] * 0
            for j in range(m):
                total += math.exp(probs[base + j] - top)
            lse = top + math.log(total)
            out[t0 + i] = probs[base + at[t0 + i]] - lse
            for j in range(m):
                probs[base + j] = math.exp(probs[base + j] - lse)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _backward(h, weight, members, starts, present, tok_starts, prob_starts, row_starts, at,
              grad, probs, grad_h, grad_rows, want_rows, by_word, u0, u1):
    D = h.shape[1]
    for u in range(u0, u1):
        w0, m, t0, n, p0 = _span(u, present, starts, tok_starts, prob_starts)
        r0 = row_starts[u]
        for i in range(n):
            for d in range(D):
                grad_h[t0 + i, d] = 0
        for j in range(m):
            row = members[w0 + j]
            out = row if by_word else r0 + j  # the (V, D) gradient's row, or the compact one's
            if want_rows:
                for d in range(D):
                    grad_rows[out, d] = 0
            for i in range(n):
                g = grad[t0 + i]
                ds = -g * probs[p0 + i * m + j]
                if j == at[t0 + i]:
                    ds += g
                for d in range(D):
                    grad_h[t0 + i, d] += ds * weight[row, d]
                if want_rows:
                    for d in range(D):
                        grad_rows[out, d] += ds * h[t0 + i, d]


@numba.njit(cache=True, nogil=True)
def _present_words(members, starts, present, row_starts, words):
    """The words of the present clusters, cluster after cluster (the rows of ``grad_rows``)."""
    for u in range(present.shape[0]):
        c = present[u]
        m = starts[c + 1] - starts[c]
        words[row_starts[u]:row_starts[u] + m] = members[starts[c]:starts[c] + m]


# SEMHUFF_NUMBA_CLUSTERS=0: the torch loop instead (A/B timings, or a suspected kernel fault)
ENABLED = os.environ.get("SEMHUFF_NUMBA_CLUSTERS", "1") != "0"
@numba.njit(cache=True, nogil=True)
def _zero_absent(members, starts, present, grad_w):
    """Zero the rows of ``grad_w`` (V, D) of the words whose clusters are not in ``present``
    (sorted): the kernel writes every other row."""
    u = 0
    for c in range(starts.shape[0] - 1):
        if u < present.shape[0] and present[u] == c:
            u += 1
            continue
        for k in range(starts[c], starts[c + 1]):
            grad_w[members[k], :] = 0


_pool: Optional[ThreadPoolExecutor] = None
_pool_size = 0


def _forget_pool() -> None:
    """In a forked child the pool's threads are gone: start a new pool there when needed."""
    global _pool, _pool_size
    _pool, _pool_size = None, 0


os.register_at_fork(after_in_child=_forget_pool)


def run_split(kernel, work: np.ndarray, args: tuple) -> None:
    """``kernel(*args, u0, u1)`` over the present clusters (or any items: the tree search's
    rows), split into torch's intra-op thread count of contiguous runs of about equal
    ``work``."""
    global _pool, _pool_size
    threads = max(1, min(torch.get_num_threads(), work.shape[0]))
    if threads == 1:
        kernel(*args, 0, work.shape[0])
        return
    ends = np.searchsorted(np.cumsum(work), np.arange(1, threads) * work.sum() / threads)
    bounds = [0, *np.minimum(ends + 1, work.shape[0]).tolist(), work.shape[0]]
    if _pool_size < threads - 1:
        _pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="semhuff-clusters")
        _pool_size = threads - 1
    futures = [_pool.submit(kernel, *args, bounds[k], bounds[k + 1]) for k in range(1, threads)]
    kernel(*args, bounds[0], bounds[1])
    for f in futures:
        f.result()


class NumbaInCluster(torch.autograd.Function):
    """log P(w | c(w), h) (N,) in the weight's dtype; the word weights' gradient sparse (the
    rows of the present clusters) or dense."""

    @staticmethod
    def forward(ctx, h, weight, target, layer, sparse: bool):
        order, present, n_tokens = tokens_by_cluster(layer, target)
        present, n_tokens = present.numpy(), n_tokens.numpy()
        starts = layer.member_starts.numpy()
        members = layer.members.numpy()
        sizes = starts[present + 1] - starts[present]
        tok_starts = np.concatenate(([0], np.cumsum(n_tokens)))
        work = n_tokens * sizes
        prob_starts = np.concatenate(([0], np.cumsum(work)))
        h_sorted = h[order].contiguous()
        at = layer.slot[target[order]].numpy()
        w = weight.detach().numpy()
        out_sorted = np.empty(h.shape[0], dtype=w.dtype)
        probs = np.empty(int(prob_starts[-1]), dtype=w.dtype)
        args = (h_sorted.detach().numpy(), w, members, starts, present, tok_starts, prob_starts,
                at, out_sorted, probs)
        run_split(_forward, work, args)
        ctx.save_for_backward(h_sorted, weight, order)
        ctx.plan = (members, starts, present, tok_starts, prob_starts, at, sizes, work, probs)
        ctx.sparse = sparse
        out = torch.empty(h.shape[0], dtype=weight.dtype)
        out[order] = torch.from_numpy(out_sorted)
        return out

    @staticmethod
    def backward(ctx, grad):
        h_sorted, weight, order = ctx.saved_tensors
        members, starts, present, tok_starts, prob_starts, at, sizes, work, probs = ctx.plan
        want_rows = bool(ctx.needs_input_grad[1])
        row_starts = np.concatenate(([0], np.cumsum(sizes)))
        D = h_sorted.shape[1]
        dtype = probs.dtype
        grad_h_sorted = np.empty((h_sorted.shape[0], D), dtype=dtype)
        grad_w = None
        by_word = want_rows and not ctx.sparse  # dense: the rows written in place, by word id
        if by_word:
            grad_w = torch.empty(weight.shape, dtype=weight.dtype)
            grad_rows = grad_w.numpy()
            _zero_absent(members, starts, present, grad_rows)
        else:
            grad_rows = np.empty((int(row_starts[-1]) if want_rows else 0, D), dtype=dtype)
        g = grad[order].to(weight.dtype).contiguous().numpy()
        run_split(_backward, work, (h_sorted.detach().numpy(), weight.detach().numpy(), members,
                                     starts, present, tok_starts, prob_starts, row_starts, at, g,
                                     probs, grad_h_sorted, grad_rows, want_rows, by_word))
        grad_h = torch.empty_like(h_sorted)
        grad_h[order] = torch.from_numpy(grad_h_sorted)
        if want_rows and ctx.sparse:  # each word is in one cluster: the rows are distinct
            words = np.empty(int(row_starts[-1]), dtype=np.int64)
            _present_words(members, starts, present, row_starts, words)
            grad_w = torch.sparse_coo_tensor(torch.from_numpy(words).unsqueeze(0),
                                             torch.from_numpy(grad_rows), weight.shape,
                                             check_invariants=False)
        return grad_h, grad_w, None, None, None


def numba_wanted(h: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether these inputs go to the kernels: CPU tensors in float32 or float64, one dtype."""
    return (ENABLED and h.device.type == "cpu" and weight.device.type == "cpu" and h.dtype == weight.dtype
            and weight.dtype in (torch.float32, torch.float64))


_first_call_done = False


def numba_in_cluster(h, weight, target, layer, sparse: bool) -> torch.Tensor:
    """log P(w | c(w), h) (N,) for the tokens ``target`` (N,) of the two-level ``layer``."""
    global _first_call_done
    if _first_call_done:
        return NumbaInCluster.apply(h, weight, target, layer, sparse)
    started = time.perf_counter()  # the first call compiles or loads the forward kernel
    out = NumbaInCluster.apply(h, weight, target, layer, sparse)
    logger.info("two-level softmax: Numba forward kernel ready in %.1f s (compiled once, then "
                "cached)", time.perf_counter() - started)
    _first_call_done = True
    return out
