"""The tree of hierarchical softmax, as a value.

Any builder (Huffman, SemHuff, self-organized) produces a ``Tree``; the trainer consumes only its
padded path arrays, the layout of the p-tHSM poster:

* ``points[w, :lengths[w]]`` — the inner nodes on word ``w``'s path, root first (rows of the
  output matrix ``syn1``, numbered ``0 .. n_words - 2``);
* ``codes[w, :lengths[w]]`` — the branch taken at each of them (0 or 1; word2vec trains node
  ``n`` to predict ``1 - code``);
* padding beyond ``lengths[w]`` is 0 in both arrays.

The canonical form is the parent array of a full binary tree: nodes ``0 .. V-1`` are the leaves
(word ids), ``V .. 2V-2`` the inner nodes (inner node ``V + i`` is output row ``i``), and
``branch[n]`` is the bit on the edge into ``n``. The path arrays are derived from it.

A tree file is an npz of these arrays (``Tree.save`` / ``Tree.load``), optionally with the
vocabulary it was built for (``vocab_words``, ``vocab_counts``; ``load_tree_file`` reads both).
"""
from __future__ import annotations

import zipfile
from typing import Optional, Tuple

import numpy as np

from ..errors import TreeError
from ..io_utils import MODEL_LAYER_PREFIX, open_npz, unpack_words
from ..vocab import Vocab


