"""Streaming corpus reader: plain / gzip / bz2 / xz text, a file or a directory of files.

One sentence per line; a line longer than ``max_sentence_length`` tokens (a text8-style file is a
single 100 MB line) is cut into consecutive pieces of that length, and *no token is dropped*
(gensim silently drops everything past 10,000 tokens of a line). Memory is bounded by the block
size and one piece, never by the corpus size. Invalid UTF-8 is replaced by U+FFFD and counted.
"""
from __future__ import annotations

import bz2
import codecs
import gzip
import logging
import lzma
import os
import threading
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Sequence, Union

from .errors import CorpusError

logger = logging.getLogger(__name__)

BLOCK_BYTES = 1 << 20
DEFAULT_MAX_SENTENCE_LENGTH = 10_000
# How many leading bytes we inspect to reject binary files (NUL bytes never occur in text).
_SNIFF_BYTES = 4096
_MAX_TOKEN_CHARS = 1 << 22

_MAGIC = (
    (b"\x1f\x8b", gzip.open),
    (b"BZh", bz2.open),
    (b"\xfd7zXZ\x00", lzma.open),
)

_decode_state = threading.local()


def _count_and_replace(err: UnicodeDecodeError):
    # Called by the codec only for invalid bytes, so clean text pays nothing for the counting.
    _decode_state.invalid = getattr(_decode_state, "invalid", 0) + 1
    return "\ufffd", err.end


codecs.register_error("semhuff_count", _count_and_replace)

PathLike = Union[str, os.PathLike]


def is_url(path) -> bool:
    """``s3://bucket/x``, ``https://...``, ``file:///...``: read through fsspec."""
    return isinstance(path, str) and "://" in path


def _url_files(url: str) -> List[str]:
    import fsspec  # comes with dask (pip install 'semhuff[dask]')
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        raise CorpusError(f"corpus not found: {url}")
    if not fs.isdir(path):
        return [url]
    files = sorted(f["name"] for f in fs.ls(path, detail=True) if f["type"] == "file"
                   and not f["name"].rstrip("/").rsplit("/", 1)[-1].startswith("."))
    if not files:
        raise CorpusError(f"corpus directory has no files: {url}")
    return [fs.unstrip_protocol(f) for f in files]


def list_corpus_files(path: PathLike) -> List[str]:
    """The files a corpus path stands for: the file itself, or every regular file in a
    directory (sorted, hidden files skipped, not recursive). An fsspec URL lists the same way."""
    path = os.fspath(path)
    if is_url(path):
        return _url_files(path)
    if path == "-":  # decided: a pipe cannot be read twice; say so, never "not found"
        raise CorpusError("'-' (standard input) cannot be a corpus: it is read more than once "
                          "(the vocabulary, then training); save it to a file first (a file "
                          "named '-' is ./-)")
    if not os.path.exists(path):
        raise CorpusError(f"corpus not found: {path}")
    if os.path.isdir(path):
        files = sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if not name.startswith(".") and os.path.isfile(os.path.join(path, name))
        )
        if not files:
            raise CorpusError(f"corpus directory has no files: {path}")
        return files
    return [path]


def _open_raw(path: str):
    if is_url(path):
        import fsspec
        return fsspec.open(path, "rb").open()
    return open(path, "rb")


def compression(path: str):
    """The opener of the compression ``path``'s first bytes show (gzip, bz2, xz), or None."""
    try:
        with _open_raw(path) as fh:
            head = fh.read(6)
    except OSError as exc:
        raise CorpusError(f"cannot read corpus {path}: {exc.strerror or exc}") from None
    return next((opener for magic, opener in _MAGIC if head.startswith(magic)), None)


def open_binary(path: str):
    """Open a file (or an fsspec URL) for binary reading, decompressing by magic bytes (not by
    extension)."""
    opener = compression(path)
    if opener is None:
        return _open_raw(path)
    return opener(_open_raw(path) if is_url(path) else path, "rb")


@dataclass
class CorpusStats:
    """What a pass over the corpus saw; filled in as the pass goes."""

    files: int = 0
    bytes_read: int = 0
    lines: int = 0
    pieces: int = 0
    tokens: int = 0
    invalid_utf8: int = 0
    long_lines_cut: int = 0
    long_tokens_cut: int = 0  # cuts inside "tokens" of more than _MAX_TOKEN_CHARS characters
    paths: List[str] = field(default_factory=list)


