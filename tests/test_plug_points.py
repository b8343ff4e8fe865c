"""The plug points, used the way a developer outside the package would: a custom output layer
registered here (not in semhuff), training-time hooks, held-out scoring, and layers that save and
restore their whole state."""
import threading
import time

import numba
import numpy as np
import pytest

import naive
from semhuff import Word2Vec
from semhuff.corpus import Corpus
from semhuff.errors import ModelFileError, OptionError, TrainingDiverged
from semhuff.hooks import Hook
from semhuff.layers import OUTPUT_LAYERS, OutputLayer, register_output_layer
from semhuff.options import Option
from semhuff.trees.base import Tree

SMALL = dict(vector_size=16, min_count=3, epochs=2, workers=1, progress=False)


# -- a custom output layer, defined outside the package ---------------------------------------------

@numba.njit(nogil=True)
def full_softmax_body(h, w, weights, larg, alpha, err, state):
    """Predict w by a full softmax over every output row; count the predictions per word in the
    layer's own array (its learned statistic)."""
    seen, = larg
    V, D = weights.shape
    scores = np.empty(V)
    top = -1e300
    for v in range(V):
        s = 0.0
        for d in range(D):
            s += h[d] * weights[v, d]
        scores[v] = s
        top = max(top, s)
    total = 0.0
    for v in range(V):
        scores[v] = np.exp(scores[v] - top)
        total += scores[v]
    nll = -np.log(scores[w] / total)
    for d in range(D):
        err[d] = 0.0
    for v in range(V):
        g = ((1.0 if v == w else 0.0) - scores[v] / total) * alpha
        for d in range(D):
            err[d] += g * weights[v, d]
            weights[v, d] += g * h[d]
    seen[w] += 1
    return nll, state


@register_output_layer("full-softmax-test")
class FullSoftmax(OutputLayer):
    OPTIONS = (Option("note", str, "", "a note kept with the layer"),)

    def __init__(self, note: str = ""):
        super().__init__()
        self.note = note
        self.seen = None

    def n_rows(self, n_words):
        return n_words

    def allocate(self, n_words, dim):
        super().allocate(n_words, dim)
        self.seen = np.zeros(n_words, np.int64)

    def kernel_args(self):
        return (self.seen,)

    def custom_body(self):
        return full_softmax_body

    def config(self):
        return {"note": self.note}

    def arrays(self):
        return {**super().arrays(), "seen": self.seen}

    def load_arrays(self, arrays):
        super().load_arrays(arrays)
        self.seen = np.array(arrays["seen"], dtype=np.int64)


@pytest.fixture(scope="module")
def small_lee(lee_path, tmp_path_factory):
    """The first 40 documents of lee: a full softmax over its 459 words stays cheap."""
    path = tmp_path_factory.mktemp("lee") / "lee40.txt"
    lines = [" ".join(s) for _, s in zip(range(40), Corpus(lee_path))]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("sg", [1, 0])
def test_custom_layer_trains_saves_loads_and_continues(tmp_path, small_lee, sg):
    model = Word2Vec(small_lee, loss="full-softmax-test", layer_options={"note": "mine"},
                     sg=sg, alpha=0.2, sample=0, **{**SMALL, "epochs": 3})
    layer = model.layer
    assert isinstance(layer, FullSoftmax) and layer.note == "mine"
    losses = [e.loss_per_pair for e in model.reports[0].epochs]
    assert max(losses) < np.log(len(model.vocab)) - 0.5  # it learns: uniform would be log V
    assert layer.seen.sum() == sum(e.pairs for e in model.reports[0].epochs)  # the body's statistic

    model.save(tmp_path / "m.npz")
    back = Word2Vec.load(tmp_path / "m.npz", progress=False)
    assert isinstance(back.layer, FullSoftmax) and back.layer.note == "mine"
    np.testing.assert_array_equal(back.layer.weights, layer.weights)
    np.testing.assert_array_equal(back.layer.seen, layer.seen)
    np.testing.assert_array_equal(back.syn0, model.syn0)

    # continuing after load = continuing without it, bit for bit (one worker, same seed)
    model.train(small_lee, epochs=1)
    back.train(small_lee, epochs=1)
    np.testing.assert_array_equal(back.syn0, model.syn0)
    np.testing.assert_array_equal(back.layer.weights, model.layer.weights)
    np.testing.assert_array_equal(back.layer.seen, model.layer.seen)
    assert back.layer.seen.sum() > layer.seen.sum() - model.reports[-1].epochs[0].pairs


