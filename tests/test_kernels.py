"""The sentence loops (``kernels/loop.py``) against their stream-sharing twins
(``stream_reference.py``: same random stream, same tables), which checks the translation: the
down-sampling, the reduced windows, the order of draws and updates. The mathematics of every
update is checked against ``naive.py`` in ``test_naive.py``."""
import functools

import numpy as np
import pytest

import stream_reference as reference
from conftest import zipf_corpus
from semhuff.kernels import loop
from semhuff.kernels.ns import build_alias_table
from semhuff.trees.huffman import build_huffman
from semhuff.vocab import Vocab

DIM = 16
COMMON = (3, 0.05, 0.001, 100, 2000)  # window, alpha0, min_alpha, words_before, total_words


def _setup(sample, seed=0):
    ids, bounds, counts = zipf_corpus(seed=seed)
    vocab = Vocab([f"w{i}" for i in range(len(counts))], counts, int(counts.sum()))
    rng = np.random.default_rng(seed)
    # larger than word2vec's initial scale so scores spread over the sigmoid table and beyond
    syn0 = ((rng.random((len(counts), DIM), dtype=np.float32) - 0.5) * 2.0).astype(np.float32)
    return ids, bounds, vocab, syn0, vocab.keep_thresholds(sample)


def _compare(kernel, ref, layer_args, rows, sample, seed=3):
    ids, bounds, vocab, syn0, keep = _setup(sample)
    rng = np.random.default_rng(1)
    syn1 = ((rng.random((rows(vocab), DIM), dtype=np.float32) - 0.5)).astype(np.float32)
    a0, a1 = syn0.copy(), syn1.copy()
    b0, b1 = syn0.copy(), syn1.copy()
    window, alpha0, min_alpha, before, total = COMMON
    larg = layer_args(vocab)
    out_k = kernel(ids, bounds, a0, a1, larg, loop.no_stats(), keep, window, True, alpha0,
                   min_alpha, before, total, np.uint64(seed), loop.NO_HOT, loop.NO_HOT)
    out_r = ref(ids, bounds, b0, b1, *larg, keep, *COMMON, np.uint64(seed))
    assert out_k[1] == out_r[1] and out_k[2] == out_r[2]  # same pairs, same kept words
    assert out_k[0] == pytest.approx(out_r[0], rel=1e-4)
    np.testing.assert_allclose(a0, b0, rtol=1e-3, atol=2e-4)
    np.testing.assert_allclose(a1, b1, rtol=1e-3, atol=2e-4)
    assert not np.allclose(a0, syn0)  # it did train


def _hs_args(vocab):
    t = build_huffman(vocab.counts)
    return (t.points, t.codes, t.lengths)


def _ns_args(vocab):
    thr, alias = build_alias_table(vocab.counts.astype(np.float64) ** 0.75)
    return (thr, alias, 4)


@pytest.mark.parametrize("batch_levels", [0, 2, 1 << 30])  # word2vec order, mixed, batched
@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_sg_hs_matches_stream_reference(sample, batch_levels):
    ref = functools.partial(reference.sg_hs, batch_levels=batch_levels)
    _compare(loop.sg_kernel(DIM, loop.HS, batch_levels), ref, _hs_args, lambda v: len(v) - 1, sample)


@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_cbow_hs_matches_stream_reference(sample):
    _compare(loop.cbow_kernel(DIM, loop.HS), reference.cbow_hs, _hs_args, lambda v: len(v) - 1, sample)


@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_sg_ns_matches_stream_reference(sample):
    _compare(loop.sg_kernel(DIM, loop.NS), reference.sg_ns, _ns_args, len, sample)


@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_cbow_ns_matches_stream_reference(sample):
    _compare(loop.cbow_kernel(DIM, loop.NS), reference.cbow_ns, _ns_args, len, sample)


