"""The quality a sentence-per-block GPU should give, estimated on the CPU before a GPU runs it.

    python -m semhuff.eval.bench.gpu_concurrency [--tokens 5000000] [--epochs 1 5]
        [--in-flight 1 1000 10000 100000] [--unit centre|sentence] [--merge sum|last] [--json OUT]

A GPU trains many sentences at once: block ``b`` of ``K`` resident blocks walks its sentences
(``b, b + K, ...``) in word2vec's order, and what it reads of the shared rows lags behind what
the other blocks write. This emulates that on the host, exactly and deterministically, with the
CPU trainer's own update (``kernels.hs.sg_centre``: skip-gram, hierarchical softmax) and the
device's layout (sentences cut at ``MAX_SENTENCE_WORDS``, one LCG stream a block seeded as the
device seeds it, ``gpu.sentences``):

* the ``K`` blocks move in lock step, one *unit* of work each a step: a ``centre`` (its reduced
  window, all its contexts along the centre's path; the default: the GPU's blocks interleave
  at about this grain) or a whole ``sentence`` (the pessimistic reading: every row a sentence
  reads is as it was when the sentence started);
* within a step every block reads the rows as they were at the step's start, plus its own
  writes of this step (a block sees its own stores);
* at the step's end the blocks' changes meet in the shared rows: ``sum`` (atomic adds: every
  change lands), ``last`` (plain stores, cusim's and word2vec.c's threads: of the blocks that
  wrote a row, one block's value survives) or ``mean`` (the mean of the changes of the blocks
  that wrote the row: what scaling a row's update by the number of blocks writing it at once
  would give).

``K = 1`` is the CPU trainer's single-thread run in word2vec's order, exactly (tested). The CPU
trainer itself (Hogwild, all cores, its default mixed order and chunks) is the reference row.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time

import numpy as np

from semhuff.cpu_session import CpuSession
from semhuff.devices import DEVICES, register_device
from semhuff.errors import TrainingDiverged
from semhuff.gpu.sentences import MAX_SENTENCE_WORDS, block_seeds, split_bounds
from semhuff.kernels.common import alpha_at, context_window, subsample_sentence
from semhuff.kernels.hs import sg_centre
from semhuff.numba_cache import numba

UNITS = ("centre", "sentence")
MERGES = ("sum", "last", "mean")
DIM = 100  # the emulation's kernel is compiled for this dimension (a constant: vectorised loops)


@numba.njit(inline="always", nogil=True)
def _save(rows, r, stamp, unit, saved, n_saved, originals):
    """Keep row ``r``'s value before this unit first writes it."""
    if stamp[r] != unit:
        stamp[r] = unit
        saved[n_saved] = r
        originals[n_saved, :] = rows[r]
        n_saved += 1
    return n_saved


@numba.njit(inline="always", nogil=True)
def _merge(rows, saved, n_saved, originals, change, writers, touched, n_touched, marked, step,
           merge):
    """This unit's changes into the step's (``merge`` 0: summed, 1: the last writer's, 2: summed
    and counted, for their mean), and the rows back to the step's start for the next block."""
    for i in range(n_saved):
        r = saved[i]
        if marked[r] != step:
            marked[r] = step
            touched[n_touched] = r
            n_touched += 1
            change[r, :] = 0.0
            writers[r] = 0
        if merge == 1:
            change[r, :] = rows[r] - originals[i]
        else:
            change[r, :] += rows[r] - originals[i]
        writers[r] += 1
        rows[r, :] = originals[i]
    return n_touched


@numba.njit(inline="always", nogil=True)
def _apply(rows, change, writers, touched, n_touched, merge):
    for i in range(n_touched):
        r = touched[i]
        if merge == 2:
            rows[r, :] += change[r] / np.float32(writers[r])
        else:
            rows[r, :] += change[r]


