"""Corpus -> chunks of token ids for the kernels.

The first epoch tokenises the text and maps words to ids (out-of-vocabulary words are dropped
before windowing, as word2vec and gensim do); the chunks are also appended to a temporary cache
file, so later epochs read ids from disk instead of re-tokenising in Python while the kernels
wait. Memory holds a few chunks at most, whatever the corpus size.
"""
from __future__ import annotations

import logging
import os
import tempfile
from itertools import repeat
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional

import numpy as np

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_WORDS = 100_000


class Chunk(NamedTuple):
    ids: np.ndarray       # int32 token ids, sentences concatenated
    bounds: np.ndarray    # int64 end offset of each sentence in ``ids``
    raw_tokens: int       # tokens read from the corpus for this chunk, OOV included


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


class ChunkCache:
    """Chunks appended to an anonymous temp file and read back in order, one at a time."""

    _HEADER = 3  # int64 words: len(ids), len(bounds), raw_tokens

    def __init__(self, directory: Optional[str] = None):
        self._fh = tempfile.TemporaryFile(prefix="semhuff-ids-", dir=directory)
        self.chunks = 0
        self.complete = False

    def append(self, chunk: Chunk) -> None:
        header = np.array([len(chunk.ids), len(chunk.bounds), chunk.raw_tokens], dtype=np.int64)
        header.tofile(self._fh)
        np.ascontiguousarray(chunk.ids, dtype=np.int32).tofile(self._fh)
        np.ascontiguousarray(chunk.bounds, dtype=np.int64).tofile(self._fh)
        self.chunks += 1

    def __iter__(self) -> Iterator[Chunk]:
        self._fh.flush()
        self._fh.seek(0)
        for _ in range(self.chunks):
            n_ids, n_bounds, raw = np.fromfile(self._fh, dtype=np.int64, count=self._HEADER)
            ids = np.fromfile(self._fh, dtype=np.int32, count=int(n_ids))
            bounds = np.fromfile(self._fh, dtype=np.int64, count=int(n_bounds))
            yield Chunk(ids, bounds, int(raw))
        self._fh.seek(0, os.SEEK_END)

    def close(self) -> None:
        self._fh.close()


class EpochSource:
    """Yields each epoch's chunks: from the corpus the first time (filling the cache), from the
    cache afterwards. With ``use_cache=False`` every epoch re-reads the corpus."""

    def __init__(self, sentences, index, chunk_words=DEFAULT_CHUNK_WORDS, use_cache=True,
                 cache_dir=None):
        self.sentences = sentences
        self.index = index
        self.chunk_words = chunk_words
        self.cache = ChunkCache(cache_dir) if use_cache else None

    def epoch(self) -> Iterator[Chunk]:
        if self.cache is not None and self.cache.complete:
            yield from self.cache
            return
        for chunk in self._first_pass():
            if self.cache is not None:
                self.cache.append(chunk)
            yield chunk
        if self.cache is not None:
            self.cache.complete = True

    def _first_pass(self) -> Iterator[Chunk]:
        """Tokenising in compiled code where the corpus allows it (``fastscan``), with the same
        chunks as the Python path."""
        from . import fastscan
        from .corpus import Corpus
        if isinstance(self.sentences, Corpus) and fastscan.eligible(self.sentences):
            words = sorted(self.index, key=self.index.get)
            return fastscan.encode_chunks(self.sentences, words, self.chunk_words)
        return encode_chunks(self.sentences, self.index, self.chunk_words)

    def close(self):
        if self.cache is not None:
            self.cache.close()
