"""Private hot output rows for two or more threads (``devices.HotRows``): the rows chosen, the
merge, and that training through them does the same arithmetic as training the shared rows."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import naive
from semhuff import Word2Vec
from semhuff.devices import CpuSession, HotRows, Plan
from semhuff.encode import EpochSource
from semhuff.kernels.common import mix_seed
from semhuff.schedule import Schedule


def _corpus(n_sentences=300, length=40, vocab=60, seed=0):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab + 1)  # Zipf-like: a clear top of the tree
    weights /= weights.sum()
    return [[f"w{i}" for i in rng.choice(vocab, size=length, p=weights)]
            for _ in range(n_sentences)]


def _model(loss, **options):
    sentences = _corpus()
    model = Word2Vec(vector_size=16, window=3, min_count=1, sample=0, loss=loss, seed=3,
                     workers=2, progress=False, **options)
    model.build_vocab(sentences)
    chunks = list(EpochSource(sentences, model.vocab.index, chunk_words=2000,
                              use_cache=False).epoch())
    total = sum(len(c.ids) for c in chunks)
    plan = Plan(sg=True, keep_thr=model.vocab.keep_thresholds(0), window=3, reduce_window=True,
                schedule=Schedule(0.05, 0.001, total), counts=model.vocab.counts)
    return model, chunks, plan


def _train(model, chunks, plan, workers, hot_rows, hot_inputs=0):
    session = CpuSession(model.syn0.copy(), copy.deepcopy(model.layer), workers)
    session.HOT_ROWS, session.HOT_SHARE, session.HOT_INPUTS = hot_rows, 1.0, hot_inputs
    session.HOT_INPUT_SHARE = 1.0  # whole changes: one thread then does Hogwild's arithmetic
    session.warm_up(plan)
    before = 0
    for i, chunk in enumerate(chunks):  # one thread: every chunk's copies merged before the next
        session.train_chunk(plan, chunk, before, int(mix_seed(1, 0, i)))
        before += len(chunk.ids)
    return session


@pytest.mark.parametrize("loss, thread_table, sg, tree", [
    ("hs", True, True, None), ("hs", False, True, None), ("hs", True, False, None),
    ("hs", False, False, None), ("hs-self-organized", True, True, None), ("ns", False, True, None)])
def test_private_rows_do_the_same_arithmetic(loss, thread_table, sg, tree):
    """Trained from one thread, a session with private hot rows (each chunk's change merged
    whole before the next chunk) ends where the plain session does, up to the merges' rounding:
    skip-gram and CBOW, HS with the thread's table of mapped paths or (a table past its size
    limit) mapping each centre's path in the kernel, a self-organized tree, NS."""
    model, chunks, plan = _model(loss, **({"tree": tree} if tree else {}))
    plan = Plan(**{**plan.__dict__, "sg": sg})
    if loss.startswith("hs") and not thread_table:
        model.layer.THREAD_PATH_BYTES = 0
    assert model.layer.thread_table() == thread_table
    plain = _train(model, chunks, plan, 1, None)
    hot = _train(model, chunks, plan, 2, 8, hot_inputs=6)
    assert plain.hot is None and hot.hot is not None and len(hot.hot.rows) == 8
    assert plain.hot_in is None and len(hot.hot_in.rows) == 6
    assert hot.layer.weights.shape == plain.layer.weights.shape
    moved = np.abs(plain.layer.weights[hot.hot.rows] - model.layer.weights[hot.hot.rows]).max()
    assert moved > 1e-3  # the hot rows were trained
    moved = np.abs(plain.syn0[hot.hot_in.rows] - model.syn0[hot.hot_in.rows]).max()
    assert moved > 1e-3  # and the hot input vectors
    # the merges' rounding, amplified by training: up to 4.8e-5 (NS here runs the batched order:
    # a row takes a window's updates at once; word2vec's order and CBOW: test_private_rows_orders)
    # over updates of about 1; a row sent to the wrong copy would be off by the size of an update
    atol = 6e-5
    np.testing.assert_allclose(hot.layer.weights, plain.layer.weights, atol=atol)
    hot.to_host()  # the model's own array gets the shared rows
    assert hot.host_syn0 is not hot.syn0 and hot.host_syn0.shape == plain.syn0.shape
    np.testing.assert_allclose(hot.host_syn0, plain.syn0, atol=atol)


