"""Where data lives. One place answers it for the library, the CLIs, the tests and the benchmarks.

Data sets are never copied into the repository. The data root is ``$SEMHUFF_DATA`` when set,
else the ``shared/data`` folder beside the repository checkout (``<repo>/../shared/data``).
Small files that ship with gensim (``gensim/test/test_data``) are found by ``gensim_test_file``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

ENV_VAR = "SEMHUFF_DATA"
_REPO = Path(__file__).resolve().parents[1]


def data_root() -> Path:
    """``$SEMHUFF_DATA``, else ``<repo>/../shared/data`` (which may not exist)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return (_REPO / ".." / "shared" / "data").resolve()


def data_path(*parts: str) -> Path:
    """A path under the data root (not checked for existence)."""
    return data_root().joinpath(*parts)


def shared_corpus() -> Path:
    """The project's default training corpus (``corpus/corpus.txt.gz`` under the data root)."""
    return data_path("corpus", "corpus.txt.gz")


def gensim_test_file(name: str) -> Optional[Path]:
    """A file of gensim's bundled test data (``lee_background.cor``, ``wordsim353.tsv`` ...)."""
    from gensim.test.utils import datapath
    path = Path(datapath(name))
    return path if path.is_file() else None


def missing_message(path: os.PathLike, what: str) -> str:
    """The one sentence every skip / error about absent data uses."""
    return f"{what} not found at {path} (set {ENV_VAR} to the data folder)"
