"""The binary self-organized tree: hierarchical softmax over the learned clusters as a binary tree
(a Huffman tree over the clusters by token mass, a Huffman tree inside each cluster), trained at
about Huffman's cost, re-organized every K words (``trees.organizer.SelfOrganizer``, the one the
PyTorch layer ``lm.self_organizing`` uses too).

The statistic q needs the full cluster distribution P(c | h), which a binary tree only gives by
evaluating every node of its cluster part (C - 1 dot products, against ~10 for a prediction).
So it is gathered on a sample of the centres: a word's centres are sampled with probability
min(1, s / (f_w keep_w)), i.e. about ``samples_per_word`` = s of its (down-sampled) occurrences
per epoch, every context of a sampled centre giving one sample. Frequent and rare words thus
get evidence alike, at a cost that does not grow with the corpus.

What happens to the output rows when the clusters change. A row is a binary classifier between
the two sets of leaves under its node. After a re-assignment the tree is rebuilt; a new node
keeps the row of an old node that splits *the same two sets* (negated if the two sides swapped):
in the cluster part the sets are sets of cluster ids (a cluster keeps its id whoever its
members), inside a cluster they are sets of words. Every other row starts from zero, as word2vec
starts the output layer. So unchanged clusters keep their whole subtree, and the cluster part
keeps every split the new Huffman tree over the clusters repeats (``trees.organizer.split_keys``
and ``remap_rows``, shared with the PyTorch layer).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

import numpy as np

from ..gpu.programs import ClusterStatistic
from ..kernels import loop
from ..options import Option, positive_number
from ..trees.base import Tree
from ..trees.clusters import cluster_tree, subtree_roots
from ..trees.organizer import (ORGANIZER_OPTIONS, SelfOrganizer, organizer_options, remap_rows,
                               split_keys)
from .diagnostics import HELDOUT_OPTIONS, ClusterDiagnostics
from .hs import CLIP, HS_ORDER, HierarchicalSoftmax
from ..hooks import Hook
from .reassign import ReassignHook

DEFAULT_SAMPLES_PER_WORD = 2.0
SAMPLES_PER_WORD = Option("samples_per_word", float, DEFAULT_SAMPLES_PER_WORD, "a word's "
                          "centres sampled per epoch for the cluster statistic",
                          check=positive_number)


def top_part(tree: Tree, cluster_of: np.ndarray, cluster_depth: np.ndarray
             ) -> Tuple[np.ndarray, np.ndarray]:
    """The cluster part of ``tree`` root first: ``top_row[i]`` the output row of the i-th node,
    ``top_child[i, b]`` the index of its b-child among them, or ``-(cluster + 1)`` where the
    child is a cluster's subtree (for a one-word cluster, the word's leaf)."""
    V = tree.n_words
    roots = subtree_roots(tree.parent, tree.lengths, cluster_depth.astype(np.int64))
    cluster_at = dict(zip(roots.tolist(), np.asarray(cluster_of).tolist()))
    if tree.root in cluster_at:  # a single cluster: no cluster part
        return np.zeros(0, np.int32), np.zeros((0, 2), np.int32)
    children = np.full((V - 1, 2), -1, np.int64)
    nodes = np.flatnonzero(tree.parent >= 0)
    children[tree.parent[nodes] - V, tree.branch[nodes]] = nodes
    order, top_child = [tree.root], []
    for node in order:  # breadth first: the list grows while it is walked
        row = []
        for child in children[node - V].tolist():
            if child in cluster_at:
                row.append(-(cluster_at[child] + 1))
            else:
                row.append(len(order))
                order.append(child)
        top_child.append(row)
    return np.array(order, np.int32) - V, np.array(top_child, np.int32)


class StatisticSwitch(Hook):
    """Turns the sampled statistic off (``layer.gathering``) at the first hook point past the
    share of the call that re-assigns (``reassign_until``): ``ReassignHook`` re-assigns no more
    from there, so what q would gather is read by nothing in this call. Runs at the same chunk
    boundaries as the re-assignment (the same K), so it adds no wait for quiescent weights."""

    def __init__(self, layer):
        self.layer = layer

    def on_train_begin(self, context) -> None:  # after ReassignHook's, which plans K
        self.every_words = self.layer.organizer.every

    def on_words(self, context) -> None:
        if context.progress > self.layer.organizer.reassign_until:
            self.layer.gathering = False


class SelfOrganizedHS(ClusterDiagnostics, HierarchicalSoftmax):
    body = loop.SO_HS
    devices = ("cpu", "cuda")  # the GPU: the sentence form, the statistic on the device
    OPTIONS = (HS_ORDER, CLIP, *ORGANIZER_OPTIONS, SAMPLES_PER_WORD, *HELDOUT_OPTIONS)

    def __init__(self, tree: Tree, cluster_depth: np.ndarray, order: str = "mixed",
                 organizer: SelfOrganizer = None, samples_per_word: float = DEFAULT_SAMPLES_PER_WORD,
                 clip: str = "skip"):
        super().__init__(tree, order, clip)
        SAMPLES_PER_WORD.validate(samples_per_word)
        self.organizer = organizer if organizer is not None else SelfOrganizer()
        self.samples_per_word = float(samples_per_word)
        self.sample_thr = np.zeros(tree.n_words, np.uint32)
        # whether this train() call will still re-assign: once it will not, the kernel samples
        # no centre for the statistic (``kernel_args``), which nothing in the call would read
        self.gathering = True
        self._no_samples = np.zeros(tree.n_words, np.uint32)
        self._keys = np.random.default_rng(self.organizer.seed)
        self._use_tree(tree, np.asarray(cluster_depth, np.int32))

    @classmethod
    def declared_options(cls):
        return cls.OPTIONS  # not HS's tree options: this layer makes its own tree

    @classmethod
    def create(cls, vocab, seed=1, hs_order="mixed", samples_per_word=DEFAULT_SAMPLES_PER_WORD,
               clip="skip", heldout=None, heldout_tokens=20_000, **options):
        organizer = SelfOrganizer(seed=seed, **organizer_options(options))
        vocab.need_two_words("hierarchical softmax")
        organizer.start(vocab.counts)
        tree, depth = cluster_tree(organizer.cluster_of, vocab.counts, organizer.n_clusters,
                                   kind="self-organized")
        layer = cls(tree, depth, hs_order, organizer, samples_per_word, clip)
        layer.set_heldout(vocab, heldout, heldout_tokens)
        return layer

    def _use_tree(self, tree: Tree, cluster_depth: np.ndarray) -> None:
        self.tree, self.cluster_depth = tree, cluster_depth
        self.top_row, self.top_child = top_part(tree, self.organizer.cluster_of, cluster_depth)

    def kernel_args(self):
        t, o = self.tree, self.organizer
        sample_thr = self.sample_thr if self.gathering else self._no_samples
        return (t.points, t.codes, t.lengths, o.q, o.lam, sample_thr, self.top_row,
                self.top_child)

    def gpu_program(self, backend):
        return None  # the batched form has no statistic

    def sentence_body(self):
        o = self.organizer
        body = super().sentence_body()
        return dataclasses.replace(body, statistic=ClusterStatistic(
            o.q, o.lam, self.sample_thr if self.gathering else self._no_samples, self.top_row,
            self.top_child))

    def row_updates(self, trained, counts):
        return None  # its tree re-organizes: rows are not combined across Dask workers

    def score_args(self, part: int = 0):
        t = self.tree
        return (t.points, t.codes, self.cluster_depth if part else t.lengths)

    # -- self-organization -----------------------------------------------------------------------
    def hooks(self):
        return [ReassignHook(self, self.organizer.reassign_every, self.heldout_chunks),
                StatisticSwitch(self)]

    def prepare(self, context) -> None:
        """Sampling rates and smoothing for this run's counts and down-sampling."""
        occurrences = np.maximum(np.asarray(context.counts, np.float64) * context.keep_prob, 1e-12)
        share = np.minimum(1.0, self.samples_per_word / occurrences)
        self.sample_thr[:] = np.minimum(np.round(share * 2.0 ** 32), 2.0 ** 32 - 1).astype(np.uint32)
        self.organizer.set_smoothing(context.counts, context.keep_prob, share,
                                        context.total_words / context.epochs)
        # no re-assignment in this call (K past its re-assigning share): no statistic either
        self.gathering = self.organizer.every <= int(self.organizer.reassign_until *
                                                     context.total_words)

    def reorganize(self, context) -> Dict[str, float]:
        o = self.organizer
        V = self.tree.n_words
        word_keys = self._keys.integers(1, 2 ** 63, size=V, dtype=np.uint64)
        cluster_keys = self._keys.integers(1, 2 ** 63, size=o.n_clusters, dtype=np.uint64)
        old_keys = split_keys(self.tree, o.cluster_of, self.cluster_depth, word_keys, cluster_keys)
        info = o.reassign(context.counts)
        tree, depth = cluster_tree(o.cluster_of, context.counts, o.n_clusters, kind="self-organized")
        new_keys = split_keys(tree, o.cluster_of, depth, word_keys, cluster_keys)
        self.weights[:], kept = remap_rows(old_keys, new_keys, self.weights)
        self._use_tree(tree, depth)
        # the hook's next call comes at the first chunk boundary past the next multiple of K; past
        # reassign_until it re-assigns no more (``ReassignHook.on_words``): stop sampling (what
        # q gathered after it would serve no re-assignment of this call; the statistic was a
        # quarter of the step's time)
        if o.every and context.total_words:  # (a call outside train() plans no run)
            following = (context.words_done // o.every + 1) * o.every
            self.gathering = following / context.total_words <= o.reassign_until
        context.layer_changed()
        info["rows_kept"] = kept / max(V - 1, 1)
        return info

    # -- state -------------------------------------------------------------------------------------
    def config(self):
        return {"order": self.order, "clip": self.clip, "samples_per_word": self.samples_per_word,
                "organizer": self.organizer.config()}

    @classmethod
    def from_state(cls, config, arrays):
        organizer = SelfOrganizer(**config["organizer"])
        organizer.load_arrays(arrays)
        layer = cls(Tree.from_arrays(arrays), arrays["cluster_depth"], config["order"], organizer,
                    config["samples_per_word"], config.get("clip", "skip"))
        layer.load_arrays(arrays)
        return layer

    def arrays(self):
        return {**super().arrays(), **self.organizer.arrays(), "sample_thr": self.sample_thr,
                "cluster_depth": self.cluster_depth}

    def load_arrays(self, arrays):
        super().load_arrays(arrays)
        self.organizer.load_arrays(arrays)
        self.sample_thr = np.ascontiguousarray(arrays["sample_thr"], np.uint32)

    def cluster_assignment(self) -> np.ndarray:
        return self.organizer.cluster_of

    def describe(self):
        return (f"hierarchical softmax over a self-organized tree ({self.organizer.n_clusters} "
                f"clusters re-assigned {self.organizer.describe_every()}, max depth "
                f"{self.tree.max_depth}, {self.order} order)")
