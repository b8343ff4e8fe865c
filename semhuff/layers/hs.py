"""Hierarchical softmax over any ``Tree`` (Huffman, SemHuff, a custom one)."""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..errors import OptionError, TreeError
from ..kernels import loop
from ..tree import Tree
from .base import OutputLayer


class HierarchicalSoftmax(OutputLayer):
    """``order`` (skip-gram only) says how a centre's context words walk the centre's path:

    * "word2vec": context by context, word2vec.c's order exactly;
    * "batched": all contexts per path node at once (the p-tHSM formulation);
    * "mixed" (default): batched over the top ``MIXED_LEVELS`` nodes of the path, which nearly
      every word shares and both threads would otherwise keep writing, word2vec's order below.
    Measured trade-offs in docs/performance.md."""

    body = loop.HS
    normalised = True
    devices = ("cpu", "cuda")
    options = ("tree", "similarity", "hs_order", "seed")
    ORDERS = ("mixed", "word2vec", "batched")
    CLIPS = ("skip", "saturate")
    MIXED_LEVELS = 4
    # Private top-of-tree rows for each thread (devices.HotRows), averaged when merged: nearly
    # every prediction updates them, so each thread's copy settles within a chunk and summing
    # two settled changes overshoots (-2.2 analogy points); averaging costs 0.3. 1,024 rows ran
    # two threads 1.82x one on the full corpus (256: 1.73x) and trained as well there and on a
    # 6M-token prefix, but worse on small ones (3M prefix, 3 epochs, 4 seeds: WS353 0.313 vs
    # 0.331; 2M: 0.270 vs 0.284), so 1,024 only for a train() call of 16M input words or more
    # (docs/performance.md, "Private hot rows").
    HOT_ROWS = 256
    HOT_ROWS_LARGE = 1024
    LARGE_WORDS = 16_000_000
    HOT_MERGE = "average"
    # the largest table of mapped paths a thread gets (thread_args): 64 MiB holds the paths of
    # 400k words 40 deep (the shared corpus's 56k words, 22 deep: 5 MB)
    THREAD_PATH_BYTES = 64 << 20

    def hot_row_count(self, total_words):
        return self.HOT_ROWS_LARGE if total_words >= self.LARGE_WORDS else self.HOT_ROWS
    _BATCH_LEVELS = {"word2vec": 0, "mixed": MIXED_LEVELS, "batched": 1 << 30}

    def __init__(self, tree: Tree, order: str = "mixed", clip: str = "skip"):
        super().__init__()
        if order not in self.ORDERS:
            raise OptionError(f"hs_order must be one of {', '.join(self.ORDERS)}, got {order!r}")
        if clip not in self.CLIPS:
            raise OptionError(f"clip must be one of {', '.join(self.CLIPS)}, got {clip!r}")
        self.tree = tree
        self.order = order
        self.clip = clip

    @classmethod
    def create(cls, vocab, tree=None, similarity=None, hs_order="mixed", seed=1, clip="skip",
               **options):
        """``tree``: a ``Tree``, the name of a tree builder (``semhuff.trees``; default
        "huffman"), or "self-organized" (a ``SelfOrganizedHS``, which takes ``options``)."""
        if tree == "self-organized":
            from .self_organized import SelfOrganizedHS
            return SelfOrganizedHS.create(vocab, hs_order=hs_order, seed=seed, clip=clip, **options)
        if options:
            raise OptionError(f"{', '.join(sorted(options))}: only for self-organized trees "
                              f"(tree 'self-organized') and the class softmax (loss 'class')")
        if len(vocab) < 2:
            raise OptionError(f"hierarchical softmax needs at least 2 words in the vocabulary, "
                              f"got {len(vocab)} (lower min_count?)")
        if not isinstance(tree, Tree):
            from ..trees import make_tree
            tree = make_tree(tree or "huffman", vocab, similarity=similarity, seed=seed)
        elif tree.n_words != len(vocab):
            raise TreeError(f"the given tree has {tree.n_words} leaves but the vocabulary has "
                            f"{len(vocab)} words")
        return cls(tree, hs_order, clip)

    def n_rows(self, n_words: int) -> int:
        if n_words != self.tree.n_words:
            raise TreeError(f"tree has {self.tree.n_words} leaves, vocabulary {n_words} words")
        return max(n_words - 1, 1)

    def batch_levels(self) -> int:
        return self._BATCH_LEVELS[self.order]

    def saturates(self) -> bool:
        return self.clip == "saturate"

    def kernel_args(self):
        t = self.tree
        return (t.points, t.codes, t.lengths)

    def thread_table(self):
        return self.tree.points.nbytes <= self.THREAD_PATH_BYTES

    def thread_args(self, remap):
        """The layer's arrays and, last, the thread's table of paths mapped through its map
        ``remap``, which the kernel reads a word's path rows from: mapping the path at every
        centre instead cost 4% of a thread's time. Only while the table takes at most
        ``THREAD_PATH_BYTES``; past it the kernel maps (docs/performance.md)."""
        args = self.kernel_args()
        return (*args, remap[args[0]]) if self.thread_table() else args

    def hot_rows(self, counts, n):
        """The ``n`` inner nodes the most words pass through (by corpus count): the top of the
        tree, which every thread writes on nearly every prediction. (A self-organized tree
        changes: the session asks again after every re-assignment, ``layer_changed``.)"""
        t = self.tree
        on_path = np.arange(t.points.shape[1]) < t.lengths[:, None]
        traffic = np.bincount(t.points[on_path], minlength=self.n_rows(t.n_words),
                              weights=np.broadcast_to(np.asarray(counts, np.float64)[:, None],
                                                      on_path.shape)[on_path])
        return np.argsort(-traffic, kind="stable")[:n]

    def score_kernel(self, sg, dim, cbow_mean=True):
        return loop.kernel(sg, dim, loop.HS_SCORE, cbow_mean=cbow_mean)

    def config(self):
        return {"order": self.order, "clip": self.clip}

    def arrays(self) -> Dict[str, np.ndarray]:
        return {**super().arrays(), **self.tree.to_arrays()}

    @classmethod
    def from_state(cls, config, arrays):
        layer = cls(Tree.from_arrays(arrays), **config)
        layer.load_arrays(arrays)
        return layer

    def describe(self):
        return (f"hierarchical softmax over a {self.tree.kind} tree (max depth "
                f"{self.tree.max_depth}, {self.order} order)")
