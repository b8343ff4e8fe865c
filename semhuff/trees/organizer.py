"""Self-organization (Shen et al. §3.3-3.5), one implementation for both trainers' clustered
output layers (the Numba trainer's ``layers/classes.py`` and ``layers/self_organized.py``, the
PyTorch ``lm/self_organizing.py``): the statistic q, its smoothing, the greedy re-assignment
every K words, the record of what each re-assignment did, and which output rows a re-built
binary tree keeps (``split_keys``, ``remap_rows``). When to re-assign is each trainer's own
(the Numba trainer's ``layers.reassign.ReassignHook``, the LM layer's ``after_step``); nothing
here imports either trainer, nor Numba until a re-assignment runs (``compiled.py``).

q(w, c) estimates g(w, c), the mean of log2 P(c | h) over the contexts h that precede w (eq. 8),
by exponential smoothing of the samples the forward pass gives (eq. 9):
``q <- lam(w) q + (1 - lam(w)) log2 P(c | h)``. The paper prints ``lam(w) = 1 / f_w`` (eq. 10),
which makes q of a word seen f times almost only its latest sample (the weight of everything
before is 1/f). Two readings are offered (``smoothing``):

* ``"printed"``: lam = 1 / f_w, as printed;
* ``"epoch"``: lam = 1 - 1 / m_w with m_w the number of samples w is expected to give in one
  epoch (its count x its down-sampling keep rate x the share of its centres sampled): q
  averages about the last epoch of samples; this reads eq. 10 as lam = 1 - 1/f_w, f_w counted
  in samples;
* ``"interval"``: the same with m_w the samples expected between two re-assignments (K
  words): q averages the samples taken under the current clusters, the E-step of the paper's
  EM view (§3.5) on the model of the last M-step.

q starts at log2(1/C) (no cluster preferred). Every K input words (a hook, on quiescent
weights) the words are re-assigned by the greedy Algorithm 1 (``clusters.greedy_assign``):
words in descending frequency take their best cluster that still has room (at most
gamma x sqrt(V) words, token share below the budget f_b).

Which q the greedy ranks by (``criterion``). q(w, c) = E[log2 P(c | h) | w] holds the prior of
cluster c as well as w's affinity to it: a cluster the model predicts often scores high for
every word. ``"log-prob"`` (default) ranks by q as the paper does (eq. 7: it minimises the
cluster perplexity); the first words in frequency order then take the most-predicted clusters.
``"lift"`` ranks by q(w, c) minus the token-weighted mean of q(., c) over all words: how much
more c is predicted around w than around words in general. On planted word classes lift
recovers the classes where log-prob leaves some mixed; on real text log-prob reaches the lower
cluster perplexity and moves fewer words (docs/self_organized.md has the measurements).

``reassign_every`` (K, input words): by default (None) chosen for each ``train()`` call from
its length, ``auto_reassign_every``: ``AUTO_REASSIGNMENTS`` re-assignments within the share of
the call that re-assigns (``reassign_until``), at most ``DEFAULT_REASSIGN_EVERY`` words apart
(the fixed default before, kept for long runs: the measurements in docs/self_organized.md
used it). A fixed K gave a short run on a small corpus no re-assignment at all.
Re-assignments run between chunks (100,000 tokens by default), so a K below a chunk's words
has that ``train()`` call's chunks cut to K/2 words (``ReassignHook.max_chunk_words``, at
least ``MIN_CHUNK_WORDS``): a small corpus (gensim's lee, 46k words an epoch: one chunk an epoch)
gets its ~10 re-assignments, not one at each epoch's end. Runs whose K is a chunk or more
(and every other layer's) keep the default chunks. A run whose settings allow none (an
explicit K longer than its re-assigning share) is warned about before it trains, not refused:
a K beyond the run is also how clusters are kept fixed.

``margin`` (bits, default 0 as in the paper): a word leaves its cluster only for one that ranks
higher by more than this. ``reassign_until`` (default 1/3; the paper: 1): re-assign only during
this share of each ``train()`` call, then keep the clusters, so that the rows the last
re-assignment reset can converge (measured in docs/self_organized.md: the binary form's
held-out perplexity 975 -> 932 on a 1M-token prefix).
"""
from __future__ import annotations

import logging
import math
from typing import Dict, Optional, Tuple

import numpy as np

from ..options import Option, at_least_one, check_settings, non_negative, positive_int, share
from .base import Tree
from .clusters import (CLUSTERS, check_clusters, cluster_capacity, greedy_assign,
                       initial_clusters, subtree_roots)

