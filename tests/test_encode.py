"""Corpus -> id chunks: out-of-vocabulary words removed before windowing, sentence bounds
shifted accordingly, and the on-disk cache gives back exactly what the first pass produced."""
import numpy as np

from semhuff.encode import EpochSource, encode_chunks


def _naive(sentences, index):
    ids, bounds = [], []
    for s in sentences:
        if not s:
            continue
        ids.extend(index[w] for w in s if w in index)
        bounds.append(len(ids))
    return ids, bounds


def test_chunks_match_a_naive_encoding():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    index = {w: i for i, w in enumerate(words[:25])}  # the rest is out of vocabulary
    sentences = [[words[int(x)] for x in rng.integers(0, 40, size=int(rng.integers(0, 30)))]
                 for _ in range(200)]
    chunks = list(encode_chunks(sentences, index, chunk_words=97))
    assert len(chunks) > 5
    ids = np.concatenate([c.ids for c in chunks])
    offsets = np.cumsum([0] + [len(c.ids) for c in chunks[:-1]])
    bounds = np.concatenate([c.bounds + off for c, off in zip(chunks, offsets)])
    ref_ids, ref_bounds = _naive(sentences, index)
    assert ids.tolist() == ref_ids and bounds.tolist() == ref_bounds
    assert sum(c.raw_tokens for c in chunks) == sum(len(s) for s in sentences)


def test_second_epoch_comes_from_the_cache(tmp_path):
    sentences = [["a", "b", "c"], ["b", "zz", "a"], ["c"]] * 50
    index = {"a": 0, "b": 1, "c": 2}
    source = EpochSource(sentences, index, chunk_words=10, cache_dir=str(tmp_path))
    first = list(source.epoch())
    source.sentences = None  # any read of the corpus now would fail
    second = list(source.epoch())
    assert len(first) == len(second) > 1
    for a, b in zip(first, second):
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.bounds, b.bounds)
        assert a.raw_tokens == b.raw_tokens
    source.close()
