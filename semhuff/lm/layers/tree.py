"""Hierarchical softmax over any of the library's trees as a PyTorch output layer.

P(w | h) is the product over w's path of sigmoid(s) where the code bit is 0 and sigmoid(-s)
where it is 1, s = h . W[row] (row i of ``weight`` is inner node V + i, ``Tree.points`` holds
rows): exactly the Numba layers' convention, so a Word2Vec model's ``layer.weights`` loads as
``weight`` and scores the same. Training touches ~depth rows a token (``kernels/paths.py``);
``log_prob`` gives the whole distribution exactly (all inner nodes scored once).

Precision: under ``torch.autocast`` the path scores are computed with autocast off, in the
weight's dtype (float32 for float32 weights: the dot products of a few rows a token are
memory-bound, half precision would gain little and lose the sums' precision); the
log-probabilities are added up in float32 for half-precision weights (``accumulate_dtype``).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import OptionError, TreeError
from ...trees.base import Tree
from ...trees.spec import SIMILARITY, TREE, resolve_tree
from ..kernels.paths import (PathBatch, Workspace, leaf_paths, path_buffers, path_scores,
                             paths_log_prob, signed_log_sigmoid)
from ..kernels.precision import accumulate_dtype
from ..kernels.threads import small_work
from ..kernels.tree_search import TreeWalk, beam_topk, walk_sample
from .base import (LOSS_OPTIONS, SPARSE, Cache, LMOutputLayer, SparseRows, check_sizes,
                   rename_in_state_dict)
from .registry import build_layer


def synced(name: str, doc: Optional[str] = None) -> property:
    """A read-only property for what a layer derives from its structure buffers (attribute
    ``name``): the layer's ``_sync()`` first, which re-derives it where the buffers were
    written from outside."""
    def get(self):
        self._sync()
        return getattr(self, name)
    return property(get, doc=doc)


class TreeSoftmax(LMOutputLayer):
    """Tree (hierarchical) softmax over ``tree`` (``semhuff.trees.base.Tree``, one leaf per word id).

    ``sparse``: the weight's gradient is a sparse tensor of the rows the batch touched (use
    SGD, Adagrad or SparseAdam; they then update only those rows), else dense. The weights
    start at zero, as word2vec's output layer: every word then has probability 2^-depth.
    ``state_dict`` holds the tree (``tree_parent``, ``tree_branch``), so a layer of the same
    vocabulary size loads any tree with it. ``ignore_index``, ``reduction``: as
    ``torch.nn.CrossEntropyLoss``'s (``base.py``)."""

    # the registry's declarations (registry.py): what make_output_layer and semhuff-lm take
    OPTIONS = LOSS_OPTIONS + (TREE, SIMILARITY, SPARSE)

    @classmethod
    def declared_options(cls):
        from ...trees import tree_builder_options
        return cls.OPTIONS + tree_builder_options()  # the builders refuse each other's

    @classmethod
    def settings_for_state(cls, settings, state):
        """A state that holds the tree replaces whatever tree the settings would build: build
        the cheapest of the same size instead (any binary tree over V words has 2V - 1 nodes;
        no builder options, no similarity: a ``tree="semhuff"`` model loads without
        WordNet)."""
        if "tree_parent" not in state:
            return settings
        from ...trees import tree_builder_options
        builders = {o.name for o in tree_builder_options()} | {TREE.name, SIMILARITY.name}
        return {k: v for k, v in settings.items() if k not in builders}

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, tree=None,
                   similarity=None, **settings):
        own = {k: settings.pop(k) for k in ("sparse", "ignore_index", "reduction")
               if k in settings}  # the rest are the tree builder's
        return cls(in_features, tree_for(tree, vocab, similarity, seed, settings),
                   device=device, dtype=dtype, **own)

    @classmethod
    def from_counts(cls, in_features, counts, tree="huffman", **settings):
        """The one-line swap for ``nn.AdaptiveLogSoftmaxWithLoss(in_features, V, cutoffs)``:
        ``counts`` has one count per word id in your id order (e.g. ``torch.bincount(ids,
        minlength=V)``); the tree is built over the frequency order and its leaves relabelled
        to your ids. ``settings``: ``make_output_layer``'s (``sparse``, ``device``, ...)."""
        return build_layer(cls, in_features, counts=counts, tree=tree, **settings)

    def __init__(self, in_features: int, tree: Tree, sparse: bool = False, device=None,
                 dtype=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        start_tree_layer(self, in_features, tree, sparse, ignore_index, reduction, device, dtype)
        self._workspace = Workspace()
        self._cache = Cache()  # the leaf matrix of log_prob, by (device, dtype)
        self.set_tree(tree)

    @property
    def weight(self) -> nn.Parameter:
        """(V - 1, D): row i is inner node V + i."""
        return self.rows.weight

    # -- the tree --------------------------------------------------------------------------------
    @torch.no_grad()
    def retree(self, tree: Tree, counts, optimizer: Optional[torch.optim.Optimizer] = None
               ) -> None:
        """Go on training over ``tree``: every node's row starts from ``carried_rows`` (what the
        old rows learned, word by word: ``counts`` weighs the words), the optimizer's state of
        the weight restarts (``remap_optimizer_state``). For a tree re-built from the model's
        own vectors during training (``semhuff-lm --retree-every``)."""
        from ..kernels.optimizer_state import remap_optimizer_state
        if tree.n_words != self.n_classes:
            raise OptionError(f"the tree has {tree.n_words:,} leaves, the layer "
                              f"{self.n_classes:,}")
        rows = carried_rows(self.tree, tree, self.weight, torch.as_tensor(np.asarray(counts)))
        self.weight.copy_(rows.to(self.weight.dtype))
        self.weight.grad = None
        fresh = torch.full((self.weight.shape[0],), -1, dtype=torch.long)
        remap_optimizer_state(optimizer, self.weight, fresh, torch.ones(len(fresh)))
        self.set_tree(tree)

    def set_tree(self, tree: Tree) -> None:
        """Use ``tree`` from now on (the weights stay as they are: re-organizing layers remap
        them first)."""
        try:
            tree.validate()
        except TreeError as exc:
            raise OptionError(f"not a usable tree: {exc}") from None
        if tree.n_words != self.n_classes:
            raise OptionError(f"the tree has {tree.n_words:,} leaves, the layer {self.n_classes:,}")
        self.tree_parent.copy_(torch.as_tensor(tree.parent.astype(np.int64)))
        self.tree_branch.copy_(torch.as_tensor(tree.branch))
        self._adopt(tree)

    def _adopt(self, tree: Tree) -> None:
        """``tree`` (already in ``tree_parent`` / ``tree_branch``) and what derives from it:
        each word's padded path (``points``, ``signs``, ``lengths``: plain tensors, not
        buffers, so that a copy of the buffers, e.g. an EMA's by
        ``torch.optim.swa_utils.AveragedModel``, never meets paths of another depth; moved by
        ``_apply``)."""
        self._tree = tree
        self._points, self._signs, self._lengths = path_buffers(tree, self.weight.device,
                                                                self.weight.dtype)
        self._cache.clear()
        self._tree_key = self._structure_key()

    def _structure_key(self):
        p, b = self.tree_parent, self.tree_branch
        return (p._version, b._version, p.data_ptr(), b.data_ptr())

    def _sync(self) -> None:
        """Re-derive the tree when its buffers were written from outside since (an EMA's or
        any other buffer copy: their in-place writes move the tensors' version counters). Not
        while compiling: a compiled graph runs on the tree it was traced with."""
        if not torch.compiler.is_compiling() and self._tree_key != self._structure_key():
            tree = Tree(self.tree_parent.cpu().numpy(), self.tree_branch.cpu().numpy(),
                        kind=getattr(self, "_loaded_kind", self._tree.kind))
            try:
                tree.validate()
            except TreeError as exc:
                raise OptionError(f"the layer's tree buffers no longer hold a tree ({exc}): "
                                  f"were they averaged (AveragedModel(use_buffers=True))? Copy "
                                  f"them (use_buffers=False, the default)") from None
            self._adopt(tree)

    tree = synced("_tree")
    points = synced("_points", "(V, depth) each word's path rows, padded "
                    "(``kernels.paths.path_buffers``).")
    signs = synced("_signs")
    lengths = synced("_lengths")

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)  # the paths follow the weight (device, dtype)
        self._points, self._signs, self._lengths = (fn(self._points), fn(self._signs),
                                                    fn(self._lengths))
        self._cache.clear()
        self._tree_key = self._structure_key()  # the buffers moved, the tree is the same
        return self

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "tree_parent" in state_dict:
            kind = getattr(self, "_loaded_kind", "loaded")
            self.set_tree(Tree(self.tree_parent.cpu().numpy(), self.tree_branch.cpu().numpy(),
                               kind=kind))

    def get_extra_state(self):
        return {"kind": self.tree.kind}

    def set_extra_state(self, state):
        self._loaded_kind = state.get("kind", "loaded")  # applied when the tree arrays load

    # -- probabilities ----------------------------------------------------------------------------
    def path_log_probs(self, h: torch.Tensor, target: torch.Tensor):
        """(N, L) log-probability of each node on each target's path (0 past the end) and the
        batch's paths."""
        self._sync()
        with small_work(h, target.numel() * self._points.shape[1] * self.in_features):
            batch = PathBatch.gather(self._points, self._signs, self._lengths, target)
            with torch.autocast(h.device.type, enabled=False):
                scores = path_scores(h.to(self.weight.dtype), self.weight, batch, self.sparse,
                                     self._workspace)
            scores = scores.to(accumulate_dtype(scores.dtype))
            return signed_log_sigmoid(scores, batch.signs.to(scores.dtype)), batch

    def target_log_prob(self, h, target, keep=None):
        with small_work(h, 0):  # the (N, L) sum too (threads.py)
            return self.path_log_probs(h, target)[0].sum(dim=1)

    def full_log_prob(self, h):
        """Every word's log-probability, in ``accumulate_dtype`` (autocast off: the sparse
        product has no half-precision kernel on the CPU)."""
        acc = accumulate_dtype(h.dtype, self.weight.dtype)
        leaves = self._derived("leaves", lambda device: leaf_paths(self.tree, device))
        with torch.autocast(h.device.type, enabled=False):
            return paths_log_prob(h.to(acc), self.weight.to(acc), leaves)

    def _derived(self, what: str, make):
        """What ``make(device)`` derives from the tree, kept for the weight's device."""
        self._sync()
        return self._cache.derived(what, self.weight.device, make)

    # -- generation (kernels/tree_search.py) ---------------------------------------------------
    def search_topk(self, h, k):
        """On the CPU the best-first search (``tree_search_numba``), elsewhere ``beam_topk``
        with a beam of 2k + 8 (nothing read back; the caller takes the whole distribution for
        the rows it leaves open)."""
        from ..kernels.tree_search_numba import best_first_topk, best_first_wanted  # Numba
        walk = self._derived("walk", lambda device: TreeWalk(self.tree, device))
        weight = self.weight.detach()
        if best_first_wanted(h, weight):
            values, indices, exact = best_first_topk(h, weight, walk, k)
            return values.to(accumulate_dtype(h.dtype, weight.dtype)), indices, exact
        with torch.autocast(h.device.type, enabled=False):
            return beam_topk(h, weight, walk, k, beam=2 * k + 8)

    def walk_sample(self, h, generator=None):
        walk = self._derived("walk", lambda device: TreeWalk(self.tree, device))
        with torch.autocast(h.device.type, enabled=False):
            return walk_sample(h, self.weight.detach(), walk, generator)

    def words_log_prob(self, h, words):
        return self.target_log_prob(h, words)

    def sparse_parameters(self) -> list:
        return [self.weight] if self.sparse else []

    def describe(self) -> str:
        mean = float(self.tree.lengths.mean())
        gradient = "sparse" if self.sparse else "dense"
        return (f"tree softmax over a {self.tree.kind} tree of {self.n_classes:,} words (depth "
                f"{mean:.1f} averaged over words, max {self.tree.max_depth}; {gradient} weight "
                f"gradient, {self.in_features} inputs)")


