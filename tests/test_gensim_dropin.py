"""semhuff.gensim: gensim's Word2Vec with one import line changed (issue 12.3).

gensim itself is the reference throughout: its signatures, its documented examples (read from
the installed gensim's own docstrings and run with only the import line changed, plus the
Word2Vec tutorial's snippets), its vocabulary rules, its callbacks and its training loss.
"""
import doctest
import inspect
import math
import re
import types

import gensim.models
import gensim.models.callbacks
import gensim.models.word2vec
import numpy as np
import pytest
from gensim.test.utils import common_texts, datapath

from semhuff.errors import UnsupportedArgument
from semhuff.gensim import Word2Vec

SWAP = ("from gensim.models import Word2Vec", "from semhuff.gensim import Word2Vec")
GensimWord2Vec = gensim.models.Word2Vec


# ---------------------------------------------------------------- gensim's documented examples

class _Checker(doctest.OutputChecker):
    """Exact output, except gensim's ``(trained words, raw words)`` from ``train()``: the first
    number depends on random down-sampling (gensim's own value varies between versions), so
    only the raw word count is compared."""

    def check_output(self, want, got, optionflags):
        pair = r"\((\d+), (\d+)\)\n"
        w, g = re.fullmatch(pair, want), re.fullmatch(pair, got)
        if w and g and w.group(1) != "0":
            return w.group(2) == g.group(2)
        return super().check_output(want, got, optionflags)


def run_docstring(doc: str, name: str, globs: dict, skip=()) -> int:
    """Run the ``>>>`` examples of one of gensim's docstrings with the import line swapped;
    ``globs`` receives the names they define; returns how many ran."""
    examples = [ex for ex in doctest.DocTestParser().get_examples(doc)
                if not any(s in ex.source for s in skip)]
    for ex in examples:
        ex.source = ex.source.replace(*SWAP)
    test = doctest.DocTest(examples, globs, name, None, 0, doc)
    runner = doctest.DocTestRunner(checker=_Checker(),
                                   optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append, clear_globs=False)
    assert runner.failures == 0, "".join(report)
    globs.update(test.globs)
    return len(examples)


def test_word2vec_module_examples(tmp_path, monkeypatch):
    """gensim/models/word2vec.py, module docstring: train + save, load + train (prints (0, 2)),
    .wv lookups and most_similar, KeyedVectors save / mmap load, C-format loading, del model,
    Phrases feeding Word2Vec (the downloader examples need a network: left out)."""
    monkeypatch.chdir(tmp_path)
    globs = {}
    ran = run_docstring(gensim.models.word2vec.__doc__, "gensim.models.word2vec", globs,
                        skip=("gensim.downloader", "glove_vectors"))
    assert ran >= 15
    assert isinstance(globs["word_vectors"], gensim.models.KeyedVectors)
    assert type(globs["model"]) is Word2Vec  # the Phrases example's model: ours, not gensim's
    assert Word2Vec.load("word2vec.model").wv.vector_size == 100


def test_word2vec_class_and_train_examples(tmp_path, monkeypatch):
    """Word2Vec.__init__'s and Word2Vec.train's docstrings (the latter prints (1, 30))."""
    monkeypatch.chdir(tmp_path)
    for name, doc in (("Word2Vec", GensimWord2Vec.__init__.__doc__),
                      ("Word2Vec.train", GensimWord2Vec.train.__doc__)):
        globs = {}
        assert run_docstring(doc, name, globs) >= 2
        assert type(globs["model"]) is Word2Vec


def test_callbacks_module_examples(tmp_path, monkeypatch, capsys):
    """gensim/models/callbacks.py, module docstring: EpochSaver, EpochLogger and a training run
    whose printed "Epoch #i start/end" lines are checked (the LDA example is not Word2Vec)."""
    monkeypatch.chdir(tmp_path)
    globs = {"Word2Vec": Word2Vec, "common_texts": common_texts}  # the docstring's context
    run_docstring(gensim.models.callbacks.__doc__, "gensim.models.callbacks", globs,
                  skip=("LdaModel", "PerplexityMetric", "perplexity_logger", "common_corpus"))
    saver = globs["EpochSaver"]("semhuff-test")
    # gensim's get_tmpfile makes a new folder per call: save where the test can find them
    saver.on_epoch_end.__globals__["get_tmpfile"] = lambda name: str(tmp_path / name)
    model = Word2Vec(common_texts, epochs=3, vector_size=10, min_count=0, seed=42, callbacks=[saver])
    assert saver.epoch == 3
    back = Word2Vec.load(str(tmp_path / "semhuff-test_epoch2.model"))
    assert back.wv.index_to_key == model.wv.index_to_key


class MyCorpus:
    """From gensim's Word2Vec tutorial (docs/src/gallery/tutorials/run_word2vec.py)."""

    def __iter__(self):
        from gensim import utils
        corpus_path = datapath('lee_background.cor')
        for line in open(corpus_path):
            yield utils.simple_preprocess(line)


