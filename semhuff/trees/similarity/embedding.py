"""Similarity from an existing embedding: top-k cosine neighbours (gensim ``KeyedVectors``, any
vectors file ``semhuff.vectors_io`` reads, or an in-memory ``(words, vectors)`` pair); negative
cosines are dropped. This is the bootstrapping route: train on Huffman, rebuild."""
from __future__ import annotations

import logging
import os
from typing import List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ...errors import SimilarityError, VectorsError
from ...numba_cache import numba
from ...vectors_io import read_vectors
from .core import DEFAULT_TOP_K, SimilarityReport, _finish, _word_index, top_k_symmetric

logger = logging.getLogger(__name__)

_VECTOR_SUFFIXES = (".kv", ".model", ".bin", ".vec", ".w2v")
_EMBEDDING_BLOCK_ROWS = 1024


@numba.njit(cache=True, nogil=True)
def _weakest(values):
    worst = 0
    for j in range(1, values.shape[0]):
        if values[j] < values[worst]:
            worst = j
    return worst


@numba.njit(cache=True, nogil=True)
def _block_top_k(scores, first_row, k, out_cols, out_vals):
    # Per row, the k largest scores without sorting the whole row: a running minimum threshold
    # over a small buffer (k << V), excluding the word itself.
    for r in range(scores.shape[0]):
        row = first_row + r
        buf_c = out_cols[row]
        buf_v = out_vals[row]
        filled = 0
        worst = 0
        for c in range(scores.shape[1]):
            s = scores[r, c]
            if c == row or not (s > 0):
                continue
            if filled < k:
                buf_c[filled] = c
                buf_v[filled] = s
                filled += 1
                if filled == k:
                    worst = _weakest(buf_v)
            elif s > buf_v[worst]:
                buf_c[worst] = c
                buf_v[worst] = s
                worst = _weakest(buf_v)


def cosine_top_k(vectors: np.ndarray, top_k: int = DEFAULT_TOP_K) -> Tuple[np.ndarray, np.ndarray]:
    """For every row of ``vectors``, the ids and cosines of its ``top_k`` most similar other
    rows (positive cosines only; missing slots have id -1). Blocked so memory stays
    ``block x n``."""
    unit = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(unit, axis=1, keepdims=True)
    unit = unit / np.where(norms > 0, norms, 1.0)
    n = unit.shape[0]
    cols = np.full((n, top_k), -1, dtype=np.int64)
    vals = np.zeros((n, top_k), dtype=np.float32)
    for start in range(0, n, _EMBEDDING_BLOCK_ROWS):
        block = unit[start:start + _EMBEDDING_BLOCK_ROWS] @ unit.T
        _block_top_k(block, start, top_k, cols, vals)
    return cols, vals


def _read_vectors(source) -> Tuple[List[str], np.ndarray]:
    if isinstance(source, tuple):
        words, vectors = source
        return list(words), np.asarray(vectors)
    if hasattr(source, "index_to_key"):
        return list(source.index_to_key), source.vectors
    path = os.fspath(source)
    if not os.path.exists(path):
        raise SimilarityError(f"vectors not found: {path}")
    try:
        kv, _ = read_vectors(path)
    except VectorsError as exc:
        raise SimilarityError(f"cannot read vectors {path}: {exc}") from None
    return list(kv.index_to_key), kv.vectors


def embedding_similarity(vectors, vocab, top_k: int = DEFAULT_TOP_K,
                         report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Top-k cosine neighbours among the vocabulary words present in ``vectors`` (a path, a
    gensim ``KeyedVectors`` or a ``(words, matrix)`` pair)."""
    words, index = _word_index(vocab)
    report = report if report is not None else SimilarityReport()
    report.source = f"embedding {vectors if isinstance(vectors, (str, os.PathLike)) else type(vectors).__name__}"
    emb_words, matrix = _read_vectors(vectors)
    if matrix.ndim != 2 or matrix.shape[0] != len(emb_words):
        raise SimilarityError("vectors must be a (words x dims) matrix")
    vocab_ids = np.array([index.get(w, -1) for w in emb_words], dtype=np.int64)
    present = vocab_ids >= 0
    report.items_read = len(emb_words)
    report.unknown_words = int(np.count_nonzero(~present))
    finite_rows = np.isfinite(matrix).all(axis=1)
    report.bad_weights = int(np.count_nonzero(present & ~finite_rows))
    use = present & finite_rows
    ids = vocab_ids[use]
    neighbour_pos, cosines = cosine_top_k(matrix[use], top_k)
    has = neighbour_pos >= 0
    rows = np.repeat(ids, top_k)[has.ravel()]
    cols = ids[neighbour_pos[has]]
    n = len(words)
    directed = sp.coo_matrix((cosines[has].astype(np.float64), (rows, cols)), shape=(n, n))
    logger.info("embedding: %d of %d vocabulary words have vectors", len(ids), n)
    return _finish(top_k_symmetric(directed, None), report)


def looks_like_vectors(path: str) -> bool:
    """A word2vec / gensim vectors file rather than a pairs file: by suffix, or a first line
    ``<count> <dims>`` (the word2vec header)."""
    if path.endswith(_VECTOR_SUFFIXES):
        return True
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256).split()
    except OSError:
        return False
    return len(first) == 2 and all(f.isdigit() for f in first)