logger = logging.getLogger(__name__)

SMOOTHINGS = ("interval", "epoch", "printed")
CRITERIA = ("lift", "log-prob")
DEFAULT_REASSIGN_EVERY = 1_000_000  # the most words between automatic re-assignments
AUTO_REASSIGNMENTS = 10  # re-assignments an automatic K gives a run (fewer past 30M words)
# Re-assignments run between chunks, so a K below a chunk's words has the chunks cut to K
# (``Hook.max_chunk_words``), but not below this many input words: a chunk costs a hand-off
# to a worker thread and a sync of its private hot rows, small against the kernel's ~2 ms on
# 1,000 words, and the cut holds for the whole call, also after the clusters are frozen.
MIN_CHUNK_WORDS = 1_000

# The SelfOrganizer's settings, declared once (``semhuff.options``): both clustered layers take
# them, and the command line, Word2Vec's checks and --init-model read them from here.
ORGANIZER_OPTIONS = (
    CLUSTERS,
    Option("reassign_every", int, None,
           f"re-assign words to clusters every this many words (default: from the run's "
           f"length, {AUTO_REASSIGNMENTS} re-assignments while they are on, at most "
           f"{DEFAULT_REASSIGN_EVERY:,} words apart)", metavar="WORDS", check=positive_int),
    Option("reassign_until", float, 1 / 3, "re-assign only during this share of training, "
           "then freeze the clusters (the paper: 1)", metavar="SHARE", check=share,),
    Option("cluster_init", str, "random", "starting clusters: random (the paper) or frequency "
           "binning", choices=("random", "frequency")),
    Option("criterion", str, "log-prob", "what the re-assignment ranks clusters by (log-prob: "
           "the paper's)", choices=CRITERIA),
    Option("smoothing", str, "epoch", "how the cluster statistic averages its samples",
           choices=SMOOTHINGS),
    Option("margin", float, 0.0, "bits a cluster must beat a word's own by",
           check=non_negative),
    Option("gamma", float, 1.5, "at most gamma x sqrt(V) words a cluster",
           check=at_least_one),
    Option("freq_budget", float, 0.1, "token share a cluster may reach", check=share,),
)
HISTORY_FIELDS = ("words_done", "epoch", "changed_share", "changed_mass", "fallback",
                  "rows_kept", "seconds", "cluster_ppl", "in_cluster_ppl", "ppl",
                  "diagnose_seconds")


