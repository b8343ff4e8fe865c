"""The learning-rate schedule, one object for every place that needs the rate: word2vec's linear
decay from ``alpha`` at the first input word of a ``train()`` call to ``min_alpha`` at its last
(``total_words`` = epochs x words an epoch), never restarted per epoch. The compiled loops
compute the same formula per sentence (``kernels.common.alpha_at``, its Numba twin; tested
equal); the trainer's hooks, the GPU's pair generator (through the loops) and Dask's shards read
it from here."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    alpha: float
    min_alpha: float
    total_words: int

    def at(self, words_done: float) -> float:
        """The rate after ``words_done`` input words of the call."""
        share = min(words_done / max(self.total_words, 1), 1.0)
        return self.alpha - (self.alpha - self.min_alpha) * share
