"""Word analogies ``a : b :: c : ?`` (Google ``questions-words.txt`` format), 3CosAdd and 3CosMul.

Protocol = gensim's ``KeyedVectors.evaluate_word_analogies`` (default arguments): questions with
a word outside the first ``restrict_vocab`` words are skipped and counted as OOV; the answer is
searched among those words, never one of ``a``, ``b``, ``c`` (nor their case variants); lookups are
case-insensitive unless asked otherwise.

* 3CosAdd (Mikolov et al. 2013): ``argmax_d cos(d, b) - cos(d, a) + cos(d, c)``.
* 3CosMul (Levy & Goldberg 2014): ``argmax_d cos'(d, b) cos'(d, c) / (cos'(d, a) + eps)`` with
  ``cos' = (cos + 1) / 2`` and ``eps = 1e-3`` as in the paper.

Vectorised: vectors are normalised once; each batch of questions costs one matrix product between
the batch's distinct words and the vocabulary, then elementwise work.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from functools import partial
from pathlib import Path
from typing import Optional

import numpy as np

from ..options import Option
from .datasets import DatasetMissing, Parsed, default_analogy_path, numbered_lines, require
from .results import Score, ratio
from .tasks import EvaluationTask, Panel, all_among, choice_list, register_task
from .vectors import Lookup, batch_rows

logger = logging.getLogger(__name__)

TASK = "analogy"
METHODS = ("3cosadd", "3cosmul")
METHOD_LABELS = {"3cosadd": "3CosAdd", "3cosmul": "3CosMul"}
DEFAULT_EPSILON = 1e-3


@dataclasses.dataclass
class Section:
    name: str
    questions: list  # of (a, b, c, expected)

    @property
    def syntactic(self) -> bool:
        """Google's convention: the syntactic sections are the ``gram*`` ones."""
        return self.name.startswith("gram")


def read_analogies(path: os.PathLike) -> Parsed:
    """Sections (``: name`` lines) of ``a b c d`` questions; records are :class:`Section`."""
    path = require(path, "analogy file")
    parsed = Parsed(str(path), [])
    section = None
    for _, line in numbered_lines(path):
        if line.startswith(":"):
            section = Section(line.lstrip(": ").strip(), [])
            parsed.records.append(section)
            continue
        words = line.split()
        if len(words) != 4:
            parsed.malformed_lines += 1
            continue
        if section is None:
            section = Section("questions", [])
            parsed.records.append(section)
        section.questions.append(tuple(words))
    if parsed.malformed_lines:
        logger.warning("%s: %d malformed lines skipped", path, parsed.malformed_lines)
    if not any(section.questions for section in parsed.records):
        raise DatasetMissing(f"analogy file: no questions in {path}")
    return parsed


def predict(lookup: Lookup, questions: np.ndarray, method: str = "3cosadd",
            epsilon: float = DEFAULT_EPSILON, budget_bytes: int = 32 << 20) -> np.ndarray:
    """Answer each ``(a, b, c)`` row of word indices; returns canonical word indices."""
    if method not in METHODS:
        raise ValueError(f"unknown analogy method {method!r}; use one of {', '.join(METHODS)}")
    questions = np.asarray(questions, dtype=np.int64).reshape(-1, 3)
    answers = np.empty(len(questions), dtype=np.int64)
    step = batch_rows(lookup.size, budget_bytes)
    for start in range(0, len(questions), step):
        batch = questions[start:start + step]
        words, where = np.unique(batch, return_inverse=True)
        where = where.reshape(batch.shape)
        sims = lookup.unit[words] @ lookup.unit.T
        if method == "3cosadd":
            scores = sims[where[:, 1]]
            scores += sims[where[:, 2]]
            scores -= sims[where[:, 0]]
        else:  # 3cosmul; the factors 1/2 of cos' are dropped, they do not move the argmax
            sims += 1.0
            scores = sims[where[:, 1]] * sims[where[:, 2]]
            scores /= sims[where[:, 0]] + 2.0 * epsilon
        _exclude_question_words(lookup, batch, scores)
        answers[start:start + len(batch)] = lookup.canonical[np.argmax(scores, axis=1)]
    return answers