def test_hot_inputs_are_the_words_written_most_as_contexts():
    """Count times keep probability: a frequent but heavily down-sampled word ranks below a
    less frequent word that is always kept."""
    model, _, plan = _model("hs")
    keep = np.full(len(model.vocab), 0xFFFFFFFF, np.uint32)
    keep[0] = np.uint32(2 ** 32 * 0.01)  # the most frequent word kept 1% of the time
    plan = Plan(**{**plan.__dict__, "keep_thr": keep})
    session = CpuSession(model.syn0.copy(), copy.deepcopy(model.layer), 2)
    session.HOT_ROWS, session.HOT_INPUTS = 8, 3  # of 59 inner nodes (the default: too many)
    session.warm_up(plan)
    written = model.vocab.counts * (keep / 2.0 ** 32)
    assert sorted(session.hot_in.rows) == sorted(np.argsort(-written)[:3])
    assert 0 not in session.hot_in.rows and 1 in session.hot_in.rows
    assert session.hot_in.share == np.float32(0.5)  # two workers' changes averaged


def test_hs_hot_rows_are_the_most_travelled_nodes():
    """The HS layer's hot rows are the inner nodes with the most word occurrences passing through
    them, counted here by walking every word's path up the tree's parent array."""
    model, _, _ = _model("hs")
    tree, counts = model.layer.tree, model.vocab.counts
    traffic = np.zeros(len(counts) - 1)
    for w, steps in enumerate(naive.paths(tree.parent, tree.branch, len(counts))):
        for row, _ in steps:
            traffic[row] += counts[w]
    rows = model.layer.hot_rows(counts, 10)
    assert len(set(rows.tolist())) == 10
    np.testing.assert_array_equal(np.sort(traffic[rows]), np.sort(traffic)[-10:])
    assert traffic[rows[0]] == counts.sum()  # the root: on every path


def test_ns_hot_rows_are_the_most_frequent_words():
    model, _, _ = _model("ns")
    counts = model.vocab.counts
    rows = model.layer.hot_rows(counts, 5)
    np.testing.assert_array_equal(np.sort(counts[rows]), np.sort(counts)[-5:])


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_merge_adds_the_threads_change_times_share(share):
    """Two threads' copies, changed by hand: the shared rows receive each change times
    ``share``; the other rows are untouched; a thread starts from the merged rows."""
    model, _, _ = _model("ns")
    layer = copy.deepcopy(model.layer)
    layer.weights[:] = np.random.default_rng(1).standard_normal(layer.weights.shape)
    before = layer.weights.copy()
    rows = np.array([4, 0, 7])
    hot = HotRows(layer, rows, share, threads=2)
    (a, map_a), (b, map_b) = hot.begin(), hot.begin()
    assert a != b
    np.testing.assert_array_equal(map_a[rows], layer.weights.shape[0] + 3 * a + np.arange(3))
    np.testing.assert_array_equal(np.delete(map_a, rows), np.delete(np.arange(len(map_a)), rows))
    hot.weights[map_a[rows]] += 1.0
    hot.weights[map_b[rows]] -= 3.0
    hot.end(a)
    hot.end(b)
    expected = before.copy()
    expected[rows] += share * (1.0 - 3.0)
    np.testing.assert_allclose(layer.weights, expected, rtol=1e-6)
    token, remap = hot.begin()
    np.testing.assert_allclose(hot.weights[remap[rows]], expected[rows], rtol=1e-6)
    hot.end(token)


def _session(model, workers, hot_rows=8):
    session = CpuSession(model.syn0, copy.deepcopy(model.layer), workers)
    session.HOT_ROWS = hot_rows
    return session


def test_average_merge_for_hs_sum_for_ns():
    model, _, plan = _model("hs")
    assert _session(model, 2)._hot_rows(plan).share == 0.5
    model, _, plan = _model("ns")
    assert _session(model, 2)._hot_rows(plan).share == 1.0
    assert _session(model, 1)._hot_rows(plan) is None


def test_a_small_layer_keeps_every_row_shared():
    """The layer's default hot rows (NS: 4,096, HS: 256) would be most of a small layer's rows
    (here 60 words): then none are private (plain Hogwild; issue 23, gensim's
    test_parallel), unless a count is set."""
    for loss in ("hs", "ns"):
        options = dict(layer_options=dict(ns_order="word2vec")) if loss == "ns" else {}
        model, _, plan = _model(loss, **options)  # (NS: the order with private rows)
        assert _session(model, 2, hot_rows=None)._hot_rows(plan) is None
        assert len(_session(model, 2, hot_rows=8)._hot_rows(plan).rows) == 8
    model.layer.HOT_ROWS = 30  # of 60 rows: half, still private
    assert len(_session(model, 2, hot_rows=None)._hot_rows(plan).rows) == 30


