"""Pure-Python twins of the sentence loops that draw the *same random stream* (word2vec's LCG) and
read the same sigmoid tables: they check the translation into Numba (down-sampling, reduced
windows, the order of draws and updates, the pairs a batcher receives), not the mathematics.
The mathematics is checked against ``naive.py``, which shares nothing with the kernels."""
from __future__ import annotations

import math

import numpy as np

from semhuff.kernels.common import LOG_SIGMOID_TABLE, MAX_EXP, SIGMOID_TABLE, SIGMOID_TABLE_SIZE, TABLE_SCALE

MASK64 = (1 << 64) - 1


class Lcg:
    def __init__(self, seed: int):
        self.state = int(seed) & MASK64

    def u32(self) -> int:
        self.state = (self.state * 25214903917 + 11) & MASK64
        return (self.state >> 16) & 0xFFFFFFFF


def _sigmoid_and_nll(s: float, code: int):
    """(sigmoid(s) from the table or None when clipped, -log p(branch))."""
    signed = s if code == 0 else -s
    if s <= -MAX_EXP or s >= MAX_EXP:
        return None, math.log1p(math.exp(-abs(signed))) + max(-signed, 0.0)
    idx = int((s + MAX_EXP) * TABLE_SCALE)
    lidx = idx if code == 0 else SIGMOID_TABLE_SIZE - 1 - idx
    return float(SIGMOID_TABLE[idx]), -float(LOG_SIGMOID_TABLE[lidx])


def _sentences(ids, bounds, keep_thr, rng):
    start = 0
    for end in bounds:
        kept = []
        for w in ids[start:end]:
            if keep_thr[w] != 0xFFFFFFFF and rng.u32() >= keep_thr[w]:
                continue
            kept.append(int(w))
        yield start, kept
        start = int(end)


def _window(pos, n, window, rng):
    b = rng.u32() % window
    return max(0, pos - window + b), min(n, pos + window + 1 - b)


def _alpha(alpha0, min_alpha, done, total):
    return alpha0 - (alpha0 - min_alpha) * min(done / total, 1.0)


def sg_hs(ids, bounds, syn0, syn1, points, codes, lengths, keep_thr, window, alpha0, min_alpha,
          words_before, total_words, seed, batch_levels=0):
    """Skip-gram + hierarchical softmax. The top ``batch_levels`` path nodes are batched over the
    centre's contexts (scores at the node's row, then one update); the deeper nodes are walked
    context by context in word2vec.c's order. 0 = word2vec's order, a huge value = all batched."""
    rng = Lcg(seed)
    loss, pairs, trained = 0.0, 0, 0
    for start, sent in _sentences(ids, bounds, keep_thr, rng):
        alpha = np.float32(_alpha(alpha0, min_alpha, words_before + start, total_words))
        trained += len(sent)
        for pos, w in enumerate(sent):
            lo, hi = _window(pos, len(sent), window, rng)
            ctx = [sent[c] for c in range(lo, hi) if c != pos]
            pairs += len(ctx)
            err = [np.zeros(syn0.shape[1], np.float32) for _ in ctx]
            top = min(batch_levels, int(lengths[w]))
            for i in range(top):
                node, code = points[w, i], int(codes[w, i])
                row = syn1[node].copy()
                grads = []
                for r in ctx:
                    f, nll = _sigmoid_and_nll(float(np.dot(syn0[r], row)), code)
                    loss += nll
                    grads.append(0.0 if f is None else (1 - code - f) * alpha)
                for j, r in enumerate(ctx):
                    err[j] += np.float32(grads[j]) * row
                    syn1[node] += np.float32(grads[j]) * syn0[r]
            for j, r in enumerate(ctx):
                for i in range(top, lengths[w]):
                    node, code = points[w, i], int(codes[w, i])
                    f, nll = _sigmoid_and_nll(float(np.dot(syn0[r], syn1[node])), code)
                    loss += nll
                    if f is None:
                        continue
                    g = np.float32((1 - code - f) * alpha)
                    err[j] += g * syn1[node]
                    syn1[node] += g * syn0[r]
                syn0[r] += err[j]
    return loss, pairs, trained


