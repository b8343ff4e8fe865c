"""Vocabulary: word counts, min_count / max_vocab_size pruning, frequency-sorted ids,
word2vec's down-sampling thresholds, and the vocabulary file (one ``word count`` per line, as
word2vec's ``-save-vocab`` writes it)."""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional

import numpy as np

from .errors import OptionError, VocabError
from .io_utils import atomic_output
from .wording import counted

logger = logging.getLogger(__name__)


def frequency_order(counts) -> Optional[np.ndarray]:
    """None when ``counts`` are in descending order already (a ``Vocab``'s ids), else the ids
    sorted by descending count (ties keep id order)."""
    counts = np.asarray(counts)
    if counts.ndim != 1 or not np.any(counts[:-1] < counts[1:]):
        return None
    return np.argsort(-counts, kind="stable")


def scan_counts(
    sentences: Iterable[List[str]],
    max_vocab_size: Optional[int] = None,
    progress=None,
    workers: int = 1,
) -> tuple:
    """Count every token. With ``max_vocab_size``, prune while scanning the way word2vec.c does:
    whenever the table outgrows the limit, drop words seen <= ``min_reduce`` times and raise
    ``min_reduce`` by one. Returns ``(Counter, total_tokens, min_reduce)``. A ``Corpus`` of
    valid UTF-8 files is scanned in compiled code (``fastscan``; plain files in ``workers``
    threads), with the same result."""
    from .corpus import Corpus
    if isinstance(sentences, Corpus):
        from . import fastscan
        fast = fastscan.scan(sentences, max_vocab_size, progress, workers)
        if fast is not None:
            return fast
    counts: Counter = Counter()
    total = 0
    min_reduce = 1
    for tokens in sentences:
        counts.update(tokens)
        total += len(tokens)
        if progress is not None:
            progress(len(tokens))
        if max_vocab_size is not None and len(counts) > max_vocab_size:
            min_reduce = prune_counts(counts, min_reduce)
    return counts, total, min_reduce


def prune_counts(counts: Counter, min_reduce: int) -> int:
    """word2vec.c's ReduceVocab: drop the words seen <= ``min_reduce`` times; the next
    threshold."""
    for word in [w for w, c in counts.items() if c <= min_reduce]:
        del counts[word]
    logger.info("pruned vocabulary to %d words (counts <= %d dropped)", len(counts), min_reduce)
    return min_reduce + 1


SAMPLE_RANGE = "1e-5 .. 1e-2 are usual, 0 disables"


def check_sample(sample) -> float:
    """``sample`` as word2vec.c reads it, a share of the corpus in [0, 1); else an error. A
    value >= 1 is refused, not read as a count: read as a share it would keep almost no
    frequent word, and the silent count reading (gensim's) surprised users."""
    ok = isinstance(sample, (int, float, np.integer, np.floating)) and not isinstance(sample, bool)
    if not ok or not np.isfinite(sample) or not 0 <= sample < 1:
        raise OptionError(f"sample is word2vec's down-sampling threshold, a fraction of the "
                          f"corpus ({SAMPLE_RANGE}), got {sample!r}")
    return float(sample)


def gensim_sample_fraction(sample: float, retained_tokens: int) -> float:
    """gensim's ``sample`` as the fraction ``Vocab.keep_probabilities`` takes, giving gensim's
    keep probabilities (``gensim.models.word2vec.Word2Vec.prepare_vocab``): below 1 it is that
    fraction; from 1 on gensim reads it as a count, t = int(sample * (3 + sqrt 5) / 2). A t at
    or above the retained tokens keeps every word: 0."""
    if not np.isfinite(sample) or sample < 0:
        raise OptionError(f"sample must be >= 0, got {sample!r}")
    if sample < 1:
        return float(sample)
    threshold = int(sample * (3 + np.sqrt(5)) / 2)
    return threshold / retained_tokens if threshold < retained_tokens else 0.0


