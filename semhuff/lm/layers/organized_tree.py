"""A flat head of the most frequent words and self-organized clusters of the others, a Huffman
tree inside each cluster (issue 45): ``head-tree``'s layout, with the tail's clusters learned
while the language model trains, as in Shen et al.'s self-organized HSM.

The top scores every cluster for every token anyway (a softmax over the head's words and the
clusters), so the paper's statistic costs nothing extra here: for each tail token w with
context h, log2 P(c | h) over the clusters c (the top's log-softmax over the cluster entries;
the head's entries left out, which shifts every cluster alike). ``q(w, c)`` is its mean over
w's tokens since the last re-assignment (a word not seen since keeps its former q); every
``reassign_every`` optimizer steps Algorithm 1 (``trees.organizer.SelfOrganizer.reassign``:
the greedy assignment under gamma sqrt(M) words and ``freq_budget`` of the tokens a cluster)
moves words to the clusters that predict them best, and each cluster's Huffman tree is built
anew (``class_tree.structure_from_clusters``). A cluster's top row stays with the cluster id
(as the two-level form's cluster vectors); the tree rows start again at zero (``new_rows``, the
binary form's measured best once the clusters stop moving: docs/lm.md) or carried over word by
word (``tree.carried_rows``), Adagrad's sums of the rows restarted. ``freeze_after``: no
re-assignment after that many steps. Under DDP the statistic's sums are added over the ranks
first (``reduce_statistic``), so every rank re-assigns alike.
"""
from __future__ import annotations

import logging
import time
from typing import Optional

import numpy as np
import torch

from ...options import Option, positive_int
from ...trees.clusters import check_clusters
from ...trees.organizer import SelfOrganizer
from ..kernels.precision import LOW_PRECISION, accumulate_dtype
from .base import LOSS_OPTIONS, SPARSE
from .class_tree import structure_from_clusters
from .head_tree import COVERAGE, HEAD, TOP_BIAS, HeadTreeSoftmax, head_and_tail, head_size
from .self_organized import LOG2E, ORGANIZED_OPTIONS, SelfOrganizedSoftmax
from .tree import carried_rows
from .vocabulary import require_frequency_order

logger = logging.getLogger(__name__)

_ORGANIZED = {o.name: o for o in ORGANIZED_OPTIONS}
NEW_ROWS = Option("new_rows", str, "zero", "the tree rows after a re-assignment: zero, or "
                  "carried over from the old rows", choices=("zero", "carried"))


