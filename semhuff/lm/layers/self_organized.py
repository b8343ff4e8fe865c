"""The self-organized hierarchical softmax of Shen et al. as a PyTorch output layer: the word
clusters are re-learned while the language model trains.

One implementation of the method serves the Numba trainer and this layer:
``semhuff.trees.organizer.SelfOrganizer`` holds the clusters and runs Algorithm 1
(``greedy_assign``) on the statistic q; ``semhuff.trees.clusters.cluster_tree`` is the binary
form; ``semhuff.trees.organizer.split_keys`` / ``remap_rows`` say which rows survive a
re-assignment. What is here is the PyTorch side:

* the statistic (eqs. 8-10), ``q(w, c) <- lam(w) q(w, c) + (1 - lam(w)) log2 P(c | h)`` for
  every token w of a training batch with its context h, kept as a (V, C) tensor on the layer's
  device and updated by scatter operations (no loop over words). Tokens of one batch are taken
  in batch order: k occurrences of w give ``lam^k q + (1 - lam) sum_i lam^(k-1-i) x_i``,
  exactly the sequential update. q is copied into the organizer's numpy array at each
  re-assignment (a V x C copy every K batches costs less than a host round trip per batch);
* ``lam``: the organizer's readings of eq. 10 (``smoothing``), with an LM's units: no
  down-sampling, one sample per token (two-level form) or per sampled row (binary form),
  and "interval" counted in batches;
* the trigger: ``after_step(optimizer)`` counts optimizer steps and every ``reassign_every``
  re-assigns, returns the diagnostics (cluster and in-cluster perplexity of the training
  batches since the last re-assignment, share of words and of token mass that moved), and in
  the binary form moves the weight's rows and the optimizer's state for them
  (``kernels/optimizer_state.py``). ``freeze_after``: no re-assignment after that many steps (None: the
  paper's, never frozen).

Forms. ``"two-level"``: the paper's softmax over clusters, then over the words of the
cluster (``ClassSoftmax``); a re-assignment moves no weight (cluster vectors belong to
cluster ids, word vectors to words), only membership. ``"binary"``: the clusters as a binary
tree (a Huffman tree over the clusters by token mass, one inside each cluster) trained as tree
softmax (``TreeSoftmax``), at about Huffman's cost; P(c | h) for all clusters needs the
C - 1 nodes of the tree's cluster part, evaluated on ``statistic_rows`` rows of each batch
(all rows when None): those nodes scored at once, then one sparse product sums each cluster's
path (``paths.path_matrix``; the Numba kernel walks ``top_part`` node by node for the same
numbers). Measured at V = 50k, 2,560 tokens a batch, 512 rows: the layer, statistic and
diagnostics included, takes 1-5 ms a batch more than the Huffman tree softmax
(eval/bench/lm_layers.py).

In a training loop: the statistic is updated under ``torch.no_grad`` from detached values
(it holds no autograd history, so memory stays flat) and without reading anything back to the
host; targets equal to ``ignore_index`` add nothing to it. Under DDP (or any data-parallel
run with ``torch.distributed`` initialised) ``reassign`` first makes the statistic the same on
every rank (``reduce_statistic``: q averaged, the diagnostics' sums added), so that every rank
re-assigns identically; set ``reduce_across_ranks = False`` to turn that off. Wrap with
``DistributedDataParallel(..., broadcast_buffers=False)``: broadcasting buffers each forward
would replace every rank's statistic by rank 0's.
"""
from __future__ import annotations

import logging
import math
import time
import warnings
from typing import Optional

import numpy as np
import torch

from ...errors import OptionError
from ...options import Option, boolean, positive_int
from ...trees.clusters import CLUSTERS, cluster_tree
from ...trees.organizer import ORGANIZER_OPTIONS, SelfOrganizer, remap_rows, split_keys
from ..kernels.optimizer_state import remap_optimizer_state
from ..kernels.paths import path_matrix, paths_log_prob
from ..kernels.precision import LOW_PRECISION, accumulate_dtype
from .base import LOSS_OPTIONS, SPARSE, Cache, LMOutputLayer, check_sizes
from .classes import ClassSoftmax
from .tree import TreeSoftmax, carried_rows
from .vocabulary import require_frequency_order

logger = logging.getLogger(__name__)

FORMS = ("two-level", "binary")
LOG2E = 1.0 / math.log(2.0)

