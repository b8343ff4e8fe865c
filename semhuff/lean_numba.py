"""Numba's first compiled call without SciPy's linear algebra, for the console scripts.

The first time Numba compiles or loads a cached function, its CPU target imports its NumPy
implementations, and one of them (``numba.np.arraymath``) imports ``scipy.linalg`` at once to
see whether ``np.dot`` and friends can call BLAS. No semhuff kernel calls BLAS (the kernels'
row operations are their own loops), yet a training run paid for it: measured on this project's
2-core guests, 0.1-0.3 s of serial start-up (SciPy 1.17 pulls in ``numpy.f2py`` there) and
25 MiB of the process's memory (docs/performance.md).

``skip_blas_probe()`` imports ``numba.np.arraymath`` itself with ``scipy.linalg`` hidden, so
Numba records "no BLAS" and the import never happens; then it un-hides it, so a later
``import scipy.linalg`` works as usual. The price: in this process, compiling a *new* function
that calls ``np.dot`` or ``np.linalg`` fails with Numba's "scipy ... is required" error. Only
processes that are wholly ours call it (``semhuff-train``); ``import semhuff`` never does, so a
library user's own Numba code is untouched. Where Numba's layout differs from what this
expects (another version), it does nothing.
"""
from __future__ import annotations

import importlib.abc
import logging
import sys

log = logging.getLogger(__name__)

_HIDDEN = "scipy.linalg"


class _HideScipyLinalg(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == _HIDDEN or fullname.startswith(_HIDDEN + "."):
            raise ImportError(f"{fullname}: hidden while Numba starts (semhuff.lean_numba)")
        return None


def skip_blas_probe() -> bool:
    """Import Numba's NumPy implementations with ``scipy.linalg`` hidden. True when Numba
    recorded "no BLAS" (the import was skipped); False when it was already too late (SciPy's
    linear algebra or Numba's implementations already imported) or Numba's layout differs."""
    if _HIDDEN in sys.modules or "numba.np.arraymath" in sys.modules:
        return False
    finder = _HideScipyLinalg()
    sys.meta_path.insert(0, finder)
    try:
        import numba.np.arraymath as arraymath
    except ImportError:  # not expected: arraymath catches the ImportError itself
        return False
    finally:
        sys.meta_path.remove(finder)
        for name in [m for m in sys.modules if m == _HIDDEN or m.startswith(_HIDDEN + ".")]:
            del sys.modules[name]  # nothing half-imported stays behind
    skipped = getattr(arraymath, "_HAVE_BLAS", None) is False
    log.debug("Numba's BLAS probe %s", "skipped" if skipped else "ran")
    return skipped