def keep_probability(counts, threshold: float) -> np.ndarray:
    """word2vec's down-sampling: a word of count c is kept with probability
    (sqrt(c / t) + 1) * t / c, capped at 1, for a threshold of t tokens."""
    counts = np.asarray(counts, dtype=np.float64)
    return np.minimum((np.sqrt(counts / threshold) + 1.0) * (threshold / counts), 1.0)


def check_max_final_vocab(max_final_vocab: Optional[int]) -> None:
    """``max_final_vocab`` keeps the N most frequent words: N = 0 keeps none, an error of its
    own (it used to read "no word reaches min_count=5 ..."). gensim accepts 0 and
    then fails at train() ("you must first build vocabulary")."""
    if max_final_vocab is not None and max_final_vocab < 1:
        raise OptionError(f"max_final_vocab (--max-final-vocab) must be >= 1: it is the number "
                          f"of most frequent words kept, got {max_final_vocab}")


def no_word_kept(counts: Mapping[str, int], min_count: int, trimmed: bool = False) -> VocabError:
    """The error for a vocabulary left empty, with the numbers of the *raw* counts (the drop-in
    filters gensim's way first and must not report its filtered, empty counts);
    ``trimmed``: a ``trim_rule`` took part."""
    most = max(counts.values()) if counts else 0
    if trimmed and most >= min_count:
        return VocabError(f"trim_rule discarded every word reaching min_count={min_count} "
                          f"({sum(c >= min_count for c in counts.values())} words)")
    return VocabError(f"no word reaches min_count={min_count} (the most frequent word occurs "
                      f"{most} times)")


