"""The sparse core every similarity source shares: a symmetric ``scipy.sparse.csr_matrix`` of
shape ``(V, V)`` over vocabulary ids with non-negative weights and an empty diagonal.

Every source keeps each word's top-k row first and then symmetrises with the element-wise maximum
(``S = max(T, T.T)``), so a word can end up with more than k neighbours but never loses one.
Bad input (unknown words, self-pairs, negative / NaN / infinite weights, malformed lines) is
counted in a ``SimilarityReport``, logged, and skipped; it never raises. Words without any edge
simply have an empty row; the tree builder still places them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ...errors import SimilarityError
from ...numba_cache import numba

logger = logging.getLogger(__name__)

DEFAULT_TOP_K = 30


@dataclass
class SimilarityReport:
    """What loading a similarity source saw and skipped; filled in by the loaders."""

    source: str = ""
    n_words: int = 0
    items_read: int = 0          # pairs, synonym sets or neighbour lists looked at
    unknown_words: int = 0       # words not in the vocabulary (each occurrence)
    self_pairs: int = 0
    bad_weights: int = 0         # negative, NaN or infinite
    malformed_lines: int = 0
    examples: List[str] = field(default_factory=list)
    edges: int = 0               # undirected edges in the final matrix
    words_with_edges: int = 0

    def note(self, kind: str, text: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples) < 5:
            self.examples.append(text)

    def summary(self) -> str:
        skipped = (f"skipped: {self.unknown_words} unknown words, {self.self_pairs} self-pairs, "
                   f"{self.bad_weights} bad weights, {self.malformed_lines} malformed lines")
        covered = 100.0 * self.words_with_edges / max(self.n_words, 1)
        return (f"{self.source}: {self.edges} edges, {self.words_with_edges}/{self.n_words} words "
                f"({covered:.1f}%) have a neighbour; {self.items_read} items read; {skipped}")


def _word_index(vocab) -> Tuple[Sequence[str], Dict[str, int]]:
    """Words and word -> id of a ``Vocab`` or of a plain word list (ids = positions)."""
    if hasattr(vocab, "words"):
        return vocab.words, vocab.index
    words = list(vocab)
    return words, {w: i for i, w in enumerate(words)}


@numba.njit(cache=True, nogil=True)
def _top_k_rows(indptr, indices, data, k):
    # Keep the k largest entries of every CSR row (ties: the lower column id, i.e. the more
    # frequent word); rows are independent, so one argsort per row.
    n = indptr.shape[0] - 1
    keep = np.zeros(data.shape[0], dtype=np.bool_)
    for r in range(n):
        lo, hi = indptr[r], indptr[r + 1]
        if hi - lo <= k:
            keep[lo:hi] = True
            continue
        cols = indices[lo:hi]
        # mergesort is stable, so sorting by column first makes ties prefer low ids
        by_col = np.argsort(cols, kind="mergesort")
        order = by_col[np.argsort(-data[lo:hi][by_col], kind="mergesort")]
        keep[lo + order[:k]] = True
    return keep


def top_k_symmetric(matrix, top_k: int) -> sp.csr_matrix:
    """Keep each row's ``top_k`` largest entries, then symmetrise with the element-wise maximum.
    Duplicate entries are merged by maximum first; the diagonal and zeros are dropped."""
    coo = sp.coo_matrix(matrix)
    n = coo.shape[0]
    off_diagonal = (coo.row != coo.col) & (coo.data > 0)
    rows, cols, vals = coo.row[off_diagonal], coo.col[off_diagonal], coo.data[off_diagonal]
    # Merge duplicates by maximum: sort by (row, col, -value) and keep the first of each run.
    order = np.lexsort((-vals, cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.ones(rows.shape[0], dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    csr = sp.csr_matrix((vals[first].astype(np.float64), (rows[first], cols[first])), shape=(n, n))
    csr.sort_indices()
    if top_k is not None and top_k > 0:
        keep = _top_k_rows(csr.indptr, csr.indices, csr.data, int(top_k))
        csr.data[~keep] = 0.0
        csr.eliminate_zeros()
    return csr.maximum(csr.T).tocsr()


def _finish(matrix: sp.csr_matrix, report: SimilarityReport) -> sp.csr_matrix:
    matrix.sort_indices()
    report.n_words = matrix.shape[0]
    report.edges = int(matrix.nnz // 2)
    report.words_with_edges = int(np.count_nonzero(np.diff(matrix.indptr)))
    bad = report.unknown_words + report.self_pairs + report.bad_weights + report.malformed_lines
    (logger.warning if bad else logger.info)("similarity %s", report.summary())
    if report.examples and bad:
        logger.warning("first skipped items: %s", "; ".join(report.examples))
    return matrix


def similarity_from_pairs(rows, cols, weights, n_words: int, top_k: int = DEFAULT_TOP_K,
                          report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Sparse similarity from undirected weighted pairs of vocabulary ids (duplicates: maximum).
    Self-pairs and negative / NaN / infinite weights are counted and dropped."""
    report = report if report is not None else SimilarityReport(source="pairs")
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    if rows.size and (min(rows.min(), cols.min()) < 0 or max(rows.max(), cols.max()) >= n_words):
        raise SimilarityError("similarity pair ids out of the vocabulary range")
    finite = np.isfinite(weights) & (weights >= 0)
    report.bad_weights += int(np.count_nonzero(~finite))
    self_pair = rows == cols
    report.self_pairs += int(np.count_nonzero(self_pair & finite))
    ok = finite & ~self_pair
    rows, cols, weights = rows[ok], cols[ok], weights[ok]
    both = sp.coo_matrix((np.concatenate([weights, weights]),
                          (np.concatenate([rows, cols]), np.concatenate([cols, rows]))),
                         shape=(n_words, n_words))
    return _finish(top_k_symmetric(both, top_k), report)
