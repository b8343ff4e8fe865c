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
import math
import os
from functools import partial
from pathlib import Path

import numpy as np

from ..options import Option
from . import thesaurus
from .datasets import Parsed, default_wordnet_dir, parse_lines, split_fields
from .results import Score
from .tasks import EvaluationTask, Panel, register_task
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


@register_task(TASK)
class SynonymsTask(EvaluationTask):
    """Pairs from a file (``--synonyms``), else built on the fly from WordNet (about a second)."""

    title = "synonyms (MR/MRR)"
    OPTIONS = (
        Option("synonym_file", Path, flag="--synonyms", metavar="SYNONYMS",
               help="word<TAB>word pairs file (default: built from WordNet)"),
        Option("wordnet_dir", Path, flag="--wordnet", metavar="WORDNET",
               help="WordNet dict folder (default: <data>/wordnet)"),
        Option("synonym_direction", str, default="both", choices=DIRECTIONS,
               help="both: ask A->B and B->A for every pair; forward: A->B only"),
    )
    METRICS = {"MRR": (0.0, 1.0), "MR": (1.0, math.inf)}
    PANELS = (Panel("Synonym MRR", lambda s: s.dataset if s.metric != "MR" else None, order=40),
              Panel("Synonym mean rank (lower is better)", lambda s: s.dataset if s.metric == "MR" else None,
                    order=50, log_scale=True))

    @staticmethod
    def _dataset(synonym_file) -> str:
        return Path(synonym_file).stem if synonym_file else "wordnet"

    def requested(self, given: dict) -> set:
        if given.get("synonym_file") or given.get("wordnet_dir"):
            return {self._dataset(given.get("synonym_file"))}
        return set()

    def plan(self, settings: dict, root: Path) -> list:
        pairs_file = settings["synonym_file"]
        source = pairs_file or settings["wordnet_dir"] or default_wordnet_dir(root)
        name = self._dataset(pairs_file)
        return [(name, partial(_read_job, source, pairs_file is not None, name, settings["synonym_direction"]))]


def _read_job(source, is_pairs_file: bool, name: str, direction: str):
    if is_pairs_file:
        pairs = read_synonym_pairs(source)
    else:  # a WordNet folder: pairs made on the fly (about a second)
        pairs = Parsed(str(source), thesaurus.synonym_pairs(thesaurus.wordnet_synsets(source)))
    return partial(evaluate_synonyms, pairs=pairs, name=name, direction=direction)
