"""The sentence-per-block GPU trainer's kernel (numba.cuda): the CPU's sentence loop on the device.

One launch trains a chunk. Block ``b`` (one warp: 32 threads, each over the dimensions ``lane,
lane + 32, ...``) walks the sentences ``b, b + G, ...`` of the chunk's ``G`` blocks from start to
end, with the CPU kernel's semantics (``kernels/loop.py``; the same rules, in the same order):
the sentence's learning rate (``alpha_at`` at its first word), word2vec's down-sampling, the
reduced window of each centre, and for each centre the body's update in word2vec's order, from
the block's own LCG stream (``sentences.block_seeds``: block 0 draws the chunk's stream, so one
block trains the CPU kernel's vectors, tested). Only the token ids travel to the device; the
blocks update the shared weights Hogwild, as cusim's kernels and word2vec.c's threads do: a
block writes a row with plain stores, so of two blocks writing the same row at once one change
may be lost (docs/gpu.md measures what that costs in quality on the host, ``eval/bench/
gpu_concurrency.py``).

The bodies, each the CPU body's arithmetic (``kernels/hs.py``, ``kernels/ns.py``):

* **HS** (any tree: padded ``points``, ``codes``, ``lengths``): for one input vector, the scores
  of up to ``NODES`` path nodes at once (the nodes of a path are distinct rows and the input does
  not change along it, so a node's score does not depend on the updates before it: the CPU
  kernel computes them ahead too), each lane's partial dot products summed in shared memory;
  then the nodes' gradients from the CPU's 1024-bin sigmoid table (the same table: not the
  exact sigmoid), ``|s| >= 6`` no update (or the saturated one, ``clip="saturate"``); then the
  updates node by node. The top ``TOP`` levels' updates wait for the centre's end (the "mixed"
  order; 0: word2vec's).
* **NS**, word2vec's order: the centre's noise words drawn first (the CPU's stream and alias
  table), the target and its noise words scored at once; a noise word drawn twice reads the row
  its first draw updated (its score corrected by ``g * |h|^2``, exact in real arithmetic), and
  one equal to the target is skipped. **NS batched** (HogBatch, the CPU's default): one draw per
  centre, each output row scored against every context at once, the contexts' errors from the
  row as it was, the contexts updated after the last row.
* **HS + NS**: the HS step, then the NS step (word2vec's order), as the CPU's ``HS_NS`` body.
* CBOW: the mean (or sum) of the contexts predicts the centre; every context receives the error
  (after a sum, its share).

Reductions use shared memory and ``syncthreads``, never warp shuffles, which the CUDA simulator
cannot run: the code the tests check is the code a GPU runs. Every lane runs the same control
flow and the same random stream (the draws cost a lane what they cost one thread), so nothing
but the partial sums and the gradients crosses lanes: two barriers for each group of up to
``NODES`` scores.
"""
from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda  # the name must be ``cuda``: the simulator swaps it in kernels' globals

from ..kernels.common import MAX_EXP, TABLE_SCALE
from .numba_kernels import log_sigmoid

WARP = 32               # lanes of a block on a GPU: one warp
MAX_DEFERRED = 8        # HS levels whose updates may wait for the centre's end ("mixed": 4)
f32 = numba.float32
f64 = numba.float64

_M32 = np.uint64(0xFFFFFFFF)
_S16 = np.uint64(16)
_S32 = np.uint64(32)
_MUL_LO = np.uint64(0xDEECE66D)  # word2vec's LCG multiplier 25214903917 = 5 * 2^32 + this
_MUL_HI = np.uint64(5)
_ADD = np.uint64(11)
_ALL = np.uint32(0xFFFFFFFF)


def lcg_next(state):
    """word2vec's LCG step ``state * 25214903917 + 11 mod 2^64`` (``kernels.common.lcg_next``)
    on 32-bit halves: no product exceeds 64 bits, so it runs unchanged on NumPy scalars (the
    simulator, which warns on overflow) and on the device (tested equal)."""
    lo = state & _M32
    hi = state >> _S32
    a = lo * _MUL_LO
    mid = (hi * _MUL_LO + lo * _MUL_HI) & _M32
    low = (a & _M32) + _ADD
    high = ((a >> _S32) + mid + (low >> _S32)) & _M32
    return (high << _S32) | (low & _M32)