@numba.njit(cache=True, nogil=True)
def emulate_chunk(ids, bounds, syn0, syn1, points, codes, lengths, keep_thr, window, alpha0,
                  min_alpha, words_before, total_words, seeds, whole_sentences, merge, merge_in,
                  top):
    """One chunk trained by ``len(seeds)`` blocks in lock step (the module's docstring).
    Returns (summed nll, predictions, words kept)."""
    D = DIM
    K = seeds.shape[0]
    S = bounds.shape[0]
    V = syn0.shape[0]
    state = seeds.copy()
    sentence = np.arange(K).astype(np.int64)  # each block's sentence (>= S: done)
    pos = np.zeros(K, np.int64)
    n_kept = np.full(K, -1, np.int64)  # -1: the sentence is not started
    alpha = np.zeros(K, np.float32)
    longest = 0
    for s in range(S):
        longest = max(longest, bounds[s] - (bounds[s - 1] if s else 0))
    kept = np.empty((K, max(longest, 1)), np.int32)
    ctx = np.empty(2 * window, np.int32)
    delta = np.empty((max(top, 1), D), np.float32)
    err = np.empty(D, np.float32)
    err2 = np.empty(D, np.float32)
    rowbuf = np.empty(1, np.int32)
    paths = (points, codes, lengths)
    lockf = np.ones(1, np.float32)
    sequential = K == 1
    # the step's bookkeeping (unused when sequential)
    stamp0, stamp1 = np.full(V, -1, np.int64), np.full(syn1.shape[0], -1, np.int64)
    marked0, marked1 = np.full(V, -1, np.int64), np.full(syn1.shape[0], -1, np.int64)
    saved0, saved1 = np.empty(V, np.int64), np.empty(syn1.shape[0], np.int64)
    orig0 = np.empty((1 if sequential else V, D), np.float32)
    orig1 = np.empty((1 if sequential else syn1.shape[0], D), np.float32)
    change0 = np.empty((1 if sequential else V, D), np.float32)
    change1 = np.empty((1 if sequential else syn1.shape[0], D), np.float32)
    touched0, touched1 = np.empty(V, np.int64), np.empty(syn1.shape[0], np.int64)
    writers0, writers1 = np.zeros(V, np.int32), np.zeros(syn1.shape[0], np.int32)
    loss = 0.0
    pairs = 0
    trained = 0
    unit = 0
    step = 0
    active = min(K, S)
    while active > 0:
        n_touched0 = 0
        n_touched1 = 0
        for b in range(K):
            if sentence[b] >= S:
                continue
            unit += 1
            n_saved0 = 0
            n_saved1 = 0
            while True:  # one centre, or (whole_sentences) every centre of the sentence
                s = sentence[b]
                if n_kept[b] < 0:  # start the sentence: its rate and its kept words
                    start = bounds[s - 1] if s else 0
                    alpha[b] = np.float32(alpha_at(alpha0, min_alpha, words_before + start,
                                                   total_words))
                    n, state[b] = subsample_sentence(ids, start, bounds[s], keep_thr, kept[b],
                                                     state[b])
                    n_kept[b] = n
                    pos[b] = 0
                    trained += n
                if pos[b] < n_kept[b]:
                    p = pos[b]
                    w = kept[b, p]
                    lo, hi, state[b] = context_window(p, n_kept[b], window, True, state[b])
                    k = 0
                    for c in range(lo, hi):
                        if c != p:
                            ctx[k] = kept[b, c]
                            k += 1
                    if not sequential:
                        for j in range(k):
                            n_saved0 = _save(syn0, ctx[j], stamp0, unit, saved0, n_saved0, orig0)
                        for i in range(lengths[w]):
                            n_saved1 = _save(syn1, points[w, i], stamp1, unit, saved1, n_saved1,
                                             orig1)
                    loss += sg_centre(syn0, syn1, (points, points, codes, lengths), ctx, k, w,
                                      alpha[b], delta, err, err2, rowbuf, top, False, rowbuf,
                                      False, lockf, False, D)
                    pairs += k
                    pos[b] += 1
                if pos[b] >= n_kept[b]:  # the sentence is done: the block's next one
                    sentence[b] += K
                    n_kept[b] = -1
                    if sentence[b] >= S:
                        active -= 1
                        break
                    if whole_sentences:
                        break
                if not whole_sentences:
                    break
            if not sequential:
                n_touched0 = _merge(syn0, saved0, n_saved0, orig0, change0, writers0, touched0,
                                    n_touched0, marked0, step, merge_in)
                n_touched1 = _merge(syn1, saved1, n_saved1, orig1, change1, writers1, touched1,
                                    n_touched1, marked1, step, merge)
        if not sequential:
            _apply(syn0, change0, writers0, touched0, n_touched0, merge_in)
            _apply(syn1, change1, writers1, touched1, n_touched1, merge)
        step += 1
    return loss, pairs, trained


class EmulatedDevice:
    """A device (``semhuff.devices``) whose session trains each chunk with ``emulate_chunk``;
    kind "cpu": it runs the CPU's layers (hierarchical softmax, skip-gram only)."""

    kind = "cpu"
    backends = ()

    def __init__(self, backend=None, in_flight=1, unit="centre", merge="sum", merge_in=None,
                 top=0, sentence_words=MAX_SENTENCE_WORDS):
        self.options = dict(in_flight=int(in_flight), unit=unit, merge=merge,
                            merge_in=merge_in or merge, top=int(top),
                            sentence_words=int(sentence_words))

    def open(self, syn0, layer, workers):
        return EmulatedSession(syn0, layer, **self.options)


