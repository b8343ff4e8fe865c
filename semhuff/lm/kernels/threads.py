"""Fewer threads for small work on the CPU.

A layer's CPU step is many small parallel regions (the tree's bucketed paths: ~20 lengths, a
gather, a product and a scatter each, both ways). Each region ends at a barrier: when another
process holds one of the cores, the region waits for a thread the scheduler has not run yet,
a time slice (milliseconds) a region. Measured at V 50k, H 512, 2,560 tokens, two threads, the
2-core machine loaded 7 deep by other work: the sparse tree's forward + backward took 5.2 times
its one-thread time, where the adaptive softmax's (a few large products) took 1.4 times. Work
this small gains little from a second thread even on an idle machine, so a region below
``GRAIN`` multiply-adds a thread runs on fewer threads (``threads_for``): the tree's forward
(``small_work``) and its backward (``paths.PathScores``, ``paths.SignedLogSigmoid``: the
element-wise ops of (tokens, depth) arrays, which torch splits between threads from 32k
elements on, are one autograd function so that their backward runs under the cap too).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch

GRAIN = 1 << 25  # multiply-adds a thread must have before the work is split (~10 ms of it)


@contextmanager
def threads_for(work: int):
    """Run the block with at most ``work // GRAIN`` (at least 1) of torch's intra-op threads,
    restoring the count after; torch's own count when that is fewer."""
    have = torch.get_num_threads()
    want = max(1, min(have, int(work) // GRAIN))
    if want == have:
        yield
        return
    torch.set_num_threads(want)
    try:
        yield
    finally:
        torch.set_num_threads(have)


def small_work(h: torch.Tensor, work: int):
    """``threads_for(work)`` for CPU eager work on ``h``; nothing elsewhere (a GPU's work, a
    compiled graph: no thread count to set there)."""
    if h.device.type != "cpu" or torch.compiler.is_compiling():
        return nullcontext()
    return threads_for(work)
