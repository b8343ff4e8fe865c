"""The two-level softmax with its in-cluster part a small tree (issue 45): a flat softmax over
about sqrt(V) clusters, then a tree over the words of the cluster, so that a token reads its
cluster's ~log2(cluster size) rows where the two-level layers read the whole cluster (~2 sqrt V
rows).

The clusters (``cluster_by``): ``tree``, the ``tree`` builder's tree cut at its top into its
``clusters`` heaviest subtrees (``head_tree.head_structure``: a SemHuff tree's top subtrees are
clusters of similar words, each with its SemHuff subtree inside); or ``frequency`` (Mikolov et
al.'s bins) / ``random``, with a Huffman tree inside each cluster (``trees.clusters.
cluster_tree``). ``head`` words (the most frequent, default 2% of V, as ``head-tree``'s; 0:
none) get entries of their own. The default since the text8 measurement (issue 45, docs/lm.md):
with the bootstrapped SemHuff tree, 2% of V as the head gave held-out perplexity 167.00 over
three seeds against the adaptive softmax's 169.90, where no head gave 172.26. It is
``HeadTreeSoftmax`` with other defaults and these clusterings.
"""
from __future__ import annotations

import numpy as np

from ...errors import OptionError
from ...options import Option
from ...trees.clusters import CLUSTERS, check_clusters, cluster_tree, word_clusters
from ...trees.spec import SIMILARITY, TREE
from .base import LOSS_OPTIONS, SPARSE
from .head_tree import (HEAD, TAIL_DIM, TOP_BIAS, HeadTreeSoftmax, head_and_tail, head_size,
                        head_structure, own_settings)
from .tree import tree_for

CLUSTER_BY = Option("cluster_by", str, "tree", "the clusters of class-tree: the tree's top "
                    "subtrees (--tree, --similarity), frequency bins (Mikolov et al. 2011) or "
                    "random, a Huffman tree inside each", choices=("tree", "frequency", "random"))


class ClassTreeSoftmax(HeadTreeSoftmax):
    """A flat softmax over ``clusters`` clusters (and ``head`` words), a tree inside each."""

    OPTIONS = LOSS_OPTIONS + (CLUSTERS, CLUSTER_BY, HEAD, TREE, SIMILARITY, TOP_BIAS, TAIL_DIM,
                              SPARSE)

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, clusters=None,
                   cluster_by="tree", head=None, tree=None, similarity=None, **settings):
        own = own_settings(settings)
        counts = np.asarray(vocab.counts, np.int64)
        k = head_size(counts, head, None)  # None: 2% of V
        n = check_clusters(clusters, counts.size - k)
        if cluster_by == "tree":
            structure = head_structure(tree_for(tree, vocab, similarity, seed, settings),
                                       counts, k, n)
        else:
            given = sorted(name for name, value in dict(settings, tree=tree,
                                                        similarity=similarity).items()
                           if value is not None)
            if given:
                raise OptionError(f"{', '.join(given)}: the clusters' tree options; the "
                                  f"{cluster_by} clusters have a Huffman tree inside each")
            structure = clustered_structure(counts, k, n, cluster_by, seed)
        layer = cls(in_features, *structure, counts=counts, head_words=k, device=device,
                    dtype=dtype, **own)
        layer.cluster_by = cluster_by
        return layer

    cluster_by = "tree"  # a layer made from a structure: its clusters are its tree's subtrees

    @classmethod
    def settings_for_state(cls, settings, state):
        """``HeadTreeSoftmax``'s (the saved tree replaces the builder's), and the saved head
        and entries: a model saved while the default head was none (before issue 45's text8
        runs) loads as it was trained."""
        settings = super().settings_for_state(settings, state)
        extra, top = state.get("_extra_state"), state.get("top.weight")
        if isinstance(extra, dict) and "head_words" in extra and top is not None:
            head = int(extra["head_words"])
            settings = dict(settings, head=head, clusters=int(top.shape[0]) - head)
        return settings

    @staticmethod
    def retree_refusal(settings) -> str:
        """Why these settings cannot re-build the tree ("" if they can): ``retree`` re-cuts
        the new tree's top subtrees, which frequency or random clusters are not."""
        by = settings.get("cluster_by", "tree")
        return "" if by == "tree" else (f"re-cuts the new tree's top subtrees into clusters; "
                                        f"--cluster-by {by} has no tree to re-build")

    def retree(self, tree, counts, optimizer=None):
        why = self.retree_refusal({"cluster_by": self.cluster_by})
        if why:
            raise OptionError(f"retree {why}")
        super().retree(tree, counts, optimizer)


def clustered_structure(counts, head: int, n_clusters: int, clustering: str, seed: int):
    """``structure_from_clusters`` over ``word_clusters``' clusters of the tail (frequency bins
    or random)."""
    tails = head_and_tail(counts, head)[1]
    local, n = word_clusters(clustering, counts[tails], n_clusters, seed)
    return structure_from_clusters(counts, head, local, n, f"{clustering} clusters")


def structure_from_clusters(counts, head: int, tail_cluster, n_clusters: int, kind: str):
    """(tree, entry, cut): the ``head`` most frequent words an entry each (0..head-1), each
    other word (in id order) in cluster ``tail_cluster[i]`` of ``n_clusters`` (entries head..;
    a cluster may be empty), a Huffman tree over each cluster's words below its entry."""
    heads, tails = head_and_tail(counts, head)
    cluster_of = np.empty(len(counts), np.int64)
    cluster_of[heads] = np.arange(head)
    cluster_of[tails] = head + np.asarray(tail_cluster, np.int64)
    tree, depth = cluster_tree(cluster_of, counts, head + n_clusters, kind=kind)
    return tree, cluster_of, depth.astype(np.int64)
