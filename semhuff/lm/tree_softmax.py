"""Hierarchical softmax over any of the library's trees as a PyTorch output layer.

P(w | h) is the product over w's path of sigmoid(s) where the code bit is 0 and sigmoid(-s)
where it is 1, s = h . W[row] (row i of ``weight`` is inner node V + i, ``Tree.points`` holds
rows): exactly the Numba layers' convention, so a Word2Vec model's ``layer.weights`` loads as
``weight`` and scores the same. Training touches ~depth rows a token (``paths.PathScores``);
``log_prob`` gives the whole distribution exactly (all inner nodes scored once).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import OptionError, TreeError
from ..trees.base import Tree
from .base import LMOutputLayer, check_sizes
from .paths import PathBatch, Workspace, leaf_matrix, path_buffers, path_scores, paths_log_prob


class TreeSoftmax(LMOutputLayer):
    """Tree (hierarchical) softmax over ``tree`` (``semhuff.trees.base.Tree``, one leaf per word id).

    ``sparse``: the weight's gradient is a sparse tensor of the rows the batch touched (use
    SGD, Adagrad or SparseAdam; they then update only those rows), else dense. The weights
    start at zero, as word2vec's output layer: every word then has probability 2^-depth.
    ``state_dict`` holds the tree (``tree_parent``, ``tree_branch``), so a layer of the same
    vocabulary size loads any tree with it."""

    def __init__(self, in_features: int, tree: Tree, sparse: bool = False, device=None,
                 dtype=None):
        super().__init__()
        if not isinstance(tree, Tree):
            raise OptionError(f"tree must be a semhuff.trees.base.Tree, got {type(tree).__name__}")
        self.in_features, self.n_classes = check_sizes(in_features, tree.n_words)
        self.sparse = bool(sparse)
        self.weight = nn.Parameter(torch.zeros(tree.n_words - 1, self.in_features,
                                               device=device, dtype=dtype))
        self.register_buffer("tree_parent", torch.empty(2 * tree.n_words - 1, dtype=torch.int64,
                                                        device=device))
        self.register_buffer("tree_branch", torch.empty(2 * tree.n_words - 1, dtype=torch.int8,
                                                        device=device))
        self._workspace = Workspace()
        self.set_tree(tree)

    # -- the tree --------------------------------------------------------------------------------
    def set_tree(self, tree: Tree) -> None:
        """Use ``tree`` from now on (the weights stay as they are: re-organizing layers remap
        them first)."""
        try:
            tree.validate()
        except TreeError as exc:
            raise OptionError(f"not a usable tree: {exc}") from None
        if tree.n_words != self.n_classes:
            raise OptionError(f"the tree has {tree.n_words:,} leaves, the layer {self.n_classes:,}")
        self.tree = tree
        device = self.weight.device
        self.tree_parent.copy_(torch.as_tensor(tree.parent.astype(np.int64)))
        self.tree_branch.copy_(torch.as_tensor(tree.branch))
        points, signs, lengths = path_buffers(tree, device, self.weight.dtype)
        # derived from the tree: rebuilt on load, so not saved
        self.register_buffer("points", points, persistent=False)
        self.register_buffer("signs", signs, persistent=False)
        self.register_buffer("lengths", lengths, persistent=False)
        self._leaf_matrix: Optional[torch.Tensor] = None

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
        batch = PathBatch.gather(self.points, self.signs, self.lengths, target)
        scores = path_scores(h, self.weight, batch, self.sparse, self._workspace)
        return torch.where(batch.valid, F.logsigmoid(scores * batch.signs), 0), batch

    def target_log_prob(self, h, target):
        return self.path_log_probs(h, target)[0].sum(dim=1)

    def full_log_prob(self, h):
        key = (self.weight.device, self.weight.dtype)
        if self._leaf_matrix is None or (self._leaf_matrix.device, self._leaf_matrix.dtype) != key:
            self._leaf_matrix = leaf_matrix(self.tree, *key)
        return paths_log_prob(h, self.weight, self._leaf_matrix)

    def describe(self) -> str:
        mean = float(self.tree.lengths.mean())
        gradient = "sparse" if self.sparse else "dense"
        return (f"tree softmax over a {self.tree.kind} tree of {self.n_classes:,} words (depth "
                f"{mean:.1f} averaged over words, max {self.tree.max_depth}; {gradient} weight "
                f"gradient, {self.in_features} inputs)")