def test_unregistered_layer_in_a_model_file_is_a_clear_error(tmp_path, small_lee):
    model = Word2Vec(small_lee, loss="full-softmax-test", **{**SMALL, "epochs": 1})
    model.save(tmp_path / "m.npz")
    cls = OUTPUT_LAYERS.pop("full-softmax-test")
    try:
        with pytest.raises(ModelFileError, match="full-softmax-test.*not registered"):
            Word2Vec.load(tmp_path / "m.npz")
        with pytest.raises(OptionError, match="unknown output layer"):
            Word2Vec(loss="full-softmax-test")
    finally:
        OUTPUT_LAYERS["full-softmax-test"] = cls


def test_cli_choices_come_from_the_registry():
    from semhuff.cli.train import build_parser
    loss = next(a for a in build_parser()._actions if a.dest == "loss")
    assert {"hs", "ns", "full-softmax-test"} <= set(loss.choices)


# -- hooks -----------------------------------------------------------------------------------------

class QuiescenceProbe(Hook):
    """Every K words: the weights must not move while the hook runs (nothing in flight)."""

    def __init__(self, every):
        self.every_words = every
        self.recent_words = every
        self.calls = []
        self.events = []

    def on_words(self, ctx):
        vectors, out = ctx.vectors(), ctx.layer.weights
        before, before_out = vectors.copy(), out.copy()
        time.sleep(0.03)  # two workers would move some of 1,500 rows in this time
        moved = not (np.array_equal(vectors, before) and np.array_equal(out, before_out))
        self.calls.append((ctx.words_done, sum(len(c.ids) for c in ctx.recent_chunks), moved))

    def on_epoch_begin(self, ctx):
        self.events.append(("begin", ctx.epoch))

    def on_epoch_end(self, ctx):
        self.events.append(("end", ctx.epoch, ctx.words_done, ctx.predictions))


