"""Hierarchical softmax and negative sampling together (``loss="hs+ns"``, gensim's ``hs=1,
negative>0``): the layer end to end. The body's arithmetic is checked against tests/naive.py in
test_naive.py and against its stream twin in test_kernels.py."""
import numpy as np
import pytest

import naive
from semhuff import Word2Vec
from semhuff.cli.train import main as train
from semhuff.corpus import Corpus
from semhuff.errors import OptionError


def _model(lee_path, **kw):
    settings = dict(vector_size=16, min_count=3, epochs=2, workers=2, progress=False, seed=3,
                    loss="hs+ns", negative=3)
    settings.update(kw)
    return Word2Vec(lee_path, **settings)


def test_both_layers_train_save_load_and_continue(lee_path, tmp_path):
    model = _model(lee_path)
    layer = model.layer
    V = len(model.vocab)
    assert layer.weights.shape == (V - 1, 16) and layer.syn1neg.shape == (V, 16)
    assert np.abs(layer.weights).max() > 0 and np.abs(layer.syn1neg).max() > 0  # both trained
    assert np.isfinite(model.syn0).all()
    path = tmp_path / "m.npz"
    model.save(str(path))
    back = Word2Vec.load(str(path))
    assert back.loss == "hs+ns" and back.layer.noise.negative == 3
    np.testing.assert_array_equal(back.layer.syn1neg, layer.syn1neg)
    np.testing.assert_array_equal(back.layer.weights, layer.weights)
    np.testing.assert_array_equal(back.layer.noise.alias_idx, layer.noise.alias_idx)
    before = back.layer.syn1neg.copy()
    back.train(lee_path, epochs=1)
    assert not np.array_equal(back.layer.syn1neg, before)


def test_score_is_the_trees_exact_likelihood(lee_path):
    """The tree is the normalised part: score() = the float64 reference over the tree's rows."""
    model = _model(lee_path)
    held_out = [s for _, s in zip(range(30), Corpus(lee_path))]
    report = model.score(held_out)
    t = model.layer.tree
    paths = naive.paths(t.parent, t.branch, t.n_words)
    nll, n = naive.score(held_out, model.vocab.index, model.syn0, model.layer.weights, paths,
                         model.window, sg=True)
    assert report.predictions == n > 500
    assert report.nll == pytest.approx(nll, rel=1e-5)


def test_one_worker_is_reproducible_and_differs_from_each_layer_alone(lee_path):
    a = _model(lee_path, workers=1)
    b = _model(lee_path, workers=1)
    np.testing.assert_array_equal(a.syn0, b.syn0)
    hs = _model(lee_path, workers=1, loss="hs", negative=None)
    assert not np.allclose(a.syn0, hs.syn0)  # the noise words' updates reach the inputs


def test_cli_and_its_refusals(lee_path, tmp_path, capsys):
    out = tmp_path / "v.txt"
    assert train([lee_path, "-o", str(out), "--loss", "hs+ns", "--negative", "2", "--tree",
                  "random", "--epochs", "1", "--dim", "8", "--min-count", "3", "-q",
                  "--no-progress"]) == 0
    assert out.read_text().split()[1] == "8"
    code = train([lee_path, "-o", str(tmp_path / "d.txt"), "--loss", "hs+ns", "--dask",
                  "local:2", "--epochs", "1", "--min-count", "3", "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Dask" in err[0]
    assert not (tmp_path / "d.txt").exists()
    with pytest.raises(OptionError, match="negative"):
        Word2Vec(loss="hs+ns", negative=0)
