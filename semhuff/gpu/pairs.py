"""A chunk's training pairs, generated on the CPU by the sentence loop's ``PAIRS`` body.

The GPU trains on exactly the pairs the CPU kernels would train: the same down-sampling, reduced
windows and linear learning-rate decay, from the same random stream seeded per chunk
(``kernels/loop.py``). The loop is ``nogil`` Numba, so several trainer threads generate pairs
for their chunks at once while one of them feeds the GPU (``device.GpuSession``).

Layout (one array set for both architectures, so the GPU kernels have one input format):
``inputs`` are input-word ids, pair ``p`` reads ``inputs[starts[p]:starts[p + 1]]``; skip-gram has
one input per pair (``starts`` is ``None``: the range is ``p:p + 1``), CBOW the centre's
contexts. ``targets`` and ``rates`` are per pair.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..kernels import loop


@dataclass
class Pairs:
    sg: bool
    n: int                        # pairs (predictions)
    inputs: np.ndarray            # int32 input ids (skip-gram: one per pair; CBOW: contexts)
    starts: Optional[np.ndarray]  # CBOW: int64 (n + 1) offsets into ``inputs``; skip-gram: None
    targets: np.ndarray           # int32 word to predict
    rates: np.ndarray             # float32 learning rate of the pair
    trained: int = 0              # words kept after down-sampling

    @property
    def n_inputs(self) -> int:
        return self.n if self.starts is None else int(self.starts[self.n])


class PairSource:
    """Per-thread reusable buffers and the compiled ``PAIRS`` loop for one dimension."""

    def __init__(self, dim: int):
        self.dim = int(dim)
        self._local = threading.local()
        self._dummy_weights = np.zeros((1, self.dim), np.float32)
        self._dummy_syn0 = np.zeros((1, self.dim), np.float32)

    def kernel(self, sg: bool):
        return loop.kernel(bool(sg), self.dim, loop.PAIRS)

    def _buffers(self, sg: bool, n_ids: int, window: int):
        key = (bool(sg), int(window))
        held = getattr(self._local, "buffers", None)
        if held is None or held[0] != key or held[1] < n_ids:
            capacity = max(int(n_ids), 1024)
            held = (key, capacity, loop.pair_buffers(sg, capacity, window))
            self._local.buffers = held
        return held[2]

    def generate(self, plan, ids: np.ndarray, bounds: np.ndarray, words_before: int,
                 seed) -> Pairs:
        """The pairs of one chunk; the arrays are views of this thread's buffers, valid until
        its next call."""
        window = max(int(plan.window), 1)
        buffers = self._buffers(plan.sg, len(ids), window)
        _, n, trained = self.kernel(plan.sg)(
            ids, bounds, self._dummy_syn0, self._dummy_weights, buffers, loop.no_stats(),
            plan.keep_thr, window, plan.reduce_window, plan.schedule.alpha,
            plan.schedule.min_alpha, words_before, plan.schedule.total_words, np.uint64(seed),
            loop.NO_HOT, loop.NO_HOT)
        if plan.sg:
            inputs, targets, rates = buffers
            return Pairs(True, n, inputs[:n], None, targets[:n], rates[:n], trained)
        contexts, starts, targets, rates = buffers
        starts = starts[:n + 1] if n else np.zeros(1, np.int64)
        return Pairs(False, n, contexts[:starts[-1]], starts, targets[:n], rates[:n], trained)