class Tree:
    """A full binary tree over ``n_words`` leaves; see the module docstring for the layout."""

    def __init__(self, parent: np.ndarray, branch: np.ndarray, kind: str = "custom"):
        self.parent = np.ascontiguousarray(parent, dtype=np.int32)
        self.branch = np.ascontiguousarray(branch, dtype=np.int8)
        if self.parent.ndim != 1 or self.parent.shape != self.branch.shape:
            raise TreeError("parent and branch must be 1-D arrays of equal length")
        n = self.parent.shape[0]
        if n % 2 == 0:
            raise TreeError(f"a full binary tree has an odd number of nodes, got {n}")
        self.n_words = (n + 1) // 2
        self.kind = kind
        self._paths = None

    # -- derived layout ----------------------------------------------------------------------
    @property
    def n_inner(self) -> int:
        return self.n_words - 1

    @property
    def root(self) -> int:
        return int(np.flatnonzero(self.parent < 0)[0])

    def node_depths(self) -> np.ndarray:
        from .compiled import _depths  # Numba on first use: importing Tree needs none
        return _depths(self.parent, self.n_words)

    def _ensure_paths(self):
        if self._paths is None:
            from .compiled import _paths_from_parents
            max_depth = int(self.node_depths()[: self.n_words].max()) if self.n_words > 1 else 0
            self._paths = _paths_from_parents(self.parent, self.branch, self.n_words, max(max_depth, 1))
        return self._paths

    @property
    def points(self) -> np.ndarray:
        return self._ensure_paths()[0]

    @property
    def codes(self) -> np.ndarray:
        return self._ensure_paths()[1]

    @property
    def lengths(self) -> np.ndarray:
        return self._ensure_paths()[2]

    @property
    def max_depth(self) -> int:
        return int(self.lengths.max()) if self.n_words > 1 else 0

    def expected_code_length(self, counts: np.ndarray) -> float:
        counts = np.asarray(counts, dtype=np.float64)
        return float((counts * self.lengths).sum() / counts.sum())

    def code_string(self, word_id: int) -> str:
        n = self.lengths[word_id]
        return "".join(str(int(c)) for c in self.codes[word_id, :n])

    # -- checks --------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ``TreeError`` unless this is a full binary tree over the leaves 0..V-1 with
        distinct branch bits under every inner node (hence prefix-free codes)."""
        V, parent, branch = self.n_words, self.parent, self.branch
        roots = np.flatnonzero(parent < 0)
        if len(roots) != 1:
            raise TreeError(f"expected exactly one root, found {len(roots)}")
        if V > 1 and roots[0] < V:
            raise TreeError("the root must be an inner node")
        inner = parent[parent >= 0]
        if inner.size and (inner.min() < V or inner.max() >= 2 * V - 1):
            raise TreeError("a parent id is not an inner node")
        kids = np.bincount(inner - V, minlength=V - 1) if V > 1 else np.zeros(0, int)
        if V > 1 and not np.all(kids == 2):
            raise TreeError("every inner node must have exactly two children")
        if V > 1:
            bitsum = np.bincount(inner - V, weights=branch[parent >= 0], minlength=V - 1)
            if not np.all(bitsum == 1):
                raise TreeError("the two children of an inner node must carry branch bits 0 and 1")
        if np.any(self.node_depths() < 0):
            raise TreeError("the parent array has a cycle")

    # -- persistence ----------------------------------------------------------------------------
    def to_arrays(self) -> dict:
        return {"tree_parent": self.parent, "tree_branch": self.branch,
                "tree_kind": np.array(self.kind)}

    @classmethod
    def from_arrays(cls, arrays) -> "Tree":
        return cls(arrays["tree_parent"], arrays["tree_branch"], str(arrays["tree_kind"]))

    def save(self, path: str, vocab: Optional[Vocab] = None) -> None:
        """The tree file, with ``vocab`` (the words of the leaves) inside when given."""
        from ..io_utils import atomic_write_npz
        arrays = self.to_arrays()
        if vocab is not None:
            arrays["vocab_words"] = np.array(vocab.words)
            arrays["vocab_counts"] = np.asarray(vocab.counts, dtype=np.int64)
        atomic_write_npz(path, arrays)

    @classmethod
    def load(cls, path: str) -> "Tree":
        with open_npz(path, "tree file", TreeError) as data:
            return cls.from_arrays(data)

    def __repr__(self) -> str:
        return f"Tree(kind={self.kind!r}, n_words={self.n_words}, max_depth={self.max_depth})"


def load_tree_file(path: str, vocab_path: Optional[str] = None) -> Tuple[Tree, Optional[Vocab]]:
    """The validated tree of a tree file and, when stored with it (or given as a vocabulary
    file, which wins), its vocabulary. A model file (``Word2Vec.save``) gives its output
    layer's tree and its vocabulary (``semhuff-tree stats model.npz`` takes one)."""
    try:
        with open_npz(path, "tree file (or model file)", TreeError) as data:
            if "tree_parent" not in data.files and "meta" in data.files:
                tree, vocab = _model_tree(data, path)
            else:
                tree = Tree.from_arrays(data)
                vocab = None
            if "vocab_words" in data and "meta" not in data.files:
                vocab = Vocab(list(data["vocab_words"]), data["vocab_counts"],
                              total_tokens=int(data["vocab_counts"].sum()))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise TreeError(f"cannot read tree file {path}: {exc}") from None
    if vocab_path:
        vocab = Vocab.read_text(vocab_path)
    if vocab is not None and len(vocab) != tree.n_words:
        raise TreeError(f"the tree has {tree.n_words} leaves but the vocabulary {len(vocab)} words")
    tree.validate()
    return tree, vocab


def _model_tree(data, path: str) -> Tuple[Tree, Vocab]:
    """The tree of a saved model's output layer (its arrays under ``MODEL_LAYER_PREFIX``), with
    the model's vocabulary; read from the file, so this module needs no model."""
    n = len(MODEL_LAYER_PREFIX)
    layer = {k[n:]: data[k] for k in data.files if k.startswith(MODEL_LAYER_PREFIX)}
    if "tree_parent" not in layer:
        raise TreeError(f"{path} is a model whose output layer has no tree")
    counts = data["vocab_counts"]
    return (Tree.from_arrays(layer),
            Vocab(unpack_words(data["vocab_words"]), counts, int(counts.sum())))