@torch.no_grad()

def start_tree_layer(layer: LMOutputLayer, in_features, tree: Tree, sparse, ignore_index,
                     reduction, device, dtype, row_features: Optional[int] = None) -> None:
    """What every layer over one binary tree sets first (``TreeSoftmax``, ``HeadTreeSoftmax``):
    the checked sizes and loss options, the zero rows of the inner nodes (``layer.weight``,
    held by an nn.Embedding so that DDP takes its sparse gradient: ``SparseRows``) and the
    tree's buffers (``tree_parent``, ``tree_branch``; ``set_tree`` fills them). The rows have
    ``row_features`` columns (default ``in_features``)."""
    if not isinstance(tree, Tree):
        raise OptionError(f"tree must be a semhuff.trees.base.Tree, got {type(tree).__name__}")
    layer.in_features, layer.n_classes = check_sizes(in_features, tree.n_words)
    layer.set_loss(ignore_index, reduction)
    layer.sparse = bool(sparse)
    width = layer.in_features if row_features is None else int(row_features)
    layer.rows = SparseRows(torch.zeros(tree.n_words - 1, width, device=device, dtype=dtype),
                            layer.sparse)
    rename_in_state_dict(layer, "rows.weight", "weight")
    for name, dt in (("tree_parent", torch.int64), ("tree_branch", torch.int8)):
        layer.register_buffer(name, torch.empty(2 * tree.n_words - 1, dtype=dt, device=device))