class SelfOrganizer:
    """The learned clustering of one layer. ``cluster_of`` is the current assignment; ``q`` and
    ``lam`` are handed to the kernels; ``history`` has one row per re-assignment."""

    def __init__(self, clusters: Optional[int] = None, reassign_every: Optional[int] = None,
                 cluster_init: str = "random", smoothing: str = "epoch", criterion: str = "log-prob",
                 margin: float = 0.0, reassign_until: float = 1 / 3, gamma: float = 1.5,
                 freq_budget: float = 0.1, seed: int = 1):
        given = dict(clusters=clusters, reassign_every=reassign_every, cluster_init=cluster_init,
                     smoothing=smoothing, criterion=criterion, margin=margin,
                     reassign_until=reassign_until, gamma=gamma, freq_budget=freq_budget)
        check_settings("self-organizing clusters", ORGANIZER_OPTIONS, given)  # the declarations
        self.clusters = clusters
        self.reassign_every = None if reassign_every is None else int(reassign_every)
        self.every = self.reassign_every  # K of the current (or last) train() call
        self.chunk_cap: Optional[int] = None  # its chunks' most input words (plan_run)
        self.cluster_init = cluster_init
        self.smoothing = smoothing
        self.criterion = criterion
        self.margin = float(margin)
        self.reassign_until = float(reassign_until)
        self.gamma = float(gamma)
        self.freq_budget = float(freq_budget)
        self.seed = int(seed)
        self.cluster_of: Optional[np.ndarray] = None
        self.q: Optional[np.ndarray] = None
        self.lam: Optional[np.ndarray] = None
        self.history = np.zeros((0, len(HISTORY_FIELDS)))

    @property
    def n_clusters(self) -> int:
        return int(self.clusters)

    def start(self, counts) -> None:
        """Initial clusters and a flat q for a fresh layer over words with these counts."""
        V = len(counts)
        self.clusters = check_clusters(self.clusters, V)  # None: the default, 0: an error
        self.cluster_of = initial_clusters(self.cluster_init, counts, self.clusters, self.seed)
        self.q = np.full((V, self.clusters), -math.log2(self.clusters), dtype=np.float32)
        self.lam = np.zeros(V, dtype=np.float32)

    def plan_run(self, total_words: int, chunk_words: int = 0) -> int:
        """K for a ``train()`` call of ``total_words`` input words (``reassign_every``, or
        the automatic one), and ``chunk_cap``: the input words a chunk may hold for
        re-assignments every K words (they run between chunks; None: any chunk will do). A
        warning when the settings allow no re-assignment: K, or the first chunk boundary
        (``chunk_words``: the default chunk's input words, cut to ``chunk_cap``), past the
        share of the run that re-assigns."""
        window = int(self.reassign_until * total_words)
        self.every = (auto_reassign_every(window) if self.reassign_every is None
                      else self.reassign_every)
        # A K that fires within the window gets chunks of at most K/2 words, so that a small
        # corpus, whose whole epoch may be one default chunk, re-assigns every K words too.
        # Half, not K: chunks end at sentence ends, so chunks of about K words put their
        # boundaries just before or just after the multiples of K by turns, and a re-assignment
        # came almost K late or was skipped (lee, 5 epochs: 7 of the 10, against 9 with K/2);
        # with K/2 each multiple has a boundary within K/2 after it.
        self.chunk_cap = (max(self.every // 2, MIN_CHUNK_WORDS) if self.every <= window
                          else None)
        if chunk_words and self.chunk_cap:
            chunk_words = min(chunk_words, self.chunk_cap)
        if self.every <= window < chunk_words:
            logger.warning(
                "the self-organized clusters will never be re-assigned: re-assignments run "
                "between chunks of about %s words, but stop after the first %s words "
                "(reassign_until %.0f%% of this run's %s); train more epochs or raise "
                "--reassign-until", f"{chunk_words:,}", f"{window:,}",
                100 * self.reassign_until, f"{total_words:,}")
        elif self.every > window:
            logger.warning(
                "the self-organized clusters will never be re-assigned: reassign_every is %s "
                "words, but re-assignment stops after the first %s words (reassign_until %.0f%% "
                "of this run's %s); lower --reassign-every (e.g. %s) or leave it out",
                f"{self.every:,}", f"{window:,}", 100 * self.reassign_until, f"{total_words:,}",
                f"{auto_reassign_every(window):,}")
        return self.every

    def describe_every(self) -> str:
        if self.reassign_every is not None:
            return f"every {self.reassign_every:,} words"
        last = f", last run every {self.every:,} words" if self.every else ""
        return f"every K words (K from the run's length{last})"

    def set_smoothing(self, counts, keep_prob, sampled_share, words_per_epoch: float) -> None:
        """lam per word for this training run (``sampled_share``: the share of a word's centres
        whose cluster distribution is evaluated: 1 for the two-level form)."""
        f = np.maximum(np.asarray(counts, np.float64), 1.0)
        if self.smoothing == "printed":
            lam = 1.0 / f
        else:
            samples = f * np.asarray(keep_prob, np.float64) * sampled_share
            if self.smoothing == "interval":
                every = self.every or DEFAULT_REASSIGN_EVERY
                samples *= min(1.0, every / max(words_per_epoch, 1.0))
            lam = 1.0 - 1.0 / np.maximum(samples, 1.0)
        self.lam[:] = lam.astype(np.float32)

    def reassign(self, counts) -> Dict[str, float]:
        """Algorithm 1 on the current q; returns what changed."""
        V, C = self.q.shape
        counts = np.asarray(counts, np.float64)
        ranking = self.q
        if self.criterion == "lift":
            ranking = self.q - (counts @ self.q / counts.sum()).astype(np.float32)
        if self.margin:  # a word leaves its cluster only for one better by more than the margin
            ranking = ranking.copy()
            ranking[np.arange(V), self.cluster_of] += np.float32(self.margin)
        new, fallback = greedy_assign(ranking, counts, C, cluster_capacity(V, C, self.gamma),
                                      self.freq_budget)
        changed = new != self.cluster_of
        info = {"changed_share": float(changed.mean()),
                "changed_mass": float(counts[changed].sum() / counts.sum()),
                "fallback": float(fallback)}
        self.cluster_of = new
        return info

    def record(self, row: Dict[str, float]) -> None:
        self.history = np.vstack([self.history, [row.get(k, np.nan) for k in HISTORY_FIELDS]])

    def history_dict(self) -> Dict[str, np.ndarray]:
        return {k: self.history[:, i] for i, k in enumerate(HISTORY_FIELDS)}

    # -- state -------------------------------------------------------------------------------
    def config(self) -> dict:
        return {"clusters": self.clusters, "reassign_every": self.reassign_every,
                "cluster_init": self.cluster_init, "smoothing": self.smoothing,
                "criterion": self.criterion, "margin": self.margin,
                "reassign_until": self.reassign_until,
                "gamma": self.gamma, "freq_budget": self.freq_budget, "seed": self.seed}

    def arrays(self) -> Dict[str, np.ndarray]:
        return {"cluster_of": self.cluster_of, "q": self.q, "lam": self.lam,
                "history": self.history}

    def load_arrays(self, arrays) -> None:
        self.cluster_of = np.ascontiguousarray(arrays["cluster_of"], np.int32)
        self.q = np.ascontiguousarray(arrays["q"], np.float32)
        self.lam = np.ascontiguousarray(arrays["lam"], np.float32)
        self.history = np.asarray(arrays["history"], np.float64).reshape(-1, len(HISTORY_FIELDS))


def auto_reassign_every(window_words: int) -> int:
    """The automatic K: ``AUTO_REASSIGNMENTS`` re-assignments within ``window_words``, at most
    ``DEFAULT_REASSIGN_EVERY`` apart (re-assignments happen at chunk boundaries: a K below a
    chunk's words has the run's chunks cut to K/2, down to ``MIN_CHUNK_WORDS``)."""
    return int(min(DEFAULT_REASSIGN_EVERY, max(1, window_words // AUTO_REASSIGNMENTS)))


def organizer_options(options: dict) -> dict:
    """The SelfOrganizer's settings among a layer's options (the rest is refused by the caller)."""
    return {o.name: options.pop(o.name) for o in ORGANIZER_OPTIONS if o.name in options}


# -- which rows a re-built tree keeps --------------------------------------------------------------
# A row of a binary tree is a classifier between the two sets of leaves under its node. After a
# re-assignment the tree is rebuilt (``clusters.cluster_tree``); a new node keeps the row of an
# old node that splits *the same two sets* (negated if the two sides swapped): in the cluster
# part the sets are sets of cluster ids (a cluster keeps its id whoever its members), inside a
# cluster they are sets of words. Every other row starts from zero, as word2vec starts the
# output layer. A set is named by the sum of random 64-bit keys of its members.

def split_keys(tree: Tree, cluster_of: np.ndarray, cluster_depth: np.ndarray,
               word_keys: np.ndarray, cluster_keys: np.ndarray) -> np.ndarray:
    """(n_inner, 2): random-key sums of the two leaf sets under every inner node of a tree from
    ``cluster_tree``: sets of clusters in the cluster part, sets of words inside the clusters."""
    from .compiled import _split_keys
    V = tree.n_words
    roots = subtree_roots(tree.parent, tree.lengths, cluster_depth.astype(np.int64))
    root_key = np.zeros(2 * V - 1, np.uint64)
    root_key[roots] = cluster_keys[cluster_of]
    n_top = np.unique(cluster_of).size - 1
    return _split_keys(tree.parent, tree.branch, V, word_keys, root_key, n_top)


def _pair_hash(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # One 64-bit number per ordered pair of (random 63-bit) set keys; uint64 arithmetic wraps.
    return a * np.uint64(0x9E3779B97F4A7C15) + b * np.uint64(0xC2B2AE3D27D4EB4F)


def remap_rows(old_keys: np.ndarray, new_keys: np.ndarray, weights: np.ndarray) -> Tuple[np.ndarray, int]:
    """New output rows: a node that splits the same two leaf sets as an old one keeps its row
    (negated when the sides swapped), the others start at zero. Returns (rows, kept)."""
    old = _pair_hash(old_keys[:, 0], old_keys[:, 1])
    order = np.argsort(old)
    old_sorted = old[order]
    out = np.zeros_like(weights)
    taken = np.zeros(len(new_keys), dtype=bool)
    for sign, a, b in ((1.0, 0, 1), (-1.0, 1, 0)):  # the same sides first, then swapped
        new = _pair_hash(new_keys[:, a], new_keys[:, b])
        at = np.minimum(np.searchsorted(old_sorted, new), len(old_sorted) - 1)
        hit = (old_sorted[at] == new) & ~taken
        out[hit] = weights[order[at[hit]]] * np.float32(sign)
        taken |= hit
    return out, int(taken.sum())
