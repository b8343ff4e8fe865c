"""Load word vectors from anything people hand us, and look words up the way gensim does.

Accepted sources: a gensim ``KeyedVectors`` (or any object with a ``.wv`` attribute, e.g. a
``Word2Vec`` model), word2vec text or binary files, gensim ``.kv`` files, and semhuff model files
(``*.npz``, through ``semhuff.model.load_vectors``).

Text files are read by a tolerant reader: lines that are malformed, have the wrong number of
dimensions or repeat a word are counted in a :class:`LoadReport` and skipped instead of failing
the whole file.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Optional

import numpy as np
from gensim.models import KeyedVectors

from ..errors import VectorsError

logger = logging.getLogger(__name__)

#: same default as gensim's ``evaluate_word_pairs`` / ``evaluate_word_analogies``
DEFAULT_RESTRICT_VOCAB = 300_000


@dataclasses.dataclass
class LoadReport:
    """What the loader had to skip; all zero for a clean file."""

    source: str
    words: int = 0
    dimensions: int = 0
    malformed_lines: int = 0
    wrong_dimension_lines: int = 0
    duplicate_words: int = 0

    @property
    def problems(self) -> int:
        return self.malformed_lines + self.wrong_dimension_lines + self.duplicate_words


@dataclasses.dataclass
class LoadedVectors:
    name: str
    vectors: KeyedVectors
    report: LoadReport


def load_vectors(source, name: Optional[str] = None, fmt: str = "auto") -> LoadedVectors:
    """Load ``source`` (a path or an in-memory vectors object).

    ``fmt`` is one of ``auto``, ``text``, ``binary``, ``kv``, ``npz``; ``auto`` decides from the
    file name and, for word2vec files, from the bytes after the header line.
    """
    if not isinstance(source, (str, os.PathLike)):
        kv = _as_keyed_vectors(source, type(source).__name__)
        label = name or "vectors"
        return LoadedVectors(label, kv, LoadReport(label, len(kv), kv.vector_size))

    path = os.fspath(source)
    label = name or _default_name(path)
    if not os.path.isfile(path):
        raise VectorsError(f"vectors file not found: {path}")
    if os.path.getsize(path) == 0:
        raise VectorsError(f"vectors file is empty: {path}")
    fmt = _detect_format(path) if fmt == "auto" else fmt
    report = LoadReport(path)
    try:
        if fmt == "npz":
            kv = _load_semhuff_model(path)
        elif fmt == "kv":
            kv = KeyedVectors.load(path)
        elif fmt == "binary":
            kv = KeyedVectors.load_word2vec_format(path, binary=True, unicode_errors="replace")
        elif fmt == "text":
            kv = _load_text(path, report)
        else:
            raise VectorsError(f"unknown vectors format {fmt!r} (use auto, text, binary, kv or npz)")
    except VectorsError:
        raise
    except Exception as exc:  # noqa: BLE001 - any user file: one clear error, never a traceback
        raise VectorsError(f"cannot read {fmt} vectors from {path}: {type(exc).__name__}: {exc}") from exc
    kv = _as_keyed_vectors(kv, path)
    report.words, report.dimensions = len(kv), kv.vector_size
    if report.problems:
        logger.warning(
            "%s: skipped %d malformed, %d wrong-dimension and %d duplicate lines",
            path, report.malformed_lines, report.wrong_dimension_lines, report.duplicate_words,
        )
    return LoadedVectors(label, kv, report)


def _default_name(path: str) -> str:
    base = os.path.basename(path.rstrip(os.sep))
    for ext in (".gz", ".bz2"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    stem, ext = os.path.splitext(base)
    return stem if ext else base


def _detect_format(path: str) -> str:
    lower = path.lower()
    if lower.endswith(".npz"):
        return "npz"
    if lower.endswith((".kv", ".model")):
        return "kv"
    if lower.endswith((".bin", ".bin.gz")):
        return "binary"
    if lower.endswith((".gz", ".bz2")):
        return "text"
    with open(path, "rb") as fh:
        head = fh.readline(1024)
        body = fh.read(4096)
    if head.startswith(b"\x93NUMPY") or head.startswith(b"PK\x03\x04"):
        return "npz"
    if head.startswith(b"\x80"):  # a pickle: gensim's native save format
        return "kv"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the end of the sample is still text
        if exc.start < len(body) - 4:
            return "binary"
    return "binary" if b"\x00" in body else "text"


def _load_semhuff_model(path: str):
    try:
        from semhuff.model import load_vectors as load_model_vectors
    except ImportError as exc:
        raise VectorsError(
            f"cannot read semhuff model {path}: semhuff.model.load_vectors is not available ({exc})"
        ) from exc
    return load_model_vectors(path)


def _load_text(path: str, report: LoadReport) -> KeyedVectors:
    """word2vec text format with or without the ``count dim`` header (GloVe files have none)."""
    from gensim import utils

    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    dim: Optional[int] = None
    with utils.open(path, "rb") as fh:
        for line_no, raw in enumerate(fh):
            parts = raw.decode("utf-8", errors="replace").split()
            if not parts:
                continue
            if line_no == 0 and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                dim = int(parts[1])
                continue
            if len(parts) < 2:
                report.malformed_lines += 1
                continue
            try:
                row = np.asarray(parts[1:], dtype=np.float32)
            except ValueError:
                report.malformed_lines += 1
                continue
            if dim is None:
                dim = len(row)
            if len(row) != dim:
                report.wrong_dimension_lines += 1
                continue
            if parts[0] in seen:
                report.duplicate_words += 1
                continue
            seen.add(parts[0])
            words.append(parts[0])
            rows.append(row)
    if not rows:
        raise VectorsError(f"no usable vectors in {path}")
    kv = KeyedVectors(vector_size=dim, dtype=np.float32)
    kv.add_vectors(words, np.vstack(rows))
    return kv


def _as_keyed_vectors(obj, label: str) -> KeyedVectors:
    """``obj`` itself, or its ``.wv`` (a whole Word2Vec model), when it holds some vectors."""
    kv = getattr(obj, "wv", obj)
    if not isinstance(kv, KeyedVectors):
        raise VectorsError(f"not word vectors: {label} holds a {type(obj).__name__}")
    if len(kv) == 0 or kv.vector_size == 0:
        raise VectorsError(f"no vectors in {label}")
    return kv


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

    def same_word_indices(self, i: int) -> np.ndarray:
        """``i`` and its case variants."""
        extra = self.variants.get(i)
        return np.array([i]) if extra is None else np.concatenate(([i], extra))


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; all-zero rows stay zero."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def batch_rows(n_columns: int, budget_bytes: int = 128 << 20, itemsize: int = 4) -> int:
    """How many rows of ``n_columns`` float32 fit in ``budget_bytes`` (at least one)."""
    return max(1, budget_bytes // max(1, n_columns * itemsize))