@dataclass
class Vocab:
    """Words sorted by descending count (ties keep first-seen order, as gensim does).

    ``total_tokens`` is every token the scan saw; ``retained_tokens`` the tokens of kept words.
    """

    words: List[str]
    counts: np.ndarray
    total_tokens: int
    min_count: int = 1

    def __post_init__(self):
        self.counts = np.asarray(self.counts, dtype=np.int64)
        if not isinstance(self.words, list):  # a tuple, an array of str: ``find`` needs a list
            self.words = [str(w) for w in self.words]
        if len(set(self.words)) != len(self.words):
            raise VocabError("vocabulary has duplicate words")
        self._index: Optional[Dict[str, int]] = None

    @property
    def index(self) -> Dict[str, int]:
        """word -> id, built on first use and kept. A training run on files never needs it
        (the compiled tokeniser has its own table; ``find`` serves a few lookups): at 147k
        words it held 7.6 MiB through training, at the run's peak."""
        if self._index is None:
            self._index = {w: i for i, w in enumerate(self.words)}
        return self._index

    def find(self, word: str) -> Optional[int]:
        """The id of ``word``, or None: through ``index`` when it is built, else by a scan of
        the words (for a few lookups that need not build it)."""
        if self._index is not None:
            return self._index.get(word)
        try:
            return self.words.index(word)
        except ValueError:
            return None

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_count: int = 5, total_tokens: Optional[int] = None,
                    max_final_vocab: Optional[int] = None) -> "Vocab":
        if min_count < 1:
            raise VocabError("min_count must be >= 1")
        check_max_final_vocab(max_final_vocab)
        kept = [(w, c) for w, c in counts.items() if c >= min_count]
        kept.sort(key=lambda wc: -wc[1])  # stable: ties stay in first-seen order
        if max_final_vocab is not None:
            kept = kept[:max_final_vocab]
        if total_tokens is None:
            total_tokens = int(sum(counts.values()))
        if not kept:
            raise no_word_kept(counts, min_count)
        return cls([w for w, _ in kept], np.array([c for _, c in kept], dtype=np.int64),
                   int(total_tokens), min_count)

    @classmethod
    def build(cls, sentences: Iterable[List[str]], min_count: int = 5, max_vocab_size: Optional[int] = None,
              max_final_vocab: Optional[int] = None, progress=None, workers: int = 1) -> "Vocab":
        check_max_final_vocab(max_final_vocab)  # before the scan, not after it
        counts, total, _ = scan_counts(sentences, max_vocab_size, progress, workers)
        if total == 0:
            raise VocabError("the corpus has no tokens")
        vocab = cls.from_counts(counts, min_count, total, max_final_vocab)
        logger.info("vocabulary: %d words of %d distinct (min_count=%d), %d tokens, %.1f%% kept",
                    len(vocab), len(counts), min_count, total, 100.0 * vocab.retained_tokens / total)
        return vocab

    @classmethod
    def read_text(cls, path: str) -> "Vocab":
        """A vocabulary file: a ``word count`` per line; re-sorted by descending count (stable)."""
        words: List[str] = []
        counts: List[int] = []
        try:
            with open(path, encoding="utf-8") as fh:
                for line_no, line in enumerate(fh, 1):
                    fields = line.split()
                    if not fields:
                        continue
                    if len(fields) != 2 or not fields[1].isdigit():
                        raise VocabError(f"{path}:{line_no}: expected 'word count', got {line.strip()[:60]!r}")
                    words.append(fields[0])
                    counts.append(int(fields[1]))
        except OSError as exc:
            raise VocabError(f"cannot read vocabulary {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise VocabError(f"vocabulary {path} is not UTF-8 text") from None
        if not words:
            raise VocabError(f"vocabulary {path} is empty")
        order = np.argsort(-np.array(counts, dtype=np.int64), kind="stable")
        return cls([words[i] for i in order], np.array(counts, dtype=np.int64)[order],
                   total_tokens=int(sum(counts)))

    def write_text(self, path: str) -> None:
        """The vocabulary file ``read_text`` reads, written atomically."""
        with atomic_output(path, "w") as fh:
            for word, count in zip(self.words, self.counts):
                fh.write(f"{word} {int(count)}\n")

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def need_two_words(self, what: str) -> None:
        """A ``VocabError`` unless there are two words at least (an output layer with one word
        predicts it with certainty and learns nothing), saying what would help."""
        if len(self) >= 2:
            return
        n, shown = len(self), ", ".join(repr(w) for w in self.words[:1])
        if self.retained_tokens >= self.total_tokens:  # every token is in it: nothing to add
            why = f"the corpus has only {counted(n, 'distinct word')}"
        else:
            why = (f"only {counted(n, 'word')} reach{'es' if n == 1 else ''} "
                   f"min_count={self.min_count} (a lower min_count, or a larger max_final_vocab, "
                   f"keeps more)")
        raise VocabError(f"{what} needs at least 2 words in the vocabulary, but {why}"
                         + (f": {shown}" if shown else ""))

    @property
    def retained_tokens(self) -> int:
        return int(self.counts.sum())

    def keep_probabilities(self, sample: float) -> np.ndarray:
        """word2vec's down-sampling: a word of count c is kept with probability
        (sqrt(c / t) + 1) * t / c, capped at 1, where t = sample * retained tokens; 0 disables.
        ``sample`` is word2vec.c's fraction only (usual: 1e-5 .. 1e-2): gensim's other reading
        of ``sample >= 1`` as a count is ``gensim_sample_fraction``'s, for the drop-in alone."""
        check_sample(sample)
        if sample == 0:
            return np.ones(len(self.counts))
        return keep_probability(self.counts, sample * self.retained_tokens)

    def keep_thresholds(self, sample: float) -> np.ndarray:
        """``keep_probabilities`` as uint32 thresholds against a uniform 32-bit random number,
        so the kernel decides with one integer compare (keep if random < threshold)."""
        prob = self.keep_probabilities(sample)
        return np.minimum(np.round(prob * 2.0 ** 32), 2.0 ** 32 - 1).astype(np.uint32)
