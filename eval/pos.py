"""POS tagging with embeddings as the only features, the SemHuff paper's §4.3.

Each token's features are the embeddings of the words in a window around it (``window`` words
each side), concatenated. Vectors are unit-normalised so models of any scale compare fairly.
A word missing from the vectors contributes a zero vector plus an "unknown" flag, a position
beyond the sentence edge a zero vector plus a "padding" flag: for a linear model that is the same
as learning one unknown vector and one padding vector. The classifier is scikit-learn's
multinomial ``LogisticRegression`` (a linear softmax, as in the paper; lbfgs converges in
a few dozen passes and needs no learning-rate tuning, unlike ``SGDClassifier``, whose log-loss
is one-vs-rest rather than a softmax).

Reported: accuracy on all test tokens and on the test tokens missing from the vectors, with two
baselines computed on the same split: the majority tag, and each word's most frequent training
tag (majority tag for unseen words).

Corpora: CoNLL-U files (Universal Dependencies; UPOS by default) and, read straight from the
NLTK data zips, CoNLL-2000, Brown and the Penn Treebank sample.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import logging
import numbers
import os
import random
import time
import warnings
import zipfile
from functools import partial
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..options import Option
from .datasets import DatasetMissing, data_root, require
from .results import Score, ratio
from .tasks import EvaluationTask, Panel, Repeated, all_among, choice_list, non_negative_int, register_task
from .vectors import Lookup

logger = logging.getLogger(__name__)

TASK = "pos"
Sentence = list  # of (word, tag)
UNKNOWN, PADDING = -1, -2
DEFAULT_WINDOW = 2
DEFAULT_MAX_TRAIN_TOKENS = 50_000


# ---------------------------------------------------------------- readers

def read_conllu(path: os.PathLike, column: str = "upos") -> list[Sentence]:
    """Sentences of (form, tag) from a CoNLL-U file; ``column`` is ``upos`` or ``xpos``.
    Multi-word token ranges and empty nodes are skipped, as are tokens whose tag is ``_``."""
    tag_at = {"upos": 3, "xpos": 4}[column]
    sentences, current = [], []
    with open(require(path, "CoNLL-U file"), encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line.strip():
                if current:
                    sentences.append(current)
                current = []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) < 5 or not cols[0].isdigit() or cols[tag_at] == "_":
                continue
            current.append((cols[1], cols[tag_at]))
    if current:
        sentences.append(current)
    return sentences


def read_columns(text: str) -> list[Sentence]:
    """``word TAG [more]`` lines, blank line between sentences (CoNLL-2000 layout)."""
    sentences, current = [], []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 2:
            current.append((cols[0], cols[1]))
        elif current:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


def read_slash_tagged(text: str, sentence_per_line: bool) -> list[Sentence]:
    """``word/TAG`` tokens (Brown: one sentence a line; PTB ``.pos``: blank line between sentences,
    ``[ ]`` chunk brackets and ``-NONE-`` traces dropped, ``A|B`` tags reduced to ``A``)."""
    blocks = text.splitlines() if sentence_per_line else text.split("\n\n")
    sentences = []
    for block in blocks:
        sentence = []
        for token in block.split():
            word, slash, tag = token.rpartition("/")
            if not slash or not word or tag == "-NONE-" or token in ("[", "]"):
                continue
            sentence.append((word.replace("\\/", "/"), tag.split("|")[0]))
        if sentence:
            sentences.append(sentence)
    return sentences


def _zip_texts(zip_path: Path, keep: Callable[[str], bool]) -> list[str]:
    with zipfile.ZipFile(zip_path) as zf:
        return [zf.read(n).decode("utf-8", errors="replace") for n in sorted(zf.namelist()) if keep(n)]


# ---------------------------------------------------------------- corpora with train/test splits

@dataclasses.dataclass
class PosCorpus:
    name: str
    train: list
    test: list
    note: str = ""


def _every_nth(sentences: list, n: int = 10):
    """Deterministic split: every ``n``-th sentence to test, the rest to train."""
    return [s for i, s in enumerate(sentences) if i % n], sentences[::n]


def _conll2000(root: Path) -> PosCorpus:
    z = require(root / "nltk_data" / "corpora" / "conll2000.zip", "CoNLL-2000 zip")
    train, test = (read_columns(t) for t in
                   (_zip_texts(z, lambda n: n.endswith(part))[0] for part in ("train.txt", "test.txt")))
    return PosCorpus("conll2000", train, test, "WSJ, PTB tags, official train/test")


def _brown(root: Path) -> PosCorpus:
    """Brown's ~470 tags (with -tl, -hl, ... variants) are mapped to the 12 universal tags of
    Petrov et al. when NLTK's ``universal_tagset`` map is there: a 470-way softmax is slow to fit
    and mostly measures the rare variants."""
    z = require(root / "nltk_data" / "corpora" / "brown.zip", "Brown zip")
    texts = _zip_texts(z, lambda n: os.path.basename(n)[:2].isalpha() and os.path.basename(n)[2:].isdigit())
    sentences = [s for t in texts for s in read_slash_tagged(t, sentence_per_line=True)]
    note = "Brown tags"
    mapping_zip = root / "nltk_data" / "taggers" / "universal_tagset.zip"
    if mapping_zip.is_file():
        lines = _zip_texts(mapping_zip, lambda n: n.endswith("en-brown.map"))[0].splitlines()
        mapping = dict(line.split("\t") for line in lines if line.count("\t") == 1)
        sentences = [[(w, mapping.get(t.upper(), "X")) for w, t in s] for s in sentences]
        note = "Brown tags mapped to the 12 universal tags"
    return PosCorpus("brown", *_every_nth(sentences), note + ", every 10th sentence is test")


def _treebank(root: Path) -> PosCorpus:
    z = require(root / "nltk_data" / "corpora" / "treebank.zip", "Penn Treebank sample zip")
    texts = _zip_texts(z, lambda n: "/tagged/" in n and n.endswith(".pos"))
    split = int(len(texts) * 0.9)
    tagged = [read_slash_tagged(t, sentence_per_line=False) for t in texts]
    return PosCorpus("treebank", [s for f in tagged[:split] for s in f], [s for f in tagged[split:] for s in f],
                     "PTB 10% sample, first 90% of files train")


def _ud(folder: str, train: str, test: str, note: str = "") -> Callable[[Path], PosCorpus]:
    def build(root: Path) -> PosCorpus:
        base = root / "ud_english" / folder
        name = "ud-" + folder.rsplit("-", 1)[-1].lower()
        return PosCorpus(name, read_conllu(base / train), read_conllu(base / test), note or "UPOS, train/test")
    return build


POS_CORPORA: dict[str, Callable[[Path], PosCorpus]] = {
    "conll2000": _conll2000,
    "ud-lines": _ud("UD_English-LinES", "en_lines-ud-train.conllu", "en_lines-ud-test.conllu"),
    "ud-partut": _ud("UD_English-ParTUT", "en_partut-ud-train.conllu", "en_partut-ud-test.conllu"),
    "ud-ewt": _ud("UD_English-EWT", "en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu",
                  "UPOS, trained on dev (train file not available)"),
    "brown": _brown,
    "treebank": _treebank,
}
DEFAULT_POS_CORPORA = ("conll2000", "ud-lines")


def load_pos_corpus(name: str, root: Optional[Path] = None) -> PosCorpus:
    if name not in POS_CORPORA:
        raise ValueError(f"unknown POS corpus {name!r}; use one of {', '.join(POS_CORPORA)}")
    corpus = POS_CORPORA[name](data_root() if root is None else root)
    if not corpus.train or not corpus.test:
        raise DatasetMissing(f"POS corpus {name}: empty train or test part")
    return corpus


def load_pos_files(name: str, train: os.PathLike, test: os.PathLike) -> PosCorpus:
    """A user's own split: CoNLL-U files (``.conllu``) or ``word TAG`` column files."""
    def read(path):
        path = require(path, f"POS corpus {name}")
        if str(path).endswith(".conllu"):
            return read_conllu(path)
        return read_columns(path.read_text(encoding="utf-8", errors="replace"))
    corpus = PosCorpus(name, read(train), read(test), f"{train} / {test}")
    if not corpus.train or not corpus.test:
        raise DatasetMissing(f"POS corpus {name}: no tagged sentences in {train} or {test}")
    return corpus