class OrganizedTreeSoftmax(HeadTreeSoftmax):
    """``head`` words and ``clusters`` self-organized clusters in a flat top, a Huffman tree
    in each cluster."""

    OPTIONS = LOSS_OPTIONS + (HEAD, COVERAGE, TOP_BIAS, SPARSE, NEW_ROWS) + tuple(
        _ORGANIZED[name] for name in ("clusters", "reassign_every", "freeze_after", "gamma",
                                      "freq_budget", "cluster_init", "criterion", "margin"))

    @classmethod
    def declared_options(cls):
        return cls.OPTIONS

    @classmethod
    def settings_for_state(cls, settings, state):
        return settings

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, head=None,
                   coverage=None, clusters=None, **settings):
        require_frequency_order(vocab, "a self-organizing layer")
        counts = np.asarray(vocab.counts, np.int64)
        k = head_size(counts, head, coverage)
        return cls(in_features, counts, k, check_clusters(clusters, counts.size - k), seed=seed,
                   device=device, dtype=dtype, **settings)

    def __init__(self, in_features: int, counts, head_words: int, n_clusters: int,
                 reassign_every: int = 1000, freeze_after: Optional[int] = None,
                 new_rows: str = "zero", gamma: float = 1.5, freq_budget: float = 0.1,
                 cluster_init: str = "random", criterion: str = "log-prob", margin: float = 0.0,
                 seed: int = 1, head_bias: bool = False, sparse: bool = False, device=None,
                 dtype=None, ignore_index: int = -100, reduction: str = "mean"):
        counts = np.asarray(counts, np.int64)
        tails = head_and_tail(counts, head_words)[1]
        organizer = SelfOrganizer(clusters=n_clusters, reassign_every=reassign_every,
                                  cluster_init=cluster_init, criterion=criterion, margin=margin,
                                  reassign_until=1.0, gamma=gamma, freq_budget=freq_budget,
                                  seed=seed)  # checks the settings
        organizer.start(counts[tails])
        structure = structure_from_clusters(counts, head_words, organizer.cluster_of,
                                            n_clusters, "self-organized clusters")
        super().__init__(in_features, *structure, counts=counts, head_words=head_words,
                         n_entries=head_words + n_clusters, head_bias=head_bias, sparse=sparse,
                         device=device, dtype=dtype, ignore_index=ignore_index,
                         reduction=reduction)
        self.organizer = organizer
        self.new_rows, self.freeze_after = new_rows, freeze_after
        M = tails.size
        local = np.full(counts.size, M, np.int64)  # a tail word's place among the tail's, M: head
        local[tails] = np.arange(M)
        self.register_buffer("local", torch.as_tensor(local, device=device))
        self.register_buffer("q_sum", torch.zeros(M + 1, n_clusters, device=device))
        self.register_buffer("q_tokens", torch.zeros(M + 1, device=device))
        # the organizer's state, saved with the layer (plain tensors: weights_only loads them)
        self.register_buffer("q", torch.as_tensor(organizer.q, device=device))
        self.register_buffer("tail_cluster", torch.as_tensor(
            organizer.cluster_of.astype(np.int64), device=device))
        self.steps = self.reassignments = 0

    # under DDP every rank re-assigns on the whole batch's statistic (``reduce_statistic``:
    # the sums added over the ranks), so that the ranks keep one structure
    reduce_across_ranks = True
    reduce_statistic = SelfOrganizedSoftmax.reduce_statistic

    def statistic_tensors(self) -> dict:
        return {"mean": [], "sum": [self.q_sum, self.q_tokens]}

    # its structure is the organizer's clusters: no tree from elsewhere replaces it
    # (semhuff-lm --retree-every refuses this layer: registry.layers_with("retree"))
    retree = None

    def _apply(self, fn, *args, **kwargs):
        # .half() / .bfloat16() cast the weights, not the statistic (sums over thousands of
        # tokens: bfloat16 counts stop at 256), as the self-organized layers'
        super()._apply(fn, *args, **kwargs)
        for name in ("q", "q_sum", "q_tokens"):
            if getattr(self, name).dtype in LOW_PRECISION:
                setattr(self, name, getattr(self, name).float())
        return self

    @property
    def n_clusters(self) -> int:
        return self.organizer.n_clusters

    @property
    def learning(self) -> bool:
        return self.training and (self.freeze_after is None or self.steps < self.freeze_after)

    def target_log_prob(self, h, target, keep=None):
        raw = self.top(h)
        raw = raw.to(accumulate_dtype(raw.dtype))
        logits = self._mask_empty(raw)
        entry = self.entry[target]
        output = -torch.nn.functional.cross_entropy(logits, entry, reduction="none") \
            + self.path_log_prob(h, target)
        if self.learning:
            with torch.no_grad():  # the statistic: log2 P(c | h) of the tail's tokens, every
                # cluster scored (an empty one too, as the two-level form's: it can win words)
                x = torch.log_softmax(raw.detach()[:, self.head_words:], dim=1) * LOG2E
                word = self.local[target]
                if keep is not None:
                    word = torch.where(keep, word, self.q_tokens.shape[0] - 1)
                self.q_sum.index_add_(0, word, x.to(self.q_sum.dtype))
                self.q_tokens.index_add_(0, word, torch.ones_like(word, dtype=self.q_sum.dtype))
        return output

    def after_step(self, optimizer=None):
        """Count a training step; every ``reassign_every`` steps (up to ``freeze_after``)
        re-assign and return what happened, else None."""
        if not self.training:
            return None
        self.steps += 1
        if (self.freeze_after is not None and self.steps > self.freeze_after) \
                or self.steps % self.organizer.reassign_every:
            return None
        return self.reassign(optimizer)

    @torch.no_grad()
    def reassign(self, optimizer=None) -> dict:
        """Algorithm 1 on the statistic gathered since the last re-assignment."""
        from ..kernels.optimizer_state import remap_optimizer_state
        started = time.perf_counter()
        if self.reduce_across_ranks:
            self.reduce_statistic()
        seen = (self.q_tokens[:-1] > 0).cpu().numpy()
        mean = (self.q_sum[:-1] / self.q_tokens[:-1].clamp_min(1).unsqueeze(1)).cpu().numpy()
        o = self.organizer
        # the clusters and q as the buffers hold them (written from outside too: a loader that
        # sets buffers without load_state_dict, e.g. Hugging Face's)
        o.cluster_of = self.tail_cluster.cpu().numpy().astype(np.int32)
        o.q = self.q.cpu().numpy().astype(np.float32)
        o.q[seen] = mean[seen].astype(np.float32)
        counts = self.counts.cpu().numpy()
        tails = head_and_tail(counts, self.head_words)[1]
        info = o.reassign(counts[tails])
        new = structure_from_clusters(counts, self.head_words, o.cluster_of, o.n_clusters,
                                      "self-organized clusters")
        weight = self.weight
        rows = carried_rows(self.tree, new[0], weight, self.counts) \
            if self.new_rows == "carried" else torch.zeros_like(weight)
        weight.copy_(rows.to(weight.dtype))
        weight.grad = None
        remap_optimizer_state(optimizer, weight,
                              torch.full((weight.shape[0],), -1, dtype=torch.long),
                              torch.ones(weight.shape[0]))
        self.set_structure(*new)
        self.q.copy_(torch.as_tensor(o.q))
        self.tail_cluster.copy_(torch.as_tensor(o.cluster_of.astype(np.int64)))
        self.q_sum.zero_()
        self.q_tokens.zero_()
        self.reassignments += 1
        info.update(step=self.steps, seconds=time.perf_counter() - started,
                    words_seen=float(seen.mean()))
        logger.info("step %d: re-assigned the tail's clusters, %.1f%% of its words (%.1f%% of "
                    "its tokens) moved", self.steps, 100 * info["changed_share"],
                    100 * info["changed_mass"])
        return info

    # -- state ------------------------------------------------------------------------------------
    def get_extra_state(self):
        return {**super().get_extra_state(), "steps": self.steps,
                "reassignments": self.reassignments}

    def set_extra_state(self, state):
        super().set_extra_state(state)
        self.steps, self.reassignments = int(state["steps"]), int(state["reassignments"])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.organizer.q = self.q.cpu().numpy().astype(np.float32)
        self.organizer.cluster_of = self.tail_cluster.cpu().numpy().astype(np.int32)

    def describe(self) -> str:
        frozen = f", frozen after {self.freeze_after:,} steps" if self.freeze_after else ""
        return (f"{super().describe()}; the {self.n_clusters} clusters re-learned every "
                f"{self.organizer.reassign_every:,} steps{frozen}")


__all__ = ["OrganizedTreeSoftmax"]
