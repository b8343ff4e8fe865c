"""Building blocks shared by the training kernels: the random stream, the sigmoid tables, the
down-sampling + window bookkeeping. All small ``inline`` functions, so the loops in ``loop.py``
compile into one loop nest without calls on the hot path."""
from __future__ import annotations

import numpy as np

from ..numba_cache import numba

# word2vec's linear congruential generator (java.util.Random's constants), on uint64.
LCG_MUL = np.uint64(25214903917)
LCG_ADD = np.uint64(11)

# Sigmoid table, as word2vec: inputs clipped to [-MAX_EXP, MAX_EXP]. Values are taken at the
# *centre* of each bin (word2vec samples the left edge, a bias of half a bin).
MAX_EXP = 6.0
SIGMOID_TABLE_SIZE = 1024


def _make_sigmoid_table():
    centres = (np.arange(SIGMOID_TABLE_SIZE) + 0.5) / SIGMOID_TABLE_SIZE * 2.0 * MAX_EXP - MAX_EXP
    sig = 1.0 / (1.0 + np.exp(-centres))
    # log(sigmoid(x)) at the same points, for the loss when the tabled sigmoid is used.
    return sig.astype(np.float32), np.log(sig)


SIGMOID_TABLE, LOG_SIGMOID_TABLE = _make_sigmoid_table()
# Row ``code`` of NLL_BY_CODE, at the bin of s: the nll of a binary prediction whose label is
# 1 - code, -log sigmoid(s) for code 0 and -log sigmoid(-s) for code 1 (the table is symmetric,
# so that row is the first reversed). One 2-D lookup per node made the HS kernel 8% faster than
# computing the mirrored index, branch-free, from one row.
NLL_BY_CODE = np.ascontiguousarray(np.stack([-LOG_SIGMOID_TABLE, -LOG_SIGMOID_TABLE[::-1]]))
TABLE_SCALE = SIGMOID_TABLE_SIZE / (2.0 * MAX_EXP)


@numba.njit(inline="always", nogil=True)
def lcg_next(state):
    return state * LCG_MUL + LCG_ADD


@numba.njit(inline="always", nogil=True)
def lcg_u32(state):
    # The high bits of a power-of-two-modulus LCG are the random ones.
    return np.uint32((state >> np.uint64(16)) & np.uint64(0xFFFFFFFF))


@numba.njit(cache=True, nogil=True)
def mix_seed(seed, a, b):
    """A well-spread 64-bit stream seed from (seed, epoch, chunk): splitmix64 finaliser, so each
    chunk's draws depend only on these numbers and not on which thread runs it."""
    z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(a) * np.uint64(0xBF58476D1CE4E5B9) \
        + np.uint64(b) * np.uint64(0x94D049BB133111EB) + np.uint64(1)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(inline="always", nogil=True)
def log_sigmoid(x):
    """log(1 / (1 + exp(-x))), stable for any x, in float64 (the loss is accumulated in float64)."""
    if x >= 0:
        return -np.log1p(np.exp(-x))
    return x - np.log1p(np.exp(x))


@numba.njit(inline="always", nogil=True)
def _exp_nonpositive(x):
    """exp(x) for -708 < x <= 0 without a libm call: exp(x / 1024) by its Taylor polynomial
    (degree 13, |x / 1024| < 0.7), squared ten times; relative error about 1e-13 for
    x > -300, below 2e-10 down to the underflow (tested against libm)."""
    y = x * (1.0 / 1024.0)
    p = 1.0
    for i in range(13, 0, -1):
        p = 1.0 + p * y / i
    for _ in range(10):
        p *= p
    return p


@numba.njit(inline="always", nogil=True)
def log_sigmoid_clipped(x):
    """log sigmoid(x) for |x| >= MAX_EXP (float64), as ``log_sigmoid`` but without calling
    ``exp``/``log1p``: a call in the training loop, even on this rare branch, makes LLVM keep the
    rows it holds in vector registers on the stack instead (every vector register is
    caller-saved), which cost ~25% of the kernel. exp(-|x|) < 0.0025 here, so log1p is its
    series to the fifth power (error < 1e-14)."""
    a = -x if x >= 0 else x
    e = 0.0 if a < -708.0 else _exp_nonpositive(a)
    log1p = e * (1.0 - e * (0.5 - e * (1.0 / 3.0 - e * (0.25 - e * 0.2))))
    if x >= 0:
        return -log1p
    return x - log1p


