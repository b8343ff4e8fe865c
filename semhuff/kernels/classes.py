"""Bodies for class-based (clustered) output layers, Shen et al.'s self-organized HSM (§3).

**Two-level form** (``predict`` / ``score``): P(w | h) = P(c(w) | h) P(w | c(w), h), a softmax
over the C cluster vectors and one over the word vectors of w's cluster (eqs. 2-4), with h the
input vector (skip-gram) or the context mean (CBOW). The layer's weights hold the cluster
vectors in rows ``0 .. C-1`` and the word vectors in rows ``C .. C+V-1``. Every prediction also
updates the layer's statistic q (eq. 9): ``q[w, c] <- lam[w] q[w, c] + (1 - lam[w]) log2 P(c|h)``
for every cluster c, from the cluster distribution the forward pass computed anyway.

``larg = (cluster_of, members, starts, q, lam)``: word -> cluster; the words of cluster c are
``members[starts[c]:starts[c+1]]``; q (V x C, float32, or 0 x C for fixed clusters: no
statistic) and the smoothing factors lam (V).

**Binary form** (``observe_tree``): hierarchical softmax over a tree whose top part is a tree
over the clusters (``clusters.cluster_tree``). P(c | h) for every cluster is the product of the
branch probabilities down that top part; on a sample of the predictions the loop evaluates all
of it (C - 1 dot products) and updates q the same way. Training bodies use float32 dot
products (as every training body does) and the statistic the log-sigmoid table; scoring is
exact float64.
"""
from __future__ import annotations

import numpy as np

from ..numba_cache import numba
from .common import (LOG_SIGMOID_TABLE, MAX_EXP, add_to_input, context_mean, lcg_next, lcg_u32,
                     log_sigmoid, table_index)

LOG2E = 1.0 / np.log(2.0)


@numba.njit(inline="always", nogil=True)
def _dot(h, weights, row, D):
    """float64 dot product, for scoring (exact)."""
    s = 0.0
    for d in range(D):
        s += np.float64(h[d]) * np.float64(weights[row, d])
    return s


@numba.njit(inline="always", nogil=True)
def _dot32(h, weights, row, D):
    """float32 dot product, for training (as the other training bodies: vectorised)."""
    s = np.float32(0.0)
    for d in range(D):
        s += h[d] * weights[row, d]
    return np.float64(s)


@numba.njit(inline="always", nogil=True)
def _log_sigmoid_fast(s):
    """log sigmoid(s) from the training kernels' table inside the clip, exact beyond it."""
    if s <= -MAX_EXP or s >= MAX_EXP:
        return log_sigmoid(s)
    return LOG_SIGMOID_TABLE[table_index(s)]


@numba.njit(inline="always", nogil=True)
def _softmax_both(scores, probs, n):
    """``scores[:n]`` -> their log-softmax in place, ``probs[:n]`` -> the softmax, with one exp
    an entry (training needs both: the log for q and the loss, the probability for the
    gradient)."""
    top = scores[0]
    for i in range(1, n):
        if scores[i] > top:
            top = scores[i]
    total = 0.0
    for i in range(n):
        probs[i] = np.exp(scores[i] - top)
        total += probs[i]
    lse = top + np.log(total)
    inv = 1.0 / total
    for i in range(n):
        scores[i] -= lse
        probs[i] *= inv


@numba.njit(inline="always", nogil=True)
def predict(h, w, weights, larg, scratch, alpha, err, state, cfg):
    """One two-level prediction of ``w`` from ``h``: cluster softmax, in-cluster softmax, their
    gradients (err = the input's error), and the q update (the loop's one signature, as every
    body's). Returns (nll, state)."""
    D = cfg[0]
    cluster_of, members, starts, q, lam = larg
    C = starts.shape[0] - 1
    c = cluster_of[w]
    lo, hi = starts[c], starts[c + 1]
    n = hi - lo
    logp = np.empty(C, np.float64)
    p = np.empty(C, np.float64)
    for j in range(C):
        logp[j] = _dot32(h, weights, j, D)
    _softmax_both(logp, p, C)
    logq = np.empty(n, np.float64)
    pq = np.empty(n, np.float64)
    for m in range(n):
        logq[m] = _dot32(h, weights, C + members[lo + m], D)
    _softmax_both(logq, pq, n)
    nll = -logp[c]
    for m in range(n):
        if members[lo + m] == w:
            nll -= logq[m]
    if q.shape[0] > 0:  # fixed clusters pass an empty q: no statistic to keep
        keep = lam[w]
        for j in range(C):
            q[w, j] = keep * q[w, j] + (1.0 - keep) * logp[j] * LOG2E
    for d in range(D):
        err[d] = 0.0
    for j in range(C):
        g = np.float32(((1.0 if j == c else 0.0) - p[j]) * alpha)
        for d in range(D):
            err[d] += g * weights[j, d]
            weights[j, d] += g * h[d]
    for m in range(n):
        v = members[lo + m]
        g = np.float32(((1.0 if v == w else 0.0) - pq[m]) * alpha)
        row = C + v
        for d in range(D):
            err[d] += g * weights[row, d]
            weights[row, d] += g * h[d]
    return nll, state


@numba.njit(inline="always", nogil=True)
def score_predict(h, w, weights, larg, scratch, alpha, err, state, cfg):
    """Scoring (the loop's one signature): ``score``."""
    return score(h, w, weights, larg, cfg[0]), state


@numba.njit(inline="always", nogil=True)
def score_centre(syn0, weights, larg, scratch, ctx, k, w, alpha, state, cfg):
    """Scoring, skip-gram: the summed ``score`` of the ``k`` contexts."""
    nll = 0.0
    for j in range(k):
        nll += score(syn0[ctx[j]], w, weights, larg, cfg[0])
    return nll, state


