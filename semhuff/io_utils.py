"""Atomic file output: write to a temp file beside the target, then rename over it, so a
failed or interrupted write never leaves a half-written file or destroys the old one."""
from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np

from .errors import OutputError


def check_writable(path: str) -> None:
    """Fail early (before hours of training) if ``path`` cannot be written."""
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise OutputError(f"output path is a directory: {path}")
    if not os.path.isdir(folder):
        raise OutputError(f"output directory does not exist: {folder}")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"output directory is not writable: {folder}")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise OutputError(f"output file is not writable: {path}")


@contextlib.contextmanager
def atomic_path(path: str):
    """Like ``atomic_output`` for writers that insist on a file name (gensim's): yield a temp
    path beside ``path`` and rename it into place on success."""
    path = os.fspath(path)
    check_writable(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "wb"):
    """Yield a file object for a temp file next to ``path``; rename it to ``path`` on success,
    delete it on any error."""
    with atomic_path(path) as tmp:
        with open(tmp, mode) as fh:
            yield fh


def atomic_write_npz(path: str, arrays: dict) -> None:
    with atomic_output(path, "wb") as fh:
        np.savez(fh, **arrays)
