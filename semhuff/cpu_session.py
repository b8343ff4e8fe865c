"""The CPU device: Hogwild threads running the compiled sentence loops (``kernels/loop.py``) on
the host arrays, each with private copies of the hottest rows (``HotRows``). Its session is the
reference implementation of ``devices.Session``; the GPU session scores through it."""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from .errors import DeviceError, OptionError
from .kernels import loop
from .schedule import Schedule

logger = logging.getLogger(__name__)


def available_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def thread_count(workers: int) -> int:
    """``workers`` capped at the CPUs available, with a warning. Decided: cap, not
    refuse (a setting copied from a larger machine still runs). The kernels never wait on
    anything, so a thread beyond the CPUs only adds contention, and the private copies of the
    hottest rows (``HotRows``: memory per thread, a change averaged over the threads) grow with
    the threads: 1,000 threads on 2 CPUs trained at 632k words/s to a worse loss (7.33) than
    2 (1.09M words/s, 7.19)."""
    cpus = available_cpus()
    if workers > cpus:
        logger.warning("workers=%d is more than the %d CPUs available: training with %d threads "
                       "(more threads than CPUs are only slower)", workers, cpus, cpus)
        return cpus
    return int(workers)


@dataclass(frozen=True)
class Plan:
    """What every chunk of one ``train()`` (or scoring) call shares. Made by ``from_settings``
    (the trainer, scoring and Dask's shards); a unit test may build one field by field."""

    sg: bool
    keep_thr: np.ndarray   # uint32 down-sampling thresholds by word id (all 0xFFFFFFFF: none)
    window: int
    reduce_window: bool    # word2vec's reduced window (training) or the full window (scoring)
    schedule: Schedule     # the learning rate over the input words of the whole call
    cbow_mean: bool = True # CBOW: mean of the contexts (word2vec) or their sum (gensim cbow_mean=0)
    counts: Optional[np.ndarray] = None  # word counts: which output rows every thread writes
    lockf: Optional[np.ndarray] = None  # float32 lock factor per word (gensim's vectors_lockf),
                                        # every input update times it; None: nothing locked

    @classmethod
    def from_settings(cls, settings, keep_thr: np.ndarray, total_words: int = 1,
                      counts: Optional[np.ndarray] = None, score: bool = False) -> "Plan":
        """The plan of a call with ``settings`` (a ``trainer.TrainSettings``): the rate decays
        from its ``alpha`` to ``min_alpha`` over ``total_words`` input words (at least 1);
        ``score``: a scoring plan (the full window, no rate, no locks: the scoring kernels
        read none). Out-of-range settings: an ``OptionError`` (``TrainSettings`` checks its
        own; the schedule, ``total_words``)."""
        if score:
            return cls(sg=bool(settings.sg), keep_thr=keep_thr, window=int(settings.window),
                       reduce_window=False, schedule=Schedule(0.0, 0.0, 1),
                       cbow_mean=bool(settings.cbow_mean))
        return cls(sg=bool(settings.sg), keep_thr=keep_thr, window=int(settings.window),
                   reduce_window=bool(settings.shrink_windows),
                   schedule=Schedule(settings.alpha, settings.min_alpha, max(1, total_words)),
                   cbow_mean=bool(settings.cbow_mean), counts=counts, lockf=settings.lockf)


