"""The process's heap, for runs that hold large arrays (peak memory against gensim).

glibc serves an allocation of more than ``M_MMAP_THRESHOLD`` bytes from its own memory map,
returned to the OS when freed; smaller ones from the heap, whose freed pages stay counted in the
process's memory. The threshold starts at 128 KiB but rises to the size of every large block
freed (up to 32 MiB), so once a run has freed one table of a few MiB, its later temporaries of
that size (the scan's tables, a check's V x dim mask, a thread's path table) land in the heap
and their pages stay: measured, 22 MiB of a 147k-word run's peak. ``return_large_blocks`` fixes
the threshold at 1 MiB for the process (the console scripts call it: the process is theirs, a
library import does not change it); ``release_freed_memory`` hands back what the heap has free.
``keep_large_blocks`` is the opposite choice, for a language model's training process: there the
same large blocks come and go every step (a two-level layer's V x D word gradient, 45 MB at
44k words), and a fresh memory map each time costs its page faults again; kept in the heap they
are reused (measured: a 44k-word class-softmax LSTM step 1.45x faster on one core; the tree and
adaptive layers, which free no such block, unchanged: docs/lm.md). All do nothing where the C
library is not glibc.
"""
from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameters
M_TRIM_THRESHOLD = -1
LARGE = 1 << 20


def _libc():
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def return_large_blocks(threshold: int = LARGE) -> bool:
    """Every allocation of ``threshold`` bytes or more gets its own memory map from now on (and
    goes back to the OS when freed). Whether the C library took it."""
    mallopt = getattr(_libc(), "mallopt", None)
    return bool(mallopt and mallopt(M_MMAP_THRESHOLD, int(threshold)))


def keep_large_blocks(limit: int = 1 << 30) -> bool:
    """Allocations up to ``limit`` bytes come from the heap, and freed memory stays there (up to
    ``limit`` of it at the heap's top), for the next allocation to reuse without page faults.
    The process's memory then stays at its peak. Whether the C library took both settings."""
    mallopt = getattr(_libc(), "mallopt", None)
    return bool(mallopt and mallopt(M_MMAP_THRESHOLD, int(limit))
                and mallopt(M_TRIM_THRESHOLD, int(limit)))


def release_freed_memory() -> None:
    """Hand the pages the heap has free back to the OS (glibc's ``malloc_trim``): the scan's
    tables and lists grow, are freed, and their pages would otherwise stay counted under the
    weights allocated next (17 MiB after scanning the shared corpus at min_count 1)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)
