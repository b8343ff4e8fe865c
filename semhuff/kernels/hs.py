"""Hierarchical-softmax bodies: what happens for one centre word once the sentence loop
(``loop.py``) has chosen its context. ``larg`` is the layer's tuple ``(points, codes, lengths)``,
the padded path arrays of any ``Tree``.

Skip-gram follows word2vec: every context word's input vector predicts the centre word through
the centre's path, so all context words of one centre share that path. ``sg_centre`` walks the
path context by context, as word2vec.c does, but the rows of the top ``top`` nodes are updated
once per centre, after its last context, with the sum of every context's update: each context
reads them as they were at the centre's start (the p-tHSM formulation, Jiang et al.: scores
against the node's row, then one row update with all the gradients). ``top = 0`` is word2vec's
order exactly; the default "mixed" order defers the top 4 levels: nearly every word passes
through them, so each hot row is written once per centre instead of once per context, and two
threads fight much less over their cache lines (docs/performance.md). The deferred updates
are summed in a small buffer while the contexts walk the whole path in one loop; the earlier
form (all contexts per top node, their errors in a per-context buffer) computed the same
updates (except for a word twice in one window, whose second occurrence now reads its updated
input vector at the top levels too, as at every deeper level) and was 18% slower on one thread.

Scores outside (-MAX_EXP, MAX_EXP) give no update, as in word2vec (``saturate=False``): a
prediction that is confidently *wrong* is then never corrected. With ``saturate=True`` such a
score gets the saturated gradient (sigmoid taken as exactly 0 or 1), as word2vec's negative
sampling does: no update when the saturated prediction is right, a full one when it is wrong.
The training loss (negative log-likelihood, nats) is accumulated in float64 from a log-sigmoid
table at the same bins, and beyond the clip from ``log_sigmoid_clipped`` (float64, no libm call,
relative error ~1e-13); scoring (``score_path``) is exact float64.
"""
from __future__ import annotations

import numba
import numpy as np

from .common import (MAX_EXP, NLL_BY_CODE, SIGMOID_TABLE, add_to_input,
                     log_sigmoid, log_sigmoid_clipped, table_index)
from .compiler import stack_row


@numba.njit(inline="always", nogil=True)
def _gradient(s, code, alpha, saturate):
    """(gradient factor, nll) of one node: label 1 - code; beyond the clip no update, or the
    saturated one."""
    if s <= -MAX_EXP or s >= MAX_EXP:
        nll = -log_sigmoid_clipped(np.float64(s) * (1 - 2 * code))
        if not saturate:
            return np.float32(0.0), nll
        f = np.float32(1.0) if s >= MAX_EXP else np.float32(0.0)
        return (np.float32(1 - code) - f) * alpha, nll
    idx = table_index(s)
    return ((np.float32(1 - code) - SIGMOID_TABLE[idx]) * alpha,
            NLL_BY_CODE[np.uint64(code), idx])


@numba.njit(inline="always", nogil=True)
def path_rows(own, points, w, depth, buf, hot, MAP):
    """The output rows of ``w``'s path nodes: ``own[w]`` (``own`` is ``points`` itself, or
    with private hot rows the thread's table of mapped paths, ``thread_args``), or with
    ``MAP`` (private hot rows, no table) the path mapped through the thread's map ``hot`` into
    ``buf``, which costs 4% of the kernel's time."""
    if MAP:
        path = points[w]
        for i in range(np.uint64(depth)):
            buf[i] = hot[path[i]]
        return buf
    return own[w]


# path nodes whose scores ``walk_path`` computes ahead of their updates (a stack row)
SCORED_AHEAD = 64
# ``walk_pair`` for rows of at most this many floats: its two inputs and two errors (4 rows) then
# fit in the 32 vector registers beside the node's row. Kernel only, 3M prefix, one thread, the
# Zen 4 guest, seconds an epoch with / without pairs: dim 64 1.32 / 1.38, 96 1.9 / 1.9,
# 100 2.14 / 2.31, 104 2.9-3.1 / 2.6-2.8, 112 2.5 / 2.45, 128 2.6 / 2.65, 200 4.6-5.0 / 4.1-4.5,
# 300 8.5 / 8.3 (docs/performance.md, "The fourth pass")
PAIRED_DIMS = 100


