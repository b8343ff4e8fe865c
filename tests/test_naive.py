"""The mathematics of the kernels against ``naive.py`` (float64, exact sigmoid, nothing shared):
one pass over one sentence with explicit windows (full window, no down-sampling, so the kernel
draws no random number for them), explicit noise words (an alias table whose every draw is one
known word), and a constant learning rate. The kernels use a 1024-bin sigmoid table, so their
gradient factors differ from the exact ones by at most ~0.0015 x alpha: updates are compared
relative to their size, with a margin a wrong sign, order or missing update would blow."""
import numpy as np
import pytest

import naive
from semhuff.kernels import loop
from semhuff.trees.huffman import build_huffman

DIM = 12
ALPHA = 0.1
WINDOW = 2
# word 1 repeats inside one window, so repeated contexts are covered
SENTENCE = np.array([0, 3, 1, 4, 1, 2, 5], dtype=np.int32)
COUNTS = np.array([9, 7, 5, 4, 3, 2])
NOISE_WORD, NEGATIVE = 2, 3


def _weights(rows, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, DIM)) * 0.4).astype(np.float32)


def _run(kernel, syn0, syn1, larg):
    keep = np.full(len(COUNTS), 0xFFFFFFFF, np.uint32)  # no down-sampling: nothing is drawn
    a0, a1 = syn0.copy(), syn1.copy()
    loss, pairs, trained = kernel(SENTENCE, np.array([len(SENTENCE)], np.int64), a0, a1, larg,
                                  loop.no_stats(), keep, WINDOW, False, ALPHA, ALPHA, 0, 1,
                                  np.uint64(1), loop.NO_HOT, loop.NO_HOT)
    assert trained == len(SENTENCE)
    return a0, a1, loss, pairs


def _close(got, before, expected):
    """The kernel's update equals the naive one within 2% of the largest update."""
    change = expected - before
    scale = np.abs(change).max()
    assert scale > 1e-3  # something was learned
    np.testing.assert_allclose(got - before, change, rtol=0, atol=0.02 * scale)


def _hs_setup():
    tree = build_huffman(COUNTS)
    paths = naive.paths(tree.parent, tree.branch, len(COUNTS))
    return tree, paths, _weights(len(COUNTS), 1), _weights(len(COUNTS) - 1, 2)


@pytest.mark.parametrize("top", [0, 2, 1 << 30], ids=["word2vec", "mixed-2", "batched"])
def test_skipgram_hs_step(top):
    tree, paths, syn0, syn1 = _hs_setup()
    got0, got1, loss, pairs = _run(loop.sg_kernel(DIM, loop.HS, top), syn0, syn1,
                                   (tree.points, tree.codes, tree.lengths))
    exp0, exp1, exp_loss = naive.sg_hs(SENTENCE.tolist(), syn0, syn1, paths, WINDOW, ALPHA,
                                       top=min(top, 100))
    assert pairs == sum(len(naive.contexts(len(SENTENCE), p, WINDOW)) for p in range(len(SENTENCE)))
    _close(got0, syn0, exp0)
    _close(got1, syn1, exp1)
    assert loss == pytest.approx(exp_loss, rel=1e-2)


