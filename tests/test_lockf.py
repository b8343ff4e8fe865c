"""Locked input vectors (gensim's ``wv.vectors_lockf``, ``Word2Vec.lockf``): a word with factor
0 keeps its vector bit for bit through training on every layer, skip-gram and CBOW, also
through the threads' private copies of the hottest input rows; factors of exactly 1 train bit
for bit as no factors do; the factors survive save / load and a checkpoint's resume; imported
vectors can be frozen; Dask and the GPU refuse them. The arithmetic of a fractional factor is
checked against ``naive.py`` in ``test_naive.py`` (and the class body in test_self_organized)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from semhuff import Word2Vec
from semhuff.devices import CpuSession, Plan
from semhuff.encode import EpochSource
from semhuff.errors import OptionError
from semhuff.hooks import Hook
from semhuff.kernels.common import mix_seed
from semhuff.schedule import Schedule


def _corpus(n_sentences=200, length=30, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab + 1)  # Zipf-like: a few words everywhere
    weights /= weights.sum()
    return [[f"w{i}" for i in rng.choice(vocab, size=length, p=weights)]
            for _ in range(n_sentences)]


SENTENCES = _corpus()
BASE = dict(vector_size=16, window=3, min_count=1, sample=0, seed=5, epochs=2, progress=False)
LAYERS = {"hs": {}, "ns": dict(loss="ns"), "hs+ns": dict(loss="hs+ns"),
          "class": dict(loss="class", layer_options=dict(clustering="frequency", clusters=5)),
          "self-organized": dict(loss="hs-self-organized",
                                 layer_options=dict(clusters=5, reassign_every=3000))}
FROZEN = [0, 1, 7, 40]  # the two most frequent words (the hottest rows) and two others


def _model(layer="hs", sg=1, workers=1, **options):
    model = Word2Vec(**{**BASE, **LAYERS[layer], "sg": sg, "workers": workers, **options})
    model.build_vocab(SENTENCES)
    return model


@pytest.mark.parametrize("sg", [1, 0], ids=["skipgram", "cbow"])
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_frozen_words_keep_their_vectors_bit_for_bit(layer, sg):
    """lockf 0 for some words: exactly their start vectors after training (two threads for the
    binary layers: Hogwild and the private hot rows), every other word moved."""
    model = _model(layer, sg, workers=2 if layer in ("hs", "ns") else 1)
    start = model.syn0.copy()
    model.lockf = np.ones(len(model.vocab), np.float32)
    model.lockf[FROZEN] = 0.0
    model.train(SENTENCES)
    np.testing.assert_array_equal(model.syn0[FROZEN], start[FROZEN])
    free = np.setdiff1d(np.arange(len(model.vocab)), FROZEN)
    assert (np.abs(model.syn0[free] - start[free]).max(axis=1) > 0).all()


@pytest.mark.parametrize("sg", [1, 0], ids=["skipgram", "cbow"])
@pytest.mark.parametrize("layer", ["hs", "ns"])
def test_factors_of_one_train_as_no_factors(layer, sg):
    """One worker and a seed: lockf all ones, per word or as gensim's one entry, gives the same
    bits as no lockf (the kernels without locks run); one word at 0.5 does not."""
    plain = _model(layer, sg)
    plain.train(SENTENCES)
    for ones in (np.ones(len(plain.vocab), np.float32), np.ones(1, np.float32)):
        model = _model(layer, sg)
        model.lockf = ones
        model.train(SENTENCES)
        np.testing.assert_array_equal(model.syn0, plain.syn0)
        np.testing.assert_array_equal(model.layer.weights, plain.layer.weights)
    half = _model(layer, sg)
    half.lockf = np.ones(len(half.vocab), np.float32)
    half.lockf[3] = 0.5
    half.train(SENTENCES)
    assert not np.array_equal(half.syn0, plain.syn0)


def test_one_factor_for_all_words_scales_every_update():
    """gensim's one-entry form: 0 freezes every input vector (the output layer still learns)."""
    model = _model("hs")
    start = model.syn0.copy()
    model.lockf = np.zeros(1, np.float32)
    model.train(SENTENCES)
    np.testing.assert_array_equal(model.syn0, start)
    assert np.abs(model.layer.weights).max() > 0