@numba.njit(inline="always", nogil=True)
def centre(syn0, weights, larg, scratch, ctx, k, w, alpha, state, cfg):
    """The skip-gram body (the loop's one signature): each of the ``k`` contexts predicts ``w``
    (``predict``) and receives its error."""
    D = cfg[0]
    err = scratch[1]
    loss = 0.0
    for j in range(k):
        r = ctx[j]
        nll, state = predict(syn0[r], w, weights, larg, scratch, alpha, err, state, cfg)
        loss += nll
        add_to_input(syn0, r, err, scratch[9], cfg[6], D)
    return loss, state


@numba.njit(inline="always", nogil=True)
def score(h, w, weights, larg, D):
    """-log P(w | h) (``part == 0``) or only its cluster part -log P(c(w) | h) (``part == 1``),
    exact float64, no update. ``larg = (cluster_of, members, starts, part)``."""
    cluster_of, members, starts, part = larg
    C = starts.shape[0] - 1
    c = cluster_of[w]
    logp = np.empty(C, np.float64)
    for j in range(C):
        # a cluster a re-assignment left without words predicts nothing: its probability goes
        # to the others, so P(w | h) sums to 1 over the vocabulary
        logp[j] = _dot(h, weights, j, D) if starts[j + 1] > starts[j] else -np.inf
    _softmax_both(logp, np.empty(C, np.float64), C)
    nll = -logp[c]
    if part == 0:
        lo, hi = starts[c], starts[c + 1]
        logq = np.empty(hi - lo, np.float64)
        at = 0
        for m in range(hi - lo):
            logq[m] = _dot(h, weights, C + members[lo + m], D)
            if members[lo + m] == w:
                at = m
        _softmax_both(logq, np.empty(hi - lo, np.float64), hi - lo)
        nll -= logq[at]
    return nll


@numba.njit(nogil=True, fastmath=True, cache=True)
def observe_tree(inputs, rows, k, w, syn1, q, lam, top_row, top_child, D):
    """Binary form: log2 P(c | h) for every cluster c, for each of the ``k`` input vectors
    ``h = inputs[rows[j]]`` (skip-gram: a centre's contexts; CBOW: its one hidden vector), from
    the top (cluster) part of the tree walked root first (``top_row[i]`` the output row of the
    i-th top node, ``top_child[i, b]`` the top-node index of its b-child, or ``-(cluster + 1)``
    where the child is a cluster's subtree); then the q updates of the clusters in the tree,
    input by input (empty clusters keep their q). The inputs share each top row while it is in
    the cache. A call, not inlined: it runs on a sample of the centres, and inlining it slowed
    the training loop around it (measured 1-2%)."""
    n_top = top_row.shape[0]
    if n_top == 0 or k == 0:
        return
    keep = lam[w]
    logp = np.empty((n_top, k), np.float64)
    score = np.empty(k, np.float64)
    for j in range(k):
        logp[0, j] = 0.0
    for i in range(n_top):
        for j in range(k):
            score[j] = _dot32(inputs[rows[j]], syn1, top_row[i], D)
        for b in range(2):
            child = top_child[i, b]
            for j in range(k):
                lp = logp[i, j] + _log_sigmoid_fast(score[j] if b == 0 else -score[j])
                if child >= 0:
                    logp[child, j] = lp
                else:
                    c = -child - 1
                    q[w, c] = keep * q[w, c] + (1.0 - keep) * lp * LOG2E


# -- the binary form: HS over the clusters' tree, plus the sampled statistic -------------------
# The training step is HS's own (``hs.centre`` / ``hs.predict``: the paired walk, the orders, the
# private hot rows); the loop only draws, per centre, whether it is sampled, and keeps a sampled
# centre's context rows (``pick``); after the sentence the statistic is gathered from them
# (``observe_picked``). Calling ``observe_tree`` inside the centre loop, as the body once did,
# made the whole step 12-28% slower even on centres not sampled (docs/performance.md).


@numba.njit(inline="always", nogil=True)
def pick(ctx, k, w, sample_thr, state, picked, picked_w, picked_k, n, at):
    """Draw whether the centre ``w`` (contexts ``ctx[:k]``) is sampled for the statistic; if
    so, append it (its contexts to ``picked`` from ``at``, ``w`` and ``k`` at entry ``n``).
    Returns (state, n, at)."""
    state = lcg_next(state)
    if lcg_u32(state) < sample_thr[w]:
        for j in range(k):
            picked[at + j] = ctx[j]
        picked_w[n] = w
        picked_k[n] = k
        return state, n + 1, at + k
    return state, n, at


@numba.njit(nogil=True, fastmath=True, cache=True)
def observe_picked(syn0, picked, picked_w, picked_k, n, syn1, q, lam, top_row, top_child, sg,
                   mean, D):
    """``observe_tree`` for the ``n`` centres ``pick`` kept, from the input vectors as they are
    now (a sentence after their step at most): skip-gram, each of a centre's contexts; CBOW,
    the mean (``mean``) or sum of its contexts. A call, not inlined: the centre loop stays
    HS's."""
    one = np.zeros(1, np.int32)
    h = np.empty((1, D), np.float32)
    at = 0
    for i in range(n):
        k = picked_k[i]
        rows = picked[at:at + k]
        if sg:
            observe_tree(syn0, rows, k, picked_w[i], syn1, q, lam, top_row, top_child, D)
        else:
            context_mean(syn0, rows, k, h[0], mean, D)
            observe_tree(h, one, 1, picked_w[i], syn1, q, lam, top_row, top_child, D)
        at += k