def test_the_orders_differ():
    """The batched top levels are a different computation, not a relabelling: the naive
    reference itself gives different updates for 0 and 2 batched levels (so the test above
    tells them apart)."""
    tree, paths, syn0, syn1 = _hs_setup()
    a = naive.sg_hs(SENTENCE.tolist(), syn0, syn1, paths, WINDOW, ALPHA, top=0)
    b = naive.sg_hs(SENTENCE.tolist(), syn0, syn1, paths, WINDOW, ALPHA, top=2)
    assert np.abs(a[0] - b[0]).max() > 1e-3 * np.abs(a[0] - syn0).max()
    # and word2vec's order is the plain skip-gram loop with the HS predictor
    c = naive.skipgram(SENTENCE.tolist(), syn0, syn1, WINDOW, naive.hs_predictor(paths, ALPHA))
    np.testing.assert_allclose(c[0], a[0], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("mean", [True, False], ids=["mean", "sum"])
def test_cbow_hs_step(mean):
    tree, paths, syn0, syn1 = _hs_setup()
    got0, got1, loss, pairs = _run(loop.cbow_kernel(DIM, loop.HS, cbow_mean=mean), syn0, syn1,
                                   (tree.points, tree.codes, tree.lengths))
    exp0, exp1, exp_loss = naive.cbow(SENTENCE.tolist(), syn0, syn1, WINDOW,
                                      naive.hs_predictor(paths, ALPHA), mean=mean)
    assert pairs == len(SENTENCE)
    _close(got0, syn0, exp0)
    _close(got1, syn1, exp1)
    assert loss == pytest.approx(exp_loss, rel=1e-2)


def _one_noise_word():
    # every draw: index i uniform, kept if a 32-bit number < threshold 0 (never), else alias[i]
    return (np.zeros(len(COUNTS), np.uint32), np.full(len(COUNTS), NOISE_WORD, np.int32), NEGATIVE)


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
def test_negative_sampling_step(sg):
    syn0, syn1neg = _weights(len(COUNTS), 3), _weights(len(COUNTS), 4)
    got0, got1, loss, _ = _run(loop.kernel(sg, DIM, loop.NS), syn0, syn1neg, _one_noise_word())
    architecture = naive.skipgram if sg else naive.cbow
    exp0, exp1, exp_loss = architecture(SENTENCE.tolist(), syn0, syn1neg, WINDOW,
                                        naive.ns_predictor([NOISE_WORD] * NEGATIVE, ALPHA))
    _close(got0, syn0, exp0)
    _close(got1, syn1neg, exp1)
    assert loss == pytest.approx(exp_loss, rel=1e-2)


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
def test_hs_and_negative_sampling_together(sg):
    """The HS_NS body (gensim's hs=1 + negative): both layers' rows and the input vectors."""
    tree, paths, syn0, syn1 = _hs_setup()
    syn1neg = _weights(len(COUNTS), 5)
    got_neg = syn1neg.copy()  # the body writes the NS rows in place (the layer's arrays)
    larg = ((tree.points, tree.codes, tree.lengths), _one_noise_word(), got_neg)
    got0, got1, loss, _ = _run(loop.kernel(sg, DIM, loop.HS_NS), syn0, syn1, larg)
    architecture = naive.skipgram_two_layers if sg else naive.cbow_two_layers
    exp0, (exp1, exp_neg), exp_loss = architecture(
        SENTENCE.tolist(), syn0, [syn1, syn1neg], WINDOW,
        [naive.hs_predictor(paths, ALPHA), naive.ns_predictor([NOISE_WORD] * NEGATIVE, ALPHA)])
    _close(got0, syn0, exp0)
    _close(got1, syn1, exp1)
    _close(got_neg, syn1neg, exp_neg)
    assert loss == pytest.approx(exp_loss, rel=1e-2)


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
def test_scoring_is_exact(sg):
    """The scoring body: float64 log-likelihood through the path, no table, no update."""
    tree, paths, syn0, syn1 = _hs_setup()
    syn1 = syn1 * 4  # large scores too: scoring never clips
    kernel = loop.kernel(sg, DIM, loop.HS_SCORE)
    got0, got1, nll, pairs = _run(kernel, syn0, syn1, (tree.points, tree.codes, tree.lengths))
    index = {str(i): i for i in range(len(COUNTS))}
    exp_nll, exp_pairs = naive.score([[str(i) for i in SENTENCE]], index, syn0, syn1, paths,
                                     WINDOW, sg=sg)
    assert pairs == exp_pairs
    assert nll == pytest.approx(exp_nll, rel=1e-6)
    np.testing.assert_array_equal(got0, syn0)
    np.testing.assert_array_equal(got1, syn1)


def test_hs_probabilities_sum_to_one():
    """The reference itself: over the whole vocabulary, P(w | h) sums to 1 for any h."""
    tree, paths, _, syn1 = _hs_setup()
    h = np.random.default_rng(0).standard_normal(DIM)
    total = sum(np.exp(naive.hs_log_prob(h, paths[w], syn1.astype(np.float64))) for w in range(len(COUNTS)))
    assert total == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("top", [0, 2], ids=["word2vec", "mixed-2"])
def test_saturated_clip_corrects_confident_mistakes(top):
    """Large vectors put many scores beyond +-6. The saturated variant updates there as the
    exact gradient does (sigmoid 0.9975 at 6 vs the saturated 1: within the tolerance); the
    word2vec variant skips those nodes, so it is further from the exact update."""
    tree, paths, syn0, syn1 = _hs_setup()
    syn0, syn1 = syn0 * 6, syn1 * 6
    larg = (tree.points, tree.codes, tree.lengths)
    exact0, exact1, _ = naive.sg_hs(SENTENCE.tolist(), syn0, syn1, paths, WINDOW, ALPHA, top=top)
    sat0, sat1, _, _ = _run(loop.sg_kernel(DIM, loop.HS, top, saturate=True), syn0, syn1, larg)
    skip0, skip1, _, _ = _run(loop.sg_kernel(DIM, loop.HS, top), syn0, syn1, larg)
    _close(sat0, syn0, exact0)
    _close(sat1, syn1, exact1)
    err = lambda got, before, exact: np.abs((got - before) - (exact - before)).max()
    assert err(skip1, syn1, exact1) > 5 * err(sat1, syn1, exact1)


# -- lock factors (gensim's vectors_lockf) -----------------------------------------------------------

# word 0 frozen, 3 free, the others scaled (1 repeats inside a window: two scaled updates)
LOCKF = np.array([0.0, 0.5, 0.25, 1.0, 0.75, 0.1], np.float32)


def _locked(kernel, syn0, syn1, larg, lockf=LOCKF):
    """``_run`` of a ``lock=True`` kernel: the 17th argument is the lock factor of each row."""
    keep = np.full(len(COUNTS), 0xFFFFFFFF, np.uint32)
    a0, a1 = syn0.copy(), syn1.copy()
    loss, pairs, _ = kernel(SENTENCE, np.array([len(SENTENCE)], np.int64), a0, a1, larg,
                            loop.no_stats(), keep, WINDOW, False, ALPHA, ALPHA, 0, 1,
                            np.uint64(1), loop.NO_HOT, loop.NO_HOT, lockf)
    return a0, a1, loss, pairs


def _lock_cases():
    """(name, body, larg, syn1, reference(sg, syn0, syn1, lockf), cbow_mean) per body."""
    tree, paths, _, syn1 = _hs_setup()
    hs_args = (tree.points, tree.codes, tree.lengths)
    syn1neg = _weights(len(COUNTS), 4)
    ns = naive.ns_predictor([NOISE_WORD] * NEGATIVE, ALPHA)

    def single(predict, mean=True):
        return lambda sg, s0, s1, lockf: (
            naive.skipgram(SENTENCE.tolist(), s0, s1, WINDOW, predict, lockf=lockf) if sg else
            naive.cbow(SENTENCE.tolist(), s0, s1, WINDOW, predict, mean=mean, lockf=lockf))

    return {
        "hs": (loop.HS, hs_args, syn1, single(naive.hs_predictor(paths, ALPHA)), True),
        "hs-sum": (loop.HS, hs_args, syn1, single(naive.hs_predictor(paths, ALPHA), False), False),
        "ns": (loop.NS, _one_noise_word(), syn1neg, single(ns), True),
    }


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
@pytest.mark.parametrize("case", ["hs", "hs-sum", "ns"])
def test_lock_factors_scale_each_input_update(sg, case):
    """A fractional factor against the reference: every update of word i's input vector
    times lockf[i] (gensim's vectors_lockf), the output rows as without locks (they see the
    scaled inputs); a frozen word (0) keeps its vector bit for bit."""
    body, larg, syn1, reference, mean = _lock_cases()[case]
    if sg and not mean:
        pytest.skip("cbow_mean applies to CBOW only")
    syn0 = _weights(len(COUNTS), 6)
    kernel = loop.kernel(sg, DIM, body, cbow_mean=mean, lock=True)
    got0, got1, loss, _ = _locked(kernel, syn0, syn1, larg)
    exp0, exp1, exp_loss = reference(sg, syn0, syn1, LOCKF.astype(np.float64))
    _close(got0, syn0, exp0)
    _close(got1, syn1, exp1)
    assert loss == pytest.approx(exp_loss, rel=1e-2)
    np.testing.assert_array_equal(got0[0], syn0[0])  # frozen
    # the reference tells the factors apart: without them it is another update
    free0 = reference(sg, syn0, syn1, None)[0]
    assert np.abs(free0 - exp0).max() > 0.2 * np.abs(exp0 - syn0).max()


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
@pytest.mark.parametrize("top", [0, 2], ids=["word2vec", "mixed-2"])
def test_lock_factors_hs_batched_orders(sg, top):
    """HS skip-gram's batched top levels (``hs.sg_centre``) with locks, against ``naive.sg_hs``."""
    if not sg and top:
        pytest.skip("batching is skip-gram's")
    tree, paths, syn0, syn1 = _hs_setup()
    kernel = loop.kernel(sg, DIM, loop.HS, top, lock=True)
    got0, got1, _, _ = _locked(kernel, syn0, syn1, (tree.points, tree.codes, tree.lengths))
    lockf = LOCKF.astype(np.float64)
    if sg:
        exp0, exp1, _ = naive.sg_hs(SENTENCE.tolist(), syn0, syn1, paths, WINDOW, ALPHA, top=top,
                                    lockf=lockf)
    else:
        exp0, exp1, _ = naive.cbow(SENTENCE.tolist(), syn0, syn1, WINDOW,
                                   naive.hs_predictor(paths, ALPHA), lockf=lockf)
    _close(got0, syn0, exp0)
    _close(got1, syn1, exp1)


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
def test_lock_factors_hs_and_negative_sampling_together(sg):
    """HS_NS: skip-gram's two bodies each scale their own input update; CBOW's summed error."""
    tree, paths, syn0, syn1 = _hs_setup()
    syn1neg = _weights(len(COUNTS), 5)
    got_neg = syn1neg.copy()
    larg = ((tree.points, tree.codes, tree.lengths), _one_noise_word(), got_neg)
    got0, got1, _, _ = _locked(loop.kernel(sg, DIM, loop.HS_NS, lock=True), syn0, syn1, larg)
    architecture = naive.skipgram_two_layers if sg else naive.cbow_two_layers
    exp0, (exp1, exp_neg), _ = architecture(
        SENTENCE.tolist(), syn0, [syn1, syn1neg], WINDOW,
        [naive.hs_predictor(paths, ALPHA), naive.ns_predictor([NOISE_WORD] * NEGATIVE, ALPHA)],
        lockf=LOCKF.astype(np.float64))
    _close(got0, syn0, exp0)
    _close(got1, syn1, exp1)
    _close(got_neg, syn1neg, exp_neg)
    np.testing.assert_array_equal(got0[0], syn0[0])


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
@pytest.mark.parametrize("body", ["hs", "ns", "hs_ns"])
def test_all_ones_lock_is_bit_identical_to_no_lock(sg, body):
    """Factors of exactly 1 through the locking kernel change no bit: the same numbers as the
    kernel without locks (which training without lockf runs)."""
    tree, _, syn0, syn1 = _hs_setup()
    hs_args = (tree.points, tree.codes, tree.lengths)
    if body == "hs":
        larg = hs_args
    elif body == "ns":
        larg, syn1 = _one_noise_word(), _weights(len(COUNTS), 4)
    else:
        larg = (hs_args, _one_noise_word(), _weights(len(COUNTS), 5))
    code = {"hs": loop.HS, "ns": loop.NS, "hs_ns": loop.HS_NS}[body]
    plain0, plain1, plain_loss, _ = _run(loop.kernel(sg, DIM, code), syn0, syn1, larg)
    if body == "hs_ns":  # the NS rows are written in place: the same start again
        larg = (hs_args, _one_noise_word(), _weights(len(COUNTS), 5))
    ones = np.ones(len(COUNTS), np.float32)
    got0, got1, loss, _ = _locked(loop.kernel(sg, DIM, code, lock=True), syn0, syn1, larg, ones)
    np.testing.assert_array_equal(got0, plain0)
    np.testing.assert_array_equal(got1, plain1)
    assert loss == plain_loss


def test_lock_goes_with_a_training_body():
    with pytest.raises(ValueError, match="lock factors"):
        loop.kernel(True, DIM, loop.HS_SCORE, lock=True)


def test_negative_sampling_batched_step():
    """ns_order="batched" (a centre's contexts share its noise words, HogBatch) against its own
    naive reference, and not the same computation as word2vec's order."""
    syn0, syn1neg = _weights(len(COUNTS), 3), _weights(len(COUNTS), 4)
    got0, got1, loss, _ = _run(loop.sg_kernel(DIM, loop.NS, 1), syn0, syn1neg, _one_noise_word())
    exp0, exp1, exp_loss = naive.skipgram_ns_batched(SENTENCE.tolist(), syn0, syn1neg, WINDOW,
                                                     [NOISE_WORD] * NEGATIVE, ALPHA)
    _close(got0, syn0, exp0)
    _close(got1, syn1neg, exp1)
    assert loss == pytest.approx(exp_loss, rel=1e-2)
    w2v0, _, _ = naive.skipgram(SENTENCE.tolist(), syn0, syn1neg, WINDOW,
                                naive.ns_predictor([NOISE_WORD] * NEGATIVE, ALPHA))
    assert np.abs(w2v0 - exp0).max() > 0.05 * np.abs(exp0 - syn0).max()


def _caterpillar(n_words):
    """A tree whose word ``n_words - 1`` is ``n_words - 1`` nodes deep: inner node V + i has
    leaf i (branch 0) and inner node V + i + 1 (branch 1) below it; the last has two leaves."""
    from semhuff.trees.base import Tree
    V = n_words
    parent = np.empty(2 * V - 1, np.int64)
    branch = np.zeros(2 * V - 1, np.int8)
    parent[:V - 1] = V + np.arange(V - 1)
    parent[V - 1] = 2 * V - 2
    branch[V - 1] = 1
    parent[V] = -1
    parent[V + 1:] = V + np.arange(V - 2)
    branch[V + 1:] = 1
    return Tree(parent, branch)


@pytest.mark.parametrize("top", [0, 2], ids=["word2vec", "mixed-2"])
def test_paths_longer_than_the_scores_computed_ahead(top):
    """The HS walk scores up to ``hs.SCORED_AHEAD`` path nodes ahead of their updates; a path
    longer than that (79 deep) trains as the naive reference does, skip-gram and CBOW."""
    from semhuff.kernels.hs import SCORED_AHEAD
    V = 80
    tree = _caterpillar(V)
    assert tree.lengths.max() == V - 1 > SCORED_AHEAD
    paths = naive.paths(tree.parent, tree.branch, V)
    sentence = np.array([79, 78, 3, 79, 70, 78, 77], np.int32)
    syn0, syn1 = _weights(V, 7) * 0.5, _weights(V - 1, 8) * 0.5
    keep = np.full(V, 0xFFFFFFFF, np.uint32)
    for sg in (True, False):
        a0, a1 = syn0.copy(), syn1.copy()
        kernel = loop.kernel(sg, DIM, loop.HS, top if sg else 0)
        kernel(sentence, np.array([len(sentence)], np.int64), a0, a1,
               (tree.points, tree.codes, tree.lengths), loop.no_stats(), keep, WINDOW, False,
               ALPHA, ALPHA, 0, 1, np.uint64(1), loop.NO_HOT, loop.NO_HOT)
        if sg:
            exp0, exp1, _ = naive.sg_hs(sentence.tolist(), syn0, syn1, paths, WINDOW, ALPHA,
                                        top=top)
        else:
            exp0, exp1, _ = naive.cbow(sentence.tolist(), syn0, syn1, WINDOW,
                                       naive.hs_predictor(paths, ALPHA))
        _close(a0, syn0, exp0)
        _close(a1, syn1, exp1)
