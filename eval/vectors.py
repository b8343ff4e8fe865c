"""Load word vectors from anything people hand us, and look words up the way gensim does.

Accepted sources: a gensim ``KeyedVectors`` (or any object with a ``.wv`` attribute, e.g. a
``Word2Vec`` model), word2vec text or binary files, gensim ``.kv`` files, and semhuff model files
(``*.npz``). Reading is ``semhuff.vectors_io.read_vectors``: its tolerant text reader counts
malformed lines, lines of the wrong dimension and repeated words in a :class:`LoadReport` and
skips them instead of failing the whole file.
"""
from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..errors import VectorsError
from ..vectors_io import LoadReport, read_vectors, strip_compression

if TYPE_CHECKING:  # only annotations name it: importing semhuff.eval needs no gensim (the GPU
    from gensim.models import KeyedVectors  # image lacks it; eval/bench/light_quality.py)

__all__ = ["DEFAULT_RESTRICT_VOCAB", "LoadReport", "LoadedVectors", "Lookup", "VectorsError",
           "batch_rows", "default_names", "load_vectors", "non_finite_message", "unit_rows"]

#: same default as gensim's ``evaluate_word_pairs`` / ``evaluate_word_analogies``
DEFAULT_RESTRICT_VOCAB = 300_000


@dataclasses.dataclass
class LoadedVectors:
    name: str
    vectors: KeyedVectors
    report: LoadReport


def load_vectors(source, name: Optional[str] = None, fmt: str = "auto") -> LoadedVectors:
    """Load ``source`` (a path or an in-memory vectors object) under the name ``name`` (default:
    the file's stem, or ``vectors``).

    ``fmt`` is one of ``auto``, ``text``, ``binary``, ``kv``, ``npz``; ``auto`` decides from the
    file's content (see ``semhuff.vectors_io.detect_format``).
    """
    if isinstance(source, (str, os.PathLike)):
        label = name or _default_name(os.fspath(source))
        kv, report = read_vectors(source, fmt)
    else:
        label = name or "vectors"
        kv, report = read_vectors(source)
        report.source = label
    problem = non_finite_message(kv)
    if problem:
        raise VectorsError(f"{report.source}: {problem}; not evaluated")
    return LoadedVectors(label, kv, report)


def non_finite_message(kv: KeyedVectors) -> Optional[str]:
    """Why vectors cannot be evaluated (some are NaN or infinite: a diverged training), or
    None. Scoring them would give numbers without meaning (an MRR above 1, say)."""
    bad = int(np.count_nonzero(~np.isfinite(np.asarray(kv.vectors)).all(axis=1)))
    if not bad:
        return None
    return f"{bad:,} of {len(kv):,} vectors are not finite (NaN or infinite: the training diverged?)"


def _default_name(path: str) -> str:
    base = strip_compression(os.path.basename(path.rstrip(os.sep)))
    stem, ext = os.path.splitext(base)
    return stem if ext else base


def default_names(paths: list) -> list:
    """Column labels for files: their stems, or when two files have the same stem (``v.bin
    v.kv``) their file names, or when those are equal too (``a/v.bin b/v.bin``) the paths as
    given. The same path given twice keeps one label (``unique_names`` numbers the repeats)."""
    paths = [os.fspath(p) for p in paths]
    for label in (_default_name, lambda p: os.path.basename(p.rstrip(os.sep)), str):
        names = [label(p) for p in paths]
        if len(set(names)) == len(set(paths)):  # one label per distinct file
            break
    return names


class Lookup:
    """Unit-length vectors plus gensim's word lookup rules.

    Only the first ``restrict_vocab`` words are used (vocabularies are sorted by frequency).
    With ``case_insensitive`` (gensim's default) words are compared in upper case and, among case
    variants, the first (most frequent) one stands for all of them. ``candidates`` are the indices
    that answer queries: one per distinct (case-folded) word.
    """

    def __init__(self, kv: KeyedVectors, restrict_vocab: Optional[int] = DEFAULT_RESTRICT_VOCAB,
                 case_insensitive: bool = True):
        self.case_insensitive = case_insensitive
        keys = kv.index_to_key[:restrict_vocab] if restrict_vocab else kv.index_to_key
        self.size = len(keys)
        self.index: dict[str, int] = {}
        for i, key in enumerate(keys):
            self.index.setdefault(self.fold(str(key)), i)
        self.candidates = np.fromiter(sorted(self.index.values()), dtype=np.int64, count=len(self.index))
        #: for each index, the index that stands for its word (itself unless a case variant)
        self.canonical = np.fromiter((self.index[self.fold(str(k))] for k in keys), dtype=np.int64,
                                     count=self.size)
        #: case variants (other than the canonical index) of each canonical index that has some
        variants: dict[int, list[int]] = {}
        for i in np.flatnonzero(self.canonical != np.arange(self.size)):
            variants.setdefault(int(self.canonical[i]), []).append(int(i))
        self.variants = {k: np.asarray(v) for k, v in variants.items()}
        self.unit = unit_rows(np.asarray(kv.vectors[: self.size], dtype=np.float32))

    def fold(self, word: str) -> str:
        return word.upper() if self.case_insensitive else word

    def get(self, word: str) -> Optional[int]:
        return self.index.get(self.fold(word))

    def indices(self, words) -> Optional[list[int]]:
        """Indices of all ``words``, or None if any of them is unknown."""
        found = [self.get(w) for w in words]
        return None if any(i is None for i in found) else found


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; all-zero rows stay zero."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def batch_rows(n_columns: int, budget_bytes: int = 128 << 20, itemsize: int = 4) -> int:
    """How many rows of ``n_columns`` float32 fit in ``budget_bytes`` (at least one)."""
    return max(1, budget_bytes // max(1, n_columns * itemsize))
