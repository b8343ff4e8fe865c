"""Hierarchical-softmax bodies: what happens for one centre word once the sentence loop
(``loop.py``) has chosen its context. ``larg`` is the layer's tuple ``(points, codes, lengths)``,
the padded path arrays of any ``Tree``.

Skip-gram follows word2vec: every context word's input vector predicts the centre word through
the centre's path, so all context words of one centre share that path. ``sg_centre`` walks the
top ``top`` nodes of the path for all contexts at once (the p-tHSM formulation, Jiang et al.:
scores against the node's row, then one row update with all the gradients) and the deeper nodes
context by context, as word2vec.c does. ``top = 0`` is word2vec's order exactly; the default
"mixed" order batches the top 4 levels: nearly every word passes through them, so batching them
means each hot row is written once per centre instead of once per context, and two threads
fight much less over their cache lines (docs/performance.md).

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

from .common import (MAX_EXP, NLL_BY_CODE, SIGMOID_TABLE, log_sigmoid, log_sigmoid_clipped,
                     table_index)


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
def walk_path(h, own, rows, bits, first, depth, syn1, alpha, err, saturate, HOT, D):
    """Prediction of a word from the input vector ``h`` over its path nodes ``first`` to
    ``depth`` (their output rows ``rows``, code bits ``bits``), node by node in word2vec's
    order: updates the node rows and adds the input's error to ``err``. With private hot rows
    (``HOT``) the first ``len(own)`` nodes' rows are the thread's ``own``. Returns the negative
    log-likelihood."""
    if not HOT:
        return _walk(h, rows, bits, first, depth, syn1, alpha, err, saturate, D)
    mid = min(np.uint64(own.shape[0]), np.uint64(depth))
    return (_walk(h, own, bits, first, mid, syn1, alpha, err, saturate, D)
            + _walk(h, rows, bits, max(np.uint64(first), mid), depth, syn1, alpha, err, saturate,
                    D))


@numba.njit(inline="always", nogil=True)
def _walk(h, rows, bits, first, depth, syn1, alpha, err, saturate, D):
    loss = 0.0
    # unsigned indices: Numba adds no negative-index fix-up to each access (~10% of the loop)
    for i in range(np.uint64(first), np.uint64(depth)):
        node = np.uint64(rows[i])
        code = bits[i]
        s = np.float32(0.0)
        for d in range(D):
            s += h[d] * syn1[node, d]
        gg, nll = _gradient(s, code, alpha, saturate)
        loss += nll
        for d in range(D):
            err[d] += gg * syn1[node, d]
        for d in range(D):
            syn1[node, d] += gg * h[d]
    return loss


@numba.njit(inline="always", nogil=True)
def predict(h, w, syn1, paths, alpha, err, saturate, HOT, D):
    """One prediction (the CBOW body): ``err`` is set to the input's error. Returns the nll
    (HS draws no random numbers)."""
    own, points, codes, lengths = paths
    for d in range(D):
        err[d] = 0.0
    return walk_path(h, own[w], points[w], codes[w], 0, lengths[w], syn1, alpha, err, saturate,
                     HOT, D)


@numba.njit(inline="always", nogil=True)
def sg_centre(syn0, syn1, paths, ctx, k, w, alpha, neu, prow, err, g, top, saturate, HOT, D):
    """Skip-gram: the ``k`` context words ``ctx[:k]`` each predict ``w``. The top ``top`` path
    nodes are batched over the contexts, the rest walked context by context; each context
    vector receives its error after its whole path. Returns the summed nll."""
    own, points, codes, lengths = paths
    loss = 0.0
    n = np.uint64(k)  # unsigned indices throughout: no negative-index fix-ups (see walk_path)
    for j in range(n):
        for d in range(D):
            neu[j, d] = 0.0
    depth = lengths[w]
    rows, mine, bits = points[w], own[w], codes[w]
    split = np.uint64(mine.shape[0]) if HOT else np.uint64(depth)
    if top > depth:
        top = depth
    for i in range(np.uint64(top)):
        node = np.uint64(mine[i] if i < split else rows[i])
        code = bits[i]
        for d in range(D):
            prow[d] = syn1[node, d]
        for j in range(n):
            r = np.uint64(ctx[j])
            s = np.float32(0.0)
            for d in range(D):
                s += syn0[r, d] * prow[d]
            g[j], nll = _gradient(s, code, alpha, saturate)
            loss += nll
        for j in range(n):
            gj = g[j]
            r = np.uint64(ctx[j])
            for d in range(D):
                neu[j, d] += gj * prow[d]
            for d in range(D):
                syn1[node, d] += gj * syn0[r, d]
    for j in range(n):
        r = np.uint64(ctx[j])
        for d in range(D):
            err[d] = neu[j, d]
        loss += walk_path(syn0[r], mine, rows, bits, top, depth, syn1, alpha, err, saturate, HOT,
                          D)
        for d in range(D):
            syn0[r, d] += err[d]
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