def test_hooks_every_k_words_see_quiescent_weights(lee_path):
    every = 20_000
    probe = QuiescenceProbe(every)
    model = Word2Vec(vector_size=16, min_count=3, epochs=2, workers=2, progress=False,
                     chunk_words=2_000, hooks=[probe])
    model.build_vocab(lee_path)
    # control: while training (no hook running), the same check does see the weights move
    moving = []

    def watch():
        while not stop.is_set():
            before = model.syn0.copy()
            time.sleep(0.03)
            moving.append(not np.array_equal(before, model.syn0))

    stop = threading.Event()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        report = model.train(lee_path)
    finally:
        stop.set()
        watcher.join()
    assert any(moving), "control: training never moved the weights while watched"

    total = 2 * model.vocab.retained_tokens
    assert len(probe.calls) == (total - 1) // every  # one per multiple of K before the end
    for k, (done, recent, moved) in enumerate(probe.calls, start=1):
        assert not moved, f"weights moved during hook call {k}"
        assert k * every <= done < k * every + 2_100  # at the first chunk boundary past k*K
        assert 0 < recent <= done
    assert probe.events == [("begin", 0), ("end", 0, total // 2, report.epochs[0].pairs),
                            ("begin", 1), ("end", 1, total, report.epochs[1].pairs)]
    assert report.hook_calls == len(probe.calls) + 4 + 2  # + epoch begin/end, train begin/end


class ShrinkOutput(Hook):
    """A hook may change the weights: the next chunk trains on what it left."""
    every_words = 5_000

    def on_words(self, ctx):
        ctx.layer.weights[:] = 0.0
        self.last = ctx.words_done


def test_a_hook_can_change_the_weights(lee_path):
    hook = ShrinkOutput()
    model = Word2Vec(lee_path, hooks=[hook], chunk_words=1_000, **SMALL)
    assert hook.last > 0 and np.abs(model.layer.weights).max() > 0  # trained on after the reset
    plain = Word2Vec(lee_path, chunk_words=1_000, **SMALL)
    assert not np.array_equal(plain.syn0, model.syn0)


# -- scoring ---------------------------------------------------------------------------------------

def _held_out(lee_path, n=40):
    return [s for _, s in zip(range(n), Corpus(lee_path))]


def _random_tree(n_words, seed=0):
    """Any full binary tree: random pairs merged until one root is left."""
    rng = np.random.default_rng(seed)
    parent = np.full(2 * n_words - 1, -1, np.int32)
    branch = np.zeros(2 * n_words - 1, np.int8)
    free = list(range(n_words))
    for new in range(n_words, 2 * n_words - 1):
        a, b = (free.pop(rng.integers(len(free))) for _ in range(2))
        parent[[a, b]] = new
        branch[b] = 1
        free.append(new)
    return Tree(parent, branch, kind="random")


@pytest.mark.parametrize("sg", [1, 0])
@pytest.mark.parametrize("tree", ["huffman", "random"])
def test_score_matches_the_float64_reference(lee_path, sg, tree):
    model = Word2Vec(vector_size=16, min_count=3, epochs=2, workers=2, progress=False, sg=sg)
    model.build_vocab(lee_path)
    if tree == "random":
        model.tree_spec = _random_tree(len(model.vocab))
        model.set_vocab(model.vocab)
    model.train(lee_path)
    held_out = _held_out(lee_path)
    report = model.score(held_out)
    t = model.tree
    paths = naive.paths(t.parent, t.branch, t.n_words)
    nll, n = naive.score(held_out, model.vocab.index, model.syn0, model.layer.weights, paths,
                         model.window, sg=bool(sg))
    assert report.predictions == n > 1000
    assert report.nll == pytest.approx(nll, rel=1e-5)
    assert report.perplexity == pytest.approx(np.exp(nll / n), rel=1e-5)
    assert report.tokens == sum(len(s) for s in held_out)


def test_training_beats_the_unigram_baseline_on_held_out_text(lee_path):
    """With zero output weights, HS over a Huffman tree is the unigram model (P(w) =
    2^-code length); trained without down-sampling, the model beats it on held-out documents.
    (Trained with down-sampling it predicts the flattened, down-sampled distribution, and can
    score worse than this baseline on full text: see semhuff.scoring.)"""
    docs = list(Corpus(lee_path))
    model = Word2Vec(vector_size=16, min_count=3, epochs=3, workers=1, progress=False, sample=0)
    model.build_vocab(docs)
    untrained = model.score(docs[250:])
    # every branch 1/2: the nll of a prediction is ln 2 x the centre's code length (each centre
    # counted once per context, so a token-weighted mean matches to a few percent)
    held_ids = [model.vocab.index[w] for s in docs[250:] for w in s if w in model.vocab.index]
    assert untrained.mean_nll == pytest.approx(np.log(2) * model.tree.lengths[held_ids].mean(), rel=0.05)
    model.train(docs[:250])
    assert model.score(docs[250:]).perplexity < untrained.perplexity


def test_negative_sampling_cannot_be_scored(lee_path):
    model = Word2Vec(lee_path, loss="ns", **SMALL)
    with pytest.raises(OptionError, match="normalised"):
        model.score(_held_out(lee_path))


def test_divergence_is_an_error(lee_path):
    with pytest.raises(TrainingDiverged):
        Word2Vec(lee_path, loss="ns", alpha=50.0, **SMALL)


# -- persistence of the built-in layers ------------------------------------------------------------

@pytest.mark.parametrize("options", [dict(loss="hs", hs_order="batched"), dict(loss="ns", negative=3)])
def test_builtin_layers_restore_their_state_and_continue(tmp_path, lee_path, options):
    model = Word2Vec(lee_path, word_stats=True, **SMALL, **options)
    model.save(tmp_path / "m.npz")
    back = Word2Vec.load(tmp_path / "m.npz", progress=False)
    assert type(back.layer) is type(model.layer) and back.layer.config() == model.layer.config()
    for name, array in model.layer.arrays().items():
        np.testing.assert_array_equal(back.layer.arrays()[name], array, err_msg=name)
    assert back.layer.word_stats[:, 0].sum() == sum(e.pairs for e in model.reports[0].epochs)
    model.train(lee_path, epochs=1)
    back.train(lee_path, epochs=1)
    np.testing.assert_array_equal(back.syn0, model.syn0)
    np.testing.assert_array_equal(back.layer.word_stats, model.layer.word_stats)


def test_format_1_model_files_still_load(tmp_path, lee_path):
    """Models saved before layers owned their state (format 1) load as the same model."""
    import json
    model = Word2Vec(lee_path, **SMALL)
    meta = {"format_version": 1, "params": {k: v for k, v in model.params().items()
                                            if k not in ("word_stats", "device", "layer_options")},
            "tree": "huffman", "total_tokens": model.vocab.total_tokens, "trained_epochs": 2}
    from semhuff.vectors_io import pack_words
    np.savez(tmp_path / "old.npz", syn0=model.syn0, vocab_counts=model.vocab.counts,
             vocab_words=pack_words(model.vocab.words), meta=np.array(json.dumps(meta)),
             output_weights=model.layer.weights, **model.tree.to_arrays())
    back = Word2Vec.load(tmp_path / "old.npz", progress=False)
    np.testing.assert_array_equal(back.layer.weights, model.layer.weights)
    np.testing.assert_array_equal(back.tree.points, model.tree.points)
    assert back.score(_held_out(lee_path)).nll == pytest.approx(model.score(_held_out(lee_path)).nll)