@numba.njit(inline="always", nogil=True)
def walk_path(h, rows, bits, depth, syn1, alpha, err, saturate, D, top, delta):
    """Prediction of a word from the input vector ``h`` over its path nodes ``0`` to ``depth``
    (their output rows ``rows``, code bits ``bits``) in word2vec's order: adds the input's
    error to ``err`` and updates the node rows, except the first ``top``, whose updates are
    added to ``delta[:top]`` instead (the caller applies them later: ``sg_centre``). Returns
    the negative log-likelihood.

    Every node of a path is a different row and ``h`` does not change along it, so a node's
    score does not depend on the updates of the nodes before it: the scores are computed
    first, up to ``SCORED_AHEAD`` nodes at a time, then the updates in order. The same
    arithmetic as scoring each node just before its update (bit for bit), but the dot products
    no longer wait for one another: each is a chain of dependent multiply-adds, and on a CPU
    with 16 vector registers (AVX2) the loop was bound by that chain (docs/performance.md)."""
    loss = 0.0
    scores = stack_row(SCORED_AHEAD)
    # unsigned indices: Numba adds no negative-index fix-up to each access (~10% of the loop)
    for start in range(np.uint64(0), np.uint64(depth), np.uint64(SCORED_AHEAD)):
        end = min(start + np.uint64(SCORED_AHEAD), np.uint64(depth))
        for i in range(start, end):
            node = np.uint64(rows[i])
            s = np.float32(0.0)
            for d in range(D):
                s += h[d] * syn1[node, d]
            scores[i - start] = s
        deferred = min(max(start, np.uint64(top)), end)
        # two loops alike but for where the row's update goes: one shared inline helper taking
        # that array as an argument measured 11% slower (2.12 -> 2.37 s an epoch of the 3M
        # prefix, word2vec's order), so the two stay written out
        for i in range(start, deferred):  # the top nodes: their row updates go to ``delta``
            node = np.uint64(rows[i])
            gg, nll = _gradient(scores[i - start], bits[i], alpha, saturate)
            loss += nll
            for d in range(D):
                err[d] += gg * syn1[node, d]
            for d in range(D):
                delta[i, d] += gg * h[d]
        for i in range(deferred, end):
            node = np.uint64(rows[i])
            gg, nll = _gradient(scores[i - start], bits[i], alpha, saturate)
            loss += nll
            for d in range(D):
                err[d] += gg * syn1[node, d]
            for d in range(D):
                syn1[node, d] += gg * h[d]
    return loss


@numba.njit(inline="always", nogil=True)
def walk_pair(ha, hb, rows, bits, depth, syn1, alpha, erra, errb, saturate, D, top, delta):
    """``walk_path`` for two inputs in turn, ``ha`` then ``hb`` (two different rows of the
    input vectors), in one pass down the path, each row read for both and written once.

    The same updates as two ``walk_path`` calls, where ``hb`` reads each row below ``top``
    after ``ha``'s update ``ga * ha``: its score is ``hb . row + ga * (ha . hb)``, and its error
    ``sum(gb * row) + sum(ga * gb) * ha``, so both scores are computed ahead from the row as it
    was, with one extra dot product per pair (equal in exact arithmetic; float32 rounds them
    differently)."""
    loss = 0.0
    scores_a = stack_row(SCORED_AHEAD)
    scores_b = stack_row(SCORED_AHEAD)
    cross = np.float32(0.0)  # ha . hb
    for d in range(D):
        cross += ha[d] * hb[d]
    both = np.float32(0.0)  # sum of ga * gb over the nodes below ``top``
    for start in range(np.uint64(0), np.uint64(depth), np.uint64(SCORED_AHEAD)):
        end = min(start + np.uint64(SCORED_AHEAD), np.uint64(depth))
        for i in range(start, end):
            node = np.uint64(rows[i])
            sa = np.float32(0.0)
            sb = np.float32(0.0)
            for d in range(D):
                x = syn1[node, d]
                sa += ha[d] * x
                sb += hb[d] * x
            scores_a[i - start] = sa
            scores_b[i - start] = sb
        deferred = min(max(start, np.uint64(top)), end)
        for i in range(start, deferred):  # the top nodes: both read the row as it was
            node = np.uint64(rows[i])
            ga, nll_a = _gradient(scores_a[i - start], bits[i], alpha, saturate)
            gb, nll_b = _gradient(scores_b[i - start], bits[i], alpha, saturate)
            loss += nll_a + nll_b
            for d in range(D):
                x = syn1[node, d]
                erra[d] += ga * x
                errb[d] += gb * x
                delta[i, d] += ga * ha[d] + gb * hb[d]
        for i in range(deferred, end):
            node = np.uint64(rows[i])
            ga, nll_a = _gradient(scores_a[i - start], bits[i], alpha, saturate)
            gb, nll_b = _gradient(scores_b[i - start] + ga * cross, bits[i], alpha, saturate)
            loss += nll_a + nll_b
            both += ga * gb
            for d in range(D):
                x = syn1[node, d]
                erra[d] += ga * x
                errb[d] += gb * x
                syn1[node, d] = x + ga * ha[d] + gb * hb[d]
    for d in range(D):
        errb[d] += both * ha[d]
    return loss


@numba.njit(inline="always", nogil=True)
def _paths(larg, scratch, cfg):
    """(the path rows' table, points, codes, lengths): the table is the thread's own table of
    mapped paths (``cfg`` OWN, ``scratch``'s last entry) or the tree's points."""
    own = scratch[8] if cfg[4] else larg[0]
    return own, larg[0], larg[1], larg[2]


