"""Input splits: the corpus cut into byte ranges that workers read independently.

A plain-text file is cut anywhere, Hadoop-style: a split starts right after the first ASCII
whitespace byte at or after its nominal start (or at 0), and ends where the next split starts.
The cut therefore never falls inside a token (a token is a run of non-whitespace, and the bytes
of a multi-byte UTF-8 character are never ASCII), so the splits together hold exactly the tokens
of the file, in the same order: counting them split by split and adding the counts in split
order gives the single pass's counts and first-seen order (the vocabulary's tie order). A
sentence crossing a cut becomes two. A compressed file cannot be entered in the middle: it is
one split. Paths are local paths (visible to every worker: a shared file system) or fsspec URLs.
"""
from __future__ import annotations

import os
from typing import Iterable, List, NamedTuple

from ..corpus import (Corpus, CorpusStats, _open_raw, compression, is_url, list_corpus_files,
                      open_binary)

_WHITESPACE = b" \t\n\r\x0b\x0c"
_SCAN = 1 << 16


class Split(NamedTuple):
    path: str
    start: int   # nominal byte range; the real cuts are moved to whitespace (``boundary``)
    end: int     # -1: to the end of the file (a compressed file)

    def __str__(self):
        return self.path if self.end < 0 else f"{self.path}[{self.start}:{self.end}]"


def file_size(path: str) -> int:
    if is_url(path):
        import fsspec
        fs, inner = fsspec.core.url_to_fs(path)
        return int(fs.size(inner))
    return os.path.getsize(path)


def corpus_files(sources) -> List[str]:
    """Every file of one or more corpus paths / URLs (directories listed, as ``Corpus``)."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    return [f for s in sources for f in list_corpus_files(os.fspath(s))]


def plan_splits(files: Iterable[str], parts: int) -> List[List[Split]]:
    """``parts`` groups of splits of about equal bytes, in corpus order (group i's bytes all
    come before group i+1's). Plain files are cut at the group edges; a compressed file goes
    whole to the group its middle falls in. Groups may be empty (a tiny corpus)."""
    files = list(files)
    sizes = [file_size(f) for f in files]
    whole = [compression(f) is not None for f in files]
    total = max(sum(sizes), 1)
    groups: List[List[Split]] = [[] for _ in range(parts)]
    offset = 0
    for path, size, atomic in zip(files, sizes, whole):
        if atomic:
            groups[min(parts - 1, (offset + size // 2) * parts // total)].append(Split(path, 0, -1))
        else:
            at = 0
            while at < size:
                group = min(parts - 1, (offset + at) * parts // total)
                edge = -(-(group + 1) * total // parts) - offset  # this group's end in the file
                end = size if group == parts - 1 else min(size, max(edge, at + 1))
                groups[group].append(Split(path, at, end))
                at = end
        offset += size
    return groups


def subdivide(splits: List[Split], max_bytes: int) -> List[Split]:
    """Splits of at most ``max_bytes`` covering the same ranges (compressed files stay whole)."""
    out = []
    for split in splits:
        if split.end < 0:
            out.append(split)
            continue
        for at in range(split.start, split.end, max(1, max_bytes)):
            out.append(Split(split.path, at, min(split.end, at + max_bytes)))
    return out


def boundary(fh, at: int) -> int:
    """Where a split with nominal start ``at`` really starts: just after the first whitespace
    byte at or after ``at - 1``, or the end of the file."""
    if at <= 0:
        return 0
    fh.seek(at - 1)
    pos = at - 1
    while True:
        block = fh.read(_SCAN)
        if not block:
            return pos
        hits = [i for i in (block.find(bytes([b])) for b in _WHITESPACE) if i >= 0]
        if hits:
            return pos + min(hits) + 1
        pos += len(block)


class RangeReader:
    """A binary file read from ``start`` up to (not including) ``end``."""

    def __init__(self, fh, start: int, end: int):
        self._fh, self._left = fh, max(0, end - start)
        fh.seek(start)

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        data = self._fh.read(self._left if n is None or n < 0 else min(n, self._left))
        self._left -= len(data)
        return data

    def close(self):
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_split(split: Split):
    """The bytes of a split, cut at whitespace as ``boundary`` says."""
    if split.end < 0:
        return open_binary(split.path)
    fh = _open_raw(split.path)
    try:
        start = boundary(fh, split.start)
        size = file_size(split.path)
        end = size if split.end >= size else boundary(fh, split.end)
    except BaseException:
        fh.close()
        raise
    return RangeReader(fh, start, end)


class SplitCorpus(Corpus):
    """A ``Corpus`` over some splits: the sentences of those byte ranges, in order."""

    def __init__(self, splits: List[Split], max_sentence_length: int, block_bytes: int = 1 << 20):
        if max_sentence_length < 1:
            raise ValueError("max_sentence_length must be >= 1")
        self.files = list(splits)
        self.max_sentence_length = int(max_sentence_length)
        self.block_bytes = int(block_bytes)
        self.stats = CorpusStats(paths=[str(s) for s in self.files])
        self._warned_long_tokens = set()

    def __iter__(self):
        self.stats = CorpusStats(paths=[str(s) for s in self.files])
        for split in self.files:
            yield from self._iter_file(split)
            self.stats.files += 1

    def _open(self, split):
        return open_split(split)