def _exclude_question_words(lookup: Lookup, batch: np.ndarray, scores: np.ndarray) -> None:
    scores[np.repeat(np.arange(len(batch)), 3), batch.ravel()] = -np.inf
    if lookup.variants:
        for row, triple in enumerate(batch):
            for i in triple:
                extra = lookup.variants.get(int(i))
                if extra is not None:
                    scores[row, extra] = -np.inf


def evaluate_analogies(lookup: Lookup, data: Parsed, name: str = "google", methods=METHODS,
                       epsilon: float = DEFAULT_EPSILON) -> list[Score]:
    """Accuracy per section and for the semantic, syntactic and all sections, for each method."""
    sections = [s for s in data.records if s.questions]
    known, where = [], []  # index quadruples of the answerable questions, and their section
    for number, section in enumerate(sections):
        for question in section.questions:
            ids = lookup.indices(question)
            if ids is not None:
                known.append(ids)
                where.append(number)
    known = np.asarray(known, dtype=np.int64).reshape(-1, 4)
    where = np.asarray(where, dtype=np.int64)
    totals = np.array([len(s.questions) for s in sections])
    covered = np.bincount(where, minlength=len(sections))
    logger.info("%s: %d of %d questions in the vocabulary", name, len(known), totals.sum())

    groups = [(f"{name}:{s.name}", np.array([i])) for i, s in enumerate(sections)]
    semantic = np.array([i for i, s in enumerate(sections) if not s.syntactic], dtype=np.int64)
    syntactic = np.array([i for i, s in enumerate(sections) if s.syntactic], dtype=np.int64)
    if len(semantic) and len(syntactic):
        groups += [(f"{name}:semantic", semantic), (f"{name}:syntactic", syntactic)]
    groups.append((name, np.arange(len(sections))))

    scores = []
    for method in methods:
        right = np.zeros(len(sections), dtype=np.int64)
        if len(known):
            answers = predict(lookup, known[:, :3], method, epsilon)
            right = np.bincount(where[answers == known[:, 3]], minlength=len(sections))
        for label, members in groups:
            n_right, n_cov, n_all = (int(x[members].sum()) for x in (right, covered, totals))
            scores.append(Score(
                TASK, label, METHOD_LABELS[method], ratio(n_right, n_cov), covered=n_cov, total=n_all,
                details={"correct": n_right, "accuracy_oov_as_wrong": ratio(n_right, n_all),
                         "oov_questions": n_all - n_cov, "malformed_lines": data.malformed_lines,
                         "path": data.path},
            ))
    return scores


def _panel_label(score: Score) -> Optional[str]:
    """The overall accuracy and the semantic / syntactic totals, not each section."""
    if ":" not in score.dataset:
        return f"{score.dataset} {score.metric}"
    if score.dataset.endswith((":semantic", ":syntactic")):
        return f"{score.dataset.split(':')[1]} {score.metric}"
    return None


@register_task(TASK)
class AnalogyTask(EvaluationTask):
    title = "analogy"
    OPTIONS = (
        Option("analogy_file", Path, metavar="FILE",
               help="questions-words.txt format (default: gensim's copy)"),
        Option("analogy_methods", choice_list(METHODS), default=METHODS, check=all_among(METHODS),
               help="comma-separated"),
    )
    METRICS = {None: (0.0, 1.0)}
    PANELS = (Panel("Analogy accuracy", _panel_label, order=20),)

    def requested(self, given: dict) -> set:
        return {"google"} if given.get("analogy_file") else set()

    def plan(self, settings: dict, root: Path) -> list:
        path = settings["analogy_file"] or default_analogy_path(root)
        return [("google", partial(_read_job, path, settings["analogy_methods"]))]


def _read_job(path, methods):
    return partial(evaluate_analogies, data=read_analogies(path), name="google", methods=methods)
