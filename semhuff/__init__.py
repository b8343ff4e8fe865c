"""semhuff: fast word2vec-style embeddings with hierarchical softmax over Huffman, SemHuff and
self-organized trees."""
import logging

from .corpus import Corpus
from .errors import SemhuffError
from .model import Word2Vec
from .tree import Tree
from .vectors_io import load_vectors
from .vocab import Vocab

__version__ = "0.1.0"
__all__ = ["Corpus", "SemhuffError", "Tree", "Vocab", "Word2Vec", "load_vectors", "__version__"]

logging.getLogger(__name__).addHandler(logging.NullHandler())