class EmulatedSession:
    concurrency = 1

    def __init__(self, syn0, layer, in_flight, unit, merge, merge_in, top, sentence_words):
        if syn0.shape[1] != DIM:
            raise ValueError(f"the emulation is compiled for dim {DIM}")
        self.syn0, self.layer = syn0, layer
        self.in_flight, self.whole = in_flight, unit == "sentence"
        self.merge, self.merge_in = MERGES.index(merge), MERGES.index(merge_in)
        self.top, self.sentence_words = top, sentence_words
        self._scorer = None

    def warm_up(self, plan, score=False):
        return 0.0

    def train_chunk(self, plan, chunk, words_before, seed):
        if not plan.sg:
            raise ValueError("the emulation trains skip-gram only")
        points, codes, lengths = self.layer.kernel_args()
        bounds = split_bounds(chunk.bounds, self.sentence_words)
        s = plan.schedule
        return emulate_chunk(chunk.ids, bounds, self.syn0, self.layer.weights, points, codes,
                             lengths, plan.keep_thr, plan.window, s.alpha, s.min_alpha,
                             words_before, s.total_words, block_seeds(seed, self.in_flight),
                             self.whole, self.merge, self.merge_in, self.top)

    def score_chunk(self, plan, chunk, part=0):
        if self._scorer is None:
            self._scorer = CpuSession(self.syn0, self.layer, 1)
        return self._scorer.score_chunk(plan, chunk, part)

    def to_host(self):
        pass

    def layer_changed(self):
        self._scorer = None

    def close(self):
        pass


if "gpu-emulation" not in DEVICES:
    register_device("gpu-emulation")(EmulatedDevice)


def train_one(path, tokens, epochs, device_options, args, workers=1):
    """One run: the CPU trainer (``device_options`` None) or the emulation; its figures."""
    from semhuff import Word2Vec
    from semhuff.eval.bench.train import quality
    emulated = device_options is not None
    model = Word2Vec(vector_size=DIM, window=5, min_count=5, sample=1e-3, sg=1, loss="hs",
                     alpha=0.025, min_alpha=0.0001, epochs=epochs, seed=args.seed,
                     progress=False, workers=workers,
                     hs_order="word2vec" if emulated else None,
                     device="gpu-emulation" if emulated else "cpu",
                     device_options=device_options or {},
                     # one chunk an epoch: every block of the launch has its sentences in it
                     chunk_words=tokens + 1 if emulated else 100_000)
    model.build_vocab(path)
    row = {"epochs": epochs, **(device_options or {"device": "cpu", "workers": workers})}
    started = time.perf_counter()
    try:
        report = model.train(path)
    except TrainingDiverged as exc:  # a result of the emulation: that setting fails
        return {**row, "diverged": str(exc).split(";")[0]}
    seconds = time.perf_counter() - started
    return {**row, "seconds": round(seconds, 1),
            "loss_per_prediction": report.epochs[-1].loss_per_pair, **quality(model.wv)}


def main(argv=None) -> int:
    from semhuff.eval.bench.train import parse_bench_args, write_prefix
    from semhuff.data_paths import shared_corpus
    p = argparse.ArgumentParser(prog="gpu_concurrency", description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default=str(shared_corpus()))
    p.add_argument("--tokens", type=int, default=5_000_000)
    p.add_argument("--epochs", type=int, nargs="+", default=[1, 5])
    p.add_argument("--in-flight", type=int, nargs="+", default=[1, 1000, 10_000, 100_000])
    p.add_argument("--unit", choices=UNITS, nargs="+", default=["centre"])
    p.add_argument("--merge", choices=MERGES, nargs="+", default=["sum", "last"])
    p.add_argument("--merge-in", choices=MERGES, help="the input vectors' merge, if not "
                   "--merge's (which then applies to the output rows only)")
    p.add_argument("--top", type=int, default=0, help="HS levels deferred to a centre's end "
                   "(0: word2vec's order; the CPU's default mixed order is 4)")
    p.add_argument("--sentence-words", type=int, default=MAX_SENTENCE_WORDS)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU trainer's rows")
    args = parse_bench_args(p, argv, "gpu_concurrency")
    if args is None:
        return 2
    logging.getLogger("semhuff").setLevel(logging.ERROR)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path, tokens = write_prefix(args.corpus, args.tokens, folder)
        print(f"{tokens:,} tokens; sentences of at most {args.sentence_words} words", flush=True)
        for epochs in args.epochs:
            runs = [] if args.no_cpu else [None]
            runs += [dict(in_flight=k, unit=u, merge=m, merge_in=args.merge_in or m, top=args.top,
                          sentence_words=args.sentence_words)
                     for k in args.in_flight for u in args.unit for m in args.merge
                     if not (k == 1 and m == "last")]  # one block: nothing to merge
            for options in runs:
                row = train_one(path, tokens, epochs, options, args,
                                workers=os.cpu_count() if options is None else 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