_lcg_next = cuda.jit(device=True)(lcg_next)


@cuda.jit(device=True)
def _u32(state):
    return (state >> _S16) & _M32


@cuda.jit(device=True)
def _alpha_at(alpha0, min_alpha, done, total):
    frac = done / total
    if frac > 1.0:
        frac = 1.0
    return f32(alpha0 - (alpha0 - min_alpha) * frac)


@cuda.jit(device=True)
def _binary_gradient(s, label, alpha, saturate, sig, nllt):
    """(gradient factor, nll) of one binary output with label 1 or 0 (the CPU's ``_gradient``
    of HS, label ``1 - code``; NS passes ``saturate`` True: ``_gradient_and_loss``)."""
    if s <= -MAX_EXP or s >= MAX_EXP:
        nll = -log_sigmoid(f64(s) if label > 0.5 else -f64(s))
        if not saturate:
            return f32(0.0), nll
        f = f32(1.0) if s >= MAX_EXP else f32(0.0)
        return (label - f) * alpha, nll
    idx = np.uint64((f64(s) + MAX_EXP) * TABLE_SCALE)
    row = 0 if label > 0.5 else 1
    return (label - sig[idx]) * alpha, nllt[row, idx]


@functools.lru_cache(maxsize=None)
def lane_ops(dim: int, lanes: int):
    """What both kernels do lane by lane, for vectors of ``dim`` over blocks of ``lanes`` (lane
    ``l`` holds the dimensions ``l, l + lanes, ...``): ``(dot, total, load, mean_of)``."""
    D, LANES = int(dim), int(lanes)
    KD = (D + LANES - 1) // LANES

    @cuda.jit(device=True)
    def dot(h, rows, row, lane):
        """This lane's share of ``h . rows[row]``."""
        acc = f32(0.0)
        for e in range(KD):
            d = lane + LANES * e
            if d < D:
                acc += h[e] * rows[row, d]
        return acc

    @cuda.jit(device=True)
    def total(part, i):
        """The lanes' shares ``part[i, :lanes]`` summed: one dot product."""
        s = f32(0.0)
        for j in range(LANES):
            s += part[i, j]
        return s

    @cuda.jit(device=True)
    def load(h, err, rows, row, lane):
        """``h`` = this lane's share of ``rows[row]``; ``err`` = 0."""
        for e in range(KD):
            d = lane + LANES * e
            h[e] = rows[row, d] if d < D else f32(0.0)
            err[e] = f32(0.0)

    @cuda.jit(device=True)
    def mean_of(h, syn0, ids, first, k, mean, lane):
        """CBOW's input (``kernels.common.context_mean``): the mean (or sum) of the ``k`` rows
        ``syn0[ids[first:first + k]]``, this lane's share."""
        for e in range(KD):
            d = lane + LANES * e
            acc = f32(0.0)
            if d < D:
                for j in range(k):
                    acc += syn0[ids[first + j], d]
                if mean:
                    acc *= f32(1.0 / k)
            h[e] = acc

    return dot, total, load, mean_of


