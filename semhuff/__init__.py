"""semhuff: fast word2vec-style embeddings with hierarchical softmax over Huffman, SemHuff and
self-organized trees."""
import logging

from .version import __version__

__all__ = ["Corpus", "SemhuffError", "Tree", "Vocab", "Word2Vec", "load_vectors", "__version__"]


def __getattr__(name):
    """The exports, each imported on first use (PEP 562): ``import semhuff`` (and so ``import
    semhuff.lm`` or ``semhuff.eval``) loads neither Numba nor the trainer until one is asked for.
    Numba's cache locator comes with the first module that compiles (``numba_cache``)."""
    if name == "Word2Vec":
        from .model import Word2Vec as value
    elif name == "Corpus":
        from .corpus import Corpus as value
    elif name == "SemhuffError":
        from .errors import SemhuffError as value
    elif name == "Tree":
        from .trees.base import Tree as value
    elif name == "Vocab":
        from .vocab import Vocab as value
    elif name == "load_vectors":
        from .vectors_io import load_vectors as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


logging.getLogger(__name__).addHandler(logging.NullHandler())