@pytest.mark.parametrize("sg,batch_levels", [(True, 0), (True, 4), (False, 0)])
def test_hs_ns_matches_stream_reference(sg, batch_levels):
    """Both output layers on the same inputs; the NS rows live in the layer's arrays (larg)."""
    ids, bounds, vocab, syn0, keep = _setup(0.05)
    rng = np.random.default_rng(1)
    syn1 = (rng.random((len(vocab) - 1, DIM), dtype=np.float32) - 0.5).astype(np.float32)
    syn1neg = (rng.random((len(vocab), DIM), dtype=np.float32) - 0.5).astype(np.float32)
    got = [syn0.copy(), syn1.copy(), syn1neg.copy()]
    want = [a.copy() for a in got]
    hs_args, ns_args = _hs_args(vocab), _ns_args(vocab)
    kernel = loop.kernel(sg, DIM, loop.HS_NS, batch_levels)
    out_k = kernel(ids, bounds, got[0], got[1], (hs_args, ns_args, got[2]), loop.no_stats(),
                   keep, *COMMON[:1], True, *COMMON[1:], np.uint64(3), loop.NO_HOT, loop.NO_HOT)
    if sg:
        out_r = reference.sg_hs_ns(ids, bounds, want[0], want[1], *hs_args, want[2], *ns_args,
                                   keep, *COMMON, np.uint64(3), batch_levels=batch_levels)
    else:
        out_r = reference.cbow_hs_ns(ids, bounds, want[0], want[1], *hs_args, want[2], *ns_args,
                                     keep, *COMMON, np.uint64(3))
    assert out_k[1:] == out_r[1:]
    assert out_k[0] == pytest.approx(out_r[0], rel=1e-4)
    for a, b, start in zip(got, want, (syn0, syn1, syn1neg)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=2e-4)
        assert not np.allclose(a, start)  # each array trained


@pytest.mark.parametrize("sg", [True, False])
def test_pairs_body_emits_the_training_windows(sg):
    """The PAIRS body (what a batcher, e.g. the GPU path, trains on) draws the same
    down-sampling and windows as the training loops, from the same stream."""
    ids, bounds, vocab, syn0, keep = _setup(0.05)
    window, alpha0, min_alpha, before, total = COMMON
    buffers = loop.pair_buffers(sg, len(ids), window)
    syn0_before = syn0.copy()
    _, n, _ = loop.kernel(sg, DIM, loop.PAIRS)(ids, bounds, syn0, np.zeros((1, DIM), np.float32),
                                              buffers, loop.no_stats(), keep, window, True,
                                              alpha0, min_alpha, before, total, np.uint64(5), loop.NO_HOT, loop.NO_HOT)
    expected = reference.pairs(ids, bounds, keep, *COMMON, np.uint64(5), sg=sg)
    assert n == len(expected) > 0
    if sg:
        inputs, targets, rates = buffers
        got = list(zip(inputs[:n].tolist(), targets[:n].tolist(), rates[:n].tolist()))
        assert got == [(r, w, float(a)) for r, w, a in expected]
    else:
        contexts, starts, targets, rates = buffers
        got = [(contexts[starts[p]:starts[p + 1]].tolist(), int(targets[p]), float(rates[p]))
               for p in range(n)]
        assert got == [(c, w, float(a)) for c, w, a in expected]
    np.testing.assert_array_equal(syn0, syn0_before)  # emitting pairs trains nothing


def test_word_stats_add_up_to_the_chunk_loss():
    """Per-word statistics the kernels accumulate (predictions, nll per target word) sum to
    what the kernel returns."""
    ids, bounds, vocab, syn0, keep = _setup(0.0)
    syn1 = np.zeros((len(vocab) - 1, DIM), np.float32)
    stats = np.zeros((len(vocab), 2))
    window, alpha0, min_alpha, before, total = COMMON
    loss, pairs, _ = loop.sg_kernel(DIM, loop.HS, 0, True)(
        ids, bounds, syn0, syn1, _hs_args(vocab), stats, keep, window, True, alpha0, min_alpha,
        before, total, np.uint64(2), loop.NO_HOT, loop.NO_HOT)
    assert stats[:, 0].sum() == pairs and stats[:, 1].sum() == pytest.approx(loss)
    # every occurrence of a word is a centre (no down-sampling), so each seen word has predictions
    seen = np.unique(ids)
    assert np.all(stats[seen, 0] > 0) and np.all(np.delete(stats[:, 0], seen) == 0)


def test_alias_table_draws_follow_weights():
    weights = np.array([8.0, 4.0, 2.0, 1.0, 1.0])
    thr, alias = build_alias_table(weights)
    # exact probability of each outcome implied by the table
    n = len(weights)
    prob = np.zeros(n)
    for i in range(n):
        keep = thr[i] / 2.0 ** 32
        prob[i] += keep / n
        prob[alias[i]] += (1 - keep) / n
    np.testing.assert_allclose(prob, weights / weights.sum(), atol=1e-8)


@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_sg_ns_batched_matches_stream_reference(sample):
    _compare(loop.sg_kernel(DIM, loop.NS, 1), reference.sg_ns_batched, _ns_args, len, sample)
