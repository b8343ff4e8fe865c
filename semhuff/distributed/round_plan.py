"""How long a Dask round is: long enough that a round's transfers and combination are cheap
against its training, short enough that a run has a handful of rounds at least.

A run of one or two rounds gives near-random vectors: every worker trains its part of the corpus
from the same start alone, and their independent solutions are averaged once (a 2 MB
corpus on ``local:2`` trained in one round of the default 1,000,000 words; MTurk -0.06 against
0.34 on one machine, and 0.38 with rounds of 50,000 words). So the default round length is
1,000,000 words, or shorter so that the longest shard trains in ``MIN_ROUNDS`` rounds; a round
length the user gives is kept, with a warning when it leaves fewer. A round is whole chunks
(the chunk is the unit a worker trains, and its random streams' key), so a corpus whose shards
hold fewer chunks than ``MIN_ROUNDS`` cannot have that many: a warning says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

DEFAULT_ROUND_WORDS = 1_000_000
MIN_ROUNDS = 10


@dataclass(frozen=True)
class RoundPlan:
    round_words: int         # the words each worker trains between two combinations
    rounds: int              # the rounds the longest shard needs (estimated: chunks vary)
    warning: Optional[str]   # why this run has fewer than MIN_ROUNDS rounds, if it has


def expected_rounds(shard_words: int, epochs: int, chunk_words: float, round_words: int) -> int:
    """Rounds a shard of ``shard_words`` input words (all epochs) takes: its chunks (an epoch
    ends a chunk) taken whole until a round has ``round_words``."""
    chunk_words = max(chunk_words, 1.0)
    chunks = epochs * math.ceil(shard_words / max(epochs, 1) / chunk_words)
    return max(1, math.ceil(chunks / math.ceil(round_words / chunk_words)))


def plan_rounds(shard_words: Sequence[int], epochs: int, chunk_words: float,
                given: Optional[int]) -> RoundPlan:
    """The round length for shards of ``shard_words`` input words each (all epochs), chunks of
    about ``chunk_words`` input words; ``given``: the user's round length (None: choose)."""
    longest = max(shard_words, default=0)

    def rounds(round_words: int) -> int:
        return expected_rounds(longest, epochs, chunk_words, round_words)

    if given is not None:
        found = rounds(given)
        if found >= MIN_ROUNDS:
            return RoundPlan(given, found, None)
        shorter = plan_rounds(shard_words, epochs, chunk_words, None).round_words
        return RoundPlan(given, found, (
            f"rounds of {given:,} words give this run about {found} round(s): with fewer than "
            f"{MIN_ROUNDS} the workers barely meet and the vectors come out close to random; "
            f"leave --round-words (round_words) out to have it chosen, or give {shorter:,} or "
            f"less"))
    round_words = DEFAULT_ROUND_WORDS
    if rounds(round_words) < MIN_ROUNDS:
        # whole chunks a round, as many as leave MIN_ROUNDS rounds (half a chunk short of
        # them: a round takes chunks until it has its words, and chunks vary a little)
        chunks = expected_rounds(longest, epochs, chunk_words, 1)
        per_round = max(1, chunks // MIN_ROUNDS)
        round_words = max(1, min(DEFAULT_ROUND_WORDS, int((per_round - 0.5) * chunk_words)))
    found = rounds(round_words)
    if found >= MIN_ROUNDS:
        return RoundPlan(round_words, found, None)
    return RoundPlan(round_words, found, (
        f"this corpus is small for Dask: {found} round(s) at most (a round is whole chunks of "
        f"about {chunk_words:,.0f} words, and the largest worker's part holds only {found}); "
        f"with fewer than {MIN_ROUNDS} rounds the vectors come out close to random: train it "
        f"on one machine (without --dask), or on fewer workers"))
