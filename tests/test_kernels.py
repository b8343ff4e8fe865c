"""The Numba kernels against their naive pure-Python references (same semantics, same random
stream), and one skip-gram + HS step against a hand computation in numpy."""
import numpy as np
import pytest

from semhuff.kernels import reference
import functools

from semhuff.kernels.hs import cbow_hs_kernel, sg_hs_kernel
from semhuff.kernels.ns import build_alias_table, cbow_ns_kernel, sg_ns_kernel
from semhuff.trees.huffman import build_huffman
from semhuff.vocab import Vocab

from conftest import zipf_corpus

DIM = 16


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
    common = (keep, 3, 0.05, 0.001, 100, 2000, np.uint64(seed))
    out_k = kernel(ids, bounds, a0, a1, *layer_args(vocab), *common)
    out_r = ref(ids, bounds, b0, b1, *layer_args(vocab), *common)
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
def test_sg_hs_matches_reference(sample, batch_levels):
    ref = functools.partial(reference.sg_hs, batch_levels=batch_levels)
    _compare(sg_hs_kernel(DIM, batch_levels), ref, _hs_args, lambda v: len(v) - 1, sample)


@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_cbow_hs_matches_reference(sample):
    _compare(cbow_hs_kernel(DIM), reference.cbow_hs, _hs_args, lambda v: len(v) - 1, sample)


@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_sg_ns_matches_reference(sample):
    _compare(sg_ns_kernel(DIM), reference.sg_ns, _ns_args, len, sample)


@pytest.mark.parametrize("sample", [0.0, 0.05])
def test_cbow_ns_matches_reference(sample):
    _compare(cbow_ns_kernel(DIM), reference.cbow_ns, _ns_args, len, sample)


def test_one_skipgram_hs_step_by_hand():
    """Sentence [0, 1], window 1 (b is always 0), no down-sampling, constant alpha.
    Centre 0: context 1 predicts word 0 through word 0's path, then centre 1: context 0 (already
    updated? no: syn0 rows are updated after each centre) predicts word 1."""
    counts = np.array([5, 3, 2])
    tree = build_huffman(counts)
    rng = np.random.default_rng(7)
    syn0 = (rng.random((3, DIM), dtype=np.float32) - 0.5).astype(np.float32)
    syn1 = (rng.random((2, DIM), dtype=np.float32) - 0.5).astype(np.float32)
    alpha = 0.1
    exp0, exp1 = syn0.astype(np.float64), syn1.astype(np.float64)
    sig = lambda x: 1.0 / (1.0 + np.exp(-x))
    expected_loss = 0.0
    for centre, context in ((0, 1), (1, 0)):
        err = np.zeros(DIM)
        for i in range(tree.lengths[centre]):
            node, code = tree.points[centre, i], tree.codes[centre, i]
            s = exp0[context] @ exp1[node]
            expected_loss -= np.log(sig(s) if code == 0 else 1 - sig(s))
            g = (1 - code - sig(s)) * alpha
            err += g * exp1[node]
            exp1[node] += g * exp0[context]
        exp0[context] += err
    keep = np.full(3, 0xFFFFFFFF, np.uint32)
    loss, pairs, trained = sg_hs_kernel(DIM, 0)(
        np.array([0, 1], np.int32), np.array([2], np.int64), syn0, syn1, tree.points, tree.codes,
        tree.lengths, keep, 1, alpha, alpha, 0, 2, np.uint64(1))
    assert (pairs, trained) == (2, 2)
    # the sigmoid comes from a 1024-bin table (error < 3e-3 before the alpha factor)
    np.testing.assert_allclose(syn0, exp0, atol=2e-4)
    np.testing.assert_allclose(syn1, exp1, atol=2e-4)
    assert loss == pytest.approx(expected_loss, abs=5e-3)


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
