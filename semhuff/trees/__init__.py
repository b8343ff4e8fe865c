"""Tree builders for hierarchical softmax; ``make_tree`` is the one entry point the trainer uses."""
from __future__ import annotations

from ..tree import Tree, TreeError

TREE_KINDS = ("huffman", "semhuff")


def make_tree(kind: str, vocab, similarity=None, **options) -> Tree:
    """Build the hierarchical-softmax tree of ``kind`` over ``vocab`` (a ``semhuff.vocab.Vocab``:
    frequency-sorted ``words`` and ``counts``; leaf ``i`` is word ``i``).

    * ``"huffman"``: word2vec's Huffman tree; ``similarity`` must be None, no options.
    * ``"semhuff"``: the Huffman tree re-paired by word similarity (``build_semhuff``).
      ``similarity`` is required: ``"wordnet"``, a path to a pairs / synonym-set file or to word
      vectors (word2vec text / binary, gensim ``.kv`` / ``.model``), a gensim ``KeyedVectors``,
      or a ready ``(V, V)`` scipy.sparse matrix over vocabulary ids (used as given).
      Options: ``top_k`` (30), ``wordnet_dir``, ``report`` (a ``SimilarityReport`` to fill),
      ``matching`` (``"auto"`` / ``"exact"`` / ``"approx"``), ``exact_max_nodes``, ``on_level``.

    Raises ``TreeError`` (a ``SemhuffError``: one-line message for the CLI) on an unknown kind,
    a missing similarity or an unknown option; similarity sources raise ``SimilarityError``.
    """
    if kind == "huffman":
        if similarity is not None or options:
            raise TreeError("the huffman tree takes no similarity or options")
        from .huffman import build_huffman
        return build_huffman(vocab.counts)
    if kind == "semhuff":
        import scipy.sparse as sp

        from .semhuff import build_semhuff
        from .similarity import DEFAULT_TOP_K, load_similarity
        if similarity is None:
            raise TreeError("a semhuff tree needs similarity knowledge "
                            "(wordnet, a pairs file or word vectors)")
        load_options = {key: options.pop(key) for key in ("top_k", "wordnet_dir", "report")
                        if key in options}
        build_options = {key: options.pop(key) for key in ("matching", "exact_max_nodes", "on_level")
                         if key in options}
        if options:
            raise TreeError(f"unknown semhuff tree option(s): {', '.join(sorted(options))}")
        if not sp.issparse(similarity):
            load_options.setdefault("top_k", DEFAULT_TOP_K)
            similarity = load_similarity(similarity, vocab, **load_options)
        return build_semhuff(vocab, similarity, **build_options)
    raise TreeError(f"unknown tree kind {kind!r} (expected one of: {', '.join(TREE_KINDS)})")
