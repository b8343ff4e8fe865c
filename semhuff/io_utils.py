"""File output the way users expect it.

* Atomic: a regular file is written to a temp file beside it and renamed over it, so a failed or
  interrupted write never leaves a half-written file or destroys the old one.
* Permissions: a new file gets ``0o666 & ~umask`` (as ``open()`` would give it, not
  ``mkstemp``'s 0600); an overwritten file keeps its mode (and, where allowed, its owner).
* Symlinks are written through: the temp file goes beside the link's target, which is replaced;
  the link stays. Special files (FIFOs, devices) are written directly; the process's own
  streams (``/dev/stdout``, ``/dev/fd/N``) get the finished file through their open descriptor
  (a ``>>`` redirect is honoured, a failed write emits nothing).
* Temp files are named ``.<name>.semhuff-<pid>-<random>.tmp``: every write first removes those
  of processes that no longer exist (a run killed with SIGKILL), and the CLIs turn SIGTERM into
  an exception so the temp file of an interrupted write is removed at once.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import zipfile
import zlib
from typing import NamedTuple, Optional

import numpy as np

from .errors import OutputError

_TMP_MARK = ".semhuff-"
# a process's own streams: written through even when they are redirected to a regular file
_STREAMS = re.compile(r"^/(dev/(stdout|stderr|fd/\d+)|proc/self/fd/\d+)$")
_STALE = re.compile(r"^\..*\.semhuff-(\d+)-[A-Za-z0-9_]+\.tmp(\.[a-z0-9]+)?$")


class Target(NamedTuple):
    path: str             # where the bytes go: symlinks resolved
    special: bool         # not a regular file (a device, a FIFO): written directly, no rename
    mode: Optional[int]   # permission bits the written file gets (None: leave as it is)
    existing: Optional[os.stat_result]
    stream: Optional[int] = None  # the file descriptor of /dev/stdout, /dev/fd/N, ...


def current_umask() -> int:
    try:  # Linux: read it without changing it (os.umask is process-wide, threads may race)
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def resolve_target(path) -> Target:
    """What writing ``path`` means: the real file behind a symlink, direct writes for special
    files, and the mode the result must have."""
    path = os.path.abspath(_stdout_alias(path))
    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"output path is a directory: {path}")
    stream = _STREAMS.match(path)
    if st is not None and (stream or not stat.S_ISREG(st.st_mode)):
        fd = None
        if stream:
            name = path.rsplit("/", 1)[1]
            fd = {"stdout": 1, "stderr": 2}.get(name) or int(name)
        return Target(path, True, None, st, fd)
    real = os.path.realpath(path)  # a symlink, even a dangling one: write its target
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~current_umask()
    return Target(real, False, mode, st)


def check_writable(path) -> None:
    """Fail early (before hours of training) if ``path`` cannot be written."""
    target = resolve_target(path)
    if target.special:
        if not os.access(target.path, os.W_OK):
            raise OutputError(f"output file is not writable: {target.path}")
        return
    folder = os.path.dirname(target.path) or "."
    if not os.path.isdir(folder):
        raise OutputError(f"output directory does not exist: {folder}")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"output directory is not writable: {folder}")
    if target.existing is not None and not os.access(target.path, os.W_OK):
        raise OutputError(f"output file is not writable: {target.path}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temp_files(folder: str) -> int:
    """Remove the temp files of semhuff writes whose process is gone; how many were removed."""
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        match = _STALE.match(name)
        if match and not _alive(int(match.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))
                removed += 1
    return removed


def _finish(tmp: str, target: Target) -> None:
    """Give the temp file the target's permissions (and owner, where allowed), then rename."""
    os.chmod(tmp, target.mode)
    if target.existing is not None:
        with contextlib.suppress(OSError):
            os.chown(tmp, target.existing.st_uid, target.existing.st_gid)
    os.replace(tmp, target.path)


