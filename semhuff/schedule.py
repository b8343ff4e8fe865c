"""The learning-rate schedule, one object for every place that needs the rate: word2vec's linear
decay from ``alpha`` at the first input word of a ``train()`` call to ``min_alpha`` at its last
(``total_words`` = epochs x words an epoch), never restarted per epoch. A ``Plan``
(``cpu_session.Plan.from_settings``) holds one; the compiled loops get its three numbers as
arguments and compute the same formula per sentence (``kernels.common.alpha_at``, its Numba
twin; tested equal); the trainer's hooks, the GPU's pair generator (through the loops) and
Dask's shards read it from here."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from .errors import OptionError


def check_rate(alpha, min_alpha) -> None:
    """The one check of a learning rate (``Word2Vec``, ``TrainSettings``, every ``Schedule``):
    a rate that rises, or is negative or not a number, would train silently wrong. 0 is a rate
    (no update: the scoring plan's)."""
    if not (_finite(alpha) and _finite(min_alpha) and 0 <= min_alpha <= alpha):
        raise OptionError(f"the learning rate must fall from alpha >= 0 to min_alpha in "
                          f"[0, alpha], got alpha={alpha!r}, min_alpha={min_alpha!r}")


def _finite(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and \
        math.isfinite(value)


@dataclass(frozen=True)
class Schedule:
    alpha: float
    min_alpha: float
    total_words: int

    def __post_init__(self):
        check_rate(self.alpha, self.min_alpha)
        if not self.total_words >= 1:
            raise OptionError(f"the learning rate decays over at least one word, got "
                              f"total_words={self.total_words!r}")

    def at(self, words_done: float) -> float:
        """The rate after ``words_done`` input words of the call."""
        share = min(words_done / max(self.total_words, 1), 1.0)
        return self.alpha - (self.alpha - self.min_alpha) * share
