"""Hierarchical softmax over any ``Tree`` (Huffman, SemHuff, a custom one)."""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..errors import TreeError
from ..gpu.programs import BinaryOutputs, SentenceBody
from ..kernels import loop
from ..options import Option
from ..trees.base import Tree
from ..trees import tree_builder_options
from ..trees.spec import SIMILARITY, TREE, resolve_tree
from .base import OutputLayer

ORDERS = ("mixed", "word2vec", "batched")
CLIPS = ("skip", "saturate")

HS_ORDER = Option("hs_order", str, "mixed", "skip-gram + HS update order: word2vec.c's (context "
                  "by context), batched (a centre's contexts per path node, p-tHSM), or mixed "
                  "(batched on the top 4 tree levels, word2vec's below: scales best across "
                  "threads)", choices=ORDERS)
CLIP = Option("clip", str, "skip", "a score beyond +-6: no update as word2vec (skip), or the "
              "saturated gradient, which corrects confidently wrong predictions", choices=CLIPS)


class HierarchicalSoftmax(OutputLayer):
    """``order`` (skip-gram only) says how a centre's context words walk the centre's path:

    * "word2vec": context by context, word2vec.c's order exactly;
    * "batched": all contexts per path node at once (the p-tHSM formulation): every context
      reads the rows as they were at the centre's start, each row takes the sum of their updates;
    * "mixed" (default): batched over the top ``MIXED_LEVELS`` nodes of the path, which nearly
      every word shares and both threads would otherwise keep writing, word2vec's order below.
    The kernel walks all three context by context (``kernels/hs.py``); a batched level only
    defers its rows' updates to the centre's end. Measured trade-offs in docs/performance.md."""

    body = loop.HS
    normalised = True
    devices = ("cpu", "cuda")
    OPTIONS = (TREE, SIMILARITY, HS_ORDER, CLIP)
    ORDERS, CLIPS = ORDERS, CLIPS
    MIXED_LEVELS = 4
    # Private top-of-tree rows for each thread (cpu_session.HotRows), averaged when merged:
    # nearly every prediction updates them, so each thread's copy settles within a chunk and
    # summing two settled changes overshoots. More rows scale two threads better on long runs
    # but train worse on small corpora, hence 1,024 only from 16M input words of a train() call
    # (measured in docs/performance.md, "Private hot rows").
    HOT_ROWS = 256
    HOT_ROWS_LARGE = 1024
    HOT_MERGE = "average"
    # the largest table of mapped paths a thread gets (thread_args): 8 MiB holds the paths of
    # 80k words 25 deep (the shared corpus at min_count 5: 56k words, 22 deep, 5 MB). Past it
    # the kernel maps each centre's path: 4% slower, but a large vocabulary's tables were the
    # largest memory cost after the weights (146k words at min_count 1: 15 MiB a thread)
    THREAD_PATH_BYTES = 8 << 20

    def hot_row_count(self, total_words):
        return self.HOT_ROWS_LARGE if total_words >= self.LARGE_WORDS else self.HOT_ROWS
    _BATCH_LEVELS = {"word2vec": 0, "mixed": MIXED_LEVELS, "batched": 1 << 30}

    def __init__(self, tree: Tree, order: str = "mixed", clip: str = "skip"):
        super().__init__()
        HS_ORDER.validate(order)
        CLIP.validate(clip)
        self.tree = tree
        self.order = order
        self.clip = clip
        self._paths = None  # (tree, its row x word path matrix) for row_updates

    @classmethod
    def declared_options(cls):
        return cls.OPTIONS + tree_builder_options()

    @classmethod
    def create(cls, vocab, seed=1, tree=None, similarity=None, hs_order="mixed", clip="skip",
               **tree_options):
        """``tree``: a tree spec (``semhuff.trees.spec.resolve_tree``: a builder's name, default
        "huffman", which gets ``similarity`` and its own ``tree_options``; a ``Tree``; a tree
        file; a model's tree)."""
        TREE.validate(tree)
        vocab.need_two_words("hierarchical softmax")
        tree = resolve_tree(tree, vocab, similarity=similarity, seed=seed, **tree_options)
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
        counts = np.asarray(counts, np.float64)
        traffic = np.zeros(self.n_rows(t.n_words))
        # level by level: temporaries of one column, not of every path node (the whole-table
        # masks took 60 MB at 200k words, at training's peak); integer sums: exact
        for d in range(t.points.shape[1]):
            deep = t.lengths > d
            traffic += np.bincount(t.points[deep, d], weights=counts[deep],
                                   minlength=traffic.shape[0])
        return np.argsort(-traffic, kind="stable")[:n].copy()  # not a view of V entries

    def score_kernel(self, sg, dim, cbow_mean=True):
        return loop.kernel(sg, dim, loop.HS_SCORE, cbow_mean=cbow_mean)

    def gpu_program(self, backend):
        return BinaryOutputs(self, "hs")

    def sentence_body(self):
        return SentenceBody(hs=self.kernel_args()[:3], hs_weights=self.weights,
                            top=self.batch_levels(), saturate=self.saturates())

    def row_updates(self, trained, counts):
        """Each inner node is updated once per prediction of every word below it."""
        if self._paths is None or self._paths[0] is not self.tree:
            from scipy import sparse  # here: only Dask asks, and a training run need not import it
            t = self.tree
            words = np.repeat(np.arange(t.n_words), t.lengths)
            nodes = t.points[np.arange(t.points.shape[1]) < t.lengths[:, None]]
            self._paths = (t, sparse.csr_matrix((np.ones(len(nodes)), (nodes, words)),
                                                shape=(self.n_rows(t.n_words), t.n_words)))
        return self._paths[1] @ trained

    def config(self):
        return {"order": self.order, "clip": self.clip}

    def arrays(self) -> Dict[str, np.ndarray]:
        return {**super().arrays(), **self.tree.to_arrays()}

    @classmethod
    def from_state(cls, config, arrays):
        layer = cls(Tree.from_arrays(arrays), **config)
        layer.load_arrays(arrays)
        return layer

    def untrained_loss(self, weight):
        """Every node's decision at 1/2: ln 2 per node of the target's path."""
        return float(weight @ self.tree.lengths.astype(np.float64)) * np.log(2.0)

    def describe(self):
        return (f"hierarchical softmax over a {self.tree.kind} tree (max depth "
                f"{self.tree.max_depth}, {self.order} order)")