# ---------------------------------------------------------------- features and classifier

def token_indices(lookup: Lookup, sentences: list) -> list[np.ndarray]:
    """Per sentence, each token's vector index or ``UNKNOWN``."""
    cache: dict[str, int] = {}
    out = []
    for sentence in sentences:
        ids = []
        for word, _ in sentence:
            i = cache.get(word)
            if i is None:
                found = lookup.get(word)
                i = cache[word] = UNKNOWN if found is None else found
            ids.append(i)
        out.append(np.asarray(ids, dtype=np.int64))
    return out


def window_features(unit: np.ndarray, sentences_ids: list, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Rows ``[vec(w-k) flags(w-k) ... vec(w+k) flags(w+k)]``, flags = (unknown, padding)."""
    pad = np.full(window, PADDING, dtype=np.int64)
    flat = np.concatenate([pad] + [part for ids in sentences_ids for part in (ids, pad)])
    centres = np.flatnonzero(flat != PADDING)
    dim = unit.shape[1]
    table = np.vstack([unit, np.zeros((1, dim), dtype=unit.dtype)])  # last row: unknown and padding
    block = dim + 2
    features = np.zeros((len(centres), (2 * window + 1) * block), dtype=np.float32)
    for slot, offset in enumerate(range(-window, window + 1)):
        ids = flat[centres + offset]
        column = slot * block
        features[:, column:column + dim] = table[np.where(ids >= 0, ids, len(unit))]
        features[:, column + dim] = ids == UNKNOWN
        features[:, column + dim + 1] = ids == PADDING
    return features


def _cap_tokens(sentences: list, max_tokens: Optional[int], seed: int = 0) -> list:
    """A random subset of sentences (fixed seed) holding about ``max_tokens`` tokens."""
    if not max_tokens or sum(map(len, sentences)) <= max_tokens:
        return sentences
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    kept, total = [], 0
    for i in order:
        if total >= max_tokens:
            break
        kept.append(i)
        total += len(sentences[i])
    return [sentences[i] for i in sorted(kept)]


def baselines(train: list, test: list) -> dict:
    """Majority-tag and per-word most-frequent-tag accuracy on ``test``."""
    tag_counts = collections.Counter(t for s in train for _, t in s)
    majority = tag_counts.most_common(1)[0][0]
    by_word: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for s in train:
        for w, t in s:
            by_word[w][t] += 1
    best = {w: c.most_common(1)[0][0] for w, c in by_word.items()}
    gold = [(w, t) for s in test for w, t in s]
    return {
        "majority_tag": majority,
        "majority_tag_accuracy": ratio(sum(t == majority for _, t in gold), len(gold)),
        "word_most_frequent_tag_accuracy": ratio(sum(best.get(w, majority) == t for w, t in gold), len(gold)),
    }


def evaluate_pos(lookup: Lookup, corpus: PosCorpus, window: int = DEFAULT_WINDOW,
                 max_train_tokens: Optional[int] = DEFAULT_MAX_TRAIN_TOKENS, max_iter: int = 200,
                 seed: int = 0) -> list[Score]:
    """Train the window softmax tagger on ``corpus.train`` and score it on ``corpus.test``."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    started = time.perf_counter()
    train = _cap_tokens(corpus.train, max_train_tokens, seed)
    train_ids, test_ids = token_indices(lookup, train), token_indices(lookup, corpus.test)
    x_train = window_features(lookup.unit, train_ids, window)
    x_test = window_features(lookup.unit, test_ids, window)
    y_train = np.array([t for s in train for _, t in s])
    y_test = np.array([t for s in corpus.test for _, t in s])
    classifier = LogisticRegression(max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        classifier.fit(x_train, y_train)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    right = classifier.predict(x_test) == y_test
    oov = np.concatenate(test_ids) == UNKNOWN
    details = {
        "train_tokens": int(len(y_train)), "test_tokens": int(len(y_test)), "tags": int(len(classifier.classes_)),
        "window": window, "converged": converged, "seconds": round(time.perf_counter() - started, 2),
        "note": corpus.note, **baselines(train, corpus.test),
    }
    logger.info("POS %s: accuracy %.4f (%d train tokens, %.1fs)", corpus.name, right.mean(),
                len(y_train), details["seconds"])
    n_test, n_oov = len(y_test), int(oov.sum())
    details["oov_tokens"] = n_oov
    details["accuracy_in_vocabulary"] = ratio(int(right[~oov].sum()), n_test - n_oov)
    return [
        Score(TASK, corpus.name, "accuracy", float(right.mean()), covered=n_test, total=n_test, details=details),
        Score(TASK, corpus.name, "accuracy-oov", ratio(int(right[oov].sum()), n_oov), covered=n_oov,
              total=n_test, details=details),
    ]


# ---------------------------------------------------------------- the task

def _split(text: str) -> tuple:
    """``NAME=TRAIN,TEST`` (``--pos-files``)."""
    name, sep, paths = text.partition("=")
    train, comma, test = paths.partition(",")
    if not (sep and name and comma and train and test):
        raise argparse.ArgumentTypeError(f"expected NAME=TRAIN,TEST, got {text!r}")
    return name, (Path(train), Path(test))


def _window(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


_window.__name__ = "int"  # argparse: "invalid int value: 'x'"

_CORPORA = Option("pos_corpora", choice_list(POS_CORPORA), default=DEFAULT_POS_CORPORA,
                  check=all_among(POS_CORPORA),
                  help=f"available: {','.join(POS_CORPORA)}; 'none' to run only --pos-files")
def _count(value) -> Optional[str]:
    """An ``Option.check``: an integer >= 0."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0
    return None if ok else "must be an integer >= 0"


_WINDOW = Option("pos_window", _window, default=DEFAULT_WINDOW, help="words each side", check=_count)
_MAX_TRAIN = Option("pos_max_train_tokens", non_negative_int, default=DEFAULT_MAX_TRAIN_TOKENS,
                    check=_count,  # 0 or None: every training sentence
                    help="subsample training sentences to about this many tokens; 0 = all")


@register_task(TASK)
class PosTask(EvaluationTask):
    title = "POS tagging"
    OPTIONS = (
        _CORPORA,
        Option("pos_files", dict, default={}, cli=False, help="extra POS corpora: name -> (train file, test file)"),
        _WINDOW,
        _MAX_TRAIN,
    )
    FLAGS = (_CORPORA,
             Option("pos_files", Repeated(_split), flag="--pos-files", metavar="NAME=TRAIN,TEST",
                    help="your own split: CoNLL-U (.conllu) or 'word TAG' column files"),
             _WINDOW, _MAX_TRAIN)
    METRICS = {None: (0.0, 1.0)}
    PANELS = (Panel("POS tagging accuracy", lambda s: s.dataset if s.metric == "accuracy" else None, order=30),)

    def settings_from_flags(self, given: dict) -> dict:
        settings = dict(given)
        if "pos_files" in given:
            settings["pos_files"] = dict(given["pos_files"])
        return settings

    def requested(self, given: dict) -> set:
        return {*given.get("pos_corpora", ()), *(name for name, _ in given.get("pos_files", ()))}

    def plan(self, settings: dict, root: Path) -> list:
        corpora = [(n, partial(load_pos_corpus, n, root)) for n in settings["pos_corpora"]]
        corpora += [(n, partial(load_pos_files, n, *files)) for n, files in settings["pos_files"].items()]
        return [(name, partial(_read_job, load, settings["pos_window"], settings["pos_max_train_tokens"]))
                for name, load in corpora]

    def notes(self, scores: list) -> list:
        """The baselines depend on the data split only: one line per corpus."""
        lines = {}
        for s in scores:
            if s.metric == "accuracy" and s.dataset not in lines:
                d = s.details
                lines[s.dataset] = (f"POS {s.dataset} baselines ({d['train_tokens']} train tokens): majority tag "
                                    f"{d['majority_tag_accuracy']:.4f}, per-word most frequent tag "
                                    f"{d['word_most_frequent_tag_accuracy']:.4f}")
        return list(lines.values())


def _read_job(load, window, max_train_tokens):
    return partial(evaluate_pos, corpus=load(), window=window, max_train_tokens=max_train_tokens)
