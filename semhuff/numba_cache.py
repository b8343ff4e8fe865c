"""Where Numba caches semhuff's compiled kernels: a per-user cache folder, never the package.

Numba's default for ``cache=True`` is a ``__pycache__`` folder beside the source file. For an
installed semhuff that is ``site-packages/semhuff/**/__pycache__``, which ``pip uninstall`` (and
so every upgrade or ``pip install -e``) leaves behind; the left-over ``semhuff`` folder, without
its ``__init__.py``, then imports as a namespace package ahead of the new install and every
console script fails with ``ModuleNotFoundError``. So semhuff registers one more cache locator,
used only for its own source files, that keeps the cache in

    $SEMHUFF_NUMBA_CACHE, else $XDG_CACHE_HOME/semhuff/numba, else ~/.cache/semhuff/numba
        / <semhuff version>-<hash of the package folder> / <module's folder inside the package>

(one folder per installed copy, so two checkouts never evict each other's entries; Numba's own
source stamp still invalidates an entry when the file changes). Other packages' Numba caching
is untouched, and ``NUMBA_CACHE_DIR``, when a user sets it, still wins (it is looked at first).
When no cache folder is writable, a per-user folder under the temp directory is used.

The locator is installed when this module is imported, and every semhuff module that compiles
with ``cache=True`` gets Numba from here (``from ..numba_cache import numba``), so it is in place
before any of their decorators runs, whichever of them a process imports first;
``import semhuff`` itself imports no Numba (``tests/test_structure.py`` checks both).
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile

import numba  # noqa: F401  (semhuff's modules import it from here)
from numba.core import caching, event

from .version import __version__

ENV_VAR = "SEMHUFF_NUMBA_CACHE"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_version = "unknown"


def cache_roots() -> list:
    """Candidate cache roots, best first."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return [explicit]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    user = getattr(os, "getuid", lambda: "user")()
    return [os.path.join(base, "semhuff", "numba"),
            os.path.join(tempfile.gettempdir(), f"semhuff-numba-{user}")]


def copy_tag() -> str:
    """This installed copy of semhuff: its version and a hash of its folder."""
    digest = hashlib.sha1(PACKAGE_DIR.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{_version}-{digest}"


def _inside_package(py_file: str) -> bool:
    path = os.path.abspath(py_file)
    return os.path.commonpath([path, PACKAGE_DIR]) == PACKAGE_DIR


class SemhuffCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba cache locator for semhuff's own modules (``None`` for every other file, so numba
    moves on to its usual locators)."""

    def __init__(self, py_func, py_file, root: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        sub = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), PACKAGE_DIR)
        self._cache_path = os.path.normpath(os.path.join(root, copy_tag(), sub))

    def get_cache_path(self) -> str:
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.exists(py_file) or not _inside_package(py_file):
            return None
        for root in cache_roots():
            locator = cls(py_func, py_file, root)
            try:
                locator.ensure_cache_path()
            except OSError:
                continue
            return locator
        return None


def _impl_class():
    # numba >= 0.62 calls it CacheImpl, earlier versions _CacheImpl
    return getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")


def install(version: str) -> None:
    """Register the locator (idempotent). Must run before any semhuff module defines a cached
    function: Numba picks the locator when the decorator runs."""
    global _version
    _version = version
    classes = _impl_class()._locator_classes
    if SemhuffCacheLocator in classes:
        return
    # after NUMBA_CACHE_DIR's locator (the user's explicit choice), before the in-tree one
    user_provided = [i for i, c in enumerate(classes) if "UserProvided" in c.__name__]
    classes.insert(user_provided[0] + 1 if user_provided else 0, SemhuffCacheLocator)


install(__version__)  # before any module that imports numba from here defines a function


# -- saying so when the first kernel compiles -----------------------------------------------------

logger = logging.getLogger(__name__)
_notice = {"given": False}


class _FirstCompileNotice(event.Listener):
    """Logs once a process, when Numba starts compiling one of semhuff's functions (a cache
    miss: a kernel loaded from the disk cache fires no compile event), that the wait is the
    first run's only: the Python API's first ``Word2Vec(...)`` took 13.3 s against gensim's
    2.3 s, saying nothing. A warning, so that a script with no logging set up shows
    it (semhuff's logger has only a NullHandler then: through Python's last-resort handler);
    the console scripts show it with -v only (their summary gives the compile time)."""

    def on_start(self, ev) -> None:
        if _notice["given"]:
            return
        dispatcher = (ev.data or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if module.split(".")[0] != "semhuff":
            return
        _notice["given"] = True
        if logger.isEnabledFor(logging.WARNING):
            message = (f"semhuff: compiling kernels (first run only: a few seconds each, then "
                       f"loaded from the cache in {cache_roots()[0]})")
            if _handled(logger):
                logger.warning(message)
            else:  # semhuff's NullHandler would swallow it: Python's last resort, stderr
                logging.lastResort.handle(logger.makeRecord(
                    logger.name, logging.WARNING, __file__, 0, message, None, None))

    def on_end(self, ev) -> None:
        pass


event.register("numba:compile", _FirstCompileNotice())


def _handled(log: logging.Logger) -> bool:
    """Whether a handler of the application's (not a library's NullHandler) sees ``log``."""
    while log is not None:
        if any(not isinstance(h, logging.NullHandler) for h in log.handlers):
            return True
        if not log.propagate:
            return False
        log = log.parent
    return False


# -- how long this process spent compiling ---------------------------------------------------------

_COMPILE_TIMER = None


def compile_seconds() -> float:
    """Seconds this process has spent in Numba compilations so far (cache misses only: a kernel
    loaded from the disk cache costs no compile time). A run's set-up compiles the vocabulary
    scanner the first time a configuration is used (seconds, once): timings subtract this to
    say so (a cold run's 4.5 s "vocabulary_and_setup" was unexplained)."""
    global _COMPILE_TIMER
    if _COMPILE_TIMER is None:
        _COMPILE_TIMER = event.TimingListener()
        event.register("numba:compile", _COMPILE_TIMER)
    return _COMPILE_TIMER.duration if _COMPILE_TIMER.done else 0.0