@contextlib.contextmanager
def atomic_path(path, suffix: str = ""):
    """For writers that insist on a file name (gensim's): yield a temp path beside the target and
    rename it into place on success. A FIFO or device is yielded as it is; for one of the
    process's streams (``/dev/stdout``) the temp file is copied into the stream on success, so
    a redirect (``>>``) is honoured and a failed write emits nothing. The temp name ends in
    ``suffix`` (``.gz``: for writers that compress by the name)."""
    check_writable(path)
    target = resolve_target(path)
    if target.special and target.stream is None:
        yield target.path
        return
    folder = tempfile.gettempdir() if target.special else os.path.dirname(target.path)
    remove_stale_temp_files(folder)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target.path)}{_TMP_MARK}{os.getpid()}-",
                               suffix=".tmp" + suffix, dir=folder)
    os.close(fd)
    try:
        yield tmp
        if target.special:
            _copy_into_stream(tmp, target.stream)
        else:
            _finish(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _copy_into_stream(tmp: str, fd: int) -> None:
    for stream in (sys.stdout, sys.stderr):  # keep the order of what was printed before
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    with open(tmp, "rb") as src, os.fdopen(os.dup(fd), "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


@contextlib.contextmanager
def atomic_output(path, mode: str = "wb"):
    """Yield a file object for a temp file next to ``path``; rename it to ``path`` on success,
    delete it on any error (special files: as ``atomic_path``)."""
    with atomic_path(path) as tmp:
        with open(tmp, mode) as fh:
            yield fh


def atomic_write_npz(path: str, arrays: dict) -> None:
    with atomic_output(path, "wb") as fh:
        np.savez(fh, **arrays)


def is_stdout(path) -> bool:
    """Whether ``path`` is this process's standard output (``-o /dev/stdout`` or ``-o -``):
    then the output owns stdout and messages go to stderr."""
    try:
        return os.path.samestat(os.stat(_stdout_alias(path)), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):
        return False


def _stdout_alias(path) -> str:
    """``-`` is standard output, as for most Unix tools (it once wrote a file named ``-``);
    ``./-`` still names a file."""
    path = os.fspath(path)
    return "/dev/stdout" if path == "-" else path


# -- reading .npz archives -------------------------------------------------------------------------

def describe_content(path) -> str:
    """What a file looks like from its first bytes, for "not a model file" messages."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not head:
        return "an empty file"
    if head.startswith(b"\x80"):
        return "a Python pickle (gensim's save format: load it with gensim)"
    if head.startswith(b"\x93NUMPY"):
        return "a single numpy array (.npy)"
    if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ")):
        return "a compressed file"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:
            return "binary data (word2vec binary vectors?)"
        text = head[:exc.start].decode("utf-8")
    first = text.split("\n", 1)[0].strip()
    fields = first.split()
    if len(fields) == 2 and all(f.isdigit() for f in fields):
        return "word2vec vectors (a count/dimension header)"
    return f"text ({first[:40]!r} ...)"


def open_npz(path, what: str = "semhuff model file", error=None):
    """``np.load(path, allow_pickle=False)`` of a ``.npz`` archive, or ``error`` (a SemhuffError
    class; default ``ModelFileError``) in one line saying what the file is instead. numpy's own
    message for a text or pickle file advises ``allow_pickle=True``, which would run code from
    the file: never shown. Its entries are checked as they are read (``CheckedNpz``)."""
    from .errors import ModelFileError
    error = error or ModelFileError
    name = os.fspath(path)
    if not os.path.exists(name):
        raise error(f"{what} not found: {name}")
    if os.path.isdir(name):
        raise error(f"{name} is a directory, not a {what}")
    try:
        with open(name, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise error(f"cannot read {name}: {exc.strerror or exc}") from None
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise error(f"{name} is not a {what} (a .npz archive): it is {describe_content(name)}")
    try:
        return CheckedNpz(np.load(name, allow_pickle=False), name, what, error)
    except _DAMAGE as exc:
        raise error(_damaged(name, what, exc)) from None


def _damaged(name: str, what: str, exc: BaseException, member: str = "") -> str:
    inside = f", its entry {member!r}" if member else ""
    return (f"{name}: a damaged or incomplete {what}{inside} ({type(exc).__name__}: "
            f"{str(exc)[:120]})")


# what reading a damaged archive raises: the directory (BadZipFile, EOFError), a member whose
# CRC-32 or compressed data is wrong (BadZipFile, zlib.error), a truncated array (ValueError)
_DAMAGE = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error)


class CheckedNpz:
    """An open ``.npz`` whose entries are read, and their CRC-32 checked, only when asked for
    (``np.load`` is lazy): a damaged entry is the caller's one-line error too, not zipfile's
    traceback (``BadZipFile: Bad CRC-32 for file 'syn0.npy'`` under ``--resume``)."""

    def __init__(self, npz, name: str, what: str, error):
        self._npz, self._name, self._what, self._error = npz, name, what, error

    @property
    def files(self):
        return self._npz.files

    def __contains__(self, key) -> bool:
        return key in self._npz

    def __getitem__(self, key):
        try:
            return self._npz[key]
        except KeyError:
            raise
        except _DAMAGE as exc:
            raise self._error(_damaged(self._name, self._what, exc, key)) from None

    def close(self) -> None:
        self._npz.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# How a model file (``Word2Vec.save``) keeps its vocabulary and its output layer's arrays: read
# here too by the readers that need no model (vectors_io, tree.load_tree_file).
MODEL_LAYER_PREFIX = "layer."


def pack_words(words) -> np.ndarray:
    """Words as one UTF-8 byte array, newline-separated (how model files keep them)."""
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8)


def unpack_words(blob: np.ndarray) -> list:
    text = blob.tobytes().decode("utf-8")
    return text.split("\n") if text else []


def json_safe(value):
    """``value`` with NaN and infinities as None (null): strict JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
