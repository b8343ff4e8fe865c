"""Hierarchical-softmax training kernels (skip-gram and CBOW), one chunk of token ids per call.

The kernels are specialised on the vector dimension (a compile-time constant makes every
``for d in range(D)`` loop a fixed-length, fully vectorised one: about 1.35x faster at D=100
than a run-time D). ``numba``'s disk cache keys closures by their captured constants, so each
dimension is compiled once per machine, not once per process.

Skip-gram follows word2vec: every context word's input vector predicts the centre word through
the centre's path, so all context words of one centre share that path. ``sg_hs_kernel(dim,
batch_levels)`` walks the top ``batch_levels`` nodes of the path for all contexts at once (the
p-tHSM formulation, Jiang et al.: scores against the node's row, then one row update with all
the gradients) and the deeper nodes context by context, as word2vec.c does. 0 is word2vec's
order exactly; the default "mixed" order batches the top 4 levels: nearly every word passes
through them, so batching them means each hot row is written once per centre instead of once per
context, and two threads fight much less over their cache lines (docs/performance.md).

Scores outside (-MAX_EXP, MAX_EXP) give no update, as in word2vec. The loss (negative
log-likelihood, nats) is accumulated in float64 from a log-sigmoid table at the same bins, and
exactly beyond the clip.
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from .common import (LOG_SIGMOID_TABLE, MAX_EXP, SIGMOID_TABLE, add_to_contexts, alpha_at,
                     context_mean, log_sigmoid, log_sigmoid_signed, longest_sentence,
                     reduced_window, subsample_sentence, table_index)


@numba.njit(inline="always", nogil=True)
def walk_path(h, w, syn1, points, codes, lengths, alpha, first, err, D):
    """Hierarchical-softmax prediction of word ``w`` from the input vector ``h`` over the path
    nodes from depth ``first`` down, node by node in word2vec's order: updates the node rows and
    adds the input's error to ``err``. Returns the negative log-likelihood."""
    loss = 0.0
    for i in range(first, lengths[w]):
        node = points[w, i]
        code = codes[w, i]
        s = np.float32(0.0)
        for d in range(D):
            s += h[d] * syn1[node, d]
        if s <= -MAX_EXP or s >= MAX_EXP:
            loss -= log_sigmoid(np.float64(s) * (1 - 2 * code))
            continue
        idx = table_index(s)
        gg = (np.float32(1 - code) - SIGMOID_TABLE[idx]) * alpha
        loss -= log_sigmoid_signed(LOG_SIGMOID_TABLE, idx, code)
        for d in range(D):
            err[d] += gg * syn1[node, d]
        for d in range(D):
            syn1[node, d] += gg * h[d]
    return loss


@functools.lru_cache(maxsize=None)
def sg_hs_kernel(dim: int, batch_levels: int = 0):
    """Skip-gram + HS. The top ``batch_levels`` nodes of the centre's path are processed for all
    context words at once (p-tHSM batch: scores against the node's row, one row update with all
    gradients); the deeper nodes are walked context by context in word2vec.c's order. Each
    context vector receives its error after its whole path. ``batch_levels=0`` is word2vec.c's
    order exactly; a value above the tree depth is the fully batched order."""
    D = int(dim)
    TOP = int(batch_levels)

    @numba.njit(cache=True, nogil=True, fastmath=True)
    def sg_hs(ids, bounds, syn0, syn1, points, codes, lengths, keep_thr, window,
              alpha0, min_alpha, words_before, total_words, seed):
        sig_table = SIGMOID_TABLE
        logsig_table = LOG_SIGMOID_TABLE
        state = np.uint64(seed)
        sent = np.empty(longest_sentence(bounds), np.int32)
        ctx = np.empty(2 * window, np.int32)
        neu = np.empty((2 * window, D), np.float32)
        prow = np.empty(D, np.float32)
        g = np.empty(2 * window, np.float32)
        loss = 0.0
        pairs = 0
        trained = 0
        start = 0
        for si in range(bounds.shape[0]):
            end = bounds[si]
            alpha = np.float32(alpha_at(alpha0, min_alpha, words_before + start, total_words))
            n, state = subsample_sentence(ids, start, end, keep_thr, sent, state)
            start = end
            trained += n
            for pos in range(n):
                w = sent[pos]
                lo, hi, state = reduced_window(pos, n, window, state)
                k = 0
                for c in range(lo, hi):
                    if c != pos:
                        ctx[k] = sent[c]
                        k += 1
                pairs += k
                for j in range(k):
                    for d in range(D):
                        neu[j, d] = 0.0
                depth = lengths[w]
                top = TOP if TOP < depth else depth
                # the top of the path, shared by most words: batched over the contexts, so each
                # hot row is written once per centre (less cache-line traffic between threads)
                for i in range(top):
                    node = points[w, i]
                    code = codes[w, i]
                    label = np.float32(1 - code)
                    for d in range(D):
                        prow[d] = syn1[node, d]
                    for j in range(k):
                        r = ctx[j]
                        s = np.float32(0.0)
                        for d in range(D):
                            s += syn0[r, d] * prow[d]
                        if s <= -MAX_EXP or s >= MAX_EXP:
                            g[j] = 0.0
                            loss -= log_sigmoid(np.float64(s) * (1 - 2 * code))
                        else:
                            idx = table_index(s)
                            g[j] = (label - sig_table[idx]) * alpha
                            loss -= log_sigmoid_signed(logsig_table, idx, code)
                    for j in range(k):
                        gj = g[j]
                        r = ctx[j]
                        for d in range(D):
                            neu[j, d] += gj * prow[d]
                        for d in range(D):
                            syn1[node, d] += gj * syn0[r, d]
                # the rest of the path: word2vec's order, context by context
                for j in range(k):
                    r = ctx[j]
                    loss += walk_path(syn0[r], w, syn1, points, codes, lengths, alpha, top,
                                      neu[j], D)
                    for d in range(D):
                        syn0[r, d] += neu[j, d]
        return loss, pairs, trained

    return sg_hs


@functools.lru_cache(maxsize=None)
def cbow_hs_kernel(dim: int):
    D = int(dim)

    @numba.njit(cache=True, nogil=True, fastmath=True)
    def cbow_hs(ids, bounds, syn0, syn1, points, codes, lengths, keep_thr, window,
                alpha0, min_alpha, words_before, total_words, seed):
        state = np.uint64(seed)
        sent = np.empty(longest_sentence(bounds), np.int32)
        hidden = np.empty(D, np.float32)
        err = np.empty(D, np.float32)
        loss = 0.0
        pairs = 0
        trained = 0
        start = 0
        for si in range(bounds.shape[0]):
            end = bounds[si]
            alpha = np.float32(alpha_at(alpha0, min_alpha, words_before + start, total_words))
            n, state = subsample_sentence(ids, start, end, keep_thr, sent, state)
            start = end
            trained += n
            for pos in range(n):
                w = sent[pos]
                lo, hi, state = reduced_window(pos, n, window, state)
                if hi - lo - 1 <= 0:
                    continue
                pairs += 1
                context_mean(syn0, sent, lo, hi, pos, hidden, D)
                for d in range(D):
                    err[d] = 0.0
                loss += walk_path(hidden, w, syn1, points, codes, lengths, alpha, 0, err, D)
                add_to_contexts(syn0, sent, lo, hi, pos, err, D)
        return loss, pairs, trained

    return cbow_hs
