"""The sentence loop, shared by skip-gram and CBOW and by every output layer.

A loop walks one chunk of token ids (sentences concatenated, ``bounds`` = end of each): the
learning rate decays linearly over all words (word2vec), each sentence is down-sampled, each
kept position gets its context window (reduced while training, full while scoring), and then
the *body* of the output layer does the work for that centre:

* ``HS``        hierarchical softmax, training (``hs.centre`` / ``hs.predict``);
* ``NS``        negative sampling, training (``ns.centre`` / ``ns.predict``);
* ``HS_SCORE``  hierarchical softmax, exact float64 log-likelihood, no update (``model.score``;
                ``hs.score_centre`` / ``hs.score_predict``);
* ``CLASS``     two-level class softmax, training, with the self-organizing statistic
                (``classes.centre`` / ``classes.predict``); ``CLASS_SCORE`` its exact scoring;
* ``SO_HS``     hierarchical softmax over a tree built from clusters, training: HS's own step
                (``hs.centre`` / ``hs.predict``), and on a sample of the centres (``classes.pick``,
                one draw a centre) the full cluster distribution for the statistic, gathered
                after each sentence (``classes.observe_picked``; the binary form);
* ``HS_NS``     hierarchical softmax and negative sampling on the same input vectors (gensim's
                ``hs=1, negative>0``; word2vec.c's ``-hs 1 -negative N``): ``larg = (the HS
                layer's arrays, the NS layer's, the NS rows)``; skip-gram runs the centre's HS
                body, then its NS body (gensim's order: each applies its own input update),
                CBOW both from the same context mean with the summed error (word2vec.c's);
* ``PAIRS``     emit the (input, target, learning rate) pairs instead of training: the same
                windows, down-sampling and random stream, for a batcher (e.g. the GPU path);
* ``CUSTOM``    a user's per-prediction body ``body(h, w, weights, larg, alpha, err, state) ->
                (nll, state)``, for output layers defined outside the package.

Every body has the same two entry points with one signature each:
``centre(syn0, weights, larg, scratch, ctx, k, w, alpha, state, cfg) -> (nll, state)`` (skip-gram:
the ``k`` contexts ``ctx[:k]`` predict ``w``, updating the weights and the context vectors) and
``predict(h, w, weights, larg, scratch, alpha, err, state, cfg) -> (nll, state)`` (one input
vector, CBOW: ``err`` gets the input's error). ``larg`` is the layer's own tuple of arrays (only
the body reads it), ``scratch`` the loop's work arrays ``(neu, work, err, g, rowbuf, noise, hot,
one, own, lockf)`` and ``cfg`` the compile-time settings ``(D, TOP, SAT, MAP, OWN, HOT, LOCK)``,
constants the compiler folds once the body is inlined. So the loop knows no layer's arrays.
Every update of an input vector goes through ``common.add_to_input`` (``add_to_contexts`` for
CBOW), which with ``LOCK`` scales it by the row's lock factor.

The architecture and the body are compile-time constants captured by the factory, so Numba
prunes the other branches and each (architecture, body) pair compiles to the same straight loop nest a
hand-written kernel would. The body is not passed as a function: a closure over a dispatcher
has no stable disk-cache key (numba #6264), so every process would recompile. ``CUSTOM``
kernels capture the user's body and are therefore compiled per process (``cache=False``).

Each factory is specialised on the vector dimension (a compile-time constant makes every
``for d in range(D)`` loop a fixed-length, fully vectorised one: about 1.35x faster at D=100
than a run-time D). Numba's disk cache keys closures by their captured constants, so each
combination is compiled once per machine, not once per process. The built-in kernels go through
``compiler.KernelCompiler``: their array arguments are promised not to overlap and they use the
CPU's full vector width, so the input vector and the error stay in registers along a path; the
D-float scratch rows live on the stack (``compiler.stack_row``). With no libm call, unsigned
indices and one table lookup for the loss in the bodies (and NS's prefetched noise rows), this
made the HS kernel about 1.8x and the NS kernel 1.7x faster (docs/performance.md, "What made the
kernels fast").

Arguments of every kernel: ``(ids, bounds, syn0, weights, larg, stats, keep_thr, window, reduce,
alpha0, min_alpha, words_before, total_words, seed, hot, hot_in[, lockf])``; ``larg`` is the layer's tuple
of arrays (its own learned or fixed state, which a body may also write), ``stats`` a ``(V, 2)``
float64 array that receives, per target word, the predictions made and their summed nll when the
kernel was built with ``stats=True`` (else any ``(1, 2)`` array); with ``hot`` (HS, NS and
SO_HS bodies) the hottest rows go to the calling thread's private copies (``devices.HotRows``):
``hot`` is the thread's int32 map from output row to row of ``weights``, which NS applies to each
target and noise row and HS and SO_HS to each centre's path (``hot=MAP_ROWS``), unless their
paths come mapped in ``larg`` (``hot=OWN_PATHS``: the layer's ``thread_args`` appends the
thread's table of mapped paths; mapping in the kernel costs 4% of a thread's time; SO_HS's
sampled statistic reads the shared rows, at most a chunk old, and the input vectors at the
sentence's end), and ``hot_in`` the map from word
id to row of ``syn0`` (the most written input vectors' private copies); else both ``NO_HOT``.
``lockf`` (kernels built with ``lock=True`` only; the others take 16 arguments): float32, one
lock factor per **row of** ``syn0`` (gensim's ``wv.vectors_lockf`` mapped through ``hot_in``'s
rows by the session: ``cpu_session.HotRows.by_row``), every update of row r times ``lockf[r]``.
Returns ``(loss, pairs, trained)``:
summed nll (nats, float64), predictions made, words kept after down-sampling.
"""
from __future__ import annotations