@functools.lru_cache(maxsize=None)
def sentence_kernel(sg: bool, dim: int, window: int, cbow_mean: bool = True, hs: bool = True,
                    top: int = 0, saturate: bool = False, negative: int = 0,
                    ns_batched: bool = False, lanes: int = WARP, atomic: bool = True,
                    pick: bool = False):
    """The training kernel for one configuration (each a compile-time constant):
    ``kernel[G, lanes](ids, bounds, kept, seeds, syn0, syn1, points, codes, lengths, syn1neg,
    alias_thr, alias_idx, sig, nllt, keep_thr, reduce, alpha0, min_alpha, words_before,
    total_words, out, sample_thr, picks, pick_count)``. ``hs``: the tree's layer (``syn1``, ``points/codes/lengths``);
    ``negative`` > 0: negative sampling (``syn1neg``, the alias table), batched or word2vec's
    order; both: HS then NS. ``kept``: int32 scratch as long as ``ids``; ``seeds``: uint64, one
    per block (``sentences.block_seeds``); ``out``: float64, its first three entries added to
    (summed nll, predictions, words kept).
    ``lanes``: the threads of a block, launched as ``kernel[G, lanes]``: a warp on a GPU; the
    simulator tests run most configurations at 8 (4x fewer Python threads) and one at 32. A
    block scores up to ``lanes`` outputs at once (``NODES``), so it takes ``negative + 2``
    and, for NS's batched order, ``2 * window`` of at most ``lanes``. ``atomic``: every update
    of a shared row an atomic add (two blocks' changes of one row both land); else a plain
    read-modify-write (cusim's, word2vec.c's threads': of two at once, one may be lost).
    ``pick`` (HS over a self-organized tree): each centre is sampled for the cluster statistic
    with probability ``sample_thr[w] / 2^32`` (the CPU's ``classes.pick``, the same draw), a
    sampled one appended to ``picks`` (``[w, k, contexts...]``, ``pick_count`` counting; past
    the rows it has, not kept) for ``observe_kernel`` after the launch."""
    SG, D, W, NEG, LANES = bool(sg), int(dim), int(window), int(negative), int(lanes)
    NODES = LANES                          # scores computed at once: one lane sums each
    if not 1 <= top + 1 <= MAX_DEFERRED + 1:
        raise ValueError(f"{top} deferred levels: the device defers at most {MAX_DEFERRED}")
    if not (hs or NEG):
        raise ValueError("a sentence kernel needs hierarchical softmax or negative sampling")
    HS, TOP, SAT, MEAN = bool(hs), int(top) if sg else 0, bool(saturate), bool(cbow_mean) or SG
    ATOMIC, PICK = bool(atomic), bool(pick)
    BATCHED = bool(ns_batched) and SG and NEG > 0 and not HS  # HS+NS: NS in word2vec's order
    if NEG + 2 > LANES:
        raise ValueError(f"negative {NEG}: a block of {LANES} lanes scores at most "
                         f"{LANES - 2} noise words at once")
    if BATCHED and 2 * W > LANES:
        raise ValueError(f"window {W}: NS's batched order scores a centre's 2 x window contexts "
                         f"at once, at most {LANES} (ns_order 'word2vec' takes any window)")
    KD = (D + LANES - 1) // LANES          # dimensions a lane holds
    CTX = 2 * W                            # contexts of a centre, at most
    NOISE = max(1, (CTX if SG and not BATCHED else 1) * NEG)  # noise words drawn per centre
    TOPN = max(TOP, 1)
    PAD = LANES + 1                        # shared rows padded: no bank conflicts on the sums
    ROWS = NODES + 1                       # partial sums' rows: NS's |h|^2 one more
    GRADS = 2 * NODES + 2                  # gradients, and NS's whole dot products
    dot, total, load, mean_of = lane_ops(D, LANES)
    # (shared shapes must be constants here: computed in the kernel they fail to type on a GPU)

    @cuda.jit(device=True)
    def add(rows, i, d, value):
        """``rows[i, d] += value``: atomically, or a plain read-modify-write."""
        if ATOMIC:
            cuda.atomic.add(rows, (i, d), value)
        else:
            rows[i, d] += value

    @cuda.jit(device=True)
    def update(rows, i, d, old, value):
        """``rows[i, d]`` (read as ``old``) += ``value``."""
        if ATOMIC:
            cuda.atomic.add(rows, (i, d), value)
        else:
            rows[i, d] = old + value

    @cuda.jit(device=True)
    def pick_centre(state, w, k, ctx, sample_thr, picks, pick_count, lane):
        state = _lcg_next(state)
        if _u32(state) < sample_thr[w] and lane == 0:
            i = cuda.atomic.add(pick_count, 0, 1)
            if i < picks.shape[0]:
                picks[i, 0] = w
                picks[i, 1] = k
                for j in range(k):
                    picks[i, 2 + j] = ctx[j]
        return state

    @cuda.jit(device=True)
    def draw_noise(state, alias_thr, alias_idx):
        state = _lcg_next(state)
        i = (_u32(state) * np.uint64(alias_idx.shape[0])) >> _S32
        state = _lcg_next(state)
        if _u32(state) >= alias_thr[i]:
            i = np.uint64(alias_idx[i])
        return numba.int32(i), state

    @cuda.jit(device=True)
    def hs_walk(h, err, w, syn1, points, codes, lengths, alpha, part, gsh, lane, sig, nllt,
                deferred, top):
        """``kernels.hs.walk_path``: ``h`` predicts ``w`` over its path; ``err`` += the input's
        error; the first ``top`` levels' updates go to ``deferred``. Returns this lane's nll."""
        loss = 0.0
        depth = lengths[w]
        for c0 in range(0, depth, NODES):
            m = min(NODES, depth - c0)
            for i in range(m):
                part[i, lane] = dot(h, syn1, points[w, c0 + i], lane)
            cuda.syncthreads()
            if lane < m:
                g, nll = _binary_gradient(total(part, lane), f32(1 - codes[w, c0 + lane]), alpha,
                                          SAT, sig, nllt)
                gsh[lane] = g
                loss += nll
            cuda.syncthreads()
            for i in range(m):
                g = gsh[i]
                node = points[w, c0 + i]
                level = c0 + i
                for e in range(KD):
                    d = lane + LANES * e
                    if d < D:
                        r = syn1[node, d]
                        err[e] += g * r
                        if level < top:
                            deferred[level, e] += g * h[e]
                        else:
                            update(syn1, node, d, r, g * h[e])
        return loss

    @cuda.jit(device=True)
    def ns_walk(h, err, w, syn1neg, noise, first, alpha, part, gsh, lane, sig, nllt):
        """``kernels.ns.predict_drawn``: ``h`` predicts ``w`` against the noise words
        ``noise[first:first + NEG]``, in word2vec's order. Returns this lane's nll."""
        loss = 0.0
        m = NEG + 1
        hh = f32(0.0)
        for e in range(KD):
            hh += h[e] * h[e]  # (a lane's dimensions past dim hold 0)
        for t in range(m):
            part[t, lane] = dot(h, syn1neg, w if t == 0 else noise[first + t - 1], lane)
        part[m, lane] = hh
        cuda.syncthreads()
        if lane < m + 1:  # each output's whole dot product (row m: |h|^2)
            gsh[NODES + lane] = total(part, lane)
        cuda.syncthreads()
        if lane == 0:  # in order: a repeated noise word reads its first draw's update
            h2 = gsh[NODES + m]
            for t in range(m):
                g = f32(0.0)
                target = w if t == 0 else noise[first + t - 1]
                if t == 0 or target != w:
                    s = gsh[NODES + t]
                    for u in range(1, t):
                        if noise[first + u - 1] == target:
                            s += gsh[u] * h2
                    g, nll = _binary_gradient(s, f32(1.0) if t == 0 else f32(0.0), alpha, True,
                                              sig, nllt)
                    loss += nll
                gsh[t] = g
        cuda.syncthreads()
        for t in range(m):
            target = w if t == 0 else noise[first + t - 1]
            if t > 0 and target == w:
                continue
            g = gsh[t]
            for e in range(KD):
                d = lane + LANES * e
                if d < D:
                    r = syn1neg[target, d]
                    err[e] += g * r
                    update(syn1neg, target, d, r, g * h[e])
        return loss

    @cuda.jit(device=True)
    def ns_batched_centre(syn0, syn1neg, ctx, k, w, noise, alpha, part, gsh, lane, sig, nllt,
                          neu, row):
        """``kernels.ns.centre_batched`` (HogBatch): every output row scored against the ``k``
        contexts at once (``row``: this lane's share of the row as it was). Returns this lane's
        nll."""
        loss = 0.0
        for j in range(k):
            for e in range(KD):
                neu[j, e] = f32(0.0)
        for t in range(NEG + 1):
            target = w if t == 0 else noise[t - 1]
            if t > 0 and target == w:
                continue
            for e in range(KD):
                d = lane + LANES * e
                row[e] = syn1neg[target, d] if d < D else f32(0.0)
            for j in range(k):
                part[j, lane] = dot(row, syn0, ctx[j], lane)
            cuda.syncthreads()
            if lane < k:
                g, nll = _binary_gradient(total(part, lane), f32(1.0) if t == 0 else f32(0.0),
                                          alpha, True, sig, nllt)
                gsh[lane] = g
                loss += nll
            cuda.syncthreads()
            for e in range(KD):
                d = lane + LANES * e
                if d < D:
                    summed = f32(0.0)
                    for j in range(k):
                        g = gsh[j]
                        neu[j, e] += g * row[e]
                        summed += g * syn0[ctx[j], d]
                    add(syn1neg, target, d, summed)
        for j in range(k):
            for e in range(KD):
                d = lane + LANES * e
                if d < D:
                    add(syn0, ctx[j], d, neu[j, e])
        return loss

    @cuda.jit
    def kernel(ids, bounds, kept, seeds, syn0, syn1, points, codes, lengths, syn1neg, alias_thr,
               alias_idx, sig, nllt, keep_thr, reduce, alpha0, min_alpha, words_before,
               total_words, out, sample_thr, picks, pick_count):
        lane = cuda.threadIdx.x
        part = cuda.shared.array((ROWS, PAD), numba.float32)
        gsh = cuda.shared.array(GRADS, numba.float32)
        h = cuda.local.array(KD, numba.float32)
        err = cuda.local.array(KD, numba.float32)
        deferred = cuda.local.array((TOPN, KD), numba.float32)
        ctx = cuda.local.array(CTX, numba.int32)
        noise = cuda.local.array(NOISE, numba.int32)
        neu = cuda.local.array((CTX if BATCHED else 1, KD), numba.float32)
        state = seeds[cuda.blockIdx.x]
        loss = 0.0
        pairs = 0
        trained = 0
        for si in range(cuda.blockIdx.x, bounds.shape[0], cuda.gridDim.x):
            start = bounds[si - 1] if si > 0 else 0
            end = bounds[si]
            alpha = _alpha_at(alpha0, min_alpha, words_before + start, total_words)
            n = 0
            for p in range(start, end):  # down-sampling: every lane the same draws and writes
                wp = ids[p]
                thr = keep_thr[wp]
                if thr != _ALL:
                    state = _lcg_next(state)
                    if _u32(state) >= thr:
                        continue
                kept[start + n] = wp
                n += 1
            trained += n
            for pos in range(n):
                w = kept[start + pos]
                b = 0
                if reduce:
                    state = _lcg_next(state)
                    b = numba.int64(_u32(state) % np.uint64(W))
                lo = max(pos - W + b, 0)
                hi = min(pos + W + 1 - b, n)
                k = 0
                for c in range(lo, hi):
                    if c != pos:
                        ctx[k] = kept[start + c]
                        k += 1
                if SG:
                    if PICK:
                        state = pick_centre(state, w, k, ctx, sample_thr, picks, pick_count, lane)
                    if NEG and not HS:
                        for t in range((k if not BATCHED else 1) * NEG):
                            if BATCHED and k == 0:
                                break
                            noise[t], state = draw_noise(state, alias_thr, alias_idx)
                    if HS:
                        top = min(TOP, lengths[w])
                        for i in range(top):
                            for e in range(KD):
                                deferred[i, e] = f32(0.0)
                        for j in range(k):
                            r = ctx[j]
                            load(h, err, syn0, r, lane)
                            loss += hs_walk(h, err, w, syn1, points, codes, lengths, alpha, part,
                                            gsh, lane, sig, nllt, deferred, top)
                            for e in range(KD):
                                d = lane + LANES * e
                                if d < D:
                                    add(syn0, r, d, err[e])
                        for i in range(top):
                            node = points[w, i]
                            for e in range(KD):
                                d = lane + LANES * e
                                if d < D:
                                    add(syn1, node, d, deferred[i, e])
                        if NEG:  # HS + NS: the NS step after the HS step (gensim's order)
                            for t in range(k * NEG):
                                noise[t], state = draw_noise(state, alias_thr, alias_idx)
                    if NEG and BATCHED:
                        if k > 0:
                            loss += ns_batched_centre(syn0, syn1neg, ctx, k, w, noise, alpha,
                                                      part, gsh, lane, sig, nllt, neu, h)
                    elif NEG:
                        for j in range(k):
                            r = ctx[j]
                            load(h, err, syn0, r, lane)
                            loss += ns_walk(h, err, w, syn1neg, noise, j * NEG, alpha, part, gsh,
                                            lane, sig, nllt)
                            for e in range(KD):
                                d = lane + LANES * e
                                if d < D:
                                    add(syn0, r, d, err[e])
                    pairs += k
                elif k > 0:  # CBOW: the contexts' mean (or sum) predicts w
                    inv = f32(1.0 / k)
                    mean_of(h, syn0, ctx, 0, k, MEAN, lane)
                    for e in range(KD):
                        err[e] = f32(0.0)
                    if PICK:
                        state = pick_centre(state, w, k, ctx, sample_thr, picks, pick_count, lane)
                    if HS:
                        loss += hs_walk(h, err, w, syn1, points, codes, lengths, alpha, part,
                                        gsh, lane, sig, nllt, deferred, 0)
                    if NEG:
                        for t in range(NEG):
                            noise[t], state = draw_noise(state, alias_thr, alias_idx)
                        loss += ns_walk(h, err, w, syn1neg, noise, 0, alpha, part, gsh, lane, sig,
                                        nllt)
                    for e in range(KD):
                        d = lane + LANES * e
                        if d < D:
                            share = err[e] if MEAN else err[e] * inv
                            for j in range(k):
                                add(syn0, ctx[j], d, share)
                    pairs += 1
        cuda.atomic.add(out, 0, loss)
        if lane == 0:
            cuda.atomic.add(out, 1, f64(pairs))
            cuda.atomic.add(out, 2, f64(trained))

    return kernel