def _session_run(model, plan, chunks, hot_inputs):
    """A two-thread session driven from one thread (``test_hot_rows``' arrangement): private
    output rows, and ``hot_inputs`` private input rows, each chunk's changes merged whole."""
    session = CpuSession(model.syn0.copy(), copy.deepcopy(model.layer), 2)
    session.HOT_ROWS, session.HOT_SHARE, session.HOT_INPUTS = 8, 1.0, hot_inputs
    session.HOT_INPUT_SHARE = 1.0
    session.warm_up(plan)
    before = 0
    for i, chunk in enumerate(chunks):
        session.train_chunk(plan, chunk, before, int(mix_seed(1, 0, i)))
        before += len(chunk.ids)
    session.to_host()
    return session


@pytest.mark.parametrize("sg", [True, False], ids=["skipgram", "cbow"])
def test_the_factor_follows_the_word_to_its_private_copy(sg):
    """The factors are mapped into row space (``HotRows.by_row``): with the hottest input
    vectors private, a frozen hot word is still frozen and a half-locked one trains as it does
    on the shared rows."""
    model = _model("hs")
    chunks = list(EpochSource(SENTENCES, model.vocab.index, chunk_words=1500,
                              use_cache=False).epoch())
    lockf = np.ones(len(model.vocab), np.float32)
    lockf[[0, 40]] = 0.0
    lockf[[1, 2]] = 0.5
    plan = Plan(sg=sg, keep_thr=model.vocab.keep_thresholds(0), window=3, reduce_window=True,
                schedule=Schedule(0.05, 0.001, sum(len(c.ids) for c in chunks)),
                counts=model.vocab.counts, lockf=lockf)
    hot = _session_run(model, plan, chunks, hot_inputs=6)
    plain = _session_run(model, plan, chunks, hot_inputs=0)
    assert hot.hot_in is not None and {0, 1, 2} <= set(hot.hot_in.rows.tolist())
    assert plain.hot_in is None
    np.testing.assert_array_equal(hot.host_syn0[[0, 40]], model.syn0[[0, 40]])
    np.testing.assert_allclose(hot.host_syn0, plain.host_syn0, rtol=0, atol=1e-5)
    assert np.abs(hot.host_syn0[[1, 2]] - model.syn0[[1, 2]]).max() > 1e-3


def test_lockf_survives_save_and_load(tmp_path):
    model = _model("ns")
    start = model.syn0.copy()
    model.lockf = np.ones(len(model.vocab), np.float32)
    model.lockf[FROZEN] = 0.0
    model.lockf[5] = 0.25
    model.save(tmp_path / "m.npz")
    back = Word2Vec.load(tmp_path / "m.npz", progress=False)
    np.testing.assert_array_equal(back.lockf, model.lockf)
    assert back.lockf.dtype == np.float32
    back.train(SENTENCES)
    np.testing.assert_array_equal(back.syn0[FROZEN], start[FROZEN])
    model.lockf = None  # nothing locked: nothing saved
    model.save(tmp_path / "plain.npz")
    assert "lockf" not in np.load(tmp_path / "plain.npz").files
    assert Word2Vec.load(tmp_path / "plain.npz", progress=False).lockf is None


class _Crash(Hook):
    every_words = 1

    def on_words(self, context):
        if context.words_done >= 7000:
            raise KeyboardInterrupt


def test_a_checkpoint_resumes_with_the_locks(tmp_path):
    """Killed mid-run and resumed: the same bits as the uninterrupted run, frozen rows frozen."""
    def locked():
        model = _model("hs", chunk_words=1000)
        model.lockf = np.ones(len(model.vocab), np.float32)
        model.lockf[FROZEN] = 0.0
        model.lockf[9] = 0.5
        return model
    reference = locked()
    start = reference.syn0.copy()
    reference.train(SENTENCES)
    model = locked()
    path = tmp_path / "run.ckpt.npz"
    with pytest.raises(KeyboardInterrupt):
        model.train(SENTENCES, hooks=[_Crash()], checkpoint=path, checkpoint_every=0)
    resumed = Word2Vec.resume(path, SENTENCES, progress=False)
    np.testing.assert_array_equal(resumed.lockf, reference.lockf)
    np.testing.assert_array_equal(resumed.syn0, reference.syn0)
    np.testing.assert_array_equal(resumed.syn0[FROZEN], start[FROZEN])


