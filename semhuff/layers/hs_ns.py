"""Hierarchical softmax and negative sampling together on the same input vectors: word2vec.c's
``-hs 1 -negative N`` and gensim's ``hs=1, negative=N``. Each output layer keeps its own rows
(the tree's inner nodes, and one row per word for the noise words) and adds its error to the
input vectors; the tree's part is the normalised one, so ``score()`` uses it.

Order of the two updates (the body ``loop.HS_NS``): in skip-gram the centre's HS step runs over
all its contexts, then its NS step, each applying its own input update, as gensim does
(``fast_sentence_sg_hs`` then ``fast_sentence_sg_neg``); in CBOW both predict from the same
context mean and the contexts receive the sum of the two errors, as word2vec.c does. (word2vec.c's
skip-gram also sums the two errors before updating; with one update per centre of ~alpha size
the difference is second order, and gensim is the reference users compare against.)
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..gpu.programs import SentenceBody
from ..kernels import loop
from .hs import HierarchicalSoftmax
from .ns import NEGATIVE, NS_EXPONENT, NegativeSampling


class HierarchicalSoftmaxAndNegative(HierarchicalSoftmax):
    """``weights``: the tree's inner-node rows (as ``HierarchicalSoftmax``); ``noise``: a
    ``NegativeSampling`` layer whose ``weights`` are the noise words' rows (gensim's
    ``syn1neg``). No private hot rows, not on Dask or the GPU's batched form (their programs
    train one output layer); the GPU's sentence kernel trains it."""

    body = loop.HS_NS
    devices = ("cpu", "cuda")  # the sentence-per-block form only (no batch program)
    OPTIONS = HierarchicalSoftmax.OPTIONS + (NEGATIVE, NS_EXPONENT)
    HOT_ROWS = 0

    def __init__(self, tree, order: str = "mixed", clip: str = "skip", negative: int = 5,
                 exponent: float = 0.75):
        super().__init__(tree, order, clip)
        self.noise = NegativeSampling(negative, exponent)

    @classmethod
    def create(cls, vocab, seed=1, negative=5, ns_exponent=0.75, **hs_settings):
        hs = HierarchicalSoftmax.create(vocab, seed=seed, **hs_settings)
        layer = cls(hs.tree, hs.order, hs.clip, negative, ns_exponent)
        layer.noise.set_noise(vocab.counts)
        return layer

    @property
    def syn1neg(self) -> np.ndarray:
        return self.noise.weights

    def allocate(self, n_words: int, dim: int) -> None:
        super().allocate(n_words, dim)
        self.noise.allocate(n_words, dim)

    def kernel_args(self):
        return (super().kernel_args(), self.noise.kernel_args(), self.noise.weights)

    def score_args(self, part: int = 0):
        return super().kernel_args()

    def hot_rows(self, counts, n):
        return None

    def thread_table(self):
        return False

    def gpu_program(self, backend):
        return None  # the batched form trains one output layer

    def sentence_body(self):
        return SentenceBody(hs=super().kernel_args(), hs_weights=self.weights,
                            top=self.batch_levels(), saturate=self.saturates(),
                            ns=self.noise.kernel_args(), ns_weights=self.noise.weights)

    def row_updates(self, trained, counts):
        return None

    def config(self):
        return {**super().config(), **self.noise.config()}

    def arrays(self) -> Dict[str, np.ndarray]:
        noise = {f"ns_{k}": v for k, v in self.noise.arrays().items()}
        return {**super().arrays(), **noise}

    def load_arrays(self, arrays):
        super().load_arrays(arrays)
        self.noise.load_arrays({k[3:]: v for k, v in arrays.items() if k.startswith("ns_")})

    def untrained_loss(self, weight):
        return super().untrained_loss(weight) + self.noise.untrained_loss(weight)

    def describe(self):
        return (f"{super().describe()} and negative sampling ({self.noise.negative} noise words)")