LOG2E = 1.0 / math.log(2.0)


@cuda.jit
def copy_count(count, out):
    """``out[3] = count[0]``: the centres a launch sampled, read back with its results."""
    out[3] = f64(count[0])


@functools.lru_cache(maxsize=None)
def observe_kernel(sg: bool, dim: int, cbow_mean: bool = True, lanes: int = WARP):
    """The self-organized cluster statistic of the centres a launch sampled (``kernels.classes
    .observe_picked``, the same arithmetic): ``observe[G, lanes](syn0, syn1, picks, pick_count,
    q, lam, top_row, top_child, nllt, logp)``. For each sampled centre and each of its input
    vectors (skip-gram: every context; CBOW: their mean or sum), log2 P(c | h) of every cluster
    ``c`` from the tree's top (cluster) part, walked root first (``top_row``, ``top_child``:
    ``layers.self_organized.top_part``), into ``q[w, c]`` as the CPU's exponential mean with
    ``lam[w]``. The scores of up to ``lanes`` top nodes at once; one lane walks them in order.
    ``logp``: float64 scratch, a row of ``len(top_row)`` per block. Reads the weights as the
    launch left them (the CPU: as the sentence left them)."""
    SG, D, LANES = bool(sg), int(dim), int(lanes)
    MEAN = bool(cbow_mean) or SG
    KD = (D + LANES - 1) // LANES
    NODES, PAD = LANES, LANES + 1
    dot, total, load, mean_of = lane_ops(D, LANES)

    @cuda.jit
    def observe(syn0, syn1, picks, pick_count, q, lam, top_row, top_child, nllt, logp):
        lane = cuda.threadIdx.x
        block = cuda.blockIdx.x
        part = cuda.shared.array((NODES, PAD), numba.float32)
        scores = cuda.shared.array(NODES, numba.float32)
        h = cuda.local.array(KD, numba.float32)
        unused = cuda.local.array(KD, numba.float32)
        n_top = top_row.shape[0]
        for p in range(block, min(pick_count[0], picks.shape[0]), cuda.gridDim.x):
            w = picks[p, 0]
            k = picks[p, 1]
            keep = f64(lam[w])
            for j in range(k if SG else min(k, 1)):
                if SG:
                    load(h, unused, syn0, picks[p, 2 + j], lane)
                else:
                    mean_of(h, syn0, picks[p], 2, k, MEAN, lane)
                for c0 in range(0, n_top, NODES):
                    m = min(NODES, n_top - c0)
                    for i in range(m):
                        part[i, lane] = dot(h, syn1, top_row[c0 + i], lane)
                    cuda.syncthreads()
                    if lane < m:
                        scores[lane] = total(part, lane)
                    cuda.syncthreads()
                    if lane == 0:  # root first: a node's log-probability is set before its own
                        for i in range(m):
                            node = c0 + i
                            base = 0.0 if node == 0 else logp[block, node]
                            s = f64(scores[i])
                            for b in range(2):
                                x = s if b == 0 else -s
                                if x <= -MAX_EXP or x >= MAX_EXP:
                                    lp = base + log_sigmoid(x)
                                else:
                                    lp = base - nllt[0, np.uint64((x + MAX_EXP) * TABLE_SCALE)]
                                child = top_child[node, b]
                                if child >= 0:
                                    logp[block, child] = lp
                                else:
                                    c = -child - 1
                                    q[w, c] = keep * q[w, c] + (1.0 - keep) * lp * LOG2E
                    cuda.syncthreads()

    return observe
