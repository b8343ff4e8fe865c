"""Negative sampling: the baseline both papers compare against.

``ns_order`` (skip-gram only) says how a centre's contexts meet their noise words:
"batched" (the default): one draw of ``negative`` noise words per centre, shared
by its contexts, each output row updated once with all their gradients (HogBatch, Ji et al.
2016; ``kernels/ns.py``), 1.7x faster kernels at the same quality (docs/performance.md,
"Negative sampling, batched"); "word2vec": fresh noise words for every context, word2vec.c's
order exactly. CBOW has one prediction per centre, so both are the same there. A model file
saved before the option existed was trained in word2vec's order, and loads with it."""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..gpu.programs import BinaryOutputs, SentenceBody
from ..kernels import loop
from ..kernels.ns import build_alias_table
from ..options import Option, positive_int
from .base import OutputLayer

NEGATIVE = Option("negative", int, 5, "noise words per prediction", check=positive_int)
NS_EXPONENT = Option("ns_exponent", float, 0.75, "noise words are drawn from unigram^this")
NS_ORDERS = ("batched", "word2vec")
NS_ORDER = Option("ns_order", str, "batched", "skip-gram + NS: a centre's contexts share one "
                  "draw of noise words and each row takes their updates at once (batched, "
                  "HogBatch: 1.7x faster kernels, same quality), or word2vec.c's fresh noise "
                  "words for every context (word2vec)", choices=NS_ORDERS)


class NegativeSampling(OutputLayer):
    """``negative`` noise words per prediction from the unigram^``exponent`` distribution,
    drawn with an alias table (``alias_thr``, ``alias_idx``) that is part of the saved state."""

    body = loop.NS
    devices = ("cpu", "cuda")
    OPTIONS = (NEGATIVE, NS_EXPONENT, NS_ORDER)
    # Private rows of the most frequent words for each thread (cpu_session.HotRows): noise words
    # spread wider than HS's top nodes, so more rows; each row gets a smaller share of the
    # updates, and summing the changes keeps the quality where averaging lost it. The batched
    # order's short training calls (under ``LARGE_WORDS`` input words) keep every row
    # shared: there the summed copies cost SimLex (3M prefix: 0.201 against 0.211 plain Hogwild,
    # one thread 0.218) and bought no speed; on long calls they keep two threads' speed steady
    # (3 epochs of the full corpus: plain Hogwild 19.1-29.0 s in 13 runs, private rows
    # 19.5-22.0 s in 7) and WS353 higher (docs/performance.md, "Private hot rows").
    HOT_ROWS = 4096
    HOT_MERGE = "sum"

    def __init__(self, negative: int = 5, exponent: float = 0.75, order: str = "word2vec"):
        # ``order``'s default here is for files saved before it existed (``from_state``); new
        # layers get NS_ORDER's default through ``create``
        super().__init__()
        NEGATIVE.validate(negative)
        NS_ORDER.validate(order)
        self.order = order
        self.negative = int(negative)
        self.exponent = float(exponent)
        self.alias_thr = self.alias_idx = None

    @classmethod
    def create(cls, vocab, seed=1, negative=5, ns_exponent=0.75, ns_order=NS_ORDER.default):
        vocab.need_two_words("negative sampling")  # else every noise word is the target
        layer = cls(negative, ns_exponent, ns_order)
        layer.set_noise(vocab.counts)
        return layer

    def set_noise(self, counts) -> None:
        weights = np.asarray(counts, dtype=np.float64) ** self.exponent
        self.alias_thr, self.alias_idx = build_alias_table(weights)

    def n_rows(self, n_words: int) -> int:
        return n_words

    def hot_row_count(self, total_words: int) -> int:
        if self.order == "batched" and total_words < self.LARGE_WORDS:
            return 0
        return self.HOT_ROWS

    def kernel_args(self):
        return (self.alias_thr, self.alias_idx, self.negative)

    def batch_levels(self):
        """The kernels' TOP: > 0 runs the batched skip-gram body (``ns.centre_batched``)."""
        return 1 if self.order == "batched" else 0

    def gpu_program(self, backend):
        return BinaryOutputs(self, "ns")

    def sentence_body(self):
        return SentenceBody(ns=self.kernel_args(), ns_weights=self.weights,
                            ns_batched=self.order == "batched")

    def row_updates(self, trained, counts):
        """A target's row once per prediction, every row as a noise word by its share."""
        noise = np.asarray(counts, np.float64) ** self.exponent
        return trained + self.negative * noise / noise.sum() * trained.sum()

    def hot_rows(self, counts, n):
        """The ``n`` most frequent words: the most drawn noise words and the most predicted
        targets, whose rows every thread writes all the time."""
        # a copy: the slice would keep the whole V-long argsort alive for the run
        return np.argsort(-np.asarray(counts), kind="stable")[:n].copy()

    def config(self):
        return {"negative": self.negative, "exponent": self.exponent, "order": self.order}

    def arrays(self) -> Dict[str, np.ndarray]:
        return {**super().arrays(), "alias_thr": self.alias_thr, "alias_idx": self.alias_idx}

    def load_arrays(self, arrays):
        super().load_arrays(arrays)
        self.alias_thr = np.ascontiguousarray(arrays["alias_thr"], dtype=np.uint32)
        self.alias_idx = np.ascontiguousarray(arrays["alias_idx"], dtype=np.int32)

    def untrained_loss(self, weight):
        """The target's and each noise word's decision at 1/2."""
        return (1 + self.negative) * float(np.log(2.0))

    def describe(self):
        return (f"negative sampling ({self.negative} noise words, unigram^{self.exponent:g}, "
                f"{self.order} order)")