@numba.njit(inline="always", nogil=True)
def subsample_sentence(ids, start, end, keep_thr, out, state):
    """Copy ids[start:end] into ``out``, dropping each word w unless a uniform 32-bit draw is
    below keep_thr[w] (word2vec's down-sampling). Returns (n_kept, state)."""
    n = 0
    for p in range(start, end):
        w = ids[p]
        thr = keep_thr[w]
        if thr != np.uint32(0xFFFFFFFF):
            state = lcg_next(state)
            if lcg_u32(state) >= thr:
                continue
        out[n] = w
        n += 1
    return n, state


@numba.njit(inline="always", nogil=True)
def alpha_at(alpha0, min_alpha, done, total):
    """Linear decay of the learning rate over all epochs, as word2vec: from alpha0 at the first
    word to min_alpha at the last."""
    frac = done / total
    if frac > 1.0:
        frac = 1.0
    return alpha0 - (alpha0 - min_alpha) * frac


@numba.njit(inline="always", nogil=True)
def context_window(pos, n, window, reduce, state):
    """Context positions lo <= c < hi (c != pos) of position ``pos`` in a sentence of ``n``
    kept words. With ``reduce`` (training) the half-width is word2vec's reduced window, drawn
    uniformly from 1..window; without it (scoring) the full window, and no draw is made.
    Returns (lo, hi, state)."""
    b = np.int64(0)
    if reduce:
        state = lcg_next(state)
        b = np.int64(lcg_u32(state) % np.uint32(window))
    lo = pos - window + b
    if lo < 0:
        lo = 0
    hi = pos + window + 1 - b
    if hi > n:
        hi = n
    return lo, hi, state


@numba.njit(inline="always", nogil=True)
def longest_sentence(bounds):
    longest = 0
    start = 0
    for i in range(bounds.shape[0]):
        if bounds[i] - start > longest:
            longest = bounds[i] - start
        start = bounds[i]
    return longest


@numba.njit(inline="always", nogil=True)
def table_index(s):
    """Bin of the sigmoid tables for a score strictly inside (-MAX_EXP, MAX_EXP). Unsigned, so
    Numba adds no negative-index fix-up to the table lookups (they are on every node)."""
    return np.uint64((s + MAX_EXP) * TABLE_SCALE)


@numba.njit(inline="always", nogil=True)
def context_mean(syn0, ctx, k, out, mean, D):
    """CBOW's hidden layer: the mean (``mean``: word2vec, gensim cbow_mean=1) or the sum (gensim
    cbow_mean=0) of the ``k`` context vectors ``syn0[ctx[:k]]``."""
    for d in range(D):
        out[d] = 0.0
    for j in range(k):
        r = ctx[j]
        for d in range(D):
            out[d] += syn0[r, d]
    if mean:
        inv = np.float32(1.0 / k)
        for d in range(D):
            out[d] *= inv


@numba.njit(inline="always", nogil=True)
def add_to_input(syn0, r, err, lockf, LOCK, D):
    """The update of input vector (row) ``r``: ``syn0[r] += err``, every body's. With ``LOCK``
    (a compile-time constant: ``loop.kernel(lock=True)``) scaled by the row's lock factor
    ``lockf[r]`` (gensim's ``wv.vectors_lockf``: 0 frozen, 1 free), else the plain sum: the
    kernels built without locks are the same code as before locks existed."""
    if LOCK:
        f = lockf[r]
        for d in range(D):
            syn0[r, d] += f * err[d]
    else:
        for d in range(D):
            syn0[r, d] += err[d]


@numba.njit(inline="always", nogil=True)
def add_to_contexts(syn0, ctx, k, err, mean, lockf, LOCK, D):
    """CBOW's update: every context vector (each occurrence) receives the full error after a
    mean (word2vec), its share ``err / k`` after a sum (gensim cbow_mean=0), through
    ``add_to_input`` (its lock factor). ``err`` is scaled in place: the loop reads it no more."""
    if not mean:
        share = np.float32(1.0 / k)
        for d in range(D):
            err[d] *= share
    for j in range(k):
        add_to_input(syn0, ctx[j], err, lockf, LOCK, D)


@numba.njit(inline="always", nogil=True)
def out_row(remap, row, HOT):
    """The row of the output weights that stands for output row ``row`` in this thread: with
    ``HOT`` (a compile-time constant) ``remap[row]``, which sends the hottest rows to the calling
    thread's private copies (``devices.HotRows``), else ``row``. An index, not a second array:
    a body that picks one of two arrays at run time loses Numba's vectorising (measured 2x)."""
    if HOT:
        return remap[row]
    return row
