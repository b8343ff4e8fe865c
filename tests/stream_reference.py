"""Pure-Python twins of the sentence loop that draw the *same random stream* (word2vec's LCG) and
read the same sigmoid tables: they check the translation into Numba (down-sampling, reduced
windows, the order of draws and updates, the pairs a batcher receives), not the mathematics.
The mathematics is checked against ``naive.py``, which shares nothing with the kernels."""
from __future__ import annotations

import math

import numpy as np

from semhuff.kernels.common import (LOG_SIGMOID_TABLE, MAX_EXP, SIGMOID_TABLE, SIGMOID_TABLE_SIZE,
                                    TABLE_SCALE)

MASK64 = (1 << 64) - 1


class Lcg:
    def __init__(self, seed: int):
        self.state = int(seed) & MASK64

    def u32(self) -> int:
        self.state = (self.state * 25214903917 + 11) & MASK64
        return (self.state >> 16) & 0xFFFFFFFF


class Totals:
    def __init__(self):
        self.loss, self.pairs, self.trained = 0.0, 0, 0

    def result(self):
        return self.loss, self.pairs, self.trained


def _table_sigmoid_and_nll(s: float, code: int):
    """(sigmoid(s) from the table or None when clipped, -log p(branch)) for HS."""
    signed = s if code == 0 else -s
    if s <= -MAX_EXP or s >= MAX_EXP:
        return None, math.log1p(math.exp(-abs(signed))) + max(-signed, 0.0)
    idx = int((s + MAX_EXP) * TABLE_SCALE)
    lidx = idx if code == 0 else SIGMOID_TABLE_SIZE - 1 - idx
    return float(SIGMOID_TABLE[idx]), -float(LOG_SIGMOID_TABLE[lidx])


def _centres(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before, total_words, rng,
             totals):
    """Yield (alpha, centre, contexts) for every kept position, drawing from ``rng`` exactly when
    the loop does: a sentence's down-sampling first, then each position's window as it comes
    (a consumer's own draws, NS noise, fall in between)."""
    start = 0
    for end in bounds:
        alpha = np.float32(alpha0 - (alpha0 - min_alpha) * min((words_before + start) / total_words, 1.0))
        sent = [int(w) for w in ids[start:end]
                if keep_thr[w] == 0xFFFFFFFF or rng.u32() < keep_thr[w]]
        totals.trained += len(sent)
        for pos, w in enumerate(sent):
            b = rng.u32() % window
            lo, hi = max(0, pos - window + b), min(len(sent), pos + window + 1 - b)
            yield alpha, w, [sent[c] for c in range(lo, hi) if c != pos]
        start = int(end)


def _hs_walk(h, w, syn1, points, codes, lengths, alpha, err, totals, pending=None):
    """Down w's path from ``h``; the updates of the first ``len(pending)`` nodes are added to
    ``pending`` instead of their rows."""
    pending = pending or []
    for i in range(lengths[w]):
        node, code = points[w, i], int(codes[w, i])
        f, nll = _table_sigmoid_and_nll(float(np.dot(h, syn1[node])), code)
        totals.loss += nll
        if f is None:
            continue
        g = np.float32((1 - code - f) * alpha)
        err += g * syn1[node]
        if i < len(pending):
            pending[i] += g * h
        else:
            syn1[node] += g * h


def _ns_predict(h, w, syn1neg, thr, alias, negative, alpha, err, rng, totals):
    for t in range(negative + 1):
        if t == 0:
            target, label = w, 1
        else:
            i = (int(rng.u32()) * len(alias)) >> 32  # multiply-shift, not modulo
            target, label = (int(i) if rng.u32() < thr[i] else int(alias[i])), 0
            if target == w:
                continue
        s = float(np.dot(h, syn1neg[target]))
        f = 1.0 if s >= MAX_EXP else 0.0 if s <= -MAX_EXP else float(SIGMOID_TABLE[int((s + MAX_EXP) * TABLE_SCALE)])
        totals.loss += _table_sigmoid_and_nll(s, 0 if label else 1)[1]
        g = np.float32((label - f) * alpha)
        err += g * syn1neg[target]
        syn1neg[target] += g * h


def sg_hs(ids, bounds, syn0, syn1, points, codes, lengths, keep_thr, window, alpha0, min_alpha,
          words_before, total_words, seed, batch_levels=0):
    """Skip-gram + HS, context by context (word2vec.c's order), except that the rows of the top
    ``batch_levels`` path nodes are updated once per centre, after its last context."""
    rng, totals = Lcg(seed), Totals()
    for alpha, w, ctx in _centres(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before,
                                  total_words, rng, totals):
        totals.pairs += len(ctx)
        _sg_hs_centre(syn0, syn1, points, codes, lengths, alpha, w, ctx, batch_levels, totals)
    return totals.result()


def _sg_hs_centre(syn0, syn1, points, codes, lengths, alpha, w, ctx, batch_levels, totals):
    top = min(batch_levels, int(lengths[w]))
    pending = [np.zeros(syn0.shape[1], np.float32) for _ in range(top)]
    for r in ctx:
        err = np.zeros(syn0.shape[1], np.float32)
        _hs_walk(syn0[r], w, syn1, points, codes, lengths, alpha, err, totals, pending)
        syn0[r] += err
    for i in range(top):
        syn1[points[w, i]] += pending[i]


