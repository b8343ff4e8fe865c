"""How the sentence-per-block GPU trainer cuts a chunk into work, on the host (no ``numba.cuda``).

* **Device sentences.** The CPU kernels walk a chunk's sentences as the corpus reader cut them
  (gensim's 10,000 words at most). A GPU block walks one sentence from start to end, so the
  number of blocks a chunk can keep busy is its number of sentences: the shared corpus is one
  line, cut into 10,000-word sentences, 10 to a 100k-word chunk. ``split_bounds`` cuts every
  sentence into pieces of at most ``max_words`` words: word2vec.c's own rule
  (``MAX_SENTENCE_LENGTH`` 1000), so the device trains word2vec's sentences; a window never
  crosses a cut, which drops about ``window / max_words`` of the pairs (0.3% at 1,000 words).
* **Random streams.** Block ``b`` walks the sentences ``b, b + G, b + 2G, ...`` of a launch of
  ``G`` blocks with its own LCG stream (word2vec's, ``kernels/common.py``), seeded
  ``block_seeds(seed)[b]``: block 0 gets the chunk's seed itself, so one block over a chunk
  draws exactly what the CPU kernel draws (down-sampling, reduced windows, noise words) and
  trains exactly the CPU kernel's vectors (tested); the others a splitmix64 of (seed, b).
"""
from __future__ import annotations

import numpy as np

# word2vec.c's MAX_SENTENCE_LENGTH: the longest sentence a block walks
MAX_SENTENCE_WORDS = 1000

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def split_bounds(bounds: np.ndarray, max_words: int) -> np.ndarray:
    """``bounds`` (the end of each sentence, as a chunk holds them) with every sentence longer
    than ``max_words`` cut into pieces of ``max_words`` words (the last one shorter); an empty
    sentence stays one empty sentence. ``max_words`` 0: no cut."""
    bounds = np.asarray(bounds, np.int64)
    if max_words <= 0 or bounds.size == 0:
        return bounds
    starts = np.concatenate(([0], bounds[:-1]))
    lengths = bounds - starts
    if lengths.max() <= max_words:
        return bounds
    pieces = np.maximum(1, -(-lengths // max_words))
    first = np.repeat(starts, pieces)
    k = np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    return np.minimum(first + (k + 1) * max_words, np.repeat(bounds, pieces))


def block_seeds(seed, blocks: int) -> np.ndarray:
    """The LCG seed of each of ``blocks`` blocks of a chunk with stream seed ``seed``: block 0
    the seed itself (the CPU kernel's stream), block b > 0 splitmix64(seed + b * golden)."""
    b = np.arange(max(int(blocks), 1), dtype=np.uint64)
    with np.errstate(over="ignore"):  # modulo 2^64 on purpose
        z = np.uint64(seed) + b * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = z ^ (z >> np.uint64(31))
    z[0] = np.uint64(seed)
    return z
