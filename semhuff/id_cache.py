"""The first epoch's token ids on disk, so later epochs read ids instead of re-tokenising.

Where: ``tmp_dir`` (``--tmp-dir``), else ``TMPDIR`` (``tempfile.gettempdir()``). Size: 4 bytes a
token plus 8 a sentence and 24 a chunk (about 4 GB at 1B tokens).

The file has no name: it is opened with ``O_TMPFILE`` (Linux), or created and unlinked at once
where the file system cannot do that, so its blocks go back to the disk when the process ends,
however it ends (Ctrl-C, SIGTERM, SIGKILL, the OOM killer). In the fallback a run killed between
the creation and the unlink (microseconds) leaves ``.ids.semhuff-PID-XXXX.tmp``; the next run
that caches into that folder removes such files of dead processes (``io_utils``'s rule for every
temp file semhuff writes).

Space: ``check_space`` refuses to start when the folder cannot hold the estimate (one line,
before any training), and ``IdCache.append`` stops caching when a write would leave less than
``reserve_bytes`` free or the disk is full: the cache is dropped (its space freed at once) and
the caller re-reads the corpus for the later epochs, with a warning.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from typing import Iterator, NamedTuple, Optional

import numpy as np

from .errors import CacheSpaceError
from .io_utils import remove_stale_temp_files

logger = logging.getLogger(__name__)

_HEADER = 3                    # int64 words per chunk: len(ids), len(bounds), raw_tokens
_CHECK_EVERY_BYTES = 64 << 20  # how often the free space is looked at while writing
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


class Chunk(NamedTuple):
    ids: np.ndarray       # int32 token ids, sentences concatenated
    bounds: np.ndarray    # int64 end offset of each sentence in ``ids``
    raw_tokens: int       # tokens read from the corpus for this chunk, OOV included


def cache_dir(tmp_dir: Optional[str] = None) -> str:
    """The folder the cache goes to: ``tmp_dir``, else TMPDIR (or the system's default)."""
    return os.path.abspath(os.fspath(tmp_dir)) if tmp_dir else tempfile.gettempdir()


def estimate_bytes(tokens: int, chunk_words: int) -> int:
    """What caching ``tokens`` in-vocabulary tokens takes, with one sentence bound per 10
    tokens (a pessimistic sentence length; a text8-style file has one per 10,000)."""
    chunks = tokens // max(chunk_words, 1) + 1
    return 4 * tokens + 8 * (tokens // 10 + chunks) + 8 * _HEADER * chunks


def reserve_bytes(directory: str) -> int:
    """Free space the cache never takes: 1% of the file system, at least 64 MiB and at most
    1 GiB, so other programs writing there do not hit a full disk because of us."""
    total = shutil.disk_usage(directory).total
    return int(min(max(total // 100, 64 << 20), 1 << 30))


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def check_space(directory: str, needed: int) -> None:
    """A ``CacheSpaceError`` (before any work) when ``directory`` cannot hold ``needed`` bytes
    and the reserve."""
    if not os.path.isdir(directory):
        raise CacheSpaceError(f"the id cache folder does not exist: {directory} (--tmp-dir)")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CacheSpaceError(f"the id cache folder is not writable: {directory} (--tmp-dir)")
    free = shutil.disk_usage(directory).free
    reserve = reserve_bytes(directory)
    if free - reserve < needed:
        raise CacheSpaceError(
            f"the first epoch's id cache needs about {_gb(needed)} in {directory} (and "
            f"{_gb(reserve)} left free for others) but only {_gb(free)} is free: point --tmp-dir (or TMPDIR) at a disk with room, or use "
            f"--no-id-cache to re-read the corpus every epoch (slower)")


def _open_unnamed(directory: str) -> int:
    """A read-write descriptor of a new file in ``directory`` that has no name."""
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
    if hasattr(os, "O_TMPFILE"):
        try:
            return os.open(directory, flags | os.O_TMPFILE | os.O_EXCL, 0o600)
        except OSError as exc:  # the file system cannot (tmpfs can; some network ones cannot)
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    remove_stale_temp_files(directory)
    fd, name = tempfile.mkstemp(prefix=f".ids.semhuff-{os.getpid()}-", suffix=".tmp",
                                dir=directory)
    os.unlink(name)
    return fd


class IdCache:
    """Chunks appended to an unnamed file and read back in order, one at a time."""

    def __init__(self, directory: Optional[str] = None):
        self.directory = cache_dir(directory)
        self._fh = os.fdopen(_open_unnamed(self.directory), "w+b")
        self._reserve = reserve_bytes(self.directory)
        self._checked_at = 0
        self.chunks = 0
        self.bytes = 0
        self.complete = False

    def append(self, chunk: Chunk) -> None:
        """Add a chunk; ``CacheSpaceError`` when the disk is (nearly) full: the caller drops
        the cache."""
        ids = np.ascontiguousarray(chunk.ids, dtype=np.int32)
        bounds = np.ascontiguousarray(chunk.bounds, dtype=np.int64)
        size = 8 * _HEADER + ids.nbytes + bounds.nbytes
        if self.bytes + size - self._checked_at >= _CHECK_EVERY_BYTES:
            self._checked_at = self.bytes
            free = shutil.disk_usage(self.directory).free
            if free - size < self._reserve:
                raise CacheSpaceError(self._full_message(f"{_gb(free)} free is the reserve"))
        header = np.array([len(ids), len(bounds), chunk.raw_tokens], dtype=np.int64)
        try:  # file.write, not ndarray.tofile: a full disk must come back as ENOSPC
            for array in (header, ids, bounds):
                self._fh.write(memoryview(array).cast("B"))
            self._fh.flush()
        except OSError as exc:
            if exc.errno in _FULL:
                raise CacheSpaceError(self._full_message(os.strerror(exc.errno))) from None
            raise
        self.bytes += size
        self.chunks += 1

    def _full_message(self, why: str) -> str:
        return (f"the id cache in {self.directory} ran out of disk space after {_gb(self.bytes)} "
                f"({why}; --tmp-dir chooses another folder)")

    def __iter__(self) -> Iterator[Chunk]:
        self._fh.flush()
        self._fh.seek(0)
        for _ in range(self.chunks):
            n_ids, n_bounds, raw = np.fromfile(self._fh, dtype=np.int64, count=_HEADER)
            ids = np.fromfile(self._fh, dtype=np.int32, count=int(n_ids))
            bounds = np.fromfile(self._fh, dtype=np.int64, count=int(n_bounds))
            yield Chunk(ids, bounds, int(raw))
        self._fh.seek(0, os.SEEK_END)

    def close(self) -> None:
        """Give the space back now."""
        try:
            self._fh.close()
        except OSError:  # unflushed bytes of a full disk: the file goes anyway
            pass