class HotRows:
    """Private copies, for each thread, of the rows that every thread writes all the time: the
    output rows at the top of the tree or of the most frequent words, and the input vectors of
    the most frequent context words.

    Two Hogwild threads writing the same rows make their cores pass those cache lines back and
    forth, which cost two threads much of their speed-up (``eval/bench/threads.py``,
    docs/performance.md). So a thread trains a chunk on its own copies of the ``rows`` and then
    merges what it changed, times ``share``, into the shared rows, under a lock; every other row
    stays Hogwild. ``share = 1``: the shared rows get each thread's whole change (what Hogwild
    would have done, a chunk late); ``1 / threads``: the changes are averaged.

    The copies live below the shared rows (``owner``'s attribute ``attr``: a layer's
    ``weights``, a session's ``syn0``) in one array (``weights``; the attribute becomes a view of
    its first rows), and a thread's kernel reaches them through an index map (``remap``): one
    array and an index keep the kernels' loops vectorised."""

    def __init__(self, owner, rows: np.ndarray, share: float, threads: int, attr: str = "weights"):
        self.owner, self.attr = owner, attr
        self.rows = np.asarray(rows, dtype=np.int64)
        self.share = np.float32(share)
        self.threads = int(threads)
        self._lock = threading.Lock()
        self._place()

    @property
    def shared(self) -> np.ndarray:
        return getattr(self.owner, self.attr)

    def _place(self) -> None:
        """Move the shared rows into the array that also holds every thread's copies, or, when
        they are the first rows of a buffer with room for the copies below them
        (``with_room``), use that buffer: no copy of the shared rows (which doubled the input
        vectors while training and the output weights while placing them)."""
        shared = self.shared
        n, h = shared.shape[0], len(self.rows)
        self.weights = room_below(shared, n + self.threads * h)
        if self.weights is None:
            self.weights = np.empty((n + self.threads * h, shared.shape[1]), dtype=np.float32)
            self.weights[:n] = shared
        setattr(self.owner, self.attr, self.weights[:n])
        self._free = list(range(self.threads))
        self.maps = []
        for t in range(self.threads):
            remap = np.arange(n, dtype=np.int32)
            remap[self.rows] = n + t * h + np.arange(h, dtype=np.int32)
            self.maps.append(remap)
        self._start = np.empty((self.threads, h, shared.shape[1]), dtype=np.float32)

    def _copies(self, t: int) -> np.ndarray:
        n, h = self.shared.shape[0], len(self.rows)
        return self.weights[n + t * h:n + (t + 1) * h]

    def begin(self) -> tuple:
        """(token, the kernel's map) for the calling thread, its copies fresh from the shared
        rows."""
        with self._lock:
            if self.shared.base is not self.weights:  # replaced (by a hook, between chunks)
                self._place()
            t = self._free.pop()
            copies = self._copies(t)
            np.take(self.shared, self.rows, axis=0, out=copies)
        self._start[t] = copies
        return t, self.maps[t]

    def by_row(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per shared row) for every row of ``weights``: a thread's copy of a
        row gets that row's value."""
        return np.concatenate([values, np.tile(values[self.rows], self.threads)])

    def end(self, t: int) -> None:
        """Merge thread token ``t``'s change since ``begin`` into the shared rows."""
        change = np.subtract(self._copies(t), self._start[t], out=self._start[t])
        if self.share != 1:
            change *= self.share
        with self._lock:
            self.shared[self.rows] += change
            self._free.append(t)


def with_room(array: np.ndarray, rows: int) -> np.ndarray:
    """``array`` (2-D float32) as the first rows of a buffer with ``rows`` more below it, the
    room ``HotRows`` puts the threads' private copies in (``room_below``). The room is never
    written until then, so it takes no memory (the pages of a large allocation are committed
    when first written). ``array`` itself when it has the room already."""
    if rows <= 0 or room_below(array, array.shape[0] + rows) is not None:
        return array
    buffer = np.empty((array.shape[0] + rows, array.shape[1]), dtype=np.float32)
    buffer[:array.shape[0]] = array
    return buffer[:array.shape[0]]


def room_below(array: np.ndarray, need: int) -> Optional[np.ndarray]:
    """The buffer whose first rows ``array`` is, when it has ``need`` rows (float32,
    C-contiguous, same width), else None."""
    base = array.base
    if not (isinstance(base, np.ndarray) and base.ndim == 2 and base.dtype == np.float32
            and array.dtype == np.float32 and array.ndim == 2
            and base.flags.c_contiguous and array.flags.c_contiguous
            and base.shape[1] == array.shape[1] and base.shape[0] >= need
            and array.__array_interface__["data"][0] == base.__array_interface__["data"][0]):
        return None
    return base


