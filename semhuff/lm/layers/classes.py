"""The two-level (class-based) softmax as a PyTorch output layer: Shen et al. eqs. 1-4, the
class-based softmax of Mikolov et al. (2011):

    P(w | h) = P(c(w) | h) P(w | c(w), h),

a softmax over the C cluster vectors, then one over the word vectors of w's cluster.

The paper's ReLU projections (eq. 1: h_c = ReLU(W_c h), h_w = ReLU(W_w h)) are an option,
``projection``, off by default. Why: this layer is meant as a drop-in replacement for the full
and the adaptive softmax, which have none, so that comparing output layers compares the
factorisation and not an extra 2 D^2 weights and a non-linearity; and at D = 512 the two
projections cost 2 D^2 = 0.52M multiply-adds a token, against ~2 sqrt(V) D = 0.23M for the two
softmaxes at V = 50k: they would triple the layer's arithmetic. ``projection=True``
reproduces the paper's layer.

The within-cluster softmax, log P(w | c(w), h), is ``kernels/clusters.py``'s
(``in_cluster_log_prob``: the torch loop over the clusters present in the batch, the Numba
kernels on the CPU, the Triton kernels on CUDA with a dense word gradient).

Cluster vectors belong to cluster ids and word vectors to words: a change of clusters
(``set_clusters``, the self-organizing layer) moves no weight, only membership.

Precision: log-softmaxes in float32 for half-precision weights or under autocast
(``accumulate_dtype``); the in-cluster products run in the word weight's dtype with autocast
off.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import OptionError
from ...options import Option, boolean
from ...trees.clusters import CLUSTERS, cluster_members, word_clusters
from ..kernels.cluster_search import cluster_sample, cluster_topk, member_table
from ..kernels.clusters import in_cluster_log_prob
from ..kernels.paths import Workspace
from ..kernels.precision import accumulate_dtype
from .base import LOSS_OPTIONS, SPARSE, LMOutputLayer, SparseRows, check_sizes, rename_in_state_dict


class ClassSoftmax(LMOutputLayer):
    """Two-level softmax over the clusters ``cluster_of`` (word id -> cluster id in
    0..n_clusters-1; ``n_clusters`` defaults to ``max + 1``). ``sparse``: the word vectors'
    gradient is sparse (the rows of the clusters in the batch). ``ignore_index``,
    ``reduction``: as ``torch.nn.CrossEntropyLoss``'s (``base.py``)."""

    # the registry's declarations (registry.py): what make_output_layer and semhuff-lm take
    OPTIONS = LOSS_OPTIONS + (
        CLUSTERS,
        Option("clustering", str, "frequency", "the clusters: frequency binning (Mikolov et al. "
               "2011) or random", choices=("frequency", "random")),
        Option("projection", boolean, False, "a ReLU projection of the input per cluster (the "
               "self-organized HSM paper's eq. 1)"),
        SPARSE)

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, clusters=None,
                   clustering="frequency", **settings):
        cluster_of, n = word_clusters(clustering, vocab.counts, clusters, seed)  # any id order
        return cls(in_features, cluster_of, n_clusters=n, device=device, dtype=dtype, **settings)

    def __init__(self, in_features: int, cluster_of, n_clusters: Optional[int] = None,
                 projection: bool = False, sparse: bool = False, device=None, dtype=None,
                 ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        self.set_loss(ignore_index, reduction)
        cluster_of = np.asarray(cluster_of)
        if cluster_of.ndim != 1 or cluster_of.size < 2:
            raise OptionError("cluster_of must list the cluster of every word (2 words or more)")
        self.in_features, self.n_classes = check_sizes(in_features, int(cluster_of.size))
        C = int(cluster_of.max()) + 1 if n_clusters is None else n_clusters
        if isinstance(C, bool) or not isinstance(C, (int, np.integer)) \
                or not 1 <= C <= self.n_classes:
            raise OptionError(f"n_clusters must be in 1..{self.n_classes}, got {n_clusters!r}")
        self.n_clusters = int(C)
        self.projection = bool(projection)
        self.sparse = bool(sparse)
        kw = dict(device=device, dtype=dtype)
        self.cluster_weight = nn.Parameter(torch.empty(self.n_clusters, self.in_features, **kw))
        # held by an nn.Embedding so that DDP takes its sparse gradient (``SparseRows``)
        self.words = SparseRows(torch.empty(self.n_classes, self.in_features, **kw), self.sparse)
        rename_in_state_dict(self, "words.weight", "word_weight")
        if self.projection:
            self.cluster_projection = nn.Linear(self.in_features, self.in_features, **kw)
            self.word_projection = nn.Linear(self.in_features, self.in_features, **kw)
        self.reset_parameters()
        self.register_buffer("cluster_of", torch.zeros(self.n_classes, dtype=torch.int64,
                                                       device=device))
        self._workspace = Workspace()
        self.set_clusters(cluster_of)

    def reset_parameters(self) -> None:
        # as nn.Linear's default: uniform in +-1/sqrt(D)
        bound = 1.0 / math.sqrt(self.in_features)
        nn.init.uniform_(self.cluster_weight, -bound, bound)
        nn.init.uniform_(self.word_weight, -bound, bound)

    @property
    def word_weight(self) -> nn.Parameter:
        """(V, D): the word vectors."""
        return self.words.weight

    # -- the clusters ------------------------------------------------------------------------------
    def set_clusters(self, cluster_of) -> None:
        cluster_of = np.asarray(cluster_of, np.int64)
        if cluster_of.shape != (self.n_classes,) or cluster_of.min() < 0 \
                or cluster_of.max() >= self.n_clusters:
            raise OptionError(f"cluster_of must give each of the {self.n_classes:,} words a "
                              f"cluster in 0..{self.n_clusters - 1}")
        self.cluster_of.copy_(torch.as_tensor(cluster_of))
        self._derive()

    def _derive(self) -> None:
        cluster_of = self.cluster_of.cpu().numpy()
        members, starts = cluster_members(cluster_of, self.n_clusters)
        slot = np.empty(self.n_classes, np.int64)  # a word's place among its cluster's members
        slot[members] = np.arange(self.n_classes) - starts[cluster_of[members]]
        device = self.cluster_of.device
        self.register_buffer("members", torch.as_tensor(members.astype(np.int64), device=device),
                             persistent=False)
        self.register_buffer("slot", torch.as_tensor(slot, device=device), persistent=False)
        self.register_buffer("empty", torch.as_tensor(np.diff(starts) == 0, device=device),
                             persistent=False)
        self.register_buffer("member_starts", torch.as_tensor(starts, device=device),
                             persistent=False)  # the Triton kernels' (kernels/clusters_triton.py)
        self.starts = starts.tolist()  # Python ints: the per-cluster loop slices with them
        self._table = (None, None)  # generation's padded member table, made when first needed
        self._clusters_key = self._structure_key()

    def _structure_key(self):
        return (self.cluster_of._version, self.cluster_of.data_ptr())

    def _sync(self) -> None:
        """Re-derive the members when ``cluster_of`` was written from outside (an EMA's or any
        other buffer copy, e.g. ``torch.optim.swa_utils.AveragedModel``'s); not while
        compiling."""
        if not torch.compiler.is_compiling() and self._clusters_key != self._structure_key():
            self._derive()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "cluster_of" in state_dict:
            self._derive()

    # -- probabilities -----------------------------------------------------------------------------
    def _project(self, h) -> Tuple[torch.Tensor, torch.Tensor]:
        if not self.projection:
            return h, h
        return F.relu(self.cluster_projection(h)), F.relu(self.word_projection(h))

    def cluster_log_softmax(self, logits: torch.Tensor) -> torch.Tensor:
        """log P(c | h) from the cluster logits. A cluster without words (possible after a
        re-assignment, or in a given clustering) gets none of the mass: its logit is masked,
        so that the words' probabilities sum to 1."""
        logits = logits.to(accumulate_dtype(logits.dtype))
        return torch.log_softmax(logits.masked_fill(self.empty, -math.inf), dim=1)

    def cluster_log_prob(self, h, target):
        self._sync()
        return self._cluster_part(self._project(h)[0], target)[1]

    def _cluster_part(self, hc, target) -> Tuple[torch.Tensor, torch.Tensor]:
        """(the cluster logits (N, C), log P(c(w) | h) (N,))."""
        logits = hc @ self.cluster_weight.t()
        clusters = self.cluster_log_softmax(logits)
        return logits, clusters.gather(1, self.cluster_of[target].unsqueeze(1)).squeeze(1)

    def parts(self, h, target) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the cluster logits (N, C), log P(c(w) | h) (N,), log P(w | c(w), h) (N,))."""
        hc, hw = self._project(h)
        logits, own = self._cluster_part(hc, target)
        within = in_cluster_log_prob(hw, self.word_weight, target, self, self.sparse)
        return logits, own, within

    def target_log_prob(self, h, target, keep=None):
        self._sync()
        _, own, within = self.parts(h, target)
        return own + within

    def full_log_prob(self, h):
        self._sync()
        hc, hw = self._project(h)
        clusters = self.cluster_log_softmax(hc @ self.cluster_weight.t())
        logits = hw @ self.word_weight.t()
        logits = logits.to(accumulate_dtype(logits.dtype))
        return clusters[:, self.cluster_of] + segment_log_softmax(logits, self.cluster_of,
                                                                  self.n_clusters)

    # -- generation (kernels/cluster_search.py) ------------------------------------------------
    def _generation_parts(self, h):
        """(log P(c | h) (N, C), the words' input (N, D), the padded member table)."""
        self._sync()
        key = ("members", self.cluster_of.device)
        if self._table[0] != key:
            self._table = (key, member_table(self.cluster_of.cpu().numpy(), self.n_clusters,
                                             self.cluster_of.device))
        with torch.autocast(h.device.type, enabled=False):
            hc, hw = self._project(h.to(self.word_weight.dtype))
            return self.cluster_log_softmax(hc @ self.cluster_weight.t()), hw, self._table[1]

    def search_topk(self, h, k):
        clusters, hw, table = self._generation_parts(h)
        m = 2 + (k - 1) // max(table.shape[1] // 2, 1)  # k words fit in m clusters of half size
        return cluster_topk(clusters, hw, self.word_weight.detach(), table, k, m)

    def walk_sample(self, h, generator=None):
        clusters, hw, table = self._generation_parts(h)
        return cluster_sample(clusters, hw, self.word_weight.detach(), table, generator)

    def words_log_prob(self, h, words):
        return self.target_log_prob(h, words)

    def sparse_parameters(self) -> list:
        return [self.word_weight] if self.sparse else []

    def describe(self) -> str:
        sizes = np.bincount(self.cluster_of.cpu().numpy(), minlength=self.n_clusters)
        return (f"two-level class softmax over {self.n_classes:,} words in {self.n_clusters} "
                f"clusters (size {sizes.min()}-{sizes.max()}"
                f"{', ReLU projections' if self.projection else ''}; "
                f"{'sparse' if self.sparse else 'dense'} word gradient, {self.in_features} inputs)")


def segment_log_softmax(logits: torch.Tensor, segment: torch.Tensor,
                        n_segments: int) -> torch.Tensor:
    """log_softmax of each row of ``logits`` (N, V) within the column groups ``segment`` (V,)."""
    index = segment.unsqueeze(0).expand_as(logits)
    top = logits.new_full((logits.shape[0], n_segments), -math.inf)
    top = top.scatter_reduce(1, index, logits, reduce="amax").detach()
    top = torch.where(torch.isfinite(top), top, 0)  # empty clusters
    shifted = logits - top.gather(1, index)
    total = shifted.new_zeros(top.shape).scatter_add(1, index, shifted.exp())
    return shifted - total.log().gather(1, index)
