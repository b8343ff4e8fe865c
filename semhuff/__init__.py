"""semhuff: fast word2vec-style embeddings with hierarchical softmax over Huffman, SemHuff and
self-organized trees."""
import logging

__version__ = "0.1.0"

# Before any module defines a cached Numba function: keep Numba's cache out of the package.
from . import numba_cache  # noqa: E402

numba_cache.install(__version__)

from .corpus import Corpus  # noqa: E402
from .errors import SemhuffError  # noqa: E402
from .model import Word2Vec  # noqa: E402
from .trees.base import Tree  # noqa: E402
from .vectors_io import load_vectors  # noqa: E402
from .vocab import Vocab  # noqa: E402

__all__ = ["Corpus", "SemhuffError", "Tree", "Vocab", "Word2Vec", "load_vectors", "__version__"]

logging.getLogger(__name__).addHandler(logging.NullHandler())
