"""Mean rank (MR) and mean reciprocal rank (MRR) on synonym pairs, the SemHuff paper's §4.1.

For a query ``A -> B`` the rank of ``B`` is its position among the candidate words ordered by
cosine similarity to ``A`` (rank 1 = nearest). Protocol:

* candidates: every distinct word among the first ``restrict_vocab`` words, except ``A`` itself;
* ties (equal cosine): ``B`` gets the mean of the tied positions (1 + #higher + #tied_others / 2);
* direction: ``both`` (default) asks ``A -> B`` and ``B -> A`` for every listed pair, so the
  result does not depend on how a pairs file orders its pairs; ``forward`` asks only ``A -> B``;
* pairs with a word outside the candidates, and pairs of a word with itself, are skipped and counted.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from .datasets import Parsed, parse_lines, split_fields
from .results import Score
from .vectors import Lookup, batch_rows

logger = logging.getLogger(__name__)

TASK = "synonyms"
DIRECTIONS = ("both", "forward")


def _parse_pair(line: str):
    fields = split_fields(line)
    return (fields[0], fields[1]) if len(fields) >= 2 else None


def read_synonym_pairs(path: os.PathLike) -> Parsed:
    """``word1<TAB>word2`` lines (further columns ignored, ``#`` comments allowed)."""
    return parse_lines(path, _parse_pair, "synonym pairs file")


def synonym_ranks(lookup: Lookup, queries: np.ndarray, budget_bytes: int = 64 << 20) -> np.ndarray:
    """Rank of ``B`` among the candidates by cosine to ``A`` for each ``(A, B)`` row of indices."""
    queries = np.asarray(queries, dtype=np.int64).reshape(-1, 2)
    candidates = lookup.candidates
    column = np.full(lookup.size, -1, dtype=np.int64)
    column[candidates] = np.arange(len(candidates))
    cand_unit = lookup.unit[candidates]
    order = np.argsort(queries[:, 0], kind="stable")
    ranks = np.empty(len(queries), dtype=np.float64)
    step = batch_rows(len(candidates), budget_bytes)
    for start in range(0, len(order), step):
        rows = order[start:start + step]
        sources, where = np.unique(queries[rows, 0], return_inverse=True)
        sims = lookup.unit[sources] @ cand_unit.T
        sims[np.arange(len(sources)), column[sources]] = -np.inf  # A is not its own candidate
        own = sims[where, column[queries[rows, 1]]]
        row_sims = sims[where]
        higher = np.count_nonzero(row_sims > own[:, None], axis=1)
        tied = np.count_nonzero(row_sims == own[:, None], axis=1) - 1
        ranks[rows] = 1.0 + higher + tied / 2.0
    return ranks


def evaluate_synonyms(lookup: Lookup, pairs: Parsed, name: str = "wordnet",
                      direction: str = "both") -> list[Score]:
    """MR (lower is better) and MRR (higher is better) over all answerable queries."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; use one of {', '.join(DIRECTIONS)}")
    known = []
    for a, b in pairs.records:
        ids = lookup.indices((a, b))
        if ids is not None and ids[0] != ids[1]:
            known.append(ids)
    queries = np.asarray(known, dtype=np.int64).reshape(-1, 2)
    if direction == "both":
        queries = np.concatenate([queries, queries[:, ::-1]])
    total = len(pairs.records)
    details = {"direction": direction, "queries": len(queries), "oov_or_self_pairs": total - len(known),
               "candidates": int(len(lookup.candidates)) - 1, "malformed_lines": pairs.malformed_lines,
               "path": pairs.path}
    if len(queries):
        ranks = synonym_ranks(lookup, queries)
        mean_rank, mrr = float(ranks.mean()), float((1.0 / ranks).mean())
        details.update(median_rank=float(np.median(ranks)), hits_at_10=float(np.mean(ranks <= 10)))
    else:
        logger.warning("%s: no synonym pair has both words in the vocabulary", name)
        mean_rank = mrr = float("nan")
    return [
        Score(TASK, name, "MR", mean_rank, higher_is_better=False, covered=len(known), total=total,
              details=details),
        Score(TASK, name, "MRR", mrr, covered=len(known), total=total, details=details),
    ]
