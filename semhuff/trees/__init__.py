"""Tree builders for hierarchical softmax, by name: ``make_tree(kind, vocab, ...)`` is the one
entry point; ``--tree`` (CLI) and ``Word2Vec(tree=...)`` choose among ``TREE_BUILDERS``, and
``register_tree_builder`` adds one. A builder takes ``(vocab, similarity=None, **options)`` and
returns a ``Tree`` whose leaf ``i`` is word ``i`` of the frequency-sorted vocabulary; the
options it takes are declared once with it (``register_tree_builder(name, options=...)``,
``semhuff.options.Option``), which is how ``Word2Vec`` and ``semhuff-train`` reach them."""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import numpy as np

from ..options import Option, check_settings, positive_int
from .base import Tree, TreeError
from .clusters import CLUSTERS

TREE_BUILDERS: Dict[str, Callable[..., Tree]] = {}
TREE_OPTIONS: Dict[str, Tuple[Option, ...]] = {}  # the options each builder takes


def register_tree_builder(name: str, options: Tuple[Option, ...] = ()):
    """Function decorator: make a builder available as ``tree=name`` / ``--tree name``, taking
    the declared ``options`` as keywords (anything else is refused before it is called)."""
    def register(build):
        if TREE_BUILDERS.get(name, build) is not build:
            raise ValueError(f"tree builder name {name!r} is taken")
        TREE_BUILDERS[name] = build
        TREE_OPTIONS[name] = tuple(options)
        return build
    return register


def tree_builder_options() -> Tuple[Option, ...]:
    """Every registered builder's options (a builder refuses those of another)."""
    return tuple(o for options in TREE_OPTIONS.values() for o in options)


def make_tree(kind: str, vocab, similarity=None, seed: int = 1, **options) -> Tree:
    """Build the hierarchical-softmax tree of ``kind`` over ``vocab`` (a ``semhuff.vocab.Vocab``:
    frequency-sorted ``words`` and ``counts``); ``seed`` for builders that draw at random.
    Raises ``TreeError`` (one-line message for the CLI) on an unknown kind or option;
    similarity sources raise ``SimilarityError``."""
    if kind not in TREE_BUILDERS:
        raise TreeError(f"unknown tree kind {kind!r} (expected one of: {', '.join(sorted(TREE_BUILDERS))})")
    options = check_settings(f"the {kind} tree", TREE_OPTIONS[kind], options, TreeError)
    return TREE_BUILDERS[kind](vocab, similarity, seed=seed, **options)


@register_tree_builder("huffman")
def huffman_tree(vocab, similarity=None, seed=1, **options) -> Tree:
    """word2vec's Huffman tree; takes no similarity and no options."""
    _no_options("huffman", similarity, options)
    from .huffman import build_huffman
    return build_huffman(vocab.counts)


SEMHUFF_OPTIONS = (
    Option("top_k", int, 30, "--tree semhuff: similar words kept per word", check=positive_int),
    Option("wordnet_dir", str, None, "--tree semhuff: WordNet's dict folder (default: found "
           "as semhuff-eval finds its data)", metavar="DIR"),
    Option("matching", str, "auto", "--tree semhuff: how each level is paired (exact blossom, "
           "the Numba approximation, or auto by level size)", choices=("auto", "exact", "approx")),
    Option("exact_max_nodes", int, None, "--tree semhuff, matching auto: the largest level "
           "paired exactly", check=positive_int),
    Option("report", object, None, "a SimilarityReport to fill", cli=False),
    Option("on_level", object, None, "called with each level's LevelStats", cli=False),
)


@register_tree_builder("semhuff", SEMHUFF_OPTIONS)
def semhuff_tree(vocab, similarity=None, seed=1, **options) -> Tree:
    """The Huffman tree re-paired by word similarity (``build_semhuff``). ``similarity`` is
    required: ``"wordnet"``, a path to a pairs / synonym-set file or to word vectors (word2vec
    text / binary, gensim ``.kv`` / ``.model``), a gensim ``KeyedVectors``, or a ready ``(V, V)``
    scipy.sparse matrix over vocabulary ids (used as given). Options: ``top_k`` (30),
    ``wordnet_dir``, ``report`` (a ``SimilarityReport`` to fill), ``matching`` (``"auto"`` /
    ``"exact"`` / ``"approx"``), ``exact_max_nodes``, ``on_level``."""
    import scipy.sparse as sp

    from .semhuff import build_semhuff
    from .similarity import DEFAULT_TOP_K, load_similarity
    if similarity is None:
        raise TreeError("a semhuff tree needs similarity knowledge "
                        "(wordnet, a pairs file or word vectors)")
    load_options = {key: options.pop(key) for key in ("top_k", "wordnet_dir", "report")
                    if options.get(key) is not None}
    build_options = {key: options.pop(key) for key in ("matching", "exact_max_nodes", "on_level")
                     if options.get(key) is not None}
    if not sp.issparse(similarity):
        from .similarity import SimilarityError, SimilarityReport
        load_options.setdefault("top_k", DEFAULT_TOP_K)
        report = load_options["report"] = load_options.get("report") or SimilarityReport()
        similarity = load_similarity(similarity, vocab, **load_options)
        if similarity.nnz == 0:  # a SemHuff tree without knowledge is a Huffman tree: say so
            examples = f" (e.g. {'; '.join(report.examples[:2])})" if report.examples else ""
            raise SimilarityError(f"no usable similarity: {report.summary()}{examples}")
    return build_semhuff(vocab, similarity, **build_options)


def _no_options(kind, similarity, options):
    if similarity is not None:
        raise TreeError(f"the {kind} tree takes no similarity (only --tree semhuff does)")


@register_tree_builder("random")
def random_tree(vocab, similarity=None, seed=1, **options) -> Tree:
    """A balanced binary tree over the words in a random order (the p-tHSM poster's baseline)."""
    _no_options("random", similarity, options)
    from .clusters import balanced_tree
    return balanced_tree(np.random.default_rng(seed).permutation(len(vocab)), "random")


@register_tree_builder("alphabetical")
def alphabetical_tree(vocab, similarity=None, seed=1, **options) -> Tree:
    """A balanced binary tree over the words in alphabetical order (the p-tHSM poster's)."""
    _no_options("alphabetical", similarity, options)
    from .clusters import balanced_tree
    return balanced_tree(np.argsort(np.array(vocab.words, dtype=object), kind="stable"), "alphabetical")


@register_tree_builder("clusters", (CLUSTERS,))
def random_clusters_tree(vocab, similarity=None, seed=1, clusters=None, **options) -> Tree:
    """Random clusters (about sqrt(V)) in their binary form (``clusters.cluster_tree``): the
    self-organized tree's starting point, never re-organized (a baseline)."""
    _no_options("clusters", similarity, options)
    from .clusters import check_clusters, cluster_tree, random_clusters
    n = check_clusters(clusters, len(vocab))
    return cluster_tree(random_clusters(len(vocab), n, seed), vocab.counts, n, kind="clusters")[0]

# a tree spec (name, Tree, tree file, model) -> a Tree for every caller: semhuff.trees.spec.resolve_tree
# (its own module, importing this registry: no import circle)

__all__ = ["TREE_BUILDERS", "TREE_OPTIONS", "make_tree", "register_tree_builder",
           "tree_builder_options"]