@numba.njit(inline="always", nogil=True)
def centre(syn0, syn1, larg, scratch, ctx, k, w, alpha, state, cfg):
    """The skip-gram body (the loop's one signature, ``loop.py``): ``larg = (points, codes,
    lengths, ...)``; see ``sg_centre``. Returns (nll, state): HS draws no random numbers."""
    D, top, saturate, MAP = cfg[0], cfg[1], cfg[2], cfg[3]
    return sg_centre(syn0, syn1, _paths(larg, scratch, cfg), ctx, k, w, alpha, scratch[10],
                     scratch[2], scratch[1], scratch[4], top, saturate, scratch[6], MAP,
                     scratch[9], cfg[6], D), state


@numba.njit(inline="always", nogil=True)
def predict(h, w, syn1, larg, scratch, alpha, err, state, cfg):
    """One prediction from the input vector ``h`` (the CBOW body; the loop's one signature):
    ``err`` is set to the input's error. Returns (nll, state)."""
    D, saturate, MAP = cfg[0], cfg[2], cfg[3]
    own, points, codes, lengths = _paths(larg, scratch, cfg)
    for d in range(D):
        err[d] = 0.0
    depth = lengths[w]
    rows = path_rows(own, points, w, depth, scratch[4], scratch[6], MAP)
    return walk_path(h, rows, codes[w], depth, syn1, alpha, err, saturate, D, 0,
                     scratch[0]), state


@numba.njit(inline="always", nogil=True)
def score_centre(syn0, syn1, larg, scratch, ctx, k, w, alpha, state, cfg):
    """Scoring, skip-gram: the summed exact -log P(w | context) of the ``k`` contexts."""
    nll = 0.0
    for j in range(k):
        nll += score_path(syn0[ctx[j]], w, syn1, larg, cfg[0])
    return nll, state


@numba.njit(inline="always", nogil=True)
def score_predict(h, w, syn1, larg, scratch, alpha, err, state, cfg):
    """Scoring, CBOW: the exact -log P(w | h)."""
    return score_path(h, w, syn1, larg, cfg[0]), state


@numba.njit(inline="always", nogil=True)
def sg_centre(syn0, syn1, paths, ctx, k, w, alpha, delta, err, err2, rowbuf, top, saturate, hot,
              MAP, lockf, LOCK, D):
    """Skip-gram: the ``k`` context words ``ctx[:k]`` each predict ``w``, context by context
    along the whole path (``walk_path``; two at a time, ``walk_pair``, for rows of at most
    ``PAIRED_DIMS`` floats); each context vector receives its error after its
    path (``add_to_input``: times its lock factor with ``LOCK``). The rows of the top ``top``
    path nodes are updated once, after the last context, with the sum of every context's
    update (``delta``, at least ``min(top, depth)`` rows): each context reads them as they
    were at the centre's start. ``paths`` is ``(own, points, codes, lengths)``: the path rows
    as ``path_rows`` finds them. Returns the summed nll."""
    own, points, codes, lengths = paths
    depth = lengths[w]
    rows, bits = path_rows(own, points, w, depth, rowbuf, hot, MAP), codes[w]
    if top > depth:
        top = depth
    deferred = np.uint64(top)  # unsigned indices throughout: no negative-index fix-ups
    for i in range(deferred):
        for d in range(D):
            delta[i, d] = 0.0
    loss = 0.0
    n = np.uint64(k)
    j = np.uint64(0)
    while j < n:
        r = np.uint64(ctx[j])
        for d in range(D):
            err[d] = 0.0
        if D <= PAIRED_DIMS and j + 1 < n and ctx[j + 1] != ctx[j]:  # two in one pass
            r2 = np.uint64(ctx[j + 1])
            for d in range(D):
                err2[d] = 0.0
            loss += walk_pair(syn0[r], syn0[r2], rows, bits, depth, syn1, alpha, err, err2,
                              saturate, D, top, delta)
            add_to_input(syn0, r, err, lockf, LOCK, D)
            add_to_input(syn0, r2, err2, lockf, LOCK, D)
            j += np.uint64(2)
        else:
            loss += walk_path(syn0[r], rows, bits, depth, syn1, alpha, err, saturate, D, top,
                              delta)
            add_to_input(syn0, r, err, lockf, LOCK, D)
            j += np.uint64(1)
    for i in range(deferred):
        node = np.uint64(rows[i])
        for d in range(D):
            syn1[node, d] += delta[i, d]
    return loss


@numba.njit(inline="always", nogil=True)
def score_path(h, w, syn1, larg, D):
    """-log P(w | h) over w's path, exact in float64 (no table, no clip); no update."""
    points, codes, lengths = larg
    nll = 0.0
    for i in range(lengths[w]):
        node = points[w, i]
        s = 0.0
        for d in range(D):
            s += np.float64(h[d]) * np.float64(syn1[node, d])
        nll -= log_sigmoid(s * (1 - 2 * codes[w, i]))
    return nll
