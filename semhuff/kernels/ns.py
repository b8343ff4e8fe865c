"""Negative sampling: the per-prediction body that the sentence loops (``loop.py``) call, and
the noise distribution, word2vec semantics.

Each (context, centre) pair draws ``negative`` fresh noise words from the unigram^0.75
distribution. Noise words are drawn with Walker's alias method (O(1) a draw, 2 arrays of V
entries) instead of word2vec's 1e8-entry table or gensim's binary search over a cumulative
table (a uniform slot by multiply-shift, then its alias). Scores beyond +-MAX_EXP are clipped
(the gradient saturates), as in word2vec.

A centre's predictions draw all their noise words first (``draw``, the same random stream as
drawing them one by one) and prefetch their rows: the noise rows are random ones, mostly beyond
the L2 cache, and fetching them while the earlier predictions compute made the skip-gram NS
kernel 1.5x faster.
"""
from __future__ import annotations

import numpy as np

from ..numba_cache import numba
from .common import (MAX_EXP, NLL_BY_CODE, SIGMOID_TABLE, add_to_input, lcg_next, lcg_u32,
                     log_sigmoid_clipped, out_row, table_index)
from .compiler import prefetch_row, stack_row


@numba.njit(cache=True, nogil=True)
def build_alias_table(weights):
    """Walker/Vose alias table for sampling index i with probability weights[i] / sum.
    Returns (threshold uint32, alias int32): draw i uniformly, keep it if a 32-bit random
    number is below threshold[i], otherwise take alias[i]."""
    n = weights.shape[0]
    scaled = weights / weights.sum() * n
    threshold = np.empty(n, np.uint32)
    alias = np.arange(n).astype(np.int32)
    small = np.empty(n, np.int64)
    large = np.empty(n, np.int64)
    ns = 0
    nl = 0
    for i in range(n):
        if scaled[i] < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    prob = scaled.copy()
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        l = large[nl - 1]
        alias[s] = l
        prob[l] = prob[l] + prob[s] - 1.0
        if prob[l] < 1.0:
            nl -= 1
            small[ns] = l
            ns += 1
    for i in range(n):
        p = prob[i] if alias[i] != i else 1.0
        threshold[i] = np.uint32(min(p * 4294967296.0, 4294967295.0))
    return threshold, alias


@numba.njit(inline="always", nogil=True)
def draw_noise(alias_thr, alias_idx, state):
    """A noise word (unsigned: no negative-index fix-ups) from the alias table: a uniform slot
    by multiply-shift of a 32-bit draw (Lemire; a division would cost ~25 cycles of latency
    per draw), then its alias unless a second draw is below the slot's threshold."""
    state = lcg_next(state)
    i = (np.uint64(lcg_u32(state)) * np.uint64(alias_idx.shape[0])) >> np.uint64(32)
    state = lcg_next(state)
    if lcg_u32(state) >= alias_thr[i]:
        i = np.uint64(alias_idx[i])
    return i, state


@numba.njit(inline="always", nogil=True)
def _gradient_and_loss(s, label, alpha):
    """(gradient factor, nll) of one binary prediction with label 1 or 0: beyond the clip the
    saturated gradient (sigmoid 0 or 1) and the exact nll, inside it the tables."""
    if s >= MAX_EXP or s <= -MAX_EXP:
        f = np.float32(1.0) if s >= MAX_EXP else np.float32(0.0)
        return (label - f) * alpha, -log_sigmoid_clipped(np.float64(s) if label > 0.5
                                                         else -np.float64(s))
    idx = table_index(s)
    return (label - SIGMOID_TABLE[idx]) * alpha, NLL_BY_CODE[np.uint64(label < 0.5), idx]


@numba.njit(inline="always", nogil=True)
def draw(larg, n, noise, syn1neg, state, hot, HOT):
    """The output rows of the next ``n`` noise words (through the thread's hot-row map) into
    ``noise[:n]``, in the order the predictions use them, and a prefetch of each row: a centre's
    predictions draw all their noise words first, so the rows (random ones, mostly beyond the
    L2 cache) are on their way while the earlier predictions compute. The random stream is the
    same as drawing them one by one."""
    alias_thr, alias_idx, _ = larg
    for t in range(n):
        target, state = draw_noise(alias_thr, alias_idx, state)
        row = np.uint64(out_row(hot, target, HOT))
        noise[t] = row
        prefetch_row(syn1neg, row)
    return state


@numba.njit(inline="always", nogil=True)
def predict_drawn(h, w, syn1neg, larg, noise, first, alpha, err, hot, HOT, D):
    """One negative-sampling prediction of word ``w`` from the input vector ``h``: the true word
    and the ``negative`` noise words whose rows are ``noise[first:first + negative]`` (from
    ``draw``; one equal to ``w`` is skipped, as in word2vec: the map is one-to-one, so comparing
    rows compares words). ``larg`` is the layer's ``(alias_thr, alias_idx, negative)``. Updates
    the output rows, sets ``err`` to the input's error. Returns the nll."""
    negative = larg[2]
    loss = 0.0
    for d in range(D):
        err[d] = 0.0
    word = np.uint64(out_row(hot, w, HOT))
    for t in range(negative + 1):
        if t == 0:
            target = word
            label = np.float32(1.0)
        else:
            target = noise[first + t - 1]
            if target == word:
                continue
            label = np.float32(0.0)
        s = np.float32(0.0)
        for d in range(D):
            s += h[d] * syn1neg[target, d]
        gg, nll = _gradient_and_loss(s, label, alpha)
        loss += nll
        for d in range(D):
            err[d] += gg * syn1neg[target, d]
        for d in range(D):
            syn1neg[target, d] += gg * h[d]
    return loss


