"""Word-pair similarity: Spearman and Pearson correlation of cosine similarity with human scores.

Same protocol as gensim's ``KeyedVectors.evaluate_word_pairs`` (default arguments): pairs with a
word outside the first ``restrict_vocab`` words are skipped and counted as OOV; lookups are
case-insensitive unless asked otherwise.
"""
from __future__ import annotations

import logging
import os

import numpy as np
from scipy import stats

from .datasets import Parsed, parse_lines, split_fields
from .results import Score
from .vectors import Lookup

logger = logging.getLogger(__name__)

TASK = "similarity"


def _parse_scored_pair(line: str):
    fields = split_fields(line)
    if len(fields) != 3:
        return None
    return fields[0], fields[1], float(fields[2])


def read_word_pairs(path: os.PathLike) -> Parsed:
    """``word1 word2 score`` lines (tab- or space-separated; ``#`` comments allowed)."""
    return parse_lines(path, _parse_scored_pair, "word-pair file")


def evaluate_word_pairs(lookup: Lookup, pairs: Parsed, name: str) -> list[Score]:
    """Spearman and Pearson scores for one data set (both NaN when fewer than 3 pairs are known)."""
    gold, found = [], []
    for a, b, score in pairs.records:
        ids = lookup.indices((a, b))
        if ids is not None:
            gold.append(score)
            found.append(ids)
    total, used = len(pairs.records), len(gold)
    details = {"oov_pairs": total - used, "malformed_lines": pairs.malformed_lines, "path": pairs.path}
    if used >= 3:
        ids = np.asarray(found)
        model = np.einsum("ij,ij->i", lookup.unit[ids[:, 0]], lookup.unit[ids[:, 1]])
        spearman = float(stats.spearmanr(gold, model).statistic)
        pearson = float(stats.pearsonr(gold, model).statistic)
    else:
        logger.warning("%s: only %d of %d pairs in the vocabulary, no correlation", name, used, total)
        spearman = pearson = float("nan")
    return [
        Score(TASK, name, "spearman", spearman, covered=used, total=total, details=details),
        Score(TASK, name, "pearson", pearson, covered=used, total=total, details=details),
    ]