def _vectors_file(tmp_path, model, words):
    rng = np.random.default_rng(9)
    path = tmp_path / "pre.txt"
    with open(path, "w") as fh:
        fh.write(f"{len(words) + 1} {model.vector_size}\n")
        for w in words + ["not-in-corpus"]:
            fh.write(w + " " + " ".join(f"{v:.6f}" for v in rng.standard_normal(16)) + "\n")
    return str(path)


def test_imported_vectors_can_be_frozen(tmp_path):
    """init_vectors_lockf=0 / intersect_vectors(lockf=0): the imported words end with exactly
    the file's vectors (gensim's intersect_word2vec_format default); the others train."""
    probe = _model("hs")
    shared = ["w0", "w3", "w11"]
    path = _vectors_file(tmp_path, probe, shared)
    model = Word2Vec(**BASE, workers=1, init_vectors=path, init_vectors_lockf=0.0)
    model.build_vocab(SENTENCES)
    ids = [model.vocab.index[w] for w in shared]
    imported = model.syn0[ids].copy()
    others = np.setdiff1d(np.arange(len(model.vocab)), ids)
    start = model.syn0[others].copy()
    assert sorted(np.flatnonzero(model.lockf == 0).tolist()) == sorted(ids)
    model.train(SENTENCES)
    np.testing.assert_array_equal(model.syn0[ids], imported)
    assert (np.abs(model.syn0[others] - start).max(axis=1) > 0).all()
    # after the vocabulary: a factor for the words taken, the others' kept
    again = _model("hs")
    again.lockf = np.full(len(again.vocab), 0.5, np.float32)
    assert again.intersect_vectors(path, lockf=0.0) == 3
    expected = np.full(len(again.vocab), 0.5, np.float32)
    expected[[again.vocab.index[w] for w in shared]] = 0.0
    np.testing.assert_array_equal(again.lockf, expected)
    plain = _model("hs")
    plain.intersect_vectors(path)  # lockf=1: nothing locked, nothing stored
    assert plain.lockf is None
    with pytest.raises(OptionError, match="init_vectors_lockf"):
        Word2Vec(**BASE, init_vectors=path, init_vectors_lockf="0")


def test_a_new_vocabulary_resets_the_factors():
    model = _model("hs")
    model.lockf = np.zeros(len(model.vocab), np.float32)
    model.build_vocab(SENTENCES[:50])
    assert model.lockf is None


@pytest.mark.parametrize("lockf, message", [
    (np.ones(3, np.float32), r"one number per word \(50\) or one for all"),
    (np.ones((50, 1), np.float32), "shape"),
    (np.array([np.nan], np.float32), "finite")])
def test_bad_factors_are_refused_before_training(lockf, message):
    model = _model("hs")
    model.lockf = lockf
    with pytest.raises(OptionError, match=message):
        model.train(SENTENCES)


def test_dask_and_the_gpu_refuse_locks(monkeypatch):
    model = _model("hs")
    model.lockf = np.zeros(1, np.float32)
    model.dask = "local:1"  # not connected: refused before any cluster starts
    with pytest.raises(OptionError, match="not implemented on Dask"):
        model.train(SENTENCES)
    model.dask = None
    # the GPU session (its CuPy program on NumPy, as test_gpu's host twin) has no locks
    from semhuff.gpu import device as gpu_device
    monkeypatch.setitem(gpu_device.BACKENDS, "host", ("semhuff.gpu.cupy_kernels", "HostArrays", "-"))
    monkeypatch.setattr(gpu_device.CudaDevice, "backends", tuple(gpu_device.BACKENDS))
    gpu = Word2Vec(**BASE, device="cuda", backend="host", workers=1)
    gpu.build_vocab(SENTENCES)
    gpu.lockf = np.zeros(1, np.float32)
    with pytest.raises(OptionError, match="device 'cuda' does not implement locked input"):
        gpu.train(SENTENCES)
