"""Corpus -> chunks of token ids for the kernels.

The first epoch tokenises the text and maps words to ids (out-of-vocabulary words are dropped
before windowing, as word2vec and gensim do); the chunks are also appended to a temporary cache
file (``id_cache.py``: where, how big, what happens when the disk fills), so later epochs read
ids from disk instead of re-tokenising in Python while the kernels wait. Memory holds a few
chunks at most, whatever the corpus size.
"""
from __future__ import annotations

import logging
from itertools import repeat
from typing import Dict, Iterable, Iterator, List

import numpy as np

from .corpus import is_one_shot
from .errors import CacheSpaceError
from .id_cache import Chunk, IdCache

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_WORDS = 100_000


def encode_chunks(sentences: Iterable[List[str]], index: Dict[str, int],
                  chunk_words: int = DEFAULT_CHUNK_WORDS) -> Iterator[Chunk]:
    """Group sentences into chunks of about ``chunk_words`` tokens and map them to ids."""
    get = index.get
    tokens: List[str] = []
    ends: List[int] = []
    for sentence in sentences:
        if not sentence:
            continue
        tokens.extend(sentence)
        ends.append(len(tokens))
        if len(tokens) >= chunk_words:
            yield _encode(tokens, ends, get)
            tokens, ends = [], []
    if tokens:
        yield _encode(tokens, ends, get)


def _encode(tokens, ends, get) -> Chunk:
    raw = np.fromiter(map(get, tokens, repeat(-1)), dtype=np.int32, count=len(tokens))
    known = raw >= 0
    kept_before = np.cumsum(known, dtype=np.int64)
    bounds = kept_before[np.asarray(ends, dtype=np.int64) - 1]
    return Chunk(raw[known], bounds, len(tokens))


def _chunks(sentences, vocab, chunk_words: int, **fast) -> Iterator[Chunk]:
    """``sentences`` as chunks of ids: tokenised in compiled code where the corpus allows it
    (``fastscan``), with the same chunks as the Python path. ``vocab``: a ``Vocab`` (its
    word -> id dict is then built only for the Python path: 7.6 MiB at 147k words)
    or such a dict."""
    from . import fastscan
    from .corpus import Corpus
    words = getattr(vocab, "words", None)
    if isinstance(sentences, Corpus) and fastscan.eligible(sentences):
        if words is None:
            words = sorted(vocab, key=vocab.get)
        return fastscan.encode_chunks(sentences, words, chunk_words, **fast)
    return encode_chunks(sentences, vocab if words is None else vocab.index, chunk_words)


def count_words(sentences, vocab, chunk_words: int = DEFAULT_CHUNK_WORDS,
                progress=None) -> tuple:
    """(in-vocabulary words, raw words) of one pass over ``sentences``, counted by the same
    tokenising and encoding as a training epoch's first pass (compiled for plain files), so the
    numbers are the ones training will see. ``vocab``: as ``_chunks``. ``progress(raw)`` after
    each chunk."""
    chunks = _chunks(sentences, vocab, chunk_words, take=False)
    kept = raw = 0
    for chunk in chunks:
        kept += len(chunk.ids)
        raw += chunk.raw_tokens
        if progress is not None:
            progress(chunk.raw_tokens)
    return kept, raw


class EpochSource:
    """Yields each epoch's chunks: from the corpus the first time (filling the cache), from the
    cache afterwards. With ``use_cache=False`` every epoch re-reads the corpus, and so do the
    epochs after a cache that ran out of disk space (a one-shot corpus cannot be re-read: then
    that is an error)."""

    def __init__(self, sentences, vocab, chunk_words=DEFAULT_CHUNK_WORDS, use_cache=True,
                 cache_dir=None):
        self.sentences = sentences
        self.vocab = vocab  # a Vocab or a word -> id dict (``_chunks``)
        self.chunk_words = chunk_words
        self.cache = IdCache(cache_dir) if use_cache else None
        self._dropped_bytes = 0  # what a cache that ran out of space had written

    @property
    def cache_bytes(self) -> int:
        """Disk the id cache takes (or took, before it was dropped)."""
        return self.cache.bytes if self.cache is not None else self._dropped_bytes

    def epoch(self) -> Iterator[Chunk]:
        if self.cache is not None and self.cache.complete:
            yield from self.cache
            return
        for chunk in self._first_pass():
            if self.cache is not None:
                self._append(chunk)
            yield chunk
        if self.cache is not None:
            self.cache.complete = True
            logger.info("id cache complete: %d chunks, %.1f MB in %s (unnamed: freed when the "
                        "run ends)", self.cache.chunks, self.cache.bytes / 1e6, self.cache.directory)

    def _append(self, chunk: Chunk) -> None:
        try:
            self.cache.append(chunk)
        except CacheSpaceError as exc:
            self._dropped_bytes = self.cache.bytes
            self.cache.close()
            self.cache = None
            if is_one_shot(self.sentences):
                raise CacheSpaceError(f"{exc}; the corpus is a one-shot iterator, so later epochs "
                                      f"cannot re-read it instead") from None
            logger.warning("%s; caching stopped and its space freed: later epochs re-read and "
                           "re-tokenise the corpus (slower)", exc)

    def _first_pass(self) -> Iterator[Chunk]:
        return _chunks(self.sentences, self.vocab, self.chunk_words)

    def close(self):
        if self.cache is not None:
            self._dropped_bytes = self.cache.bytes
            self.cache.close()
            self.cache = None