class Corpus:
    """A re-iterable stream of sentences (lists of str tokens) over one or more files.

    Iterating yields lists of tokens; each call to ``__iter__`` is a fresh pass and resets
    ``stats``. ``Corpus`` accepts a path (file or directory) or a list of paths.
    """

    def __init__(
        self,
        source: Union[PathLike, Sequence[PathLike]],
        max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
        block_bytes: int = BLOCK_BYTES,
    ):
        if max_sentence_length < 1:
            raise CorpusError("max_sentence_length must be >= 1")
        if isinstance(source, (str, os.PathLike)):
            self.files = list_corpus_files(source)
        else:
            self.files = [f for p in source for f in list_corpus_files(p)]
        self.max_sentence_length = int(max_sentence_length)
        self.block_bytes = int(block_bytes)
        self.stats = CorpusStats(paths=list(self.files))
        self._warned_long_tokens: set = set()

    @property
    def total_bytes(self) -> int:
        """Size on disk (compressed where compressed): a progress denominator for the first pass."""
        return sum(os.path.getsize(f) for f in self.files)

    def _open(self, path):
        """The binary stream of one of ``files`` (a subclass may read a part of a file)."""
        return open_binary(path)

    def __iter__(self) -> Iterator[List[str]]:
        self.stats = CorpusStats(paths=list(self.files))
        for path in self.files:
            yield from self._iter_file(path)
            self.stats.files += 1

    def _iter_file(self, path: str) -> Iterator[List[str]]:
        stats = self.stats
        limit = self.max_sentence_length
        _decode_state.invalid = 0
        decoder = codecs.getincrementaldecoder("utf-8")(errors="semhuff_count")
        pending: List[str] = []  # tokens of the current line not yet emitted
        partial = ""  # text after the last whitespace of the previous block
        first = True
        cuts_before = stats.long_tokens_cut
        try:
            with self._open(path) as fh:
                while True:
                    raw = fh.read(self.block_bytes)
                    if first:
                        _reject_binary(path, raw)
                        first = False
                    final = not raw
                    stats.bytes_read += len(raw)
                    text = partial + decoder.decode(raw, final=final)
                    if final:
                        partial = ""
                    else:
                        # Keep the trailing fragment (possibly half a token) for the next block.
                        cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"), text.rfind("\r"))
                        partial = text[cut + 1:]
                        text = text[: cut + 1]
                        if len(partial) > _MAX_TOKEN_CHARS:
                            # A "token" with no whitespace for megabytes: emit it rather than
                            # letting the carry grow with the file (and say so, below).
                            text, partial = text + partial + " ", ""
                            stats.long_tokens_cut += 1

                    lines = text.split("\n")
                    for i, line in enumerate(lines):
                        ends_line = i < len(lines) - 1 or final
                        tokens = line.split()
                        if tokens:
                            pending.extend(tokens)
                            if len(pending) > limit:
                                # emit whole pieces, keep 1..limit tokens for the line's end
                                full = (len(pending) - 1) // limit * limit
                                for at in range(0, full, limit):
                                    yield self._emit(pending[at:at + limit])
                                stats.long_lines_cut += full // limit
                                pending = pending[full:]
                        if ends_line:
                            if i < len(lines) - 1 or line:
                                stats.lines += 1
                            if pending:
                                yield self._emit(pending)
                                pending = []
                    if final:
                        break
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise CorpusError(f"cannot read corpus {path}: {exc}") from None
        finally:
            stats.invalid_utf8 += getattr(_decode_state, "invalid", 0)
            _decode_state.invalid = 0
        cuts = stats.long_tokens_cut - cuts_before
        if cuts and path not in self._warned_long_tokens:
            self._warned_long_tokens.add(path)
            logger.warning("%s: %d cut(s) inside tokens longer than %s characters (no whitespace "
                           "for megabytes: binary data, or a missing separator?); the pieces are "
                           "separate tokens", path, cuts, f"{_MAX_TOKEN_CHARS:,}")

    def _emit(self, tokens: List[str]) -> List[str]:
        self.stats.pieces += 1
        self.stats.tokens += len(tokens)
        return tokens


def _reject_binary(path: str, head: bytes) -> None:
    if b"\x00" in head[:_SNIFF_BYTES]:
        raise CorpusError(f"corpus looks binary, not text (NUL bytes): {path}")


def is_one_shot(source) -> bool:
    """Whether ``source`` is an iterator (a generator, an open file): it yields its items once,
    while a list, a ``Corpus`` or any object whose ``__iter__`` starts a new pass can be read
    again."""
    try:
        return iter(source) is source
    except TypeError:
        return False


def as_corpus(source, max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH) -> Iterable[List[str]]:
    """A path / list of paths becomes a ``Corpus``; an iterable of token lists passes through
    (the gensim convention: any re-iterable of lists of str)."""
    if isinstance(source, (str, os.PathLike)):
        return Corpus(source, max_sentence_length=max_sentence_length)
    if isinstance(source, (list, tuple)) and source and isinstance(source[0], (str, os.PathLike)):
        return Corpus(source, max_sentence_length=max_sentence_length)
    return source