def check_separate(*arrays) -> None:
    """The training kernels are compiled on the promise that no two of their arrays overlap
    (``kernels/compiler.py``: it lets LLVM keep rows in registers); a layer that breaks it
    would train wrongly, silently. Raises ``ValueError`` instead."""
    arrays = [a for a in arrays if isinstance(a, np.ndarray) and a.size]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if np.may_share_memory(a, b):
                raise ValueError("the training kernel's arrays must not overlap (the input "
                                 "vectors, the output weights and the layer's kernel_args() "
                                 "share memory)")


class CpuSession:
    """Hogwild threads on the host arrays: the kernels release the GIL and update ``syn0`` and
    the layer's weights in place, without locks (word2vec's and gensim's way)."""

    HOT_ROWS = None      # output rows each thread keeps private (``HotRows``); None: the
                         # layer's ``HOT_ROWS``, 0: none
    HOT_SHARE = None     # factor of a thread's change to them when merged; None: the layer's
                         # ``HOT_MERGE`` ("sum": 1, "average": 1 / workers)
    HOT_INPUTS = 256     # input vectors each thread keeps private: the words written most as
                         # contexts (with private output rows only; 0: none)
    HOT_INPUT_SHARE = None  # factor of a thread's change to them; None: 1 / workers (averaged:
                            # summing lost quality, docs/performance.md)
    # Summed private rows (NS's) by default only up to this many threads: the sum of changes
    # a chunk late was chosen on two CPUs. With more, the hottest rows' changes pile up: on
    # the 18M-token corpus sg-NS diverged in epoch 1 with 4, 8 and 16 threads (loss 1e3-1e13;
    # 16 real cores on the GPU host, 4-16 threads emulated here) and CBOW-NS collapsed at 8
    # (WS353 0.09); averaging did not save it (WS353 0.20). Every row shared instead: 16 cores
    # 7.75M words/s, WS353 0.627. Averaged ones (HS's) stay: on 16 cores without them sg-HS
    # fell from 10.0M to 1.5M words/s (every thread writing the tree's top). docs/performance.md
    PRIVATE_MAX_THREADS = 2
    locks = True  # honours ``Plan.lockf`` (a session without this attribute: refused)

    def __init__(self, syn0: np.ndarray, layer, workers: int):
        self.syn0 = syn0
        self.host_syn0 = syn0  # the model's array; ``syn0`` may become a view of ``hot_in``'s
        self.layer = layer
        self.concurrency = int(workers)
        self.hot: Optional[HotRows] = None
        self.hot_in: Optional[HotRows] = None
        self._plan: Optional[Plan] = None
        self._mapped: Dict[int, tuple] = {}  # thread token: (map, layer args, its thread args)
        self._same_rows = loop.NO_HOT
        self._locks: tuple = (None, None, ())  # (plan.lockf, hot_in, the kernel's lock argument)

    def _thread_args(self, token: int, remap: np.ndarray, larg: tuple) -> tuple:
        """The layer's kernel arguments for the thread holding ``token`` (``thread_args``),
        made again only when its map or the layer's arrays are new."""
        seen = self._mapped.get(token)
        if seen is None or seen[0] is not remap or len(seen[1]) != len(larg) or \
                any(a is not b for a, b in zip(seen[1], larg)):
            seen = self._mapped[token] = (remap, larg, self.layer.thread_args(remap))
        return seen[2]

    def _hot_rows(self, plan: Plan) -> Optional[HotRows]:
        """Private hot rows for two or more threads, where the layer names them; rows merged by
        sum only up to ``PRIVATE_MAX_THREADS`` threads (beyond, every row shared: word2vec's
        Hogwild), unless ``HOT_ROWS`` is set."""
        n = (self.layer.hot_row_count(plan.schedule.total_words) if self.HOT_ROWS is None
             else self.HOT_ROWS)
        if self.concurrency < 2 or plan.counts is None or n <= 0:
            return None
        if self.HOT_ROWS is None and self.layer.HOT_MERGE == "sum" and \
                self.concurrency > self.PRIVATE_MAX_THREADS:
            return None
        rows = self.layer.hot_rows(plan.counts, n)
        if rows is None or len(rows) == 0:
            return None
        if self.HOT_ROWS is None and 2 * len(rows) > self.layer.weights.shape[0]:
            # most of a small layer private (NS's 4,096 rows of a 889-word vocabulary): each
            # thread would train a whole chunk against its own copy of the layer, a chunk-late
            # sum, not Hogwild. Measured worse (gensim's test_parallel: CBOW + NS,
            # dim 16, 4 threads: 'palestinian' 1st-15th among 'israeli''s neighbours over 6
            # seeds, 1st-2nd with every row shared); a small layer is all hot anyway
            return None
        share = self.HOT_SHARE
        if share is None:
            share = 1.0 / self.concurrency if self.layer.HOT_MERGE == "average" else 1.0
        return HotRows(self.layer, rows, share, self.concurrency)

    def _hot_inputs(self, plan: Plan) -> Optional[HotRows]:
        """Private input vectors of the ``HOT_INPUTS`` words written most as contexts: count
        times the down-sampling keep probability (for kernels with private output rows)."""
        if self.hot is None or self.HOT_INPUTS <= 0:
            return None
        written = np.asarray(plan.counts, np.float64) * (plan.keep_thr / 2.0 ** 32)
        rows = np.argsort(-written, kind="stable")[:self.HOT_INPUTS].copy()  # not a view of V
        share = 1.0 / self.concurrency if self.HOT_INPUT_SHARE is None else self.HOT_INPUT_SHARE
        return HotRows(self, rows, share, self.concurrency, attr="syn0")

    def _kernel(self, plan: Plan, score: bool):
        dim, layer = self.syn0.shape[1], self.layer
        if score:
            return layer.score_kernel(plan.sg, dim, plan.cbow_mean)
        return layer.train_kernel(plan.sg, dim, plan.cbow_mean, hot=self.hot is not None,
                                  lock=plan.lockf is not None)

    def _lock_args(self, plan: Plan) -> tuple:
        """The kernel's lock argument: () without locks, else the lock factor of every row of
        the input array it gets. By row, not by word (decision): the bodies only see rows
        (``hot_in`` sends a hot word to the thread's private copy) and the factor must follow
        the word there; one array made per ``train()`` call, instead of a second context array
        of words in every body."""
        if plan.lockf is None:
            return ()
        if self._locks[0] is not plan.lockf or self._locks[1] is not self.hot_in:
            lockf = np.ascontiguousarray(plan.lockf, dtype=np.float32)
            if lockf.shape != (self.host_syn0.shape[0],):
                raise OptionError(f"{len(lockf)} lock factors for {self.host_syn0.shape[0]} "
                                  f"input vectors")
            rows = lockf if self.hot_in is None else self.hot_in.by_row(lockf)
            self._locks = (plan.lockf, self.hot_in, (rows,))
        return self._locks[2]

    def warm_up(self, plan: Plan, score: bool = False) -> float:
        """Compile (or load from Numba's disk cache) the kernel; seconds it took (0 when it was
        ready in this process). The call trains on an empty chunk: the same types as a real
        call, so the same compiled code, and no side effect on any weight or statistic."""
        if not score:
            self._plan = plan
            self.hot = self._hot_rows(plan)
            if self.hot_in is None:
                self.hot_in = self._hot_inputs(plan)
            # the input map of a kernel with private output rows only; never read without them
            self._same_rows = (loop.NO_HOT if self.hot is None or self.hot_in is not None
                               else np.arange(self.syn0.shape[0], dtype=np.int32))
        fn = self._kernel(plan, score)
        if fn.signatures:
            return 0.0
        started = time.perf_counter()
        if score:
            larg = self.layer.score_args(0)
        elif self.hot is not None:  # a thread's arguments (its table is kept for its chunks)
            larg = self._thread_args(0, self.hot.maps[0], self.layer.kernel_args())
        else:
            larg = self.layer.kernel_args()
        fn(np.zeros(0, np.int32), np.zeros(0, np.int64), self.syn0, self.layer.weights,
           larg, self.layer.stats_array(), plan.keep_thr, 1,
           plan.reduce_window, 0.0, 0.0, 0, 1, np.uint64(1), loop.NO_HOT, loop.NO_HOT,
           *(() if score else self._lock_args(plan)))
        return time.perf_counter() - started

    def train_chunk(self, plan: Plan, chunk, words_before: int, seed: int):
        fn = self._kernel(plan, score=False)
        hot, hot_in = self.hot, self.hot_in
        weights = self.layer.weights if hot is None else hot.weights
        syn0 = self.syn0 if hot_in is None else hot_in.weights
        larg, stats = self.layer.kernel_args(), self.layer.stats_array()
        locks = self._lock_args(plan)
        token, remap = hot.begin() if hot is not None else (None, loop.NO_HOT)
        token_in, remap_in = hot_in.begin() if hot_in is not None else (None, self._same_rows)
        try:
            if hot is not None:
                larg = self._thread_args(token, remap, larg)
            check_separate(syn0, weights, stats, *larg, *locks)
            rate = plan.schedule  # the kernel takes it as three numbers
            return fn(chunk.ids, chunk.bounds, syn0, weights, larg, stats, plan.keep_thr,
                      plan.window, plan.reduce_window, rate.alpha, rate.min_alpha, words_before,
                      rate.total_words, np.uint64(seed), remap, remap_in, *locks)
        finally:
            if hot is not None:
                hot.end(token)
            if hot_in is not None:
                hot_in.end(token_in)

    def score_chunk(self, plan: Plan, chunk, part: int = 0):
        """(summed nll, predictions); ``part=1``: only the cluster part (clustered layers)."""
        fn = self._kernel(plan, score=True)
        nll, pairs, _ = fn(chunk.ids, chunk.bounds, self.syn0, self.layer.weights,
                           self.layer.score_args(part), np.zeros((1, 2)), plan.keep_thr,
                           plan.window, False, 0.0, 0.0, 0, 1, np.uint64(0), loop.NO_HOT,
                           loop.NO_HOT)
        return nll, pairs

    def to_host(self) -> None:
        """The host arrays are the weights, but for private input vectors: then the model's
        ``syn0`` gets a copy of the shared rows (the threads are idle: between chunks)."""
        if self.syn0 is not self.host_syn0 and not _same_rows(self.syn0, self.host_syn0):
            self.host_syn0[...] = self.syn0

    def layer_changed(self) -> None:
        """Kernels read ``layer.kernel_args()`` per chunk; the hottest rows may be others now (a
        re-assigned tree): choose them again (the threads are idle: hooks run between chunks)."""
        if self.hot is not None:
            self.hot = self._hot_rows(self._plan)

    def close(self) -> None:
        self.to_host()


def _same_rows(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same memory (a view of the model's own rows)."""
    return a.shape == b.shape and a.strides == b.strides and \
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


class CpuDevice:
    name = kind = "cpu"
    backends = ("numba",)

    def __init__(self, backend=None, **options):
        if options:
            raise OptionError(f"device option(s) {', '.join(sorted(options))} do not apply to "
                              f"device 'cpu'")

    def open(self, syn0: np.ndarray, layer, workers: int) -> CpuSession:
        return CpuSession(syn0, layer, thread_count(workers))