def test_two_workers_train_with_private_rows_and_save(tmp_path, monkeypatch):
    """The whole path: two workers (private hot rows in use), finite weights, save and load."""
    monkeypatch.setattr(CpuSession, "HOT_ROWS", 8)  # the default is too many for 60 words
    model = Word2Vec(_corpus(), vector_size=16, window=3, min_count=1, workers=2, epochs=2,
                     seed=2, progress=False)
    assert np.isfinite(model.layer.weights).all() and np.isfinite(model.syn0).all()
    model.save(str(tmp_path / "m.npz"))
    again = Word2Vec.load(str(tmp_path / "m.npz"), progress=False)
    np.testing.assert_array_equal(again.layer.weights, model.layer.weights)


def test_a_changed_tree_gets_its_own_hot_rows():
    """After a hook changes the tree (as a self-organized re-assignment does) and says so, the
    session keeps private copies of the new tree's busiest nodes, merged into the same weights."""
    from semhuff.trees import make_tree
    model, chunks, plan = _model("hs")
    session = CpuSession(model.syn0.copy(), copy.deepcopy(model.layer), 2)
    session.HOT_ROWS = 8  # of 59 inner nodes
    session.warm_up(plan)
    old = session.hot.rows.copy()
    session.layer.tree = make_tree("random", model.vocab, seed=5)
    session.layer_changed()
    new = model.layer.__class__(session.layer.tree).hot_rows(plan.counts, len(old))
    assert not np.array_equal(np.sort(old), np.sort(new))
    np.testing.assert_array_equal(session.hot.rows, new)
    session.train_chunk(plan, chunks[0], 0, 1)
    assert np.isfinite(session.layer.weights).all()
    assert session.hot.owner.weights.base is session.hot.weights


def test_a_thread_gets_its_own_table_of_mapped_paths(monkeypatch):
    """HS hands each thread its paths mapped through its map, while the table takes at most
    ``THREAD_PATH_BYTES`` (past it the kernel maps each centre's path)."""
    from semhuff.kernels import loop
    model, _, _ = _model("hs")
    layer = model.layer
    points, V = layer.tree.points, layer.tree.n_words
    private = np.array([points[0, 0], points[7, 3]])
    remap = np.arange(layer.n_rows(V), dtype=np.int32)
    remap[private] = [100, 101]
    args = layer.thread_args(remap)
    assert len(args) == len(layer.kernel_args()) + 1
    own = args[-1]
    assert own.shape == points.shape and own.flags.c_contiguous
    for w in range(V):
        for i in range(layer.tree.lengths[w]):
            node = points[w, i]
            assert own[w, i] == {points[0, 0]: 100, points[7, 3]: 101}.get(node, node)
    modes = []
    monkeypatch.setattr(loop, "kernel", lambda *a: modes.append(a[8]))  # hot (lock follows)
    layer.train_kernel(True, 16, hot=True)
    layer.THREAD_PATH_BYTES = points.nbytes - 1
    assert len(layer.thread_args(remap)) == len(layer.kernel_args())
    layer.train_kernel(True, 16, hot=True)
    layer.train_kernel(True, 16, hot=False)
    assert modes == [loop.OWN_PATHS, loop.MAP_ROWS, 0]


def test_a_changed_tree_trains_through_the_new_trees_rows():
    """The session re-makes a thread's mapped paths when the layer's arrays change: after the
    change, training through private rows still does the plain session's arithmetic."""
    from semhuff.trees import make_tree
    model, chunks, plan = _model("hs")
    sessions = [_train(model, chunks[:1], plan, 1, None), _train(model, chunks[:1], plan, 2, 8)]
    new_tree = make_tree("random", model.vocab, seed=5)
    for session in sessions:
        session.layer.tree = new_tree
        session.layer_changed()
        before = len(chunks[0].ids)
        for i, chunk in enumerate(chunks[1:]):
            session.train_chunk(plan, chunk, before, int(mix_seed(1, 0, i + 1)))
            before += len(chunk.ids)
    plain, hot = sessions
    # the merges' rounding, amplified by training: up to 1.7e-5 (NS in word2vec's order) and
    # 4.8e-5 (batched NS: a row takes a window's updates at once) over updates of about 1; a
    # row sent to the wrong copy would be off by the size of an update
    atol = 6e-5
    np.testing.assert_allclose(hot.layer.weights, plain.layer.weights, atol=atol)