def cbow_hs(ids, bounds, syn0, syn1, points, codes, lengths, keep_thr, window, alpha0,
            min_alpha, words_before, total_words, seed):
    rng = Lcg(seed)
    loss, pairs, trained = 0.0, 0, 0
    for start, sent in _sentences(ids, bounds, keep_thr, rng):
        alpha = np.float32(_alpha(alpha0, min_alpha, words_before + start, total_words))
        trained += len(sent)
        for pos, w in enumerate(sent):
            lo, hi = _window(pos, len(sent), window, rng)
            ctx = [sent[c] for c in range(lo, hi) if c != pos]
            if not ctx:
                continue
            pairs += 1
            h = np.mean([syn0[r] for r in ctx], axis=0).astype(np.float32)
            err = np.zeros_like(h)
            for i in range(lengths[w]):
                node, code = points[w, i], int(codes[w, i])
                f, nll = _sigmoid_and_nll(float(np.dot(h, syn1[node])), code)
                loss += nll
                if f is None:
                    continue
                g = np.float32((1 - code - f) * alpha)
                err += g * syn1[node]
                syn1[node] += g * h
            for r in ctx:
                syn0[r] += err
    return loss, pairs, trained


def pairs(ids, bounds, keep_thr, window, alpha0, min_alpha, words_before, total_words, seed,
          sg=True):
    """The (inputs, target, rate) the loops' PAIRS body emits, in order: skip-gram one input
    per pair, CBOW the list of context words per centre."""
    rng = Lcg(seed)
    out = []
    for start, sent in _sentences(ids, bounds, keep_thr, rng):
        alpha = np.float32(_alpha(alpha0, min_alpha, words_before + start, total_words))
        for pos, w in enumerate(sent):
            lo, hi = _window(pos, len(sent), window, rng)
            ctx = [sent[c] for c in range(lo, hi) if c != pos]
            if sg:
                out.extend((r, w, alpha) for r in ctx)
            elif ctx:
                out.append((ctx, w, alpha))
    return out


def _draw_noise(thr, alias, rng):
    i = rng.u32() % len(alias)
    return int(i) if rng.u32() < thr[i] else int(alias[i])


def _ns_step(h, syn1neg, target, label, alpha):
    s = float(np.dot(h, syn1neg[target]))
    if s >= MAX_EXP:
        f = 1.0
    elif s <= -MAX_EXP:
        f = 0.0
    else:
        f = float(SIGMOID_TABLE[int((s + MAX_EXP) * TABLE_SCALE)])
    _, nll = _sigmoid_and_nll(s, 0 if label else 1)
    return np.float32((label - f) * alpha), nll


def sg_ns(ids, bounds, syn0, syn1neg, alias_thr, alias_idx, negative, keep_thr, window, alpha0,
          min_alpha, words_before, total_words, seed):
    rng = Lcg(seed)
    loss, pairs, trained = 0.0, 0, 0
    for start, sent in _sentences(ids, bounds, keep_thr, rng):
        alpha = np.float32(_alpha(alpha0, min_alpha, words_before + start, total_words))
        trained += len(sent)
        for pos, w in enumerate(sent):
            lo, hi = _window(pos, len(sent), window, rng)
            for c in range(lo, hi):
                if c == pos:
                    continue
                r = sent[c]
                pairs += 1
                err = np.zeros(syn0.shape[1], np.float32)
                for t in range(negative + 1):
                    target, label = (w, 1) if t == 0 else (_draw_noise(alias_thr, alias_idx, rng), 0)
                    if t > 0 and target == w:
                        continue
                    g, nll = _ns_step(syn0[r], syn1neg, target, label, alpha)
                    loss += nll
                    err += g * syn1neg[target]
                    syn1neg[target] += g * syn0[r]
                syn0[r] += err
    return loss, pairs, trained


def cbow_ns(ids, bounds, syn0, syn1neg, alias_thr, alias_idx, negative, keep_thr, window, alpha0,
            min_alpha, words_before, total_words, seed):
    rng = Lcg(seed)
    loss, pairs, trained = 0.0, 0, 0
    for start, sent in _sentences(ids, bounds, keep_thr, rng):
        alpha = np.float32(_alpha(alpha0, min_alpha, words_before + start, total_words))
        trained += len(sent)
        for pos, w in enumerate(sent):
            lo, hi = _window(pos, len(sent), window, rng)
            ctx = [sent[c] for c in range(lo, hi) if c != pos]
            if not ctx:
                continue
            pairs += 1
            h = np.mean([syn0[r] for r in ctx], axis=0).astype(np.float32)
            err = np.zeros_like(h)
            for t in range(negative + 1):
                target, label = (w, 1) if t == 0 else (_draw_noise(alias_thr, alias_idx, rng), 0)
                if t > 0 and target == w:
                    continue
                g, nll = _ns_step(h, syn1neg, target, label, alpha)
                loss += nll
                err += g * syn1neg[target]
                syn1neg[target] += g * h
            for r in ctx:
                syn0[r] += err
    return loss, pairs, trained