# both forms' settings: the organizer's own declarations (shared with the Numba trainer's
# clustered layers), with the LM's unit for reassign_every (steps)
_SHARED = {o.name: o for o in ORGANIZER_OPTIONS}
ORGANIZED_OPTIONS = (
    CLUSTERS,
    Option("reassign_every", int, 1000, "optimizer steps between re-assignments (the paper: "
           "1000 batches)", metavar="STEPS", check=positive_int),
    *(_SHARED[name] for name in ("gamma", "freq_budget", "smoothing", "criterion", "margin",
                                 "cluster_init")),
    Option("freeze_after", int, None, "no re-assignment after this many steps (default: never "
           "frozen)", metavar="STEPS", check=positive_int),
    SPARSE)


class SelfOrganizedSoftmax(LMOutputLayer):
    """Self-organized two-level or binary softmax over words with frequency-sorted ``counts``
    (id 0 the most frequent). ``n_clusters``: default round(sqrt V); ``reassign_every``:
    optimizer steps between re-assignments (the paper's K = 1000 batches); ``gamma``,
    ``freq_budget``: Algorithm 1's limits (at most gamma sqrt V words and a token share below
    the budget a cluster); ``smoothing``, ``criterion``, ``margin``, ``cluster_init``: as
    ``SelfOrganizer`` (docs/self_organized.md); ``projection``: the two-level form's ReLU
    projections (eq. 1); ``statistic_rows``: binary form, rows of each batch whose full
    cluster distribution feeds q; ``sparse``: sparse gradient of the word / node rows;
    ``ignore_index``, ``reduction``: as ``torch.nn.CrossEntropyLoss``'s."""

    reduce_across_ranks = True  # reassign() averages the statistic over torch.distributed ranks
    # the registry's declarations (registry.py): what make_output_layer and semhuff-lm take
    FORM = "two-level"
    OPTIONS = LOSS_OPTIONS + ORGANIZED_OPTIONS + (
        Option("projection", boolean, False, "the two-level form's ReLU projections (eq. 1)"),)

    @classmethod
    def named_defaults(cls, given) -> dict:
        """Settings the layer takes by name unless given (the binary form's schedule)."""
        return {}

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, clusters=None,
                   **settings):
        require_frequency_order(vocab, "a self-organizing layer")
        settings = {**cls.named_defaults(settings), **settings}
        return SelfOrganizedSoftmax(in_features, vocab.counts, n_clusters=clusters,
                                     form=cls.FORM, seed=seed, device=device, dtype=dtype,
                                     **settings)

    def __init__(self, in_features: int, counts, n_clusters: Optional[int] = None,
                 form: str = "two-level", reassign_every: int = 1000, gamma: float = 1.5,
                 freq_budget: float = 0.1, smoothing: str = "epoch", criterion: str = "log-prob",
                 margin: float = 0.0, cluster_init: str = "random",
                 freeze_after: Optional[int] = None,
                 freeze_after_epochs: Optional[float] = None, projection: bool = False,
                 statistic_rows: Optional[int] = 512, new_rows: Optional[str] = None,
                 sparse: bool = False, seed: int = 1,
                 device=None, dtype=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        self.set_loss(ignore_index, reduction)
        counts = np.asarray(counts, np.int64)
        if counts.ndim != 1 or np.any(counts[:-1] < counts[1:]) or np.any(counts < 0):
            raise OptionError("counts must be the words' counts in descending order (a Vocab's)")
        self.in_features, self.n_classes = check_sizes(in_features, int(counts.size))
        if form not in FORMS:
            raise OptionError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
        if form == "binary" and projection:
            raise OptionError("projection applies to the two-level form only")
        for name, value in (("freeze_after", freeze_after), ("statistic_rows", statistic_rows)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise OptionError(f"{name} must be an integer >= 1 or None, got {value!r}")
        freeze_after_epochs = freeze_after_epochs or None  # 0: never frozen
        if freeze_after_epochs is not None and (
                isinstance(freeze_after_epochs, bool)
                or not isinstance(freeze_after_epochs, (int, float)) or freeze_after_epochs <= 0):
            raise OptionError(f"freeze_after_epochs must be > 0 or None, got "
                              f"{freeze_after_epochs!r}")
        if new_rows is not None and form != "binary":
            raise OptionError("new_rows applies to the binary form only")
        new_rows = "carried" if new_rows is None else new_rows
        if new_rows not in ("zero", "carried"):
            raise OptionError(f"new_rows must be zero or carried, got {new_rows!r}")
        self.form = form
        self.new_rows = new_rows
        self.freeze_after = freeze_after
        self.freeze_after_epochs = freeze_after_epochs
        self._epoch_steps = None  # steps a pass over the counts takes (the first batch says)
        self.statistic_rows = statistic_rows
        self.organizer = SelfOrganizer(
            clusters=n_clusters, reassign_every=reassign_every, cluster_init=cluster_init,
            smoothing=smoothing, criterion=criterion, margin=margin, reassign_until=1.0,
            gamma=gamma, freq_budget=freq_budget, seed=seed)  # checks every setting
        self.organizer.start(counts)
        o = self.organizer
        self.register_buffer("counts", torch.as_tensor(counts, device=device))
        self.register_buffer("q", torch.as_tensor(o.q, device=device))
        self.register_buffer("lam", torch.zeros(self.n_classes, device=device))
        self.register_buffer("cluster_of", torch.as_tensor(o.cluster_of.astype(np.int64),
                                                           device=device))
        # the diagnostics' sums since the last re-assignment: cluster nll, in-cluster nll, tokens
        self.register_buffer("sums", torch.zeros(3, dtype=torch.float64, device=device),
                             persistent=False)
        # tokens learnt from since the last re-assignment, counted on the device (no read-back)
        self.register_buffer("pending_tokens", torch.zeros((), dtype=torch.int64, device=device),
                             persistent=False)
        self.steps = self.reassignments = 0
        self._tokens_done = 0
        self._lam_for = None  # (tokens a step) lam was set for
        if form == "two-level":
            self.body = ClassSoftmax(in_features, o.cluster_of, o.n_clusters, projection, sparse,
                                    device=device, dtype=dtype)
            self.register_buffer("cluster_depth", None)
        else:
            tree, depth = cluster_tree(o.cluster_of, counts, o.n_clusters, kind="self-organized")
            self.body = TreeSoftmax(in_features, tree, sparse, device=device, dtype=dtype)
            self.register_buffer("cluster_depth", torch.as_tensor(depth.astype(np.int64),
                                                                  device=device))
        self._cache = Cache()  # the binary form's cluster path matrix, by (device, dtype)

    @property
    def tokens(self) -> int:
        """Training tokens the statistic has seen (reads the device's count)."""
        return self._tokens_done + int(self.pending_tokens)

    @tokens.setter
    def tokens(self, value: int) -> None:
        self._tokens_done = int(value)
        self.pending_tokens.zero_()

    def _apply(self, fn, *args, **kwargs):
        # .half() / .bfloat16() cast the weights, not the statistic: q and lam stay float32 (an
        # average of log-probabilities over thousands of tokens), the sums float64
        super()._apply(fn, *args, **kwargs)
        for name in ("q", "lam"):
            if getattr(self, name).dtype in LOW_PRECISION:
                setattr(self, name, getattr(self, name).float())
        if self.sums.dtype != torch.float64:
            self.sums = self.sums.double()
        return self

    @property
    def n_clusters(self) -> int:
        return self.organizer.n_clusters

    @property
    def reassign_every(self) -> int:
        return self.organizer.reassign_every

    @property
    def learning(self) -> bool:
        """Gathering the statistic: in training mode, until the clusters are frozen."""
        limit = self.freeze_step
        return self.training and (limit is None or self.steps < limit)

    @property
    def freeze_step(self) -> Optional[int]:
        """The step after which the clusters stay as they are: ``freeze_after``, else
        ``freeze_after_epochs`` passes over the counts (steps of the first training batch's
        size: known from it on), else None (never)."""
        if self.freeze_after is not None:
            return self.freeze_after
        if self.freeze_after_epochs is None or self._epoch_steps is None:
            return None
        return max(1, math.ceil(self.freeze_after_epochs * self._epoch_steps))

    # -- forward ----------------------------------------------------------------------------------
    def target_log_prob(self, h, target, keep=None):
        if keep is None:
            keep = torch.ones_like(target, dtype=torch.bool)
        if self.form == "two-level":
            logits, own, within = self.body.parts(h, target)
            output = own + within
            if self.learning:
                # the statistic takes the softmax over all C cluster vectors, empty clusters
                # included (as the Numba layer's): for a token it differs from the model's
                # P(c | h), which gives empty clusters nothing, by one constant over c, so the
                # ranking Algorithm 1 reads is the same, and an empty cluster keeps a finite q
                # with which it can win words back
                with torch.no_grad():
                    clusters = torch.log_softmax(logits.detach().to(own.dtype), dim=1)
                    self._learn(target, clusters * LOG2E, None, own.detach(), output.detach(),
                                keep, keep)
            return output
        nodes, batch = self.body.path_log_probs(h, target)
        output = nodes.sum(dim=1)
        if self.learning:
            with torch.no_grad():
                in_cluster_part = torch.arange(nodes.shape[1], device=nodes.device) \
                    < self.cluster_depth[target].unsqueeze(1)
                own = torch.where(in_cluster_part, nodes.detach(), 0).sum(dim=1)
                rows = self._sample_rows(h.shape[0], h.device)
                clusters, used = self.cluster_log_probs(h.detach()[rows])
                self._learn(target[rows], clusters * LOG2E, used, own, output.detach(), keep,
                            keep[rows])
        return output

    def full_log_prob(self, h):
        return self.body.full_log_prob(h)

    # generation: the body's (a tree or a two-level softmax), no statistic touched
    def search_topk(self, h, k):
        return self.body.search_topk(h, k)

    def walk_sample(self, h, generator=None):
        return self.body.walk_sample(h, generator)

    def words_log_prob(self, h, words):
        return self.body.words_log_prob(h, words)

    def cluster_log_probs(self, h: torch.Tensor):
        """Binary form: (N, C) log P(c | h) for every cluster in the tree (0 for the others) and
        the (C,) mask of those clusters, from the C_used - 1 nodes of the tree's cluster part;
        in ``accumulate_dtype``, autocast off (the sparse product has no half-precision kernel
        on the CPU)."""
        acc = accumulate_dtype(h.dtype, self.body.weight.dtype)
        # the clusters as they are now (a buffer copy, e.g. an EMA's, moves the version)
        key = ("clusters", h.device, acc, self.cluster_of._version, self.cluster_of.data_ptr())
        if key not in self._cache:
            self._cache.clear()
            self._cache[key] = self._cluster_matrix(h.device, acc)
        matrix, used = self._cache[key]
        inner = self.body.weight[:matrix.shape[1] // 2]  # cast only the rows it uses
        with torch.autocast(h.device.type, enabled=False):
            return paths_log_prob(h.to(acc), inner.to(acc), matrix), used

    def _cluster_matrix(self, device, dtype):
        """``path_matrix`` of the paths from the root down to each cluster's subtree: those of
        any of its words, cut at ``cluster_depth`` (``cluster_tree`` lays the cluster part out
        as rows 0 .. C_used - 2, so they are the only rows used)."""
        cluster_of = self.cluster_of.cpu().numpy()
        used = np.bincount(cluster_of, minlength=self.n_clusters) > 0
        first = np.full(self.n_clusters, -1)
        first[cluster_of[::-1]] = np.arange(self.n_classes)[::-1]  # a member of each cluster
        words = first[used]
        tree = self.body.tree
        matrix = path_matrix(tree.points[words], tree.codes[words],
                             self.cluster_depth.cpu().numpy()[words], self.n_clusters,
                             max(int(used.sum()) - 1, 0), out_row=np.flatnonzero(used),
                             device=device, dtype=dtype)
        return matrix, torch.as_tensor(used, device=device)

    def _sample_rows(self, n: int, device) -> torch.Tensor:
        if self.statistic_rows is None or self.statistic_rows >= n:
            return torch.arange(n, device=device)
        g = torch.Generator().manual_seed(self.organizer.seed * 1_000_003 + self.steps)
        rows = torch.randperm(n, generator=g)[:self.statistic_rows].sort().values
        if torch.device(device).type == "cuda":  # from pinned memory: the copy does not wait
            return rows.pin_memory().to(device, non_blocking=True)
        return rows.to(device)

    # -- the statistic -----------------------------------------------------------------------------
    @torch.no_grad()
    def _learn(self, words, log2_clusters, used, own, output, keep, keep_words) -> None:
        """q <- lam q + (1 - lam) log2 P(c | h) for each (word, its context) in batch order,
        the tokens ``keep_words`` leaves out skipped; sums for the diagnostics over ``keep``.
        Shapes do not depend on the data (no ``unique``): nothing is read back to the host."""
        n_tokens = output.shape[0]
        if n_tokens == 0:  # an empty batch: nothing to learn, and lam's unit is a batch's tokens
            return
        self._set_lam(n_tokens)
        own, output = torch.where(keep, own, 0), torch.where(keep, output, 0)
        self.sums += torch.stack([-own.sum(), -(output - own).sum(),
                                  keep.sum().to(own.dtype)]).to(self.sums.dtype)
        self.pending_tokens += keep.sum()
        if words.numel() == 0:
            return
        V = self.n_classes
        key = torch.where(keep_words, words, V)  # the skipped tokens sort last, as "word V"
        order = torch.argsort(key, stable=True)
        key = key[order]
        x = log2_clusters[order].to(self.q.dtype)
        counts = torch.zeros(V + 1, dtype=torch.int64, device=words.device).index_add_(
            0, key, torch.ones_like(key))  # occurrences of each word in the batch
        first = torch.cumsum(counts, 0) - counts  # where each word's run starts in key
        place = torch.arange(key.numel(), device=words.device) - first[key]
        later = counts[key] - 1 - place  # occurrences after this one
        kept = key < V
        words = key.clamp(max=V - 1)
        lam = self.lam[words].to(self.q.dtype)
        weight = (1 - lam) * lam.pow(later)
        # lam^k once per word (at its first occurrence), 1 elsewhere: the product is lam^k
        decay = torch.where(kept & (place == 0), lam.pow(counts[key]), 1.0).unsqueeze(1)
        decay = decay.expand(-1, self.q.shape[1])
        if used is not None:  # clusters outside the tree get no sample: leave their q alone
            decay = torch.where(used, decay, 1.0)
            x = torch.where(used, x, 0.0)
        with warnings.catch_warnings():  # "index_reduce() is in beta": not the user's concern
            warnings.simplefilter("ignore", UserWarning)
            self.q.index_reduce_(0, words, decay.contiguous(), "prod")
        self.q.index_add_(0, words, torch.where(kept.unsqueeze(1), weight.unsqueeze(1) * x, 0))

    def _set_lam(self, tokens_per_step: int) -> None:
        """lam per word (eq. 10, the organizer's reading ``smoothing``) for batches of this many
        tokens; set on the first training batch (the unit of the intervals is only known then)."""
        if self._lam_for == tokens_per_step:
            return
        counts = self.counts.cpu().numpy().astype(np.float64)
        share = 1.0
        if self.form == "binary" and self.statistic_rows is not None:
            share = min(1.0, self.statistic_rows / tokens_per_step)
        steps_per_epoch = counts.sum() / tokens_per_step  # "interval" counts in steps
        self._epoch_steps = steps_per_epoch
        self.organizer.set_smoothing(counts, np.ones_like(counts), share, steps_per_epoch)
        self.lam.copy_(torch.as_tensor(self.organizer.lam))
        self._lam_for = tokens_per_step

    # -- re-assignment -----------------------------------------------------------------------------
    def after_step(self, optimizer: Optional[torch.optim.Optimizer] = None) -> Optional[dict]:
        """Count a training step; every ``reassign_every`` steps (until ``freeze_after``)
        re-assign the clusters and return what happened, else None."""
        if not self.training:
            return None
        self.steps += 1
        limit = self.freeze_step
        frozen = limit is not None and self.steps > limit
        return None if frozen or self.steps % self.reassign_every else self.reassign(optimizer)

    def reassign(self, optimizer: Optional[torch.optim.Optimizer] = None) -> dict:
        """Algorithm 1 on the current q now; returns the diagnostics (also kept in
        ``organizer.history``)."""
        started = time.perf_counter()
        if self.reduce_across_ranks:
            self.reduce_statistic()
        o = self.organizer
        # the clusters as the buffers hold them (written from outside too: a loader that sets
        # buffers without load_state_dict, e.g. Hugging Face's)
        o.cluster_of = self.cluster_of.cpu().numpy().astype(np.int32)
        o.q[:] = self.q.detach().cpu().numpy().astype(np.float32)
        counts = self.counts.cpu().numpy()
        cluster_nll, in_cluster_nll, n = self.sums.tolist()
        row = {"step": self.steps, "words_done": self.tokens}
        if n:  # the training batches since the last re-assignment (eqs. 5-6)
            row.update(cluster_ppl=math.exp(cluster_nll / n),
                       in_cluster_ppl=math.exp(in_cluster_nll / n),
                       ppl=math.exp((cluster_nll + in_cluster_nll) / n))
        if self.form == "two-level":
            row.update(o.reassign(counts))
            self.body.set_clusters(o.cluster_of)
        else:
            row.update(self._reassign_binary(counts, optimizer))
        self.cluster_of.copy_(torch.as_tensor(o.cluster_of.astype(np.int64)))
        self.reassignments += 1
        self.sums.zero_()
        row["seconds"] = time.perf_counter() - started
        o.record(row)
        logger.info("step %d: re-assigned clusters, %.1f%% of the words (%.1f%% of the tokens) "
                    "moved%s", self.steps, 100 * row["changed_share"], 100 * row["changed_mass"],
                    f"; cluster perplexity {row['cluster_ppl']:.1f}, in-cluster "
                    f"{row['in_cluster_ppl']:.1f}" if "cluster_ppl" in row else "")
        return row

    def statistic_tensors(self) -> dict:
        """The statistic a data-parallel run must share before re-assigning, by how the ranks'
        values combine: ``{"mean": [q], "sum": [the diagnostics' sums, the token count]}``."""
        return {"mean": [self.q], "sum": [self.sums, self.pending_tokens]}

    @torch.no_grad()
    def reduce_statistic(self, all_reduce=None, world_size: Optional[int] = None) -> bool:
        """Make the statistic identical on every rank: q the ranks' mean (each rank smoothed
        its own batches), the sums and token counts their totals. ``all_reduce(tensor)`` sums a
        tensor in place over the ranks; default ``torch.distributed.all_reduce`` when a process
        group of more than one rank is initialised (``world_size`` then defaults to its size).
        Returns whether anything was reduced. ``reassign`` calls it first (unless
        ``reduce_across_ranks`` is False), so every rank of a DDP run re-assigns alike."""
        if all_reduce is None:
            import torch.distributed as dist
            if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
                return False
            all_reduce, world_size = dist.all_reduce, world_size or dist.get_world_size()
        if world_size is None or world_size < 1:
            raise OptionError("reduce_statistic with a given all_reduce needs world_size >= 1")
        parts = self.statistic_tensors()
        for tensor in parts["mean"]:
            all_reduce(tensor)
            tensor.div_(world_size)
        for tensor in parts["sum"]:
            all_reduce(tensor)
        return True

    def _reassign_binary(self, counts, optimizer) -> dict:
        """New clusters, their tree, and the rows that carry over (``remap_rows``: a node that
        splits the same two sets as an old one keeps its row, negated if the sides swapped;
        the others start from ``carried_rows``, or at zero with ``new_rows="zero"``), the
        optimizer's state moved alike (a new row's starts afresh)."""
        o = self.organizer
        keys = np.random.default_rng([o.seed, self.reassignments])
        word_keys = keys.integers(1, 2 ** 63, size=self.n_classes, dtype=np.uint64)
        cluster_keys = keys.integers(1, 2 ** 63, size=o.n_clusters, dtype=np.uint64)
        old_keys = split_keys(self.body.tree, o.cluster_of, self.cluster_depth.cpu().numpy(),
                              word_keys, cluster_keys)
        info = o.reassign(counts)
        tree, depth = cluster_tree(o.cluster_of, counts, o.n_clusters, kind="self-organized")
        new_keys = split_keys(tree, o.cluster_of, depth, word_keys, cluster_keys)
        # remap_rows on the row numbers (+1) tells where each new row comes from, and its sign
        ids = np.arange(1, self.n_classes, dtype=np.float64)[:, None]
        moved, kept = remap_rows(old_keys, new_keys, ids)
        moved = torch.as_tensor(moved[:, 0], device=self.body.weight.device)
        source = (moved.abs() - 1).long()
        sign = torch.sign(moved)
        weight = self.body.weight
        with torch.no_grad():
            fresh = 0 if self.new_rows == "zero" else \
                carried_rows(self.body.tree, tree, weight, self.counts).to(weight.dtype)
            weight.copy_(torch.where((source >= 0).unsqueeze(1),
                                     weight[source.clamp(min=0)] * sign.to(weight.dtype)
                                     .unsqueeze(1), fresh))
        weight.grad = None
        remap_optimizer_state(optimizer, weight, source, sign)
        self.body.set_tree(tree)
        self.cluster_depth.copy_(torch.as_tensor(depth.astype(np.int64)))
        self._cache.clear()
        info["rows_kept"] = kept / max(self.n_classes - 1, 1)
        return info

    # -- state -------------------------------------------------------------------------------------
    def get_extra_state(self):
        # plain ints and a tensor: torch.load(weights_only=True) reads them (a NumPy array not)
        return {"steps": self.steps, "tokens": self.tokens, "reassignments": self.reassignments,
                "history": torch.as_tensor(np.array(self.organizer.history, np.float64))}

    def set_extra_state(self, state):
        self.steps, self.tokens = int(state["steps"]), int(state["tokens"])
        self.reassignments = int(state["reassignments"])
        history = state["history"]  # a tensor (a NumPy array in older files)
        self.organizer.history = np.array(history.cpu().numpy() if torch.is_tensor(history)
                                          else history, np.float64)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        o = self.organizer
        o.cluster_of = self.cluster_of.cpu().numpy().astype(np.int32)
        o.q = self.q.detach().cpu().numpy().astype(np.float32)
        self._cache.clear()
        self._lam_for = None
        self.sums.zero_()

    def cluster_log_prob(self, h, target):
        """The two-level form's cluster part, or the binary form's path down to the cluster."""
        if self.form == "two-level":
            return self.body.cluster_log_prob(h, target)
        nodes, _ = self.body.path_log_probs(h, target)
        top = torch.arange(nodes.shape[1], device=nodes.device) < \
            self.cluster_depth[target].unsqueeze(1)
        return torch.where(top, nodes, 0).sum(dim=1)

    def sparse_parameters(self) -> list:
        return self.body.sparse_parameters()

    def describe(self) -> str:
        frozen = f", frozen after {self.freeze_after:,} steps" if self.freeze_after else \
            f", frozen after {self.freeze_after_epochs:g} epoch(s)" if self.freeze_after_epochs \
            else ""
        o = self.organizer
        return (f"self-organized {self.form} softmax: {self.n_classes:,} words in "
                f"{o.n_clusters} clusters re-assigned every {o.reassign_every:,} steps{frozen} "
                f"(gamma {o.gamma:g}, budget {o.freq_budget:g}, {o.smoothing} smoothing, "
                f"{o.criterion}); {self.body.describe()}")


class SelfOrganizedBinary(SelfOrganizedSoftmax):
    """The binary form's declarations, registered as "self-organized-binary"; ``from_vocab``
    gives a ``SelfOrganizedSoftmax(form="binary")``. By name the layer comes with the schedule
    measured best (docs/lm.md, "The binary form, repaired": PTB-like perplexity over
    3 seeds 196.7 against Huffman's 204.1, where re-assigning to the end gave 209.5 with carried
    rows, 226.6 with zero rows): clusters re-learned during the first pass over the counts
    (``freeze_after_epochs=1``), new rows at zero. ``freeze_after`` (steps) takes precedence;
    re-assigning to the end: ``freeze_after_epochs=None`` (``--freeze-after-epochs 0``) and
    ``new_rows="carried"``. (``SelfOrganizedSoftmax(form="binary")`` itself keeps the
    paper's never-frozen schedule.)"""
    FORM = "binary"
    OPTIONS = LOSS_OPTIONS + ORGANIZED_OPTIONS + (
        Option("statistic_rows", int, 512, "rows of each batch whose full cluster distribution "
               "feeds the statistic", metavar="ROWS", check=positive_int),
        Option("new_rows", str, "zero", "the rows of the nodes a re-assignment creates: zero, "
               "or carried from the old rows (each side's words' mean direction); PTB-like "
               "perplexity over 3 seeds: frozen after epoch 1, 196.7 zero, 205.2 carried; "
               "re-assigned to the end, 226.6 zero, 209.5 carried (docs/lm.md)",
               choices=("zero", "carried")),
        Option("freeze_after_epochs", float, 1.0, "no re-assignment after this many passes "
               "over the counts (steps of the first batch's size; 0: never frozen; "
               "freeze_after, in steps, takes precedence)", metavar="EPOCHS",
               check=lambda v: None if v >= 0 else "must be >= 0"),)

    @classmethod
    def named_defaults(cls, given) -> dict:
        """The declared schedule (frozen after an epoch, zero rows) unless ``freeze_after`` or
        these are given."""
        if given.get("freeze_after") is not None:
            return {"new_rows": "zero"}
        return {"new_rows": "zero", "freeze_after_epochs": 1.0}