def test_tutorial_snippets(tmp_path):
    """gensim's Word2Vec tutorial (docs/src/gallery/tutorials/run_word2vec.py), its
    "gensim.models.Word2Vec" written "Word2Vec" after the changed import."""
    import tempfile
    sentences = MyCorpus()
    model = Word2Vec(sentences=sentences)
    vec_king = model.wv['king']
    assert vec_king.shape == (100,)
    with tempfile.NamedTemporaryFile(prefix='gensim-model-', delete=False, dir=tmp_path) as tmp:
        temporary_filepath = tmp.name
        model.save(temporary_filepath)
        new_model = Word2Vec.load(temporary_filepath)
    np.testing.assert_array_equal(new_model.wv.vectors, model.wv.vectors)
    for options in (dict(min_count=10), dict(vector_size=200), dict(workers=4)):
        model = Word2Vec(sentences, **options)
    assert model.workers == 4 and model.wv.vector_size == 100
    accuracy = model.wv.evaluate_word_analogies(datapath('questions-words.txt'))[0]
    assert 0 <= accuracy <= 1
    assert -1 <= model.wv.evaluate_word_pairs(datapath('wordsim353.tsv'))[1][0] <= 1
    # online training with new words, as the tutorial does it
    model = Word2Vec.load(temporary_filepath)
    more_sentences = [['Advanced', 'users', 'can', 'load', 'a', 'model',
                       'and', 'continue', 'training', 'it', 'with', 'more', 'sentences']]
    model.build_vocab(more_sentences, update=True)
    model.train(more_sentences, total_examples=model.corpus_count, epochs=model.epochs)
    # training loss computation
    model_with_loss = Word2Vec(sentences, min_count=1, compute_loss=True, hs=0, sg=1, seed=42)
    training_loss = model_with_loss.get_latest_training_loss()
    assert training_loss > 0 and math.isfinite(training_loss)


# ---------------------------------------------------------------- the same signature and meaning

def _params(fn):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()
            if p.kind is not p.VAR_KEYWORD]


def test_signatures_are_gensims():
    assert inspect.signature(Word2Vec.__init__) == inspect.signature(GensimWord2Vec.__init__)
    assert inspect.signature(Word2Vec.build_vocab_from_freq) == \
        inspect.signature(GensimWord2Vec.build_vocab_from_freq)
    for name in ("build_vocab", "train"):  # gensim's **kwargs: ours names what it accepts
        ours, theirs = _params(getattr(Word2Vec, name)), _params(getattr(GensimWord2Vec, name))
        assert ours[:len(theirs)] == theirs


