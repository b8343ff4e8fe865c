"""Word-pair similarity: Spearman and Pearson correlation of cosine similarity with human scores.

Same protocol as gensim's ``KeyedVectors.evaluate_word_pairs`` (default arguments): pairs with a
word outside the first ``restrict_vocab`` words are skipped and counted as OOV; lookups are
case-insensitive unless asked otherwise.
"""
from __future__ import annotations

import logging
import os
from functools import partial
from pathlib import Path

import numpy as np
from scipy import stats

from ..options import Option
from .datasets import SIMILARITY_FILES, Parsed, default_similarity_path, parse_lines, split_fields
from .results import Score
from .tasks import EvaluationTask, Panel, Repeated, choice_list, named_value, register_task
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


@register_task(TASK)
class SimilarityTask(EvaluationTask):
    """Every built-in word-pair set by default; ``--pairs NAME=PATH`` adds one (or moves one)."""

    title = "word-pair similarity"
    OPTIONS = (Option("similarity_files", dict, cli=False,
                      help="name -> word-pair file (None: the built-in set's default place); "
                           "None: every built-in set"),)
    FLAGS = (
        Option("similarity_sets", choice_list(SIMILARITY_FILES), flag="--similarity-sets",
               help=f"built-in sets (default all, 'none' for --pairs only): {','.join(SIMILARITY_FILES)}"),
        Option("pairs", Repeated(named_value), flag="--pairs", metavar="NAME=PATH",
               help="a word<TAB>word<TAB>score file; adds a set or replaces a built-in one's path"),
    )
    METRICS = {None: (-1.0, 1.0)}
    PANELS = (Panel("Word-pair similarity (Spearman)",
                    lambda s: s.dataset if s.metric == "spearman" else None, order=10),)

    def settings_from_flags(self, given: dict) -> dict:
        files = dict.fromkeys(given.get("similarity_sets", SIMILARITY_FILES))
        files.update({name: Path(path) for name, path in given.get("pairs", ())})
        return {"similarity_files": files}

    def requested(self, given: dict) -> set:
        return {*given.get("similarity_sets", ()), *(name for name, _ in given.get("pairs", ()))}

    def plan(self, settings: dict, root: Path) -> list:
        files = settings["similarity_files"]
        files = dict.fromkeys(SIMILARITY_FILES) if files is None else files
        plan = []
        for name, path in files.items():
            if path is None and name in SIMILARITY_FILES:
                path = default_similarity_path(name, root)
            plan.append((name, partial(_read_job, path, name)))
        return plan


def _read_job(path, name):
    return partial(evaluate_word_pairs, pairs=read_word_pairs(path), name=name)