import functools
import hashlib
import pathlib

import numpy as np

from ..numba_cache import numba
from . import classes, hs, ns
from .compiler import VECTOR_WIDTH, KernelCompiler, stack_row
from .common import (add_to_contexts, add_to_input, alpha_at, context_mean, context_window,
                     longest_sentence, subsample_sentence)

HS, NS, HS_SCORE, PAIRS, CUSTOM, CLASS, CLASS_SCORE, SO_HS, HS_NS = 0, 1, 2, 3, 4, 5, 6, 7, 8
# HS skip-gram: up to this many top levels keep their deferred updates on the stack
STACKED_LEVELS = 8
BODIES = {"hs": HS, "ns": NS, "hs_score": HS_SCORE, "pairs": PAIRS, "custom": CUSTOM,
          "class": CLASS, "class_score": CLASS_SCORE, "so_hs": SO_HS, "hs_ns": HS_NS}


def _sources_digest() -> int:
    """A digest of every module the loop inlines. Numba keys a closure's disk cache by the file
    that defines it and by the captured values, not by the files of the functions it inlines:
    captured by every kernel, this digest makes a change to a body module recompile the loops
    instead of loading stale code."""
    here = pathlib.Path(__file__).parent
    digest = hashlib.sha1()
    for name in ("common.py", "hs.py", "ns.py", "classes.py", "loop.py", "compiler.py"):
        digest.update((here / name).read_bytes())
    return int.from_bytes(digest.digest()[:7], "little")


SOURCES = _sources_digest()


def no_stats() -> np.ndarray:
    return np.zeros((1, 2), dtype=np.float64)


# ``hot`` for kernels built without private rows: never read (the flag prunes every use).
NO_HOT = np.zeros(0, np.int32)
# ``kernel(hot=...)``: private hot rows, HS paths mapped by the kernel at every centre
# (MAP_ROWS) or read from the thread's table of mapped paths (OWN_PATHS, ``thread_args``)
MAP_ROWS, OWN_PATHS = 1, 2
# the lock factors of kernels built without locks (``lock=False``): never read (the flag prunes
# every use), there so that every body's ``scratch`` has the same types
NO_LOCK = np.ones(1, np.float32)
# bodies that update input vectors: the ones a lock applies to
_TRAINING = (HS, NS, CUSTOM, CLASS, SO_HS, HS_NS)