def _cbow(ids, bounds, syn0, keep_thr, window, alpha0, min_alpha, words_before, total_words,
          seed, predict):
    rng, totals = Lcg(seed), Totals()
    for alpha, w, ctx in _centres(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before,
                                  total_words, rng, totals):
        if not ctx:
            continue
        totals.pairs += 1
        h = np.mean([syn0[r] for r in ctx], axis=0).astype(np.float32)
        err = np.zeros_like(h)
        predict(h, w, alpha, err, rng, totals)
        for r in ctx:
            syn0[r] += err
    return totals.result()


def cbow_hs(ids, bounds, syn0, syn1, points, codes, lengths, keep_thr, window, alpha0,
            min_alpha, words_before, total_words, seed):
    return _cbow(ids, bounds, syn0, keep_thr, window, alpha0, min_alpha, words_before,
                 total_words, seed, lambda h, w, alpha, err, rng, totals: _hs_walk(
                     h, w, syn1, points, codes, lengths, alpha, err, totals))


def cbow_ns(ids, bounds, syn0, syn1neg, alias_thr, alias_idx, negative, keep_thr, window, alpha0,
            min_alpha, words_before, total_words, seed):
    return _cbow(ids, bounds, syn0, keep_thr, window, alpha0, min_alpha, words_before,
                 total_words, seed, lambda h, w, alpha, err, rng, totals: _ns_predict(
                     h, w, syn1neg, alias_thr, alias_idx, negative, alpha, err, rng, totals))


def sg_ns(ids, bounds, syn0, syn1neg, alias_thr, alias_idx, negative, keep_thr, window, alpha0,
          min_alpha, words_before, total_words, seed):
    rng, totals = Lcg(seed), Totals()
    for alpha, w, ctx in _centres(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before,
                                  total_words, rng, totals):
        for r in ctx:
            totals.pairs += 1
            err = np.zeros(syn0.shape[1], np.float32)
            _ns_predict(syn0[r], w, syn1neg, alias_thr, alias_idx, negative, alpha, err, rng, totals)
            syn0[r] += err
    return totals.result()


def sg_hs_ns(ids, bounds, syn0, syn1, points, codes, lengths, syn1neg, alias_thr, alias_idx,
             negative, keep_thr, window, alpha0, min_alpha, words_before, total_words, seed,
             batch_levels=0):
    """Skip-gram with HS and NS: at each centre sg_hs's step over its contexts, then sg_ns's."""
    rng, totals = Lcg(seed), Totals()
    for alpha, w, ctx in _centres(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before,
                                  total_words, rng, totals):
        totals.pairs += len(ctx)
        _sg_hs_centre(syn0, syn1, points, codes, lengths, alpha, w, ctx, batch_levels, totals)
        for r in ctx:
            err = np.zeros(syn0.shape[1], np.float32)
            _ns_predict(syn0[r], w, syn1neg, alias_thr, alias_idx, negative, alpha, err, rng, totals)
            syn0[r] += err
    return totals.result()


def cbow_hs_ns(ids, bounds, syn0, syn1, points, codes, lengths, syn1neg, alias_thr, alias_idx,
               negative, keep_thr, window, alpha0, min_alpha, words_before, total_words, seed):
    """CBOW with HS and NS from the same context mean, the errors summed."""
    def predict(h, w, alpha, err, rng, totals):
        _hs_walk(h, w, syn1, points, codes, lengths, alpha, err, totals)
        _ns_predict(h, w, syn1neg, alias_thr, alias_idx, negative, alpha, err, rng, totals)
    return _cbow(ids, bounds, syn0, keep_thr, window, alpha0, min_alpha, words_before,
                 total_words, seed, predict)


def pairs(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before, total_words, seed,
          sg=True):
    """The (inputs, target, rate) the loop's PAIRS body emits, in order: skip-gram one input per
    pair, CBOW the list of context words per centre."""
    out = []
    for alpha, w, ctx in _centres(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before,
                                  total_words, Lcg(seed), Totals()):
        if sg:
            out.extend((r, w, alpha) for r in ctx)
        elif ctx:
            out.append((ctx, w, alpha))
    return out


def sg_ns_batched(ids, bounds, syn0, syn1neg, alias_thr, alias_idx, negative, keep_thr, window,
                  alpha0, min_alpha, words_before, total_words, seed):
    """ns_order="batched": one draw of ``negative`` noise words per centre (none for a centre
    without contexts), each row scored against all contexts, then updated with their sum."""
    rng, totals = Lcg(seed), Totals()
    for alpha, w, ctx in _centres(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before,
                                  total_words, rng, totals):
        totals.pairs += len(ctx)
        if not ctx:
            continue
        noise = []
        for _ in range(negative):
            i = (int(rng.u32()) * len(alias_idx)) >> 32
            noise.append(int(i) if rng.u32() < alias_thr[i] else int(alias_idx[i]))
        err = np.zeros((len(ctx), syn0.shape[1]), np.float32)
        for target, label in [(w, 1)] + [(z, 0) for z in noise if z != w]:
            row = syn1neg[target].copy()
            for j, r in enumerate(ctx):
                s = float(np.dot(syn0[r], row))
                f = 1.0 if s >= MAX_EXP else 0.0 if s <= -MAX_EXP else float(SIGMOID_TABLE[int((s + MAX_EXP) * TABLE_SCALE)])
                totals.loss += _table_sigmoid_and_nll(s, 0 if label else 1)[1]
                g = np.float32((label - f) * alpha)
                err[j] += g * row
                syn1neg[target] += g * syn0[r]
        for j, r in enumerate(ctx):
            syn0[r] += err[j]
    return totals.result()
