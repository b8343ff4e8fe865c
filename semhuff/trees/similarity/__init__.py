"""Sparse word-similarity knowledge for SemHuff: each word keeps its ``top_k`` most similar words.

Three sources, all returning a symmetric ``scipy.sparse.csr_matrix`` of shape ``(V, V)`` over
vocabulary ids (``core``):

* ``wordnet`` — WordNet path similarity between the senses of two words;
* ``pairs`` — a user file of weighted pairs or synonym sets;
* ``embedding`` — top-k cosine neighbours in an existing embedding.

``load_similarity`` picks the source from what it is given.
"""
from __future__ import annotations

import os
from typing import Optional

import scipy.sparse as sp

from ...errors import SimilarityError
from .core import DEFAULT_TOP_K, SimilarityReport, _word_index, similarity_from_pairs, top_k_symmetric
from .embedding import cosine_top_k, embedding_similarity, looks_like_vectors
from .pairs import pairs_file_similarity
from .wordnet import (DEFAULT_WORDNET_HOPS, WORDNET_LINKS, WordNetGraph, base_forms,
                      default_wordnet_dirs, find_wordnet, read_wordnet, wordnet_similarity)

WORDNET_SOURCE = "wordnet"

__all__ = [
    "DEFAULT_TOP_K", "DEFAULT_WORDNET_HOPS", "SimilarityError", "SimilarityReport", "WORDNET_LINKS",
    "WORDNET_SOURCE", "WordNetGraph", "base_forms", "cosine_top_k", "default_wordnet_dirs",
    "embedding_similarity", "find_wordnet", "load_similarity", "looks_like_vectors",
    "pairs_file_similarity", "read_wordnet", "similarity_from_pairs", "top_k_symmetric",
    "wordnet_similarity",
]


def load_similarity(source, vocab, top_k: int = DEFAULT_TOP_K, wordnet_dir: Optional[str] = None,
                    report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Similarity knowledge from ``source``: ``"wordnet"``, a pairs / synonym-set file, a vectors
    file (word2vec text or binary, gensim ``.kv`` / ``.model``), a gensim ``KeyedVectors`` or a
    ready sparse matrix (re-cut to ``top_k`` and symmetrised)."""
    if top_k < 1:
        raise SimilarityError("top_k must be >= 1")
    report = report if report is not None else SimilarityReport()
    words, _ = _word_index(vocab)
    if sp.issparse(source):
        if source.shape != (len(words), len(words)):
            raise SimilarityError(f"similarity matrix shape {source.shape} does not match "
                                  f"the vocabulary ({len(words)} words)")
        coo = sp.coo_matrix(source)
        report.source = "matrix"
        return similarity_from_pairs(coo.row, coo.col, coo.data, len(words), top_k, report)
    if hasattr(source, "index_to_key") or isinstance(source, tuple):
        return embedding_similarity(source, vocab, top_k, report)
    source = os.fspath(source)
    if source == WORDNET_SOURCE:
        return wordnet_similarity(vocab, top_k, wordnet_dir, report=report)
    if not os.path.isfile(source):
        raise SimilarityError(f"similarity source not found: {source!r} "
                              f"(expected 'wordnet', a pairs file or a vectors file)")
    if looks_like_vectors(source):
        return embedding_similarity(source, vocab, top_k, report)
    return pairs_file_similarity(source, vocab, top_k, report)