def test_defaults_and_switches_mean_what_they_mean_in_gensim():
    model = Word2Vec()
    reference = GensimWord2Vec()
    for name in ("sg", "hs", "negative", "cbow_mean", "workers", "window", "epochs", "alpha",
                 "min_alpha", "sample", "vector_size", "min_count", "ns_exponent"):
        assert getattr(model, name) == getattr(reference, name), name
    assert len(model.wv) == 0 and model.wv.vector_size == 100  # .wv before training, as gensim
    ns = Word2Vec(common_texts, negative=10, min_count=1, epochs=1)
    assert ns.semhuff.loss == "ns" and ns.semhuff.layer.negative == 10 and ns.sg == 0
    hs = Word2Vec(common_texts, hs=1, negative=0, sg=1, min_count=1, epochs=1)
    assert hs.semhuff.loss == "hs" and hs.sg == 1
    # gensim's shape (a row per word, the last one unused and zero), semhuff's rows
    assert hs.syn1.shape == (len(hs.wv), 100) and not hs.syn1[-1].any()
    np.testing.assert_array_equal(hs.syn1[:-1], hs.semhuff.layer.weights)
    cbow_sum = Word2Vec(common_texts, cbow_mean=0, min_count=1, epochs=1)
    assert cbow_sum.semhuff.cbow_mean == 0
    positional = Word2Vec(common_texts, None, 20, 0.05, 3, 1)  # gensim 4's positional order
    assert (positional.vector_size, positional.alpha, positional.window, positional.min_count) == \
        (20, 0.05, 3, 1)


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(hs=0, negative=0), ValueError, "You must set either 'hs' or 'negative'"),
    (dict(hashfxn=lambda s: 1), UnsupportedArgument, "hashfxn"),
    (dict(null_word=1), UnsupportedArgument, "null_word=1"),
    (dict(sorted_vocab=0), UnsupportedArgument, "sorted_vocab=0"),
    (dict(size=50), TypeError, "size"),  # gensim 3's name: gensim 4 refuses it too
])
def test_what_cannot_be_honoured_is_an_error_naming_it(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        Word2Vec(common_texts, min_count=1, **kwargs)


def test_corpus_arguments_as_gensim(tmp_path, lee_path):
    with pytest.raises(TypeError, match="corpus_file is gensim 4's second argument|vector_size=50"):
        Word2Vec(common_texts, 50)
    with pytest.raises(TypeError, match="generator"):
        Word2Vec((s for s in common_texts), min_count=1)
    with pytest.raises(TypeError, match="valid path"):
        Word2Vec(corpus_file=str(tmp_path / "missing.txt"))
    ours = Word2Vec(corpus_file=lee_path, epochs=1)
    reference = GensimWord2Vec(min_count=5)
    reference.build_vocab(corpus_file=lee_path)
    assert (ours.corpus_count, ours.corpus_total_words) == \
        (reference.corpus_count, reference.corpus_total_words)
    assert set(ours.wv.index_to_key) == set(reference.wv.index_to_key)
    again = Word2Vec(min_count=5)
    again.build_vocab(corpus_iterable=gensim.models.word2vec.LineSentence(lee_path))
    assert again.corpus_count == reference.corpus_count
    # train() reads its corpus once (the later epochs come from a cache): a generator works
    again.train(corpus_iterable=(s for s in gensim.models.word2vec.LineSentence(lee_path)),
                total_examples=again.corpus_count, epochs=2)
    with pytest.raises(ValueError, match="total_examples or total_words"):
        again.train(common_texts, epochs=1)
    with pytest.raises(ValueError, match="explicit epochs"):
        again.train(common_texts, total_examples=again.corpus_count)


@pytest.mark.parametrize("options", [
    dict(min_count=0), dict(min_count=3, max_final_vocab=500), dict(max_vocab_size=2000),
    dict(min_count=2, trim_rule="keep_the"),
])
def test_vocabulary_follows_gensims_rules(lee_path, options):
    from gensim.utils import RULE_DEFAULT, RULE_DISCARD, RULE_KEEP

    def keep_the(word, count, min_count):
        return RULE_KEEP if word == "the" else RULE_DISCARD if word.isdigit() else RULE_DEFAULT

    options = dict(options)
    rule = keep_the if options.pop("trim_rule", None) else None
    ours, reference = Word2Vec(**options), GensimWord2Vec(**options)
    corpus = gensim.models.word2vec.LineSentence(lee_path)
    ours.build_vocab(corpus, trim_rule=rule)
    reference.build_vocab(corpus, trim_rule=rule)
    assert set(ours.wv.index_to_key) == set(reference.wv.index_to_key)
    assert ours.effective_min_count == reference.effective_min_count
    counts = {w: ours.wv.get_vecattr(w, "count") for w in ours.wv.index_to_key[:50]}
    assert counts == {w: reference.wv.get_vecattr(w, "count") for w in counts}


def test_wv_is_live_and_build_vocab_from_freq():
    model = Word2Vec(min_count=1, vector_size=8)
    model.build_vocab(common_texts)
    wv = model.wv
    before = wv["computer"].copy()
    model.train(common_texts, total_examples=model.corpus_count, epochs=20)
    assert model.wv is wv and not np.array_equal(before, wv["computer"])  # updated in place
    freq = Word2Vec(min_count=2)
    freq.build_vocab_from_freq({"a": 5, "b": 3, "c": 1}, corpus_count=4)
    assert freq.wv.index_to_key == ["a", "b"] and freq.corpus_count == 4


def test_what_is_not_provided_says_so():
    model = Word2Vec(common_texts, min_count=1, epochs=1)
    with pytest.raises(NotImplementedError, match="estimate_memory"):
        model.estimate_memory()
    with pytest.raises(RuntimeError, match="hierarchical softmax"):  # gensim's: HS only
        model.score(common_texts)
    with pytest.raises(AttributeError):
        model.no_such_thing


# ---------------------------------------------------------------- callbacks and the loss

class Recorder(gensim.models.callbacks.CallbackAny2Vec):
    def __init__(self):
        self.calls = []

    def on_train_begin(self, model):
        self.calls.append(("train_begin", model.get_latest_training_loss()))

    def on_epoch_begin(self, model):
        self.calls.append(("epoch_begin", model.get_latest_training_loss()))

    def on_epoch_end(self, model):
        model.wv.most_similar("computer")  # the live vectors, with fresh norms
        self.calls.append(("epoch_end", model.get_latest_training_loss()))

    def on_train_end(self, model):
        self.calls.append(("train_end", model.get_latest_training_loss()))


def test_callbacks_in_gensims_order_with_the_running_loss():
    recorder = Recorder()
    model = Word2Vec(common_texts * 20, min_count=1, epochs=3, compute_loss=True, callbacks=[recorder])
    names = [name for name, _ in recorder.calls]
    assert names == ["train_begin"] + ["epoch_begin", "epoch_end"] * 3 + ["train_end"]
    ends = [loss for name, loss in recorder.calls if name == "epoch_end"]
    assert recorder.calls[0][1] == 0.0 and 0 < ends[0] < ends[1] < ends[2]  # since train() began
    epochs = model.semhuff.reports[-1].epochs
    assert ends == pytest.approx(np.cumsum([e.loss for e in epochs]).tolist())
    assert model.get_latest_training_loss() == recorder.calls[-1][1] == pytest.approx(ends[-1])
    quiet = Recorder()
    Word2Vec(common_texts, min_count=1, epochs=2, callbacks=[quiet])  # compute_loss=False
    assert {loss for _, loss in quiet.calls} == {0.0}  # gensim's value without compute_loss


def _zero_weight_loss(model, sentences):
    """The loss of a skip-gram HS pass with window 1 and no down-sampling while the output
    weights are zero: every path node predicts with probability 1/2, so each (context, centre)
    prediction costs ln 2 per node of the centre's path."""
    lengths = model.semhuff.tree.lengths
    index = model.wv.key_to_index
    total = 0
    for sentence in sentences:
        ids = [index[w] for w in sentence if w in index]
        for i, w in enumerate(ids):
            neighbours = (i > 0) + (i < len(ids) - 1)
            total += neighbours * int(lengths[w])
    return math.log(2) * total


def test_loss_is_correct_against_a_hand_computation_and_gensim(lee_path):
    """gensim's meaning (summed negative log-likelihood since train() began), the right value:
    at zero output weights every path node costs ln 2. gensim's own value is about 2% high
    there (its log-sigmoid table is read off zero), and its float32 tally, shared by its threads
    without a lock, drifts and loses updates on larger runs."""
    settings = dict(sg=1, hs=1, negative=0, window=1, sample=0, min_count=1, alpha=1e-10,
                    min_alpha=1e-10, epochs=1, workers=1, compute_loss=True)
    corpus = list(gensim.models.word2vec.LineSentence(lee_path))
    ours = Word2Vec(corpus, **settings)
    # the loss is read from sigmoid-table bins centred 0.006 off zero: within 0.5%
    assert ours.get_latest_training_loss() == pytest.approx(_zero_weight_loss(ours, corpus), rel=5e-3)
    small = corpus[:25]  # small enough for gensim's float32 tally to be exact to ~0.1%
    ours, theirs = Word2Vec(small, **settings), GensimWord2Vec(small, **settings)
    expected = _zero_weight_loss(ours, small)
    ours, theirs = ours.get_latest_training_loss(), theirs.get_latest_training_loss()
    assert ours == pytest.approx(expected, rel=5e-3)
    assert theirs == pytest.approx(expected, rel=3e-2)  # the same quantity...
    assert abs(ours - expected) < abs(theirs - expected) / 4  # ...more exactly


def test_save_load_keeps_the_gensim_state(tmp_path):
    model = Word2Vec(common_texts, min_count=1, hs=1, negative=0, epochs=2, compute_loss=True,
                     comment="run 1")
    model.save(str(tmp_path / "m.model"))
    back = Word2Vec.load(str(tmp_path / "m.model"))
    for name in ("hs", "negative", "corpus_count", "corpus_total_words", "comment", "train_count",
                 "compute_loss", "epochs", "sg", "window"):
        assert getattr(back, name) == getattr(model, name), name
    assert back.get_latest_training_loss() == model.get_latest_training_loss()
    np.testing.assert_array_equal(back.wv.vectors, model.wv.vectors)
    # a model gensim saved (a pickle) is read by gensim and converted: its vectors, its
    # output layer (gensim's predictions) and its settings
    theirs = GensimWord2Vec(common_texts, min_count=1, epochs=1)
    theirs.save(str(tmp_path / "g.model"))
    ours = Word2Vec.load(str(tmp_path / "g.model"))
    np.testing.assert_array_equal(ours.wv.vectors, theirs.wv.vectors)
    assert ours.wv.index_to_key == theirs.wv.index_to_key
    np.testing.assert_array_equal(ours.syn1neg, theirs.syn1neg)
    assert [w for w, _ in ours.predict_output_word(["system", "human"], topn=5)] == \
        [w for w, _ in theirs.predict_output_word(["system", "human"], topn=5)]
    assert (ours.window, ours.negative, ours.corpus_count) == \
        (theirs.window, theirs.negative, theirs.corpus_count)
    events = [e["event"] for e in ours.lifecycle_events]  # gensim's history goes on
    assert events == [e["event"] for e in theirs.lifecycle_events] + ["loaded"]


def test_module_is_a_one_line_switch():
    """Everything a gensim script reaches through Word2Vec is there; the drop-in is an adapter
    over semhuff.Word2Vec (no second trainer)."""
    import semhuff.gensim as module
    assert isinstance(module, types.ModuleType) and module.Word2Vec is Word2Vec
    model = Word2Vec(common_texts, min_count=1, epochs=1)
    from semhuff import Word2Vec as SemhuffWord2Vec
    assert isinstance(model.semhuff, SemhuffWord2Vec)
    assert model.train(common_texts, total_examples=model.corpus_count, epochs=1)[1] == \
        sum(len(s) for s in common_texts)


# ---------------------------------------------------------------- the main API's own answers

def test_main_api_refuses_what_it_would_silently_get_wrong(tmp_path):
    from semhuff import Word2Vec as SemhuffWord2Vec
    from semhuff.errors import CorpusError, OptionError, SemhuffError
    with pytest.raises(OptionError, match="loss 'hs' does not use negative"):
        SemhuffWord2Vec(common_texts, min_count=1, negative=10)  # used to train HS silently
    assert SemhuffWord2Vec(common_texts, min_count=1, loss="ns", negative=10,
                           progress=False).layer.negative == 10
    with pytest.raises(CorpusError, match="one-shot iterator"):
        SemhuffWord2Vec((s for s in common_texts), min_count=1)
    model = SemhuffWord2Vec(min_count=1, progress=False)
    one_shot = iter(common_texts)
    model.build_vocab(one_shot)
    with pytest.raises(SemhuffError, match="one-shot iterator: was it consumed already"):
        model.train(one_shot)
    model.train(iter(common_texts))  # a fresh one trains: later epochs come from the cache
    model.save(str(tmp_path / "m.npz"))
    assert SemhuffWord2Vec.load(str(tmp_path / "m.npz")).train_calls == 1


# ---------------------------------------------------------------- issue 23: gensim's test suite

NEW_SENTENCES = [["computer", "artificial", "intelligence"], ["artificial", "trees"],
                 ["human", "intelligence"], ["artificial", "graph"], ["intelligence"],
                 ["artificial", "intelligence", "system"]]  # gensim's test_word2vec.py's


@pytest.mark.parametrize("hs,negative", [(1, 0), (0, 5)])
def test_online_vocabulary_update_as_gensim(hs, negative):
    """build_vocab(update=True): gensim's words, appended in gensim's order, with gensim's
    counts; the old words keep their trained vectors and output rows, the new ones get fresh
    vectors and zero rows, and training goes on over all of them."""
    settings = dict(vector_size=10, min_count=1, seed=42, hs=hs, negative=negative, workers=1,
                    sample=0)
    ours, theirs = Word2Vec(common_texts, **settings), GensimWord2Vec(common_texts, **settings)
    vectors, rows = ours.wv.vectors.copy(), ours.semhuff.layer.weights.copy()
    ours.build_vocab(NEW_SENTENCES, update=True)
    theirs.build_vocab(NEW_SENTENCES, update=True)
    assert set(ours.wv.index_to_key[:12]) == set(theirs.wv.index_to_key[:12])
    assert ours.wv.index_to_key[12:] == theirs.wv.index_to_key[12:] == ["artificial",
                                                                          "intelligence"]
    assert {w: ours.wv.get_vecattr(w, "count") for w in ours.wv.index_to_key} == \
        {w: theirs.wv.get_vecattr(w, "count") for w in theirs.wv.index_to_key}
    assert ours.corpus_count == theirs.corpus_count == len(NEW_SENTENCES)
    np.testing.assert_array_equal(ours.wv.vectors[:12], vectors)
    layer = ours.semhuff.layer.weights
    np.testing.assert_array_equal(layer[:len(rows)], rows)
    assert layer.shape[0] == len(ours.wv) - hs and not layer[len(rows):].any()
    fresh = ours.wv.vectors[12:].copy()
    assert fresh.std() > 0 and np.abs(fresh).max() <= 0.5 / 10  # word2vec's initialisation
    raw = ours.train(NEW_SENTENCES, total_examples=ours.corpus_count, epochs=ours.epochs)[1]
    assert raw == ours.epochs * sum(map(len, NEW_SENTENCES))
    assert not np.array_equal(ours.wv.vectors[12:], fresh)
    if hs:  # the tree over the new counts: a Huffman code as good as gensim's
        def cost(m):
            return sum(m.wv.get_vecattr(w, "count") * len(m.wv.get_vecattr(w, "code"))
                       for w in m.wv.index_to_key)
        assert cost(ours) == cost(theirs)
    with pytest.raises(RuntimeError, match="no prior vocabulary"):
        Word2Vec(min_count=1).build_vocab(NEW_SENTENCES, update=True)


def test_shrink_windows_false_trains_every_pair_of_the_full_window():
    """gensim's shrink_windows=False: every context within ``window`` (counted by hand),
    where word2vec's reduced windows train fewer."""
    sentences, window = common_texts * 3, 3
    full = sum(min(i, window) + min(len(s) - 1 - i, window)
               for s in sentences for i in range(len(s)))
    settings = dict(sg=1, hs=1, negative=0, window=window, sample=0, min_count=1, epochs=1,
                    workers=1)
    fixed = Word2Vec(sentences, shrink_windows=False, **settings)
    assert fixed.semhuff.reports[-1].epochs[0].pairs == full
    assert Word2Vec(sentences, **settings).semhuff.reports[-1].epochs[0].pairs < full
    assert fixed.shrink_windows is False and fixed.semhuff.params()["shrink_windows"] is False


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def test_predict_output_word_hs_exact_ns_as_gensim():
    """Hierarchical softmax: the exact P(w | context), by hand along each word's path (gensim's
    ``code`` / ``point`` vecattrs, ``syn1``), summing to 1; negative sampling: gensim's
    softmax over ``syn1neg``."""
    hs = Word2Vec(common_texts * 5, hs=1, negative=0, min_count=1, vector_size=8, workers=1)
    everything = hs.predict_output_word(["system", "human"], topn=len(hs.wv))
    assert len(everything) == len(hs.wv)
    assert sum(p for _, p in everything) == pytest.approx(1.0, abs=1e-9)
    h = (hs.wv["system"] + hs.wv["human"]) / 2
    for word, p in everything:
        expected = 1.0
        for code, node in zip(hs.wv.get_vecattr(word, "code"), hs.wv.get_vecattr(word, "point")):
            f = _sigmoid(float(np.dot(h, hs.syn1[node])))
            expected *= f if code == 0 else 1.0 - f  # node n predicts 1 - code (word2vec.c)
        assert p == pytest.approx(expected, rel=1e-5)
    ns = Word2Vec(common_texts, min_count=1, vector_size=8, workers=1)
    h = (ns.wv["system"] + ns.wv["human"]) / 2
    prob = np.exp(h @ ns.syn1neg.T)
    prob /= prob.sum()
    got = ns.predict_output_word(["system", "human"], topn=5)
    assert [w for w, _ in got] == [ns.wv.index_to_key[i] for i in np.argsort(-prob)[:5]]
    np.testing.assert_allclose([p for _, p in got], np.sort(prob)[::-1][:5], rtol=1e-5)
    assert ns.predict_output_word([ns.wv.get_index("system"), "human"], topn=5) == got
    assert ns.predict_output_word(["no", "such", "words"]) is None


def _hand_score(model, sentence):
    """A sentence's log probability by hand: each word from its full window (skip-gram: each
    context predicts it; CBOW: their mean, a zero vector without context, as gensim), the
    product of sigmoid(+-h . syn1[node]) along its path (gensim's code / point)."""
    wv, total = model.wv, 0.0
    ids = [w for w in sentence if w in wv]
    for i, word in enumerate(ids):
        ctx = [ids[j] for j in range(max(0, i - model.window), i + model.window + 1)
               if j != i and j < len(ids)]
        if model.sg:
            inputs = [wv[c] for c in ctx]
        else:
            inputs = [np.mean([wv[c] for c in ctx], axis=0) if ctx else np.zeros(wv.vector_size)]
        for h in inputs:
            for code, node in zip(wv.get_vecattr(word, "code"), wv.get_vecattr(word, "point")):
                f = _sigmoid(float(np.dot(h, model.syn1[node])))
                total += math.log(f if code == 0 else 1.0 - f)
    return total


@pytest.mark.parametrize("sg", [0, 1])
def test_score_is_gensims_log_probability(tmp_path, sg):
    """score() on a model gensim trained and saved: each sentence's log probability, exactly
    (by hand), and gensim's own value within its sigmoid table's error (3%)."""
    theirs = GensimWord2Vec(common_texts * 3, hs=1, negative=0, sg=sg, min_count=1,
                            vector_size=10, workers=1, seed=3)
    theirs.save(str(tmp_path / "g.model"))
    ours = Word2Vec.load(str(tmp_path / "g.model"))
    got = ours.score(common_texts, total_sentences=len(common_texts))
    assert got.dtype == np.float32 and got.shape == (len(common_texts),)
    np.testing.assert_allclose(got, [_hand_score(ours, s) for s in common_texts], rtol=1e-5)
    expected = theirs.score(common_texts, total_sentences=len(common_texts))
    np.testing.assert_allclose(got, expected, rtol=3e-2)
    assert len(ours.score(common_texts, total_sentences=4)) == 4


def test_errors_gensim_code_catches_and_sentences_of_strings():
    from semhuff.errors import CorpusError, SemhuffError, VocabError
    with pytest.raises(RuntimeError, match=r"min_count=100 \(the most frequent word occurs 4 "):
        Word2Vec(common_texts, min_count=100)  # gensim: RuntimeError (no vocabulary)
    assert issubclass(VocabError, SemhuffError) and issubclass(VocabError, RuntimeError)
    with pytest.raises(RuntimeError):
        Word2Vec([])
    for sentences in (["hello world foo bar"], "hello world", ["human", "machine"]):
        with pytest.raises(CorpusError, match="sentences must be lists of tokens"):
            Word2Vec(sentences, min_count=1)
    with pytest.raises(CorpusError, match="lists of tokens"):
        Word2Vec(min_count=1).build_vocab(iter(["human", "machine"]))


def test_gensim_bookkeeping(tmp_path, caplog, lee_path):
    """The effective-alpha warning, lifecycle_events (saved), reset_from, scan_vocab /
    prepare_vocab's report, and each word's Huffman code as good as gensim's."""
    import logging
    model = Word2Vec(min_count=1, vector_size=8, workers=1)
    model.build_vocab(common_texts)
    model.train(common_texts, total_examples=model.corpus_count, epochs=1)
    with caplog.at_level(logging.WARNING, logger="semhuff.gensim"):
        model.train(common_texts, total_examples=model.corpus_count, epochs=1)
    assert "Effective 'alpha' higher than previous training cycles" in caplog.text
    events = [e["event"] for e in model.lifecycle_events]
    assert events == ["created", "build_vocab", "train", "train"]
    model.save(str(tmp_path / "m.model"))
    back = Word2Vec.load(str(tmp_path / "m.model"))
    assert [e["event"] for e in back.lifecycle_events] == events + ["saved", "loaded"]
    other = Word2Vec(NEW_SENTENCES, min_count=1, vector_size=8)
    model.reset_from(other)
    assert model.wv.key_to_index == other.wv.key_to_index
    assert model.corpus_count == other.corpus_count
    ours, theirs = (cls(vector_size=10, max_final_vocab=4, min_count=2, sample=0)
                    for cls in (Word2Vec, GensimWord2Vec))
    assert ours.scan_vocab(common_texts) == theirs.scan_vocab(common_texts) == (29, 9)
    assert ours.prepare_vocab() == {k: v for k, v in theirs.prepare_vocab().items()
                                    if k != "memory"}
    assert ours.effective_min_count == theirs.effective_min_count == 3
    corpus = gensim.models.word2vec.LineSentence(lee_path)
    ours, theirs = Word2Vec(hs=1, negative=0), GensimWord2Vec(hs=1, negative=0)
    ours.build_vocab(corpus)
    theirs.build_vocab(corpus)

    def cost(m):  # sum of count x code length: optimal for any Huffman tie-breaking
        return sum(m.wv.get_vecattr(w, "count") * len(m.wv.get_vecattr(w, "code"))
                   for w in m.wv.index_to_key)
    assert cost(ours) == cost(theirs)


def test_wv_assignment_starts_from_those_vectors():
    """gensim's ``model.wv = kv``: no trained output layer to predict with (gensim's
    RuntimeError), gensim's ValueError for missing totals, and training from those vectors."""
    theirs = GensimWord2Vec(common_texts, min_count=1, vector_size=8)
    model = Word2Vec(vector_size=8, min_count=1, workers=1)
    model.wv = theirs.wv
    assert model.wv is theirs.wv
    with pytest.raises(RuntimeError, match="not found"):
        model.predict_output_word(["system", "human"])
    with pytest.raises(ValueError, match="total_examples or total_words"):
        model.train(common_texts)
    start = theirs.wv["system"].copy()
    model.train(common_texts, total_examples=len(common_texts), epochs=2)
    assert not np.array_equal(model.wv["system"], start)
    assert model.predict_output_word(["system", "human"], topn=3)


def test_huffman_tree_in_any_word_order():
    """An online update leaves the counts unsorted: the drop-in's tree is word2vec's Huffman
    tree of the sorted counts with its leaves renamed, and gensim's own paths read back into
    the same tree."""
    from semhuff.gensim_support import huffman_tree, tree_from_paths
    from semhuff.trees.huffman import build_huffman
    counts = np.array([50, 40, 31, 30, 9, 8, 7, 3, 2, 1])  # no ties: one tree
    reference = build_huffman(counts)
    np.testing.assert_array_equal(huffman_tree(counts).parent, reference.parent)
    order = np.random.default_rng(0).permutation(len(counts))  # word w has counts[order[w]]
    tree = huffman_tree(counts[order])
    for w, sorted_id in enumerate(order):
        assert tree.code_string(w) == reference.code_string(sorted_id)
    paths = [tree.points[w, :n] for w, n in enumerate(tree.lengths)]
    codes = [tree.codes[w, :n] for w, n in enumerate(tree.lengths)]
    again = tree_from_paths(paths, codes)
    np.testing.assert_array_equal(again.parent, tree.parent)
    np.testing.assert_array_equal(again.branch, tree.branch)


def test_locked_vectors_as_gensim(tmp_path):
    """gensim's wv.vectors_lockf: a word locked at 0 keeps its vector bit for bit, a factor of
    0.5 scales its updates (the model's lockf, ``test_naive``), gensim's one entry broadcasts;
    the factors are saved with the model; another length is refused, not taken modulo."""
    model = Word2Vec(common_texts, min_count=1, vector_size=8, workers=1)
    assert np.array_equal(model.wv.vectors_lockf, [1.0])  # gensim's default: nothing locked
    assert model.semhuff.lockf is None
    model.wv.vectors_lockf = np.ones(len(model.wv), dtype=np.float32)
    model.wv.vectors_lockf[0] = 0.0
    model.wv.vectors_lockf[1] = 0.5
    before = model.wv.vectors.copy()
    model.train(common_texts, total_examples=model.corpus_count, epochs=2)
    np.testing.assert_array_equal(model.wv.vectors[0], before[0])
    assert np.abs(model.wv.vectors[2:] - before[2:]).max() > 0
    np.testing.assert_array_equal(model.semhuff.lockf, model.wv.vectors_lockf)
    model.save(str(tmp_path / "m.model"))
    back = Word2Vec.load(str(tmp_path / "m.model"))
    np.testing.assert_array_equal(back.wv.vectors_lockf, model.wv.vectors_lockf)
    back.wv.vectors_lockf = np.zeros(1, dtype=np.float32)  # one entry: every word frozen
    frozen = back.wv.vectors.copy()
    back.train(common_texts, total_examples=back.corpus_count, epochs=1)
    np.testing.assert_array_equal(back.wv.vectors, frozen)
    back.wv.vectors_lockf = np.ones(3, dtype=np.float32)
    with pytest.raises(UnsupportedArgument, match="vectors_lockf of shape"):
        back.train(common_texts, total_examples=back.corpus_count, epochs=1)


def test_intersect_word2vec_format_freezes_the_imported_vectors(tmp_path):
    """gensim's KeyedVectors.intersect_word2vec_format on the drop-in's wv (lockf=0.0, its
    default): the imported words keep the file's vectors through training."""
    model = Word2Vec(min_count=1, vector_size=8, workers=1)
    model.build_vocab(common_texts)
    path = tmp_path / "pre.txt"
    rows = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    path.write_text("2 8\n" + "".join(w + " " + " ".join(f"{v:.6f}" for v in r) + "\n"
                                      for w, r in zip(["human", "graph"], rows)))
    model.wv.vectors_lockf = np.ones(len(model.wv), dtype=np.float32)  # as in gensim
    model.wv.intersect_word2vec_format(str(path))
    imported = model.wv[["human", "graph"]].copy()
    np.testing.assert_allclose(imported, rows, atol=1e-6)
    others = [w for w in model.wv.index_to_key if w not in ("human", "graph")]
    start = model.wv[others].copy()
    model.train(common_texts, total_examples=model.corpus_count, epochs=3)
    np.testing.assert_array_equal(model.wv[["human", "graph"]], imported)
    assert np.abs(model.wv[others] - start).max() > 0


def test_hs_and_negative_together_as_gensim(tmp_path, lee_path):
    """hs=1 with negative>0: both output layers (semhuff's "hs+ns"), in gensim's shapes; a model
    gensim trained that way loads with both layers, and predictions from its arrays are
    gensim's own."""
    ours = Word2Vec(corpus_file=lee_path, hs=1, negative=5, min_count=3, vector_size=16,
                    epochs=2, workers=1)
    assert ours.semhuff.loss == "hs+ns"
    V = len(ours.wv)
    assert ours.syn1.shape == ours.syn1neg.shape == (V, 16)
    assert np.abs(ours.syn1[:V - 1]).max() > 0 and np.abs(ours.syn1neg).max() > 0
    path = tmp_path / "ours.model"
    ours.save(str(path))
    back = Word2Vec.load(str(path))
    assert (back.hs, back.negative) == (1, 5)
    np.testing.assert_array_equal(back.syn1neg, ours.syn1neg)

    theirs = gensim.models.Word2Vec(corpus_file=lee_path, hs=1, negative=5, min_count=3,
                                    vector_size=16, epochs=2, workers=1, seed=2)
    theirs.save(str(tmp_path / "theirs.model"))
    loaded = Word2Vec.load(str(tmp_path / "theirs.model"))
    assert loaded.semhuff.loss == "hs+ns"
    np.testing.assert_array_equal(loaded.syn1neg, theirs.syn1neg)
    np.testing.assert_array_equal(loaded.syn1[:V - 1], theirs.syn1[:V - 1])
    context = ["government", "minister"]
    want = theirs.predict_output_word(context, topn=5)  # gensim: softmax over syn1neg
    got = loaded.predict_output_word(context, topn=5)
    assert [w for w, _ in got] == [w for w, _ in want]
    np.testing.assert_allclose([p for _, p in got], [p for _, p in want], rtol=1e-4)
    # gensim's score() reads syn1 through its own tree: the same per-sentence log probabilities
    # up to gensim's sigmoid table (its terms beyond +-6 are skipped, semhuff's exact)
    sentences = [["the", "government", "said"], ["police", "are", "searching"]]
    np.testing.assert_allclose(loaded.score(sentences), theirs.score(sentences), rtol=0.05)
