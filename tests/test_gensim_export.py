"""A semhuff model gensim loads (issue 48: ``gensim.models.Word2Vec.load`` failed with
``UnpicklingError`` on semhuff's file), checked against gensim itself; and the documented
difference of the down-sampling after ``build_vocab(update=True)``."""
import numpy as np
import pytest
from gensim.models import Word2Vec as GensimWord2Vec
from gensim.models.word2vec import LineSentence

from semhuff import Word2Vec
from semhuff.cli import query, train
from semhuff.errors import OptionError
from semhuff.gensim import Word2Vec as DropIn
from semhuff.gensim_support import hs_log_probs
from semhuff.vocab import keep_probability

SMALL = dict(vector_size=16, min_count=3, epochs=2, workers=1, seed=1, progress=False)


def gensim_hs_log_probs(g, h):
    """log P(w | h) from what gensim holds: each word's code and point, and syn1 (gensim's
    rule: node p predicts 1 - code with sigmoid(h . syn1[p]))."""
    out = np.empty(len(g.wv))
    for i in range(len(g.wv)):
        code = g.wv.get_vecattr(i, "code").astype(np.float64)
        scores = g.syn1[g.wv.get_vecattr(i, "point")].astype(np.float64) @ h
        out[i] = -np.logaddexp(0.0, -(1.0 - 2.0 * code) * scores).sum()
    return out


@pytest.mark.parametrize("loss, options", [("hs", {"tree": "random"}), ("ns", {}),
                                           ("hs+ns", {})])
def test_gensim_loads_a_semhuff_model_and_keeps_training_it(tmp_path, lee_path, loss, options):
    model = Word2Vec(lee_path, loss=loss, layer_options=options, **SMALL)
    path = tmp_path / "m.model"
    model.save(str(path), format="gensim")
    g = GensimWord2Vec.load(str(path))
    assert [path.name] == [p.name for p in tmp_path.iterdir()]  # one file, nothing beside it
    assert sorted(g.wv.index_to_key) == sorted(model.vocab.words)
    for word in ("government", "fire", "the"):
        i = model.vocab.index[word]
        np.testing.assert_array_equal(g.wv[word], model.syn0[i])
        assert g.wv.get_vecattr(word, "count") == model.vocab.counts[i]
    assert (g.hs, g.negative, g.sg, g.window) == (int(loss != "ns"), 5 if "ns" in loss else 0,
                                                  1, model.window)
    h = model.syn0[model.vocab.index["government"]].astype(np.float64)
    if loss != "ns":  # this model's own tree (a random one, not gensim's Huffman tree)
        theirs = gensim_hs_log_probs(g, h)
        ours = hs_log_probs(h, model.layer.weights, model.tree)
        order = [g.wv.key_to_index[w] for w in model.vocab.words]
        np.testing.assert_allclose(theirs[order], ours, rtol=1e-9, atol=1e-12)
        assert abs(np.exp(theirs).sum() - 1.0) < 1e-9
    if "ns" in loss:
        noise = model.layer.weights if loss == "ns" else model.layer.syn1neg
        for word in ("government", "fire"):
            np.testing.assert_array_equal(g.syn1neg[g.wv.key_to_index[word]],
                                          noise[model.vocab.index[word]])
    before = g.wv["government"].copy()
    g.train(LineSentence(lee_path), total_examples=g.corpus_count or 300, epochs=1)
    assert not np.array_equal(before, g.wv["government"]) and np.isfinite(g.wv.vectors).all()
    # and back: the drop-in reads gensim's file, the same vectors and output rows
    back = DropIn.load(str(path))
    np.testing.assert_array_equal(back.wv["fire"], model.syn0[model.vocab.index["fire"]])


def test_the_drop_in_and_the_command_line_write_it_too(tmp_path, lee_path, capsys):
    sentences = list(LineSentence(lee_path))
    dropin = DropIn(sentences, vector_size=16, min_count=3, epochs=1, workers=1, hs=1,
                    negative=0, seed=1)
    dropin.save(str(tmp_path / "d.model"), format="gensim")
    g = GensimWord2Vec.load(str(tmp_path / "d.model"))
    np.testing.assert_array_equal(g.wv["fire"], dropin.wv["fire"])
    assert g.corpus_count == dropin.corpus_count == len(sentences)

    out = tmp_path / "v.model"
    assert train.main(["lee", "-o", str(out), "--format", "gensim", "--epochs", "1", "--dim",
                       "16", "--min-count", "3", "--workers", "1", "-q"]) == 0
    assert GensimWord2Vec.load(str(out)).wv.vector_size == 16
    assert query.main([str(out), "government", "--topn", "2"]) == 0  # semhuff reads it back
    assert capsys.readouterr().out.startswith("government -> ")


def test_a_layer_gensim_has_no_form_of_is_refused_in_one_line(tmp_path, lee_path):
    model = Word2Vec(lee_path, loss="class", **SMALL)
    with pytest.raises(OptionError, match="export the vectors instead"):
        model.save(str(tmp_path / "c.model"), format="gensim")
    assert not (tmp_path / "c.model").exists()


def test_update_down_sampling_differs_from_gensim_as_documented(lee_path):
    """After build_vocab(update=True) gensim keeps an updated word by its count in the update
    against the update's total (and leaves the others); semhuff by the vocabulary's counts
    against its total (semhuff.gensim's docstring says why). Both rules checked, and the
    numbers the docstring quotes."""
    lines = list(LineSentence(lee_path))
    first, update = lines[:200], lines[200:260]
    g = GensimWord2Vec(first, min_count=3, seed=1, workers=1, epochs=1)
    g.build_vocab(update, update=True)
    s = DropIn(first, min_count=3, seed=1, workers=1, epochs=1)
    s.build_vocab(update, update=True)
    assert sorted(g.wv.index_to_key) == sorted(s.wv.index_to_key)

    update_counts = {}
    for sentence in update:
        for word in sentence:
            update_counts[word] = update_counts.get(word, 0) + 1
    kept = {w: c for w, c in update_counts.items() if c >= 3}
    total = sum(kept.values())
    gensim_keep = np.array([g.wv.get_vecattr(w, "sample_int") for w in g.wv.index_to_key],
                           np.float64) / (2 ** 32 - 1)
    rule = keep_probability([kept[w] for w in kept], 1e-3 * total)
    np.testing.assert_allclose(gensim_keep[[g.wv.key_to_index[w] for w in kept]], rule,
                               rtol=1e-6)

    vocab = s.semhuff.vocab
    ours = vocab.keep_probabilities(s.semhuff.sample)
    np.testing.assert_allclose(ours, keep_probability(vocab.counts, 1e-3 * vocab.retained_tokens))
    assert ((gensim_keep < 1).sum(), (ours < 1).sum(), len(ours)) == (56, 44, 2352)