def test_two_workers_leave_their_training_in_the_models_own_array():
    """With private input vectors the threads train a larger array; the model's ``syn0`` (the
    same object) gets the trained rows at the end, and a hook sees the current ones."""
    from semhuff.hooks import Hook
    sentences = _corpus()

    class Snapshot(Hook):
        every_words = 5000

        def __init__(self):
            self.seen = []

        def on_words(self, context):
            self.seen.append(context.vectors()[:3].copy())

    model = Word2Vec(vector_size=16, window=3, min_count=1, sample=0, seed=3, workers=2,
                     epochs=2, progress=False)
    model.chunk_words = 2000  # hooks run between chunks
    model.build_vocab(sentences)
    array, initial = model.syn0, model.syn0.copy()
    hook = Snapshot()
    model.train(sentences, hooks=[hook])
    assert model.syn0 is array
    assert np.abs(array[:3] - initial[:3]).min() > 0  # the hottest words' vectors moved
    assert len(hook.seen) >= 2 and not np.array_equal(hook.seen[0], hook.seen[-1])
    assert not np.array_equal(hook.seen[0], initial[:3])


def test_ns_batched_keeps_private_rows_for_a_long_training_call_only():
    """NS's batched order trains plain Hogwild on a short train() call (its rows are written
    once per centre: private copies bought no speed there and moved SimLex away from one
    thread's vectors) and keeps 4,096 private rows from 16M input words on (steadier two-thread
    speed); word2vec's order keeps them always; a count set still applies."""
    for order, short in (("batched", 0), ("word2vec", 4096)):
        model, _, plan = _model("ns", layer_options=dict(ns_order=order))
        layer = model.layer
        assert layer.hot_row_count(layer.LARGE_WORDS - 1) == short
        assert layer.hot_row_count(layer.LARGE_WORDS) == 4096
        if short == 0:
            assert _session(model, 2, hot_rows=None)._hot_rows(plan) is None
        assert len(_session(model, 2, hot_rows=8)._hot_rows(plan).rows) == 8


def test_hs_keeps_more_private_rows_for_a_long_training_call():
    """256 top-of-tree rows for a short train() call, 1,024 from 16M input words on (measured
    to train as well there, and worse on 2M-3M-token corpora)."""
    model, _, plan = _model("hs")
    layer = model.layer
    assert layer.hot_row_count(layer.LARGE_WORDS - 1) == 256
    assert layer.hot_row_count(layer.LARGE_WORDS) == 1024
    layer.HOT_ROWS, layer.HOT_ROWS_LARGE = 4, 16  # of 59 inner nodes
    for words, rows in ((1000, 4), (layer.LARGE_WORDS, 16)):
        session = CpuSession(model.syn0.copy(), copy.deepcopy(layer), 2)
        session.warm_up(Plan(**{**plan.__dict__, "schedule": Schedule(0.05, 0.001, words)}))
        assert len(session.hot.rows) == rows


def test_summed_private_rows_only_for_two_threads_by_default():
    """More threads than ``PRIVATE_MAX_THREADS``: a layer whose threads' changes are summed
    (NS) keeps every row shared (the chunk-late sum of 4+ threads diverged, test below), unless
    a count is set (the benchmarks' override); an averaged one (HS) keeps its private rows (16
    real cores: 10.0M words/s and WS353 0.618 with them, 1.5M and 0.608 without)."""
    assert CpuSession.PRIVATE_MAX_THREADS == 2
    for loss in ("hs", "ns"):
        options = dict(layer_options=dict(ns_order="word2vec")) if loss == "ns" else {}
        model, _, plan = _model(loss, **options)
        model.layer.HOT_ROWS = 8  # of 60 rows: private by the small-layer rule
        assert len(_session(model, 2, hot_rows=None)._hot_rows(plan).rows) == 8
        for workers in (3, 4, 16):
            hot = _session(model, workers, hot_rows=None)._hot_rows(plan)
            if loss == "ns":
                assert hot is None
            else:
                assert len(hot.rows) == 8 and hot.share == np.float32(1 / workers)
        assert len(_session(model, 16, hot_rows=8)._hot_rows(plan).rows) == 8


def test_many_threads_of_negative_sampling_do_not_diverge(shared_corpus, monkeypatch):
    """The bug: skip-gram NS with 4+ threads over the 18M-token corpus (each thread's private
    copies of the 4,096 hottest rows, summed a chunk late) diverged in epoch 1 (loss per
    prediction 1e3 at 4 threads, 1e13 on 16 real cores). Four threads, time-sliced on any
    machine (the staleness is in chunks, not in cores): the loss is the two-thread run's."""
    import semhuff.cpu_session as cpu_session
    monkeypatch.setattr(cpu_session, "available_cpus", lambda: 4)
    model = Word2Vec(vector_size=50, window=5, min_count=5, sample=1e-3, loss="ns", sg=1,
                     epochs=1, seed=1, workers=4, progress=False)
    model.build_vocab(shared_corpus)
    report = model.train(shared_corpus)
    assert np.isfinite(model.syn0).all()
    assert report.epochs[0].loss_per_pair < 2.6  # 2 threads: 2.45; diverged: 1e3 and up
