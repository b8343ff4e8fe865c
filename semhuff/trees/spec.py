"""One way from a tree *spec* to a ``Tree`` for every caller: the Numba HS layer
(``layers/hs.py``), the LM tree layer (``lm/tree_softmax.py``), ``semhuff-train --tree`` and
``semhuff-lm --tree``. A spec is

* a tree builder's name (``TREE_BUILDERS``: huffman, semhuff, random, ... or a plugin's), built
  with ``similarity``, ``seed`` and the builder's own options;
* a ready ``Tree`` with one leaf per word id;
* the path of a tree file (``semhuff-tree build``) or of a saved ``Word2Vec`` model (its tree);
* an object holding a tree (a ``Word2Vec`` model, an HS or LM tree layer: ``.tree``).

Ids. A builder's contract is "leaf i = word i of the frequency-sorted vocabulary". A vocabulary
whose counts are not in descending order (the caller's own ids, e.g. ``make_output_layer("tree",
H, counts=...)``) gets the tree built over the sorted order, its leaves then relabelled to the
caller's ids: word w gets exactly the code the builder gives it in the sorted vocabulary (the
most frequent words the shortest codes under Huffman). A tree file that stores its vocabulary is
matched by word: the same words in another order are relabelled, other words are an error.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from ..errors import TreeError
from ..options import Option
from ..vocab import frequency_order
from .base import Tree

# names that are clusterings, hence output layers of their own, not tree builders
_LAYER_NAMES = ("self-organized", "frequency")


def not_a_layer(spec) -> Optional[str]:
    """``TREE``'s check: one name, one thing, ``tree`` names a tree; a learned or binned
    clustering is an output layer of its own."""
    if isinstance(spec, str) and spec in _LAYER_NAMES:
        return ("names a clustering, not a tree builder: a self-organized tree is an output "
                "layer of its own (loss 'hs-self-organized' in semhuff-train, "
                "'self-organized-binary' in semhuff-lm), and so is a class softmax over "
                "frequency-binned or random clusters (loss 'class')")
    return None


# the settings of every layer that takes a tree (the Numba HS layers, the LM tree layer)
TREE = Option("tree", str, None, "the tree: a builder's name (huffman, the default; semhuff, "
              "random, alphabetical, clusters, or a --plugin's), a tree file from semhuff-tree "
              "build or a saved Word2Vec model (its tree; same words)", metavar="KIND|FILE",
              check=not_a_layer)
SIMILARITY = Option("similarity", str, None, "similarity knowledge for --tree semhuff: wordnet, "
                    "a pairs file or a vectors file (semhuff-lm also: skipgram, vectors trained "
                    "on its training text first, cached)")


def relabel_leaves(tree: Tree, new_id: np.ndarray) -> Tree:
    """``tree`` with its leaf ``k`` renamed ``new_id[k]`` (a permutation of the leaves); the
    inner nodes, hence the weight rows, are unchanged."""
    V = tree.n_words
    new_id = np.asarray(new_id, np.int64)
    if new_id.shape != (V,) or not np.array_equal(np.sort(new_id), np.arange(V)):
        raise TreeError(f"a leaf relabelling must be a permutation of the {V:,} words")
    parent, branch = tree.parent.copy(), tree.branch.copy()
    parent[new_id], branch[new_id] = tree.parent[:V], tree.branch[:V]
    return Tree(parent, branch, kind=tree.kind)


def is_tree_spec_name(spec) -> bool:
    from . import TREE_BUILDERS
    return isinstance(spec, str) and (spec in TREE_BUILDERS or spec in _LAYER_NAMES)


def check_tree_spec(spec, flag: str = "--tree") -> Optional[str]:
    """Before any work: None for a builder name (or no spec), the path for a tree file; a
    one-line ``TreeError`` for a string that is neither."""
    from . import TREE_BUILDERS
    if not isinstance(spec, str) or is_tree_spec_name(spec):
        return None
    if os.path.isfile(spec):
        return spec
    raise TreeError(f"{flag} {spec!r} is neither a tree kind ({', '.join(sorted(TREE_BUILDERS))}) "
                    f"nor a tree file")


def resolve_tree(spec, vocab, *, similarity=None, seed: int = 1, **options) -> Tree:
    """The ``Tree`` that ``spec`` names over ``vocab`` (a ``semhuff.vocab.Vocab``: ``words`` and
    ``counts`` in the caller's id order; leaf i = word id i). ``similarity`` and ``options`` go
    to a builder only. ``TreeError`` (one line) for anything that does not fit."""
    if spec is None:
        spec = "huffman"
    if is_tree_spec_name(spec) or (isinstance(spec, str) and not os.path.isfile(spec)):
        return _built(spec, vocab, similarity, seed, options)
    if similarity is not None or options:
        given = ", ".join(sorted(options) or ["similarity"])
        raise TreeError(f"{given}: options of a tree builder, but a ready tree was given")
    if isinstance(spec, (str, os.PathLike)):
        return _from_file(os.fspath(spec), vocab)
    tree = spec if isinstance(spec, Tree) else getattr(spec, "tree", None)
    if not isinstance(tree, Tree):
        raise TreeError(f"a tree spec is a builder's name, a Tree, a tree file or a model with a "
                        f"tree; got {type(spec).__name__}")
    if tree.n_words != len(vocab):
        raise TreeError(f"the given tree has {tree.n_words:,} leaves but the vocabulary has "
                        f"{len(vocab):,} words")
    other = getattr(spec, "vocab", None)  # a model: its tree's words
    if other is not None and tree is not spec and list(other.words) != list(vocab.words):
        return _by_word(tree, other.words, vocab, "the model's tree")
    return tree


def _built(kind: str, vocab, similarity, seed, options) -> Tree:
    from . import make_tree
    order = frequency_order(vocab.counts)
    if order is None:
        return make_tree(kind, vocab, similarity=similarity, seed=seed, **options)
    # the builder's contract is a frequency-sorted vocabulary: build over that, then relabel
    from ..vocab import Vocab
    ranked = Vocab([vocab.words[i] for i in order], np.asarray(vocab.counts)[order],
                   int(getattr(vocab, "total_tokens", 0) or np.sum(vocab.counts)),
                   getattr(vocab, "min_count", 1))
    similarity = _permuted(similarity, order)
    return relabel_leaves(make_tree(kind, ranked, similarity=similarity, seed=seed, **options),
                          order)


def _permuted(similarity, order):
    """A (V, V) sparse similarity over the caller's ids as one over the sorted ids."""
    import scipy.sparse as sp  # a dependency; imported here so that spec imports without it
    if sp.issparse(similarity):
        return sp.csr_matrix(similarity)[order][:, order]
    return similarity


def _from_file(path: str, vocab) -> Tree:
    from .base import load_tree_file
    tree, tree_vocab = load_tree_file(path)
    if tree_vocab is None:
        if tree.n_words != len(vocab):
            raise TreeError(f"the tree in {path} has {tree.n_words:,} leaves but the vocabulary "
                            f"{len(vocab):,} words")
        return tree
    if list(tree_vocab.words) == list(vocab.words):
        return tree
    return _by_word(tree, tree_vocab.words, vocab, f"the tree in {path}")


def _by_word(tree: Tree, tree_words, vocab, what: str) -> Tree:
    """``tree`` over ``tree_words`` relabelled to ``vocab``'s ids: the same words in another
    order; any other vocabulary is an error."""
    if len(tree_words) == len(vocab) and set(tree_words) == set(vocab.words):
        index = {w: i for i, w in enumerate(vocab.words)}
        return relabel_leaves(tree, np.array([index[w] for w in tree_words], np.int64))
    raise TreeError(f"{what} was built for another vocabulary ({len(tree_words):,} words; this "
                    f"one has {len(vocab):,}): build it from the same corpus and --min-count")


__all__ = ["SIMILARITY", "TREE", "check_tree_spec", "frequency_order", "relabel_leaves",
           "resolve_tree"]