@functools.lru_cache(maxsize=None)
def kernel(sg: bool, dim: int, body: int, batch_levels: int = 0, stats: bool = False,
           custom=None, cbow_mean: bool = True, saturate: bool = False, hot: int = 0,
           lock: bool = False):
    """The sentence loop for skip-gram (``sg``) or CBOW with the given body.

    * skip-gram: every context word predicts the centre word (word2vec.c's direction);
      ``batch_levels`` applies to ``HS``: the number of top path levels batched over a centre's
      contexts (0 = word2vec's order). ``PAIRS`` emits ``(inputs, targets, rates)``.
      ``saturate`` (HS bodies): the saturated gradient beyond the sigmoid's clip instead of no
      update (``hs.py``).
    * ``hot`` (HS, NS, SO_HS bodies; 0: none): every input row goes through the ``hot_in``
      argument's map and the output rows through ``hot``'s (``MAP_ROWS``), or, HS and SO_HS,
      from the thread's table of mapped paths (``OWN_PATHS``), which send the hottest rows to
      the calling thread's private copies (``devices.HotRows``).
    * ``lock`` (training bodies): the kernel takes a 17th argument, ``lockf``, the lock factor
      of each row of ``syn0``, and every update of an input vector is scaled by it
      (``common.add_to_input``): gensim's ``wv.vectors_lockf``. Without it (the default) the
      kernel is the same code as before locks existed: no run pays for them unless it locks.
    * CBOW: the mean of the context vectors predicts the centre word and every context vector
      receives the full error (word2vec, gensim ``cbow_mean=1``); with ``cbow_mean=False`` their
      sum predicts it and each receives the error divided by their number (gensim
      ``cbow_mean=0``). ``PAIRS`` emits, per centre,
      its contexts into ``contexts`` and their start offsets into ``starts`` (one more entry),
      with ``targets`` and ``rates``.
    """
    if body not in BODIES.values():
        raise ValueError(f"unknown body {body!r}")
    if (body == CUSTOM) != (custom is not None):
        raise ValueError("a custom body function goes with body=CUSTOM, and only with it")
    if lock and body not in _TRAINING:
        raise ValueError("lock factors go with a training body (one that updates input vectors)")
    SG, D, OUT, TOP, STATS = bool(sg), int(dim), int(body), int(batch_levels), bool(stats)
    MEAN = bool(cbow_mean) or SG
    SAT = bool(saturate)
    HOT = bool(hot) and OUT in (HS, NS, SO_HS)
    OWN = HOT and hot == OWN_PATHS and OUT != NS  # HS paths mapped in the thread's table
    MAP = HOT and not OWN and OUT != NS  # HS paths mapped per centre
    LOCK = bool(lock)
    # HS skip-gram's deferred updates of the top levels (``hs.sg_centre``): on the stack when few
    # (every body that walks ``hs.centre``: SO_HS's tree too)
    DEFERS = SG and TOP > 0 and OUT in (HS, SO_HS, HS_NS)
    STACK_DEFERRED = DEFERS and TOP <= STACKED_LEVELS
    DEFERRED_SIZE = TOP * D if STACK_DEFERRED else 1
    SRC = SOURCES
    WIDTH = VECTOR_WIDTH  # keys the disk cache too: the width changes the code

    def loop(ids, bounds, syn0, weights, larg, word_stats, keep_thr, window, reduce, alpha0,
             min_alpha, words_before, total_words, seed, hot, hot_in, lockf=None):
        if SRC < 0 or WIDTH < 0:  # never: they only key the disk cache (_sources_digest)
            return 0.0, 0, 0
        state = np.uint64(seed)
        sent = np.empty(longest_sentence(bounds), np.int32)
        ctx = np.empty(2 * window, np.int32)
        neu = np.empty((2 * window, D), np.float32)  # NS's batched order: a context's error
        # HS skip-gram's deferred updates of the top path levels (``hs.sg_centre``): on the
        # stack when few (LLVM then knows they alias no other array: 7% faster), else up to
        # the tree's depth (the "batched" order); other bodies never read them
        if STACK_DEFERRED:
            deferred = stack_row(DEFERRED_SIZE).reshape((TOP, D))
        elif DEFERS and OUT != HS_NS:
            deferred = np.empty((larg[0].shape[1], D), np.float32)
        elif DEFERS:
            deferred = np.empty((larg[0][0].shape[1], D), np.float32)
        else:
            deferred = np.empty((0, D), np.float32)
        hidden = stack_row(D)
        work = stack_row(D)  # HS skip-gram: the second context's error (``hs.walk_pair``);
        # else the input's error
        err = stack_row(D)  # HS skip-gram: a context's error along the path
        g = np.empty(2 * window, np.float32)
        one = np.zeros(1, np.int32)  # CBOW's one input row for ``classes.observe_tree``
        noise = np.empty(0, np.uint64)  # NS: the noise rows of a centre's predictions
        if OUT == NS:
            noise = np.empty(2 * window * larg[2], np.uint64)
        elif OUT == HS_NS:
            noise = np.empty(2 * window * larg[1][2], np.uint64)
        rowbuf = np.empty(0, np.int32)  # HS mapping a path per centre: its rows
        if MAP:
            rowbuf = np.empty(larg[0].shape[1], np.int32)
        own = np.empty((0, 0), np.int32)  # the thread's table of mapped paths (``thread_args``: last)
        if OWN:
            own = larg[-1]
        # SO_HS: a sentence's centres sampled for the statistic (``classes.pick``): their
        # contexts' rows, their words and context counts, observed after the sentence
        n_picked = 0
        at_picked = 0
        picked = np.empty(0, np.int32)
        picked_w = np.empty(0, np.int32)
        picked_k = np.empty(0, np.int32)
        if OUT == SO_HS:
            longest = longest_sentence(bounds)
            picked = np.empty(longest * 2 * window, np.int32)
            picked_w = np.empty(longest, np.int32)
            picked_k = np.empty(longest, np.int32)
        lock = lockf if LOCK else NO_LOCK  # (without LOCK the argument is omitted: None)
        # what every body gets besides the layer's arrays: the loop's scratch, and the
        # compile-time settings (constants: folded once the body is inlined)
        scratch = (neu, work, err, g, rowbuf, noise, hot, one, own, lock, deferred)
        cfg = (D, TOP, SAT, MAP, OWN, HOT, LOCK)
        # HS_NS's NS part: TOP is the HS layer's levels, its NS keeps word2vec's order
        cfg_ns = (D, 0, SAT, MAP, OWN, HOT, LOCK)
        loss = 0.0
        pairs = 0
        trained = 0
        start = 0
        n_contexts = 0
        for si in range(bounds.shape[0]):
            end = bounds[si]
            alpha = np.float32(alpha_at(alpha0, min_alpha, words_before + start, total_words))
            n, state = subsample_sentence(ids, start, end, keep_thr, sent, state)
            start = end
            trained += n
            for pos in range(n):
                w = sent[pos]
                lo, hi, state = context_window(pos, n, window, reduce, state)
                k = 0
                for c in range(lo, hi):
                    if c != pos:
                        ctx[k] = hot_in[sent[c]] if HOT else sent[c]  # the input rows
                        # (mapping once a sentence instead measured no faster)
                        k += 1
                centre_loss = 0.0
                if OUT == PAIRS:  # not a body: the pairs a batcher trains, from the same stream
                    if SG:
                        inputs, targets, rates = larg
                        for j in range(k):
                            inputs[pairs + j] = ctx[j]
                            targets[pairs + j] = w
                            rates[pairs + j] = alpha
                    elif k > 0:
                        contexts, starts, targets, rates = larg
                        starts[pairs] = n_contexts
                        for j in range(k):
                            contexts[n_contexts + j] = ctx[j]
                        n_contexts += k
                        starts[pairs + 1] = n_contexts
                        targets[pairs] = w
                        rates[pairs] = alpha
                        k = 1
                elif SG:
                    # every body: body.centre(syn0, weights, larg, scratch, ctx, k, w, alpha,
                    # state, cfg) -> (nll, state), the k contexts ctx[:k] predicting w
                    if OUT == HS:
                        centre_loss, state = hs.centre(syn0, weights, larg, scratch, ctx, k, w,
                                                       alpha, state, cfg)
                    elif OUT == SO_HS:  # HS's step; the statistic after the sentence
                        state, n_picked, at_picked = classes.pick(
                            ctx, k, w, larg[5], state, picked, picked_w, picked_k, n_picked,
                            at_picked)
                        centre_loss, state = hs.centre(syn0, weights, larg, scratch, ctx, k, w,
                                                       alpha, state, cfg)
                    elif OUT == NS:
                        centre_loss, state = ns.centre(syn0, weights, larg, scratch, ctx, k, w,
                                                       alpha, state, cfg)
                    elif OUT == HS_NS:
                        centre_loss, state = hs.centre(syn0, weights, larg[0], scratch, ctx, k,
                                                       w, alpha, state, cfg)
                        ns_loss, state = ns.centre(syn0, larg[2], larg[1], scratch, ctx, k, w,
                                                   alpha, state, cfg_ns)
                        centre_loss += ns_loss
                    elif OUT == CLASS:
                        centre_loss, state = classes.centre(syn0, weights, larg, scratch, ctx, k,
                                                            w, alpha, state, cfg)
                    elif OUT == HS_SCORE:
                        centre_loss, state = hs.score_centre(syn0, weights, larg, scratch, ctx, k,
                                                             w, alpha, state, cfg)
                    elif OUT == CLASS_SCORE:
                        centre_loss, state = classes.score_centre(syn0, weights, larg, scratch,
                                                                  ctx, k, w, alpha, state, cfg)
                    else:  # a plugin's per-prediction body, context by context
                        for j in range(k):
                            r = ctx[j]
                            nll, state = custom(syn0[r], w, weights, larg, alpha, work, state)
                            centre_loss += nll
                            add_to_input(syn0, r, work, lock, LOCK, D)
                else:
                    if k == 0:
                        continue
                    # every body: body.predict(h, w, weights, larg, scratch, alpha, err, state,
                    # cfg) -> (nll, state), the context mean (or sum) predicting w
                    context_mean(syn0, ctx, k, hidden, MEAN, D)
                    if OUT == HS:
                        centre_loss, state = hs.predict(hidden, w, weights, larg, scratch, alpha,
                                                        work, state, cfg)
                    elif OUT == SO_HS:
                        state, n_picked, at_picked = classes.pick(
                            ctx, k, w, larg[5], state, picked, picked_w, picked_k, n_picked,
                            at_picked)
                        centre_loss, state = hs.predict(hidden, w, weights, larg, scratch, alpha,
                                                        work, state, cfg)
                    elif OUT == NS:
                        centre_loss, state = ns.predict(hidden, w, weights, larg, scratch, alpha,
                                                        work, state, cfg)
                    elif OUT == HS_NS:  # both from the same mean; the context gets their sum
                        centre_loss, state = hs.predict(hidden, w, weights, larg[0], scratch,
                                                        alpha, work, state, cfg)
                        ns_loss, state = ns.predict(hidden, w, larg[2], larg[1], scratch, alpha,
                                                    err, state, cfg)
                        centre_loss += ns_loss
                        for d in range(D):
                            work[d] += err[d]
                    elif OUT == CLASS:
                        centre_loss, state = classes.predict(hidden, w, weights, larg, scratch,
                                                             alpha, work, state, cfg)
                    elif OUT == HS_SCORE:
                        centre_loss, state = hs.score_predict(hidden, w, weights, larg, scratch,
                                                              alpha, work, state, cfg)
                    elif OUT == CLASS_SCORE:
                        centre_loss, state = classes.score_predict(hidden, w, weights, larg,
                                                                   scratch, alpha, work, state,
                                                                   cfg)
                    else:
                        centre_loss, state = custom(hidden, w, weights, larg, alpha, work, state)
                    if OUT != HS_SCORE and OUT != CLASS_SCORE:
                        add_to_contexts(syn0, ctx, k, work, MEAN, lock, LOCK, D)
                    k = 1  # one prediction per centre
                pairs += k
                loss += centre_loss
                if STATS:
                    word_stats[w, 0] += k
                    word_stats[w, 1] += centre_loss
            if OUT == SO_HS and n_picked > 0:
                classes.observe_picked(syn0, picked, picked_w, picked_k, n_picked, weights,
                                       larg[3], larg[4], larg[6], larg[7], SG, MEAN, D)
                n_picked = 0
                at_picked = 0
        return loss, pairs, trained

    if custom is not None:  # a user's body: no promise about its arrays
        return numba.njit(cache=False, nogil=True, fastmath=True)(loop)
    return numba.njit(cache=True, nogil=True, fastmath=True, pipeline_class=KernelCompiler)(loop)


def sg_kernel(dim: int, body: int, batch_levels: int = 0, stats: bool = False, custom=None,
              saturate: bool = False, hot: int = 0, lock: bool = False):
    return kernel(True, dim, body, batch_levels, stats, custom, True, saturate, hot, lock)


def cbow_kernel(dim: int, body: int, stats: bool = False, custom=None, cbow_mean: bool = True,
                saturate: bool = False, hot: int = 0, lock: bool = False):
    return kernel(False, dim, body, 0, stats, custom, cbow_mean, saturate, hot, lock)


def pair_buffers(sg: bool, n_ids: int, window: int):
    """Output arrays for a ``PAIRS`` kernel on a chunk of ``n_ids`` ids (capacity for every
    possible pair): skip-gram ``(inputs, targets, rates)``, CBOW ``(contexts, starts, targets,
    rates)``. The kernel's ``pairs`` result says how many entries were written."""
    if sg:
        cap = n_ids * 2 * window
        return (np.empty(cap, np.int32), np.empty(cap, np.int32), np.empty(cap, np.float32))
    return (np.empty(n_ids * 2 * window, np.int32), np.empty(n_ids + 1, np.int64),
            np.empty(n_ids, np.int32), np.empty(n_ids, np.float32))
