"""Output layers: each class owns the output weights and the kernel that trains them, so the
trainer never needs to know which one it drives (fastText's ``loss.cc`` pattern).

* ``HierarchicalSoftmax(tree)`` works with any ``Tree`` (Huffman, SemHuff, self-organized);
* ``NegativeSampling(counts, negative)`` is the baseline both papers compare against.

A new output layer (a self-organized tree that re-learns its clusters, a GPU device) subclasses
``OutputLayer``: ``train_chunk`` for the work, ``end_epoch`` for anything between epochs.
"""
from __future__ import annotations

import numpy as np

from .kernels.hs import cbow_hs_kernel, sg_hs_kernel
from .kernels.ns import build_alias_table, cbow_ns_kernel, sg_ns_kernel
from .tree import Tree


class OutputLayer:
    name = "abstract"

    def __init__(self):
        self.weights = None  # (rows, dim) float32, allocated by ``allocate``

    def n_rows(self, n_words: int) -> int:
        raise NotImplementedError

    def allocate(self, n_words: int, dim: int) -> None:
        # word2vec starts the output layer at zero
        self.weights = np.zeros((self.n_rows(n_words), dim), dtype=np.float32)

    def kernel(self, sg: bool, dim: int):
        raise NotImplementedError

    def kernel_args(self) -> tuple:
        """The layer's own arrays, passed to its kernel right after the weights."""
        raise NotImplementedError

    def train_chunk(self, sg, ids, bounds, syn0, keep_thr, window, alpha0, min_alpha,
                    words_before, total_words, seed):
        """Train on one chunk of token ids; returns (loss, pairs, trained_words)."""
        fn = self.kernel(sg, syn0.shape[1])
        return fn(ids, bounds, syn0, self.weights, *self.kernel_args(), keep_thr, window,
                  alpha0, min_alpha, words_before, total_words, seed)

    def end_epoch(self, model, epoch: int) -> None:
        """Hook between epochs (all chunks of ``epoch`` are done). Nothing by default."""

    def state(self) -> dict:
        return {"output_weights": self.weights}

    def describe(self) -> str:
        return self.name


class HierarchicalSoftmax(OutputLayer):
    """``order`` (skip-gram only) says how a centre's context words walk the centre's path:

    * "word2vec": context by context, word2vec.c's order exactly;
    * "batched": all contexts per path node at once (the p-tHSM formulation);
    * "mixed" (default): batched over the top ``MIXED_LEVELS`` nodes of the path, which nearly
      every word shares and both threads would otherwise keep writing, word2vec's order below.
    Measured trade-offs in docs/performance.md."""

    name = "hs"
    ORDERS = ("mixed", "word2vec", "batched")
    MIXED_LEVELS = 4
    _BATCH_LEVELS = {"word2vec": 0, "mixed": MIXED_LEVELS, "batched": 1 << 30}

    def __init__(self, tree: Tree, order: str = "mixed"):
        super().__init__()
        if order not in self.ORDERS:
            raise ValueError(f"hs order must be one of {self.ORDERS}, got {order!r}")
        self.tree = tree
        self.order = order

    def n_rows(self, n_words: int) -> int:
        if n_words != self.tree.n_words:
            raise ValueError(f"tree has {self.tree.n_words} leaves, vocabulary {n_words} words")
        return max(n_words - 1, 1)

    def kernel(self, sg, dim):
        if not sg:
            return cbow_hs_kernel(dim)
        return sg_hs_kernel(dim, self._BATCH_LEVELS[self.order])

    def kernel_args(self):
        t = self.tree
        return (t.points, t.codes, t.lengths)

    def state(self):
        return {**super().state(), **self.tree.to_arrays()}

    def describe(self):
        order = f", {self.order} order"
        return f"hierarchical softmax over a {self.tree.kind} tree (max depth {self.tree.max_depth}{order})"


class NegativeSampling(OutputLayer):
    name = "ns"

    def __init__(self, counts: np.ndarray, negative: int = 5, exponent: float = 0.75):
        super().__init__()
        if negative < 1:
            raise ValueError("negative sampling needs negative >= 1")
        self.negative = int(negative)
        self.exponent = float(exponent)
        weights = np.asarray(counts, dtype=np.float64) ** self.exponent
        self.alias_thr, self.alias_idx = build_alias_table(weights)

    def n_rows(self, n_words: int) -> int:
        return n_words

    def kernel(self, sg, dim):
        return sg_ns_kernel(dim) if sg else cbow_ns_kernel(dim)

    def kernel_args(self):
        return (self.alias_thr, self.alias_idx, self.negative)

    def describe(self):
        return f"negative sampling ({self.negative} noise words, unigram^{self.exponent:g})"
