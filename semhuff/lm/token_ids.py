"""Corpus -> vocabulary -> id tensors for the language-model trainer, with the same readers
(plain, gzip, bz2, xz by content; files or directories; ``lee``) and the same ``Vocab`` as
``semhuff-train``.

Language-model specifics:

* ``<unk>`` stands for every word outside the vocabulary (the PTB convention) and counts as a
  word with the summed count of the words it replaces, in frequency order, so trees and
  clusters place it like any other word;
* ``<eos>`` ends every line of a corpus with lines (PTB); a one-line corpus (text8) has none;
* the split: held-out text is a file of its own, or the text8 way, the *last* ``heldout_chars``
  characters of the corpus (the self-organized HSM paper: the first 99M characters of text8
  train, the last 1M score), cut at a word boundary.

The text is held in memory while it is split and mapped (the shared 100 MB corpus: about 2 GB
at the peak, then 4 bytes a token): a language model of this size trains for hours per 100M
characters on a CPU, so this is not where a run's memory goes.
"""
from __future__ import annotations

import collections
import logging
import os
from dataclasses import dataclass
from itertools import repeat
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..corpus import list_corpus_files, open_binary
from ..errors import CorpusError, OptionError
from ..vocab import Vocab

logger = logging.getLogger(__name__)

UNK, EOS = "<unk>", "<eos>"


def read_text(paths: Sequence[str]) -> str:
    """The text of every corpus file, in order, decoded as UTF-8 (invalid bytes replaced)."""
    parts = []
    for path in paths:
        for name in list_corpus_files(path):
            with open_binary(name) as fh:
                parts.append(fh.read().decode("utf-8", errors="replace"))
    text = "\n".join(p.rstrip("\n") for p in parts)
    if not text.strip():
        raise CorpusError(f"the corpus has no words: {', '.join(map(str, paths))}")
    return text


def split_heldout(text: str, heldout_chars: int) -> Tuple[str, str]:
    """(train, held-out): the last ``heldout_chars`` characters are held out, moved forward to
    the next whitespace so no word is cut."""
    if not 0 < heldout_chars < len(text):
        raise OptionError(f"--heldout-chars must be in 1..{len(text) - 1} (the corpus has "
                          f"{len(text):,} characters), got {heldout_chars}")
    cut = len(text) - heldout_chars
    while cut < len(text) and not text[cut].isspace():
        cut += 1
    if cut >= len(text):
        raise OptionError("the held-out part would hold no complete word")
    return text[:cut], text[cut:]


def tokens(text: str, eos: bool) -> List[str]:
    """The words of ``text``; with ``eos`` each non-empty line ends with ``<eos>``."""
    if not eos:
        return text.split()
    out: List[str] = []
    for line in text.splitlines():
        words = line.split()
        if words:
            out.extend(words)
            out.append(EOS)
    return out


def has_lines(text: str) -> bool:
    """Whether the text has lines (``<eos>`` then means something) or is one line (text8)."""
    return text.strip("\n").count("\n") > 0


def build_vocab(train: Sequence[str], min_count: int = 1, max_vocab: Optional[int] = None
                ) -> Vocab:
    """The training words at ``min_count`` (and the ``max_vocab`` most frequent), plus ``<unk>``
    with the count of all the others, sorted by count. ``<unk>`` is there even when every
    training word was kept (count 1 then): held-out text has words training never saw."""
    counts = collections.Counter(train)
    if UNK in counts or (max_vocab is not None and max_vocab < 2):
        raise OptionError(f"the corpus uses {UNK!r} itself" if UNK in counts else
                          f"--max-vocab must be >= 2, got {max_vocab}")
    kept = Vocab.from_counts(counts, min_count=min_count,
                             max_final_vocab=None if max_vocab is None else max_vocab - 1)
    missing = len(train) - int(kept.counts.sum())
    counts = dict(zip(kept.words, kept.counts.tolist()), **{UNK: max(missing, 1)})
    return Vocab.from_counts(counts, min_count=1, total_tokens=len(train))


def to_ids(words: Sequence[str], vocab: Vocab) -> np.ndarray:
    """int64 ids; a word outside the vocabulary is ``<unk>``."""
    unk = vocab.index[UNK]
    return np.fromiter(map(vocab.index.get, words, repeat(unk)), dtype=np.int64, count=len(words))


@dataclass
class LMData:
    vocab: Vocab
    train: np.ndarray     # int64 ids
    heldout: np.ndarray
    eos: bool

    def describe(self) -> str:
        unk = self.vocab.index.get(UNK)
        share = (float((self.heldout == unk).mean()) if unk is not None and len(self.heldout)
                 else 0.0)
        return (f"{len(self.vocab):,} words, {len(self.train):,} training and "
                f"{len(self.heldout):,} held-out tokens ({100 * share:.1f}% <unk>)"
                f"{', <eos> at line ends' if self.eos else ''}")


def load_data(corpus: Sequence[str], heldout: Optional[Sequence[str]] = None,
              heldout_chars: Optional[int] = None, min_count: int = 1,
              max_vocab: Optional[int] = None, train_tokens: Optional[int] = None,
              heldout_tokens: Optional[int] = None, eos: Optional[bool] = None) -> LMData:
    """The vocabulary and the id streams: held-out text from ``heldout`` files or the last
    ``heldout_chars`` characters of the corpus (one of the two); ``train_tokens`` /
    ``heldout_tokens``: keep only the first so many (scaled runs; the vocabulary is counted on
    the kept training tokens); ``eos`` None: at line ends when the corpus has lines."""
    for path in [*corpus, *(heldout or [])]:
        if not os.path.exists(path):
            raise CorpusError(f"corpus not found: {path}")
    if (heldout is None) == (heldout_chars is None):
        raise OptionError("give the held-out text: --heldout FILE, or --heldout-chars N (the "
                          "last N characters of the corpus, text8's split)")
    text = read_text(corpus)
    if heldout is not None:
        held_text = read_text(heldout)
    else:
        text, held_text = split_heldout(text, int(heldout_chars))
    use_eos = has_lines(text) if eos is None else bool(eos)
    train_words = tokens(text, use_eos)
    del text
    if train_tokens is not None:
        train_words = train_words[:int(train_tokens)]
    held_words = tokens(held_text, use_eos)
    if heldout_tokens is not None:
        held_words = held_words[:int(heldout_tokens)]
    if len(train_words) < 2 or len(held_words) < 2:
        raise CorpusError("the training and the held-out text need at least 2 words each")
    vocab = build_vocab(train_words, min_count, max_vocab)
    data = LMData(vocab, to_ids(train_words, vocab), to_ids(held_words, vocab), use_eos)
    logger.info("language-model data: %s", data.describe())
    return data


def batchify(ids: np.ndarray, batch_size: int) -> np.ndarray:
    """(batch_size, n): the stream cut into ``batch_size`` rows read in parallel (the usual LM
    batching: each row a contiguous part of the text, the hidden state carried along it)."""
    n = len(ids) // batch_size
    if n < 2:
        raise OptionError(f"{len(ids):,} tokens are too few for batches of {batch_size} rows")
    return ids[:n * batch_size].reshape(batch_size, n)
