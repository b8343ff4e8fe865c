"""``make_output_layer``: an LM output layer by name, for the language-model trainer and the
benchmark. Every layer it returns has the same interface (``semhuff.lm.base``)."""
from __future__ import annotations

from ..errors import OptionError
from ..trees.base import Tree

LM_LAYERS = ("full", "adaptive", "tree", "class", "self-organized", "self-organized-binary")

# the options each layer takes as keywords, besides the named arguments
LAYER_OPTIONS = {
    "full": ("bias",),
    "adaptive": ("div_value", "head_bias"),
    "tree": ("sparse",),  # + the tree builder's own options (make_tree checks them)
    "class": ("projection", "sparse"),
    "self-organized": ("reassign_every", "gamma", "freq_budget", "smoothing", "criterion",
                       "margin", "cluster_init", "freeze_after", "projection", "sparse"),
    "self-organized-binary": ("reassign_every", "gamma", "freq_budget", "smoothing",
                              "criterion", "margin", "cluster_init", "freeze_after",
                              "statistic_rows", "sparse"),
}


def make_output_layer(name: str, in_features: int, vocab, *, tree="huffman", similarity=None,
                      clusters=None, clustering="frequency", cutoffs=None, seed=1,
                      **options):
    """The output layer ``name`` (one of ``LM_LAYERS``) over ``vocab``, a
    ``semhuff.vocab.Vocab`` (frequency-sorted words and counts; id i = the i-th word).

    * ``tree`` (name "tree"): a tree-builder name for ``semhuff.trees.make_tree`` (huffman,
      semhuff, random, alphabetical, clusters, ...) or a ready ``Tree`` with one leaf per word;
      ``similarity`` goes to the builder (semhuff: "wordnet", a pairs file, a vectors file);
      options other than ``sparse`` go to the builder too (e.g. ``top_k``);
    * ``clusters``: the number of clusters (default round(sqrt V)) of "class", the
      self-organizing layers and the "clusters" tree builder;
    * ``clustering`` (name "class"): "frequency" (Mikolov et al. 2011's binning) or "random";
    * ``cutoffs`` (name "adaptive"): default ``full.default_cutoffs`` (4% and 20% of V);
    * ``seed``: random trees, random clusters, the self-organizer's keys;
    * ``options``: the layer's own (``LAYER_OPTIONS``), e.g. ``reassign_every``, ``gamma``,
      ``freq_budget`` for the self-organizing layers.

    An unknown name or option, or a setting the named layer does not use, is an
    ``OptionError`` (one line)."""
    if name not in LM_LAYERS:
        raise OptionError(f"unknown output layer {name!r} (expected one of: "
                          f"{', '.join(LM_LAYERS)})")
    V = len(vocab)
    _refuse_unused(name, tree=tree, similarity=similarity, clusters=clusters,
                   clustering=clustering, cutoffs=cutoffs)
    own = {k: options.pop(k) for k in LAYER_OPTIONS[name] if k in options}
    if options and name != "tree":
        raise OptionError(f"the {name} output layer does not use {', '.join(sorted(options))} "
                          f"(it takes: {', '.join(LAYER_OPTIONS[name]) or 'no options'})")
    if name == "full":
        from .full import FullSoftmax
        return FullSoftmax(in_features, V, **own)
    if name == "adaptive":
        from .full import AdaptiveSoftmax
        return AdaptiveSoftmax(in_features, V, cutoffs=cutoffs, **own)
    if name == "tree":
        from .tree_softmax import TreeSoftmax
        return TreeSoftmax(in_features, _tree(tree, vocab, similarity, clusters, seed, options),
                           **own)
    n_clusters = _n_clusters(clusters, V)
    if name == "class":
        from ..trees.clusters import frequency_binning, random_clusters
        from .class_softmax import TwoLevelSoftmax
        if clustering not in ("frequency", "random"):
            raise OptionError(f"clustering must be 'frequency' or 'random', got {clustering!r}")
        cluster_of = (frequency_binning(vocab.counts, n_clusters) if clustering == "frequency"
                      else random_clusters(V, n_clusters, seed))
        return TwoLevelSoftmax(in_features, cluster_of, n_clusters=n_clusters, **own)
    from .self_organizing import SelfOrganizingSoftmax
    form = "binary" if name == "self-organized-binary" else "two-level"
    return SelfOrganizingSoftmax(in_features, vocab.counts, n_clusters=n_clusters, form=form,
                                 seed=seed, **own)


def _refuse_unused(name, tree, similarity, clusters, clustering, cutoffs) -> None:
    """A named argument set away from its default for a layer that does not use it."""
    unused = []
    if name != "tree" and not (isinstance(tree, str) and tree == "huffman"):
        unused.append("tree")
    if name != "tree" and similarity is not None:
        unused.append("similarity")
    if name in ("full", "adaptive") and clusters is not None:
        unused.append("clusters")
    if name != "class" and clustering != "frequency":
        unused.append("clustering" + (" (the self-organizing layers take cluster_init)"
                                      if name.startswith("self") else ""))
    if name != "adaptive" and cutoffs is not None:
        unused.append("cutoffs")
    if unused:
        raise OptionError(f"the {name} output layer does not use {', '.join(unused)}")


def _n_clusters(clusters, V: int) -> int:
    from ..trees.clusters import check_clusters, default_clusters
    return check_clusters(default_clusters(V) if clusters is None else clusters, V)


def _tree(tree, vocab, similarity, clusters, seed, builder_options) -> Tree:
    """A ``Tree`` as given (checked against the vocabulary) or built by name."""
    if isinstance(tree, Tree):
        if tree.n_words != len(vocab):
            raise OptionError(f"the tree has {tree.n_words:,} leaves but the vocabulary "
                              f"{len(vocab):,} words")
        if similarity is not None or clusters is not None or builder_options:
            raise OptionError("a ready Tree takes no similarity, clusters or builder options")
        return tree
    if not isinstance(tree, str):
        raise OptionError(f"tree must be a tree-builder name or a Tree, got {type(tree).__name__}")
    from ..options import check_settings
    from ..trees import TREE_OPTIONS, make_tree
    if clusters is not None:
        builder_options = {**builder_options, "clusters": clusters}
    if tree in TREE_OPTIONS:  # an option the builder does not take is the caller's option error
        check_settings(f"the {tree} tree", TREE_OPTIONS[tree], builder_options)
    return make_tree(tree, vocab, similarity=similarity, seed=seed, **builder_options)


__all__ = ["LAYER_OPTIONS", "LM_LAYERS", "make_output_layer"]
