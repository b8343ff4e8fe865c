"""Negative sampling's two skip-gram orders (``ns_order``): "batched" (HogBatch, the default: a
centre's contexts share one draw of noise words) and "word2vec" (fresh noise words per context).
The arithmetic of each is checked against tests/naive.py in test_naive.py and against its
stream twin in test_kernels.py; these are the layer and the options end to end."""
import numpy as np
import pytest

from semhuff import Word2Vec
from semhuff.cli.train import main as train
from semhuff.errors import OptionError
from semhuff.layers import NegativeSampling


def _model(lee_path, **kw):
    settings = dict(vector_size=16, min_count=3, epochs=1, workers=1, progress=False, seed=3,
                    loss="ns")
    settings.update(kw)
    return Word2Vec(lee_path, **settings)


def test_batched_is_the_skipgram_default_and_a_different_computation(lee_path):
    default = _model(lee_path)
    assert default.layer.order == "batched" and "batched order" in default.layer.describe()
    batched = _model(lee_path, layer_options={"ns_order": "batched"})
    word2vec = _model(lee_path, layer_options={"ns_order": "word2vec"})
    np.testing.assert_array_equal(default.syn0, batched.syn0)
    assert not np.allclose(batched.syn0, word2vec.syn0, atol=1e-4)
    # both learn, about as well: the loss per prediction falls below the untrained model's
    # log(2) x (1 + 5) decisions, and the two within 5% of each other
    losses = [m.reports[-1].epochs[-1].loss_per_pair for m in (batched, word2vec)]
    assert all(np.isfinite(m.syn0).all() for m in (batched, word2vec))
    assert max(losses) < 0.95 * 6 * np.log(2.0)
    assert abs(losses[0] - losses[1]) < 0.05 * losses[1], losses


def test_cbow_has_one_order(lee_path):
    """CBOW makes one prediction per centre: the two orders train the same bits."""
    a = _model(lee_path, sg=0, layer_options={"ns_order": "batched"})
    b = _model(lee_path, sg=0, layer_options={"ns_order": "word2vec"})
    np.testing.assert_array_equal(a.syn0, b.syn0)


def test_the_order_is_saved_and_files_from_before_load_in_word2vecs(lee_path, tmp_path):
    model = _model(lee_path, layer_options={"ns_order": "word2vec"})
    model.save(str(tmp_path / "m.npz"))
    assert Word2Vec.load(str(tmp_path / "m.npz")).layer.order == "word2vec"
    config = dict(model.layer.config())
    del config["order"]  # a layer saved before the option existed was trained in word2vec's order
    old = NegativeSampling.from_state(config, model.layer.arrays())
    assert old.order == "word2vec"


def test_the_option_is_checked_and_reaches_the_cli(lee_path, tmp_path, capsys):
    with pytest.raises(OptionError, match="ns_order"):
        _model(lee_path, layer_options={"ns_order": "hogwild"})
    out = tmp_path / "v.bin"
    assert train([lee_path, "-o", str(out), "--loss", "ns", "--ns-order", "word2vec", "--epochs",
                  "1", "--dim", "8", "-q", "--no-progress"]) == 0
    assert out.exists()
    capsys.readouterr()
    assert train([lee_path, "-o", str(tmp_path / "h.bin"), "--loss", "hs", "--ns-order",
                  "batched", "-q"]) != 0
    assert "--ns-order: not used by --loss hs" in capsys.readouterr().err
    assert not (tmp_path / "h.bin").exists()
