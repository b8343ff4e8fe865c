"""Similarity from a user file; each line is either ``word word weight`` (a weighted pair:
exactly three fields, the last a number) or a synonym set of two or more words (every pair gets
weight 1). Fields are separated by white space or commas, ``#`` starts a comment."""
from __future__ import annotations

import math
import re
from typing import List, Optional

import scipy.sparse as sp

from ...errors import SimilarityError
from .core import DEFAULT_TOP_K, SimilarityReport, _word_index, similarity_from_pairs

_FIELD_SPLIT = re.compile(r"[\s,]+")


def _as_weight(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def pairs_file_similarity(path: str, vocab, top_k: int = DEFAULT_TOP_K,
                          report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Similarity from a file of weighted pairs (``a b 0.7``) or synonym sets (``a b c``)."""
    words, index = _word_index(vocab)
    report = report if report is not None else SimilarityReport()
    report.source = f"pairs file {path}"
    rows: List[int] = []
    cols: List[int] = []
    weights: List[float] = []
    try:
        fh = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SimilarityError(f"cannot read similarity file {path}: {exc.strerror or exc}") from None
    with fh:
        for line_no, line in enumerate(fh, 1):
            fields = [f for f in _FIELD_SPLIT.split(line.split("#", 1)[0].strip()) if f]
            if not fields:
                continue
            report.items_read += 1
            weight = _as_weight(fields[-1]) if len(fields) == 3 else None
            members = fields[:2] if weight is not None else fields
            if len(members) < 2 or any(_as_weight(f) is not None for f in members):
                report.note("malformed_lines", f"line {line_no}: {line.strip()[:60]!r}")
                continue
            if weight is None:
                weight = 1.0
            if not (math.isfinite(weight) and weight >= 0):
                report.note("bad_weights", f"line {line_no}: weight {fields[-1]}")
                continue
            ids = []
            for word in members:
                if word in index:
                    ids.append(index[word])
                else:
                    report.note("unknown_words", f"line {line_no}: {word!r} not in vocabulary")
            if len(members) == 2 and len(ids) == 2 and ids[0] == ids[1]:
                report.note("self_pairs", f"line {line_no}: {members[0]!r} paired with itself")
                continue
            for i, a in enumerate(ids):
                for b in ids[i + 1:]:
                    if a != b:
                        rows.append(a)
                        cols.append(b)
                        weights.append(weight)
    return similarity_from_pairs(rows, cols, weights, len(words), top_k, report)