def carried_rows(old_tree, new_tree, weight: torch.Tensor, counts: torch.Tensor,
                 chunk: int = 8) -> torch.Tensor:
    """(V - 1, D) rows for every node of ``new_tree`` from what the old tree's rows learned
    (the binary self-organized form's ``new_rows="carried"``, ``TreeSoftmax.retree``). Each
    word's direction along its old path, e_w = sum_j sign_j W[point_j] (an h with a large h . e_w gives w a high probability); a new
    node's row, the difference of the count-weighted mean directions of the words on its two
    sides (+ side minus - side), scaled to the old rows' mean norm. Nothing of size (V, depth,
    D): ``chunk`` levels at a time."""
    W = weight.detach().float()
    c = counts.to(W.device, torch.float32).clamp_min(1.0)
    points, signs, _ = path_buffers(old_tree, device=W.device, dtype=torch.float32)
    e = torch.zeros(points.shape[0], W.shape[1], device=W.device)
    for a in range(0, points.shape[1], chunk):
        e += torch.einsum("vl,vld->vd", signs[:, a:a + chunk], W[points[:, a:a + chunk]])
    points, signs, _ = path_buffers(new_tree, device=W.device, dtype=torch.float32)
    n_rows = new_tree.n_inner
    sums = torch.zeros(2 * n_rows, W.shape[1], device=W.device)  # (node, side) sums
    mass = torch.zeros(2 * n_rows, device=W.device)
    for j in range(points.shape[1]):
        on = signs[:, j] != 0
        slot = points[on, j] * 2 + (signs[on, j] < 0).long()
        sums.index_add_(0, slot, c[on, None] * e[on])
        mass.index_add_(0, slot, c[on])
    mean = (sums / mass.clamp_min(1e-12).unsqueeze(1)).view(n_rows, 2, -1)
    rows = mean[:, 0] - mean[:, 1]
    scale = W.norm(dim=1).mean() / rows.norm(dim=1).clamp_min(1e-12)
    return rows * scale.unsqueeze(1)


def tree_for(spec, vocab, similarity, seed: int, builder_options):
    """The tree layer's ``Tree`` (``semhuff.trees.spec.resolve_tree``), its errors as the
    layer's ``OptionError``."""
    try:
        return resolve_tree(spec, vocab, similarity=similarity, seed=seed, **builder_options)
    except TreeError as exc:
        raise OptionError(str(exc)) from None
