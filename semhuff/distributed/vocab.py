"""The vocabulary as a map-reduce: every split counted by a task on the cluster, the counts
added on the client in split order; and the same map for the words of another corpus
(``count_shards``: continued training, whose schedule runs over that corpus).

Adding ``Counter``s in order keeps the single pass's first-seen order (ties in the vocabulary
are broken by it), and the splits hold exactly the file's tokens (``splits.py``), so the
vocabulary equals ``Vocab.build`` on one machine: same words, same ids, same counts. With
``max_vocab_size`` each map prunes its own table with word2vec.c's rule (bounding a worker's
memory) and the client prunes the sum the same way; that bounds memory as on one machine but
is not the single pass's pruning, whose result depends on the order it met the words in: the
rare words near the cut may differ.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import List, Optional, Sequence, Tuple

from ..errors import VocabError
from ..vocab import Vocab, prune_counts, scan_counts
from .splits import Split, SplitCorpus, subdivide

logger = logging.getLogger(__name__)


def count_split(split: Split, max_sentence_length: int, max_vocab_size: Optional[int]):
    """The map: (counts, tokens, invalid UTF-8 sequences) of one split."""
    corpus = SplitCorpus([split], max_sentence_length)
    counts, total, _ = scan_counts(corpus, max_vocab_size)
    return counts, total, corpus.stats.invalid_utf8


def count_vocab(client, shards: List[List[Split]], min_count: int = 5,
                max_vocab_size: Optional[int] = None, max_final_vocab: Optional[int] = None,
                max_sentence_length: int = 10_000, split_bytes: int = 64 << 20
                ) -> Tuple[Vocab, List[int]]:
    """The vocabulary of the shards' splits (cut to at most ``split_bytes`` for the map), and
    the number of tokens in each shard."""
    tasks = [(i, split) for i, shard in enumerate(shards) for split in subdivide(shard, split_bytes)]
    futures = client.map(count_split, [split for _, split in tasks], pure=False,
                         max_sentence_length=max_sentence_length, max_vocab_size=max_vocab_size)
    counts: Counter = Counter()
    shard_tokens = [0] * len(shards)
    invalid = 0
    min_reduce = 1
    for (shard, _), future in zip(tasks, futures):  # in split order: the first-seen order
        part, tokens, bad = future.result()
        future.release()
        counts.update(part)
        shard_tokens[shard] += tokens
        invalid += bad
        if max_vocab_size is not None and len(counts) > max_vocab_size:
            min_reduce = prune_counts(counts, min_reduce)
    total = sum(shard_tokens)
    if total == 0:
        raise VocabError("the corpus has no tokens")
    if invalid:
        logger.warning("%d invalid UTF-8 sequences were replaced by U+FFFD", invalid)
    vocab = Vocab.from_counts(counts, min_count, total, max_final_vocab)
    logger.info("vocabulary from %d splits on the cluster: %d words of %d distinct "
                "(min_count=%d), %d tokens", len(tasks), len(vocab), len(counts), min_count, total)
    return vocab, shard_tokens


def count_split_words(split: Split, words: Sequence[str], max_sentence_length: int):
    """The map of ``count_shards``: (in-vocabulary, raw) tokens of one split, read as training
    reads it (``encode.count_words``)."""
    from ..encode import count_words
    index = {w: i for i, w in enumerate(words)}
    return count_words(SplitCorpus([split], max_sentence_length), index)


def count_shards(client, shards: List[List[Split]], words: Sequence[str],
                 max_sentence_length: int = 10_000, split_bytes: int = 64 << 20
                 ) -> Tuple[List[int], List[int]]:
    """(in-vocabulary tokens, raw tokens) of each shard, counted on the cluster split by split:
    each worker's learning rate then falls over exactly its shard's words."""
    tasks = [(i, split) for i, shard in enumerate(shards) for split in subdivide(shard, split_bytes)]
    kept, raw = [0] * len(shards), [0] * len(shards)
    if not tasks:
        return kept, raw
    [vocabulary] = client.scatter([list(words)], broadcast=True)
    futures = client.map(count_split_words, [split for _, split in tasks], pure=False,
                         words=vocabulary, max_sentence_length=max_sentence_length)
    for (shard, _), future in zip(tasks, futures):
        k, r = future.result()
        future.release()
        kept[shard] += k
        raw[shard] += r
    return kept, raw
