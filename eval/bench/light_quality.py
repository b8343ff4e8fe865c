"""WS353 / SimLex Spearman and Google analogy accuracy without gensim, for machines that lack it
(the GPU image the device checks run on has numpy and scipy, not gensim).

The same protocol as gensim's ``KeyedVectors.evaluate_word_pairs`` and
``evaluate_word_analogies`` with their default arguments (``eval/bench/train.py: quality``):
words compared in upper case, the first (most frequent) of a word's case variants taken; pairs
with a word outside the first 300,000 words skipped; analogy questions with a word outside the
first 30,000 skipped, each answered by 3CosAdd over those 30,000 unit vectors with the three
question words excluded; the score is correct / answered over every section. Tested equal to
gensim's figures on a trained model (``tests/test_gpu_bench.py``).
"""
from __future__ import annotations

import os
from typing import Dict, Sequence

import numpy as np
from scipy import stats

FILES = {"ws353": "wordsim353.tsv", "simlex": "simlex999.txt", "analogy": "questions-words.txt"}


def _index(words: Sequence[str], restrict: int) -> Dict[str, int]:
    """Upper-cased word -> row among the first ``restrict`` words, the first variant winning."""
    index: Dict[str, int] = {}
    for i, word in enumerate(words[:restrict]):
        index.setdefault(word.upper(), i)
    return index


def _unit(vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(norms > 0, norms, 1)


def word_pairs(words: Sequence[str], vectors: np.ndarray, path: str,
               restrict: int = 300_000) -> float:
    """Spearman correlation of the cosine similarities with a pairs file's judgements."""
    index = _index(words, restrict)
    unit = _unit(vectors[:restrict])
    gold, model = [], []
    with open(path, encoding="utf8") as fh:
        for line in fh:
            if not line or line.startswith("#"):
                continue
            try:
                a, b, sim = [w.upper() for w in line.split("\t")]
                sim = float(sim)
            except ValueError:
                continue
            if a in index and b in index:
                gold.append(sim)
                model.append(float(unit[index[a]] @ unit[index[b]]))
    return float(stats.spearmanr(gold, model).statistic)


def analogies(words: Sequence[str], vectors: np.ndarray, path: str, restrict: int = 30_000,
              batch: int = 2048) -> float:
    """The share of the analogy questions answered (3CosAdd) that were answered right."""
    index = _index(words, restrict)
    unit = _unit(vectors[:restrict])
    questions = []
    with open(path, encoding="utf8") as fh:
        for line in fh:
            if line.startswith(": "):
                continue
            parts = [w.upper() for w in line.split()]
            if len(parts) == 4 and all(w in index for w in parts):
                questions.append([index[w] for w in parts])
    if not questions:
        return 0.0
    q = np.array(questions, np.int64)
    correct = 0
    for start in range(0, len(q), batch):
        a, b, c, expected = q[start:start + batch].T
        target = unit[b] + unit[c] - unit[a]
        scores = target @ unit.T
        rows = np.arange(len(a))
        for excluded in (a, b, c):
            scores[rows, excluded] = -np.inf
        correct += int((scores.argmax(axis=1) == expected).sum())
    return correct / len(q)


def quality(words: Sequence[str], vectors: np.ndarray, folder: str) -> dict:
    """The three figures, from the files ``FILES`` in ``folder``."""
    path = {key: os.path.join(folder, name) for key, name in FILES.items()}
    return {"ws353": word_pairs(words, vectors, path["ws353"]),
            "simlex": word_pairs(words, vectors, path["simlex"]),
            "analogy": analogies(words, vectors, path["analogy"])}


def gensim_data_folder() -> str:
    """Where gensim keeps its copies of the three files (on a machine that has gensim)."""
    from gensim.test.utils import datapath
    return os.path.dirname(datapath(FILES["ws353"]))
