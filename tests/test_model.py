"""End to end through the Python API: reproducibility, persistence, every export format loaded
by gensim, and vector quality against gensim trained with the same settings."""

import numpy as np
import pytest
from gensim.models import KeyedVectors
from gensim.models import Word2Vec as GensimWord2Vec
from gensim.test.utils import datapath

from semhuff import Word2Vec, load_vectors
from semhuff.corpus import Corpus
from semhuff.errors import SemhuffError

SMALL = dict(vector_size=24, min_count=3, epochs=2, progress=False)


def test_one_worker_with_seed_is_bit_reproducible(lee_path):
    a = Word2Vec(lee_path, workers=1, seed=7, **SMALL)
    b = Word2Vec(lee_path, workers=1, seed=7, **SMALL)
    c = Word2Vec(lee_path, workers=1, seed=8, **SMALL)
    assert np.array_equal(a.syn0, b.syn0) and np.array_equal(a.layer.weights, b.layer.weights)
    assert a.reports[0].epochs[-1].loss == b.reports[0].epochs[-1].loss
    assert not np.array_equal(a.syn0, c.syn0)


@pytest.mark.parametrize("options", [dict(sg=1, loss="hs"), dict(sg=0, loss="hs"),
                                     dict(sg=1, loss="ns"), dict(sg=0, loss="ns")])
def test_loss_falls_and_two_workers_run(lee_path, options):
    model = Word2Vec(lee_path, workers=2, **{**SMALL, "epochs": 4}, **options)
    losses = [e.loss_per_pair for e in model.reports[0].epochs]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    report = model.reports[0]
    assert report.raw_words == 4 * model.vocab.total_tokens
    assert 0 < report.trained_words < report.raw_words


def test_save_load_and_keep_training(tmp_path, lee_path):
    model = Word2Vec(lee_path, workers=1, **SMALL)
    model.save(tmp_path / "m.npz")
    back = Word2Vec.load(tmp_path / "m.npz", progress=False)
    assert back.vocab.words == model.vocab.words
    np.testing.assert_array_equal(back.syn0, model.syn0)
    np.testing.assert_array_equal(back.layer.weights, model.layer.weights)
    np.testing.assert_array_equal(back.tree.points, model.tree.points)
    before = back.syn0.copy()
    back.train(lee_path, epochs=1)
    assert not np.array_equal(before, back.syn0)


@pytest.mark.parametrize("name,fmt", [("v.kv", "kv"), ("v.txt", "text"), ("v.bin", "binary"),
                                      ("v.npz", "npz")])
def test_every_output_format_loads_in_gensim(tmp_path, lee_path, name, fmt):
    model = Word2Vec(lee_path, workers=1, **SMALL)
    path = str(tmp_path / name)
    assert model.save_vectors(path) == fmt
    if fmt == "kv":
        kv = KeyedVectors.load(path)
    elif fmt in ("text", "binary"):
        kv = KeyedVectors.load_word2vec_format(path, binary=fmt == "binary")
    else:
        kv = load_vectors(path)
    assert kv.index_to_key == model.vocab.words
    np.testing.assert_allclose(kv.vectors, model.syn0, rtol=1e-5, atol=1e-6 if fmt != "text" else 1e-5)
    assert load_vectors(path).index_to_key == model.vocab.words  # our loader sniffs every format
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temp files left behind


def test_bad_options_raise_clear_errors(lee_path):
    for bad in (dict(vector_size=0), dict(window=0), dict(alpha=-1.0), dict(loss="xx"),
                dict(loss="ns", negative=0), dict(epochs=0), dict(sample=-1.0)):
        with pytest.raises(SemhuffError):
            Word2Vec(**bad)
    with pytest.raises(SemhuffError, match="min_count"):
        Word2Vec(lee_path, min_count=10**6, progress=False)


def _prefix_file(src, dst, n_tokens):
    out = []
    for piece in Corpus(src):
        out.extend(piece)
        if len(out) >= n_tokens:
            break
    dst.write_text(" ".join(out[:n_tokens]))
    return dst


def test_quality_matches_gensim_on_real_text(tmp_path, shared_corpus):
    """Same data, same settings: our WS353 Spearman is not worse than gensim's by more than
    0.05, and 'king' finds royal neighbours."""
    path = _prefix_file(shared_corpus, tmp_path / "prefix.txt", 2_000_000)
    settings = dict(vector_size=50, window=5, min_count=5, sample=1e-3, epochs=3)
    ours = Word2Vec(str(path), workers=2, progress=False, **settings)
    from gensim.models.word2vec import LineSentence
    theirs = GensimWord2Vec(LineSentence(str(path), max_sentence_length=10000), sg=1, hs=1,
                            negative=0, workers=2, seed=1, vector_size=50, window=5,
                            min_count=5, sample=1e-3, epochs=3)
    ws = datapath("wordsim353.tsv")
    rho_ours = ours.wv.evaluate_word_pairs(ws)[1].statistic
    rho_theirs = theirs.wv.evaluate_word_pairs(ws)[1].statistic
    print("WS353 spearman ours %.3f gensim %.3f" % (rho_ours, rho_theirs))
    # a floor against a broken model; two Hogwild workers move this figure by about +-0.01
    # run to run (0.248-0.257 measured at the same commit), the comparison below is the test
    assert rho_ours > 0.22
    assert rho_ours >= rho_theirs - 0.05, (rho_ours, rho_theirs)
    near = {w for w, _ in ours.wv.most_similar("king", topn=20)}
    assert near & {"queen", "prince", "emperor", "throne", "kings", "lord", "monarch", "duke"}