@numba.njit(inline="always", nogil=True)
def centre(syn0, syn1neg, larg, scratch, ctx, k, w, alpha, state, cfg):
    """The skip-gram body (the loop's one signature, ``loop.py``), word2vec's order: the
    centre's noise words are drawn first (``draw``: their rows prefetched), then each of the
    ``k`` contexts predicts ``w`` against its own ``negative`` of them and receives its error.
    With ``cfg``'s TOP > 0, ``centre_batched``. Returns (nll, state)."""
    if cfg[1] > 0:  # the layer's order "batched" (its ``batch_levels``): HogBatch
        return centre_batched(syn0, syn1neg, larg, scratch, ctx, k, w, alpha, state, cfg)
    D, HOT = cfg[0], cfg[5]
    err, noise, hot = scratch[1], scratch[5], scratch[6]
    negative = larg[2]
    state = draw(larg, k * negative, noise, syn1neg, state, hot, HOT)
    loss = 0.0
    for j in range(k):
        r = ctx[j]
        loss += predict_drawn(syn0[r], w, syn1neg, larg, noise, j * negative, alpha, err, hot,
                              HOT, D)
        add_to_input(syn0, r, err, scratch[9], cfg[6], D)
    return loss, state


@numba.njit(inline="always", nogil=True)
def predict(h, w, syn1neg, larg, scratch, alpha, err, state, cfg):
    """One prediction from the input vector ``h`` (the CBOW body; the loop's one signature):
    draws its noise words, sets ``err`` to the input's error. Returns (nll, state)."""
    D, HOT = cfg[0], cfg[5]
    noise, hot = scratch[5], scratch[6]
    state = draw(larg, larg[2], noise, syn1neg, state, hot, HOT)
    return predict_drawn(h, w, syn1neg, larg, noise, 0, alpha, err, hot, HOT, D), state


@numba.njit(inline="always", nogil=True)
def batched_row_update(syn0, out, node, ctx, n, g, neu, row, D):
    """The update half of one output row batched over a centre's ``n`` contexts (negative
    sampling's batched order, HogBatch): context j's error ``neu[j]`` takes the row as it was
    (``row``, a copy), and the row ``out[node]`` takes the sum of every context's update
    ``g[j] * syn0[ctx[j]]``, summed on the stack first: there LLVM keeps it in registers
    across the contexts (it cannot tell that ``neu``, on the heap, is not the row)."""
    total = stack_row(D)
    for d in range(D):
        total[d] = 0.0
    for j in range(n):
        gj = g[j]
        r = np.uint64(ctx[j])
        for d in range(D):
            neu[j, d] += gj * row[d]
        for d in range(D):
            total[d] += gj * syn0[r, d]
    for d in range(D):
        out[node, d] += total[d]


@numba.njit(inline="always", nogil=True)
def centre_batched(syn0, syn1neg, larg, scratch, ctx, k, w, alpha, state, cfg):
    """The skip-gram body with one draw of noise words per centre (``ns_order="batched"``:
    HogBatch, Ji et al. 2016, "Parallelizing Word2Vec in Shared and Distributed Memory"): the
    ``k`` contexts share the centre's ``negative`` noise words, and each output row (the
    centre's, then each noise word's) is scored against all ``k`` contexts at once; the
    contexts' errors come from the row as it was before its update, the row then takes all
    ``k`` updates (a small matrix product), and each context vector receives its error after
    the last row. ``k``-fold fewer noise rows fetched and drawn than word2vec's fresh noise
    words per context. Returns (nll, state)."""
    D, HOT, LOCK = cfg[0], cfg[5], cfg[6]
    neu, row, g, noise, hot, lockf = scratch[0], scratch[1], scratch[3], scratch[5], \
        scratch[6], scratch[9]
    negative = larg[2]
    n = np.uint64(k)
    if k == 0:  # no context: nothing to predict, nothing drawn
        return 0.0, state
    state = draw(larg, negative, noise, syn1neg, state, hot, HOT)
    word = np.uint64(out_row(hot, w, HOT))
    for j in range(n):
        for d in range(D):
            neu[j, d] = 0.0
    loss = 0.0
    for t in range(negative + 1):
        if t == 0:
            target = word
            label = np.float32(1.0)
        else:
            target = noise[t - 1]
            if target == word:
                continue
            label = np.float32(0.0)
        for d in range(D):
            row[d] = syn1neg[target, d]
        for j in range(n):
            r = np.uint64(ctx[j])
            s = np.float32(0.0)
            for d in range(D):
                s += syn0[r, d] * row[d]
            g[j], nll = _gradient_and_loss(s, label, alpha)
            loss += nll
        batched_row_update(syn0, syn1neg, target, ctx, n, g, neu, row, D)
    for j in range(n):
        add_to_input(syn0, ctx[j], neu[j], lockf, LOCK, D)
    return loss, state
