"""Issue 23, training options that gave silent wrong results: ``sample >= 1``, a collapsed
model from ``alpha=5``, ``--clusters 0``, a self-organized run that never re-organises,
``--seed -1``, ``--workers 1000``, a one-word corpus, "1 epochs"."""
import logging

import numpy as np
import pytest

from semhuff import health
from semhuff.cli.train import main as train_main
from semhuff.errors import OptionError, TrainingDiverged, VocabError
from semhuff.model import Word2Vec
from semhuff.vocab import Vocab, gensim_sample_fraction

FAST = ["--epochs", "1", "--dim", "16", "--no-progress", "--workers", "1"]
SMALL = dict(vector_size=16, epochs=1, workers=1, progress=False)


def run(argv, capsys):
    code = train_main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(code, err, *needles):
    assert code == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


# -- 1. sample -------------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", [1, 1.5, 5, 100, -0.1, float("nan")])
def test_semhuff_sample_is_a_fraction_only(sample):
    with pytest.raises(OptionError, match=r"fraction of the corpus \(1e-5 .. 1e-2 are usual"):
        Word2Vec(sample=sample)


def test_cli_sample_one_is_a_one_line_error(tmp_path, capsys, lee_path):
    out = tmp_path / "v.kv"
    code, _, err = run([lee_path, "-o", str(out), *FAST, "--sample", "1"], capsys)
    one_line_error(code, err, "sample", "1e-5 .. 1e-2", "0 disables")
    assert not out.exists()


def test_keep_probabilities_are_word2vecs_formula():
    """By hand: t = sample x retained tokens, keep = (sqrt(c / t) + 1) t / c, capped at 1."""
    vocab = Vocab(["a", "b", "c"], np.array([600, 300, 100]), 1000)
    t = 1e-2 * 1000
    expected = [min(1.0, (np.sqrt(c / t) + 1) * t / c) for c in (600, 300, 100)]
    assert np.allclose(vocab.keep_probabilities(1e-2), expected, rtol=1e-12)
    assert np.all(vocab.keep_probabilities(0) == 1)


@pytest.mark.parametrize("sample", [1, 1.5, 2, 5, 100, 1e-3, 1e-5])
def test_dropin_sample_keeps_what_gensim_keeps(sample, lee_path):
    """gensim reads sample >= 1 as a count (t = int(sample (3 + sqrt 5) / 2)): the drop-in's
    keep thresholds are gensim's own ``sample_int`` (to the rounding of p x 2^32)."""
    from gensim.models import Word2Vec as GensimWord2Vec
    from gensim.models.word2vec import LineSentence

    from semhuff.gensim import Word2Vec as DropIn
    sentences = list(LineSentence(lee_path))
    theirs = GensimWord2Vec(sample=sample, min_count=5)
    theirs.build_vocab(sentences)
    ours = DropIn(sample=sample, min_count=5)
    ours.build_vocab(sentences)
    assert ours.sample == sample  # gensim's value reads back
    vocab = ours.semhuff.vocab
    gensim_int = np.array([theirs.wv.get_vecattr(w, "sample_int") for w in vocab.words], np.int64)
    ours_int = vocab.keep_thresholds(ours.semhuff.sample).astype(np.int64)
    assert np.abs(ours_int - gensim_int).max() <= 2
    assert (ours_int < 2 ** 32 - 1).any()  # some word is down-sampled: the test tests something


def _mean_pair_cosine(vectors, n=1000, pairs=4000, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, min(n, len(vectors)), (2, pairs))
    a, b = a[a != b], b[a != b]
    x, y = vectors[a].astype(np.float64), vectors[b].astype(np.float64)
    return float(np.mean((x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)))


def test_dropin_sample_one_trains_like_gensim(lee_path):
    """Why `sample=1` gave every neighbour at cosine 1.00: not semhuff's trainer (not its
    learning-rate schedule either). gensim with the same keep probabilities gives the same kind
    of model: on lee, CBOW + NS, the mean cosine of random pairs of frequent words is ~0.99 in
    both (word2vec has no output bias: with the frequent words thinned to a few occurrences,
    the input vectors share one large component). The 0.25 reported for gensim came from its
    corpus_file mode, which trained 40,000 of the one-line 3 MB file's 553,142 words an epoch.
    The drop-in now keeps gensim's probabilities, so the two agree."""
    from gensim.models import Word2Vec as GensimWord2Vec
    from gensim.models.word2vec import LineSentence

    from semhuff.gensim import Word2Vec as DropIn
    sentences = list(LineSentence(lee_path))
    theirs = _mean_pair_cosine(GensimWord2Vec(sentences, sample=1, workers=1, seed=1).wv.vectors)
    ours = _mean_pair_cosine(DropIn(sentences, sample=1, workers=1, seed=1).wv.vectors)
    default = _mean_pair_cosine(DropIn(sentences, workers=1, seed=1, sample=1e-2).wv.vectors)
    assert theirs > 0.9 and abs(ours - theirs) < 0.05, (ours, theirs)
    assert default < theirs  # more words kept: less of the shared component


def test_gensim_sample_fraction_edges():
    assert gensim_sample_fraction(1e-3, 50) == 1e-3
    assert gensim_sample_fraction(1, 1000) == 2 / 1000  # int(2.618)
    assert gensim_sample_fraction(1e6, 1000) == 0.0  # t above every count: nothing down-sampled
    with pytest.raises(OptionError):
        gensim_sample_fraction(-1, 1000)


def test_dropin_sample_survives_save_and_load(tmp_path):
    from gensim.test.utils import common_texts

    from semhuff.gensim import Word2Vec as DropIn
    model = DropIn(common_texts, sample=3, min_count=1, vector_size=8, workers=1, epochs=1)
    model.save(str(tmp_path / "m"))
    again = DropIn.load(str(tmp_path / "m"))
    assert again.sample == 3 and again.semhuff.sample == model.semhuff.sample


# -- 2. a run that predicts far worse than an untrained model fails ------------------------------
def test_chance_loss_by_hand():
    """Zero output weights: every binary decision at 1/2 (NS: the target and each noise word;
    HS: each node of the target's path); the class softmax: uniform clusters, uniform words."""
    from semhuff.layers import layer_class
    from semhuff.trees.organizer import SelfOrganizer
    vocab = Vocab(list("abcd"), np.array([4, 2, 1, 1]), 8)
    keep = np.ones(4)
    ns = layer_class("ns").create(vocab, negative=3)
    assert health.chance_loss(ns, vocab.counts, keep) == pytest.approx(4 * np.log(2))
    hs = layer_class("hs").create(vocab)  # Huffman over 4, 2, 1, 1: code lengths 1, 2, 3, 3
    assert sorted(hs.tree.lengths) == [1, 2, 3, 3]
    expected = (4 * 1 + 2 * 2 + 1 * 3 + 1 * 3) / 8 * np.log(2)
    assert health.chance_loss(hs, vocab.counts, keep) == pytest.approx(expected)
    classes = layer_class("class").create(vocab, clusters=2)
    o = classes.organizer
    sizes = np.bincount(o.cluster_of, minlength=2)[o.cluster_of]
    expected = np.log(2) + (vocab.counts * np.log(sizes)).sum() / 8
    assert health.chance_loss(classes, vocab.counts, keep) == pytest.approx(expected)
    assert isinstance(o, SelfOrganizer)
    both = layer_class("hs+ns").create(vocab, negative=3)  # the two losses are summed
    assert health.chance_loss(both, vocab.counts, keep) == pytest.approx(
        (4 * 1 + 2 * 2 + 1 * 3 + 1 * 3) / 8 * np.log(2) + 4 * np.log(2))


@pytest.mark.parametrize("loss", ["hs", "ns"])
def test_alpha_5_fails_and_writes_nothing(loss, tmp_path, capsys, lee_path):
    """Issue 23.2: finite but exploded weights (loss per prediction ~10^8 nats, every neighbour
    at 1.00) used to be written with exit 0."""
    out = tmp_path / "v.kv"
    out.write_bytes(b"old vectors")
    code, stdout, err = run([lee_path, "-o", str(out), *FAST, "--alpha", "5", "--loss", loss],
                            capsys)
    one_line_error(code, err)  # NS's loss becomes NaN (the trainer's check), HS's does not
    assert ("training failed in epoch 1" in err and "alpha=5 is too high" in err
            or "training diverged" in err and "learning rate 5.0 too high" in err)
    assert out.read_bytes() == b"old vectors" and stdout == ""


def test_failed_epoch_is_detected_before_the_next():
    with pytest.raises(TrainingDiverged, match=r"epoch 2: its loss per prediction \(3e\+08\) is "
                                               r"more than 2 times an untrained model's \(6.96\)"):
        health.check_epoch(3e8, 6.96, 1, 5.0)
    health.check_epoch(8.45, 6.96, 0, 0.25)  # lee, HS, alpha 0.25: epoch 1 (then 6.29)


def test_alpha_far_above_usual_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="semhuff.model"):
        Word2Vec(alpha=0.5)
    assert "alpha=0.5 is far above" in caplog.text


@pytest.mark.parametrize("options", [
    dict(), dict(sg=0), dict(loss="ns"), dict(loss="ns", sg=0), dict(sample=0),
    dict(sample=1e-5), dict(vector_size=4), dict(loss="class"), dict(loss="hs-self-organized"),
    dict(epochs=3, vector_size=100, loss="ns"), dict(epochs=3, vector_size=100, alpha=0.25),
    dict(loss="hs+ns"), dict(loss="hs+ns", sg=0),
])
def test_sound_small_runs_stay_far_below_the_failure_line(options, lee_path):
    """The evidence for ``health.WORSE_THAN_CHANCE`` (2): the runs tests make (dim 16, 1 epoch,
    lee) end at or below the untrained model's loss (sample=1e-5 keeps 12% of lee: 1.004x)."""
    model = Word2Vec(lee_path, **{**SMALL, **options})
    keep = model.vocab.keep_probabilities(model.sample)
    chance = health.chance_loss(model.layer, model.vocab.counts, keep)
    assert model.reports[-1].epochs[-1].loss_per_pair < 1.05 * chance


def test_down_sampling_that_keeps_little_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="semhuff.health"):
        health.warn_down_sampling(np.array([1000, 10]), np.array([0.01, 1.0]))
    assert "down-sampling keeps only 2% of the words" in caplog.text


# -- 3. --clusters 0 -------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["hs-self-organized", "class"])
@pytest.mark.parametrize("clusters", ["0", "-3"])
def test_clusters_zero_is_an_error(loss, clusters, tmp_path, capsys, lee_path):
    out = tmp_path / "v.kv"
    code, _, err = run([lee_path, "-o", str(out), *FAST, "--loss", loss, "--clusters", clusters],
                       capsys)
    one_line_error(code, err, "clusters must be an integer >= 1")
    assert not out.exists()


def test_clusters_zero_is_an_error_everywhere(lee_path):
    from semhuff.trees.organizer import SelfOrganizer
    from semhuff.trees import make_tree
    vocab = Vocab(list("abcdefgh"), np.arange(8, 0, -1), 36)
    for make in (lambda: SelfOrganizer(clusters=0),
                 lambda: make_tree("clusters", vocab, clusters=0),
                 lambda: Word2Vec(loss="class", layer_options={"clusters": 0})):
        with pytest.raises(OptionError, match="clusters"):
            make()
    organizer = SelfOrganizer()  # not given: the default, about sqrt(V)
    organizer.start(np.arange(100, 0, -1))
    assert organizer.n_clusters == 10


# -- 4. self-organized runs re-organise on a small corpus ------------------------------------------
def test_default_reassignment_scales_with_the_run(lee_path, caplog):
    """Not given, K is chosen from the run: about 10 re-assignments in its first third (lee is
    60k words: small chunks, so that the chunk boundaries, where hooks run, fall often)."""
    from semhuff.trees.organizer import AUTO_REASSIGNMENTS, auto_reassign_every
    with caplog.at_level(logging.WARNING):
        model = Word2Vec(lee_path, loss="hs-self-organized", chunk_words=300,
                         **{**SMALL, "epochs": 2})
    o = model.layer.organizer
    total = 2 * model.vocab.retained_tokens
    assert o.reassign_every is None and o.every == auto_reassign_every(int(total / 3))
    assert o.every == int(total / 3) // AUTO_REASSIGNMENTS
    # at the first chunk boundary past each multiple of K, while under a third of the run
    assert AUTO_REASSIGNMENTS - 1 <= len(o.history) <= AUTO_REASSIGNMENTS
    assert "never be re-assigned" not in caplog.text
    assert auto_reassign_every(10 ** 9) == 1_000_000  # long runs: the measured K (docs)


def test_settings_that_allow_no_reassignment_are_said_before_training(tmp_path, lee_path):
    """semhuff-train's default log level shows warnings: the user reads it before the run."""
    import subprocess
    import sys
    out = tmp_path / "v.kv"
    proc = subprocess.run([sys.executable, "-m", "semhuff.cli.train", lee_path, "-o", str(out),
                           *FAST, "-q", "--loss", "hs-self-organized", "--reassign-every",
                           "1000000"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "will never be re-assigned: reassign_every is 1,000,000 words" in proc.stderr
    assert "lower --reassign-every (e.g. 1,536) or leave it out" in proc.stderr


# A default run on a small corpus must re-organise as the paper does, periodically (Shen et al.
# re-assign every K steps throughout; §3.5 reads it as EM, which needs several E-steps to move
# from the random start). The default K asks for AUTO_REASSIGNMENTS (10) in the first third;
# chunks end at sentence ends, so one or two may fall past it. At least half of them: 5, which
# is also where the share of words that move has fallen from ~all (the first, from random
# clusters) to about a third on lee (measured: 98%, 48%, 65%, 41%, 32%, ...).
MIN_DEFAULT_REASSIGNMENTS = 5


@pytest.mark.parametrize("loss", ["hs-self-organized", "class"])
def test_a_default_run_on_lee_reassigns_several_times(tmp_path, capsys, lee_path, loss):
    """lee is 60k tokens (46k in the vocabulary) an epoch: one default chunk of 100,000 tokens
    an epoch, so re-assignments, which run between chunks, could only come at the epochs' ends
    (before: 1 in 5 epochs). The run cuts its chunks to K/2 words instead; the count is what
    semhuff-tree clusters reports from the saved model."""
    from semhuff.cli.tree import main as tree_main
    from semhuff.trees.organizer import AUTO_REASSIGNMENTS
    model = tmp_path / "m.npz"
    code, _, err = run([lee_path, "-o", str(model), "--loss", loss, "--no-progress",
                        "--dim", "16"], capsys)  # the defaults but the size: 5 epochs, all CPUs
    assert code == 0 and "never be re-assigned" not in err, err
    assert tree_main(["clusters", str(model), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    count = int(out.split(" re-assignment")[0].rsplit(" ", 1)[1])
    assert MIN_DEFAULT_REASSIGNMENTS <= count <= AUTO_REASSIGNMENTS, out
    history = Word2Vec.load(model, progress=False).layer.organizer.history_dict()
    assert len(history["words_done"]) == count
    assert history["words_done"][-1] <= 5 * 46_084 / 3  # all within the first third


def test_runs_of_other_layers_keep_their_chunks(lee_path):
    """Only the re-assigning hook asks for smaller chunks: another layer's run, with or without
    a hook of its own every few words, keeps the chunks it had (speed, and the same numbers),
    and so does a self-organized run whose K is a chunk or more."""
    from semhuff.hooks import Hook

    class Often(Hook):
        every_words = 1_000
        calls = 0

        def on_words(self, context):
            Often.calls += 1
    for options, chunk_words, chunks in [(dict(loss="hs"), 100_000, 1), (dict(loss="ns"), 100_000, 1),
                                         (dict(loss="hs", hooks=[Often()]), 100_000, 1),
                                         (dict(loss="hs"), 20_000, 3),
                                         (dict(loss="hs-self-organized",
                                               layer_options=dict(reassign_every=20_000)), 20_000, 3)]:
        model = Word2Vec(lee_path, **options, chunk_words=chunk_words, **SMALL)
        report = model.reports[-1]
        assert len(report.chunks) == chunks, options  # lee: 59,890 tokens
        assert all(c.raw_words >= chunk_words for c in report.chunks[:-1])
    assert Often.calls == 0  # one chunk: no boundary inside the epoch, as before


def test_a_default_run_shorter_than_a_chunk_reassigns_and_impossible_ones_are_warned(lee_path, caplog):
    """lee, 1 epoch: 46,084 input words, re-assigning during the first 15,361 (K 1,536), where
    the default chunks hold ~77,000 (100,000 tokens): before, no re-assignment and a warning;
    now the chunks are cut (to 1,000 words, the least) and it re-assigns. A share so small that
    even the least chunk ends past it is still said."""
    with caplog.at_level(logging.WARNING, logger="semhuff.trees.organizer"):
        model = Word2Vec(lee_path, loss="hs-self-organized", **SMALL)
    assert len(model.layer.organizer.history) >= MIN_DEFAULT_REASSIGNMENTS
    assert "never" not in caplog.text
    assert len(model.reports[-1].chunks) > 30  # ~1,300 tokens a chunk, not 1 chunk
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="semhuff.trees.organizer"):
        model = Word2Vec(lee_path, loss="hs-self-organized",
                         layer_options=dict(reassign_until=0.01), **SMALL)
    assert len(model.layer.organizer.history) == 0
    assert "will never be re-assigned: re-assignments run between chunks of about 1,000" in caplog.text


# -- 10. --seed -1 ---------------------------------------------------------------------------------
def test_negative_seed_is_a_one_line_error(tmp_path, capsys, lee_path):
    code, _, err = run([lee_path, "-o", str(tmp_path / "v.kv"), *FAST, "--seed", "-1"], capsys)
    one_line_error(code, err, "seed must be an integer in 0..4294967295, got -1")
    with pytest.raises(OptionError, match="seed"):
        Word2Vec(seed=2 ** 32)
    Word2Vec([["a", "b", "c"]] * 20, min_count=1, seed=2 ** 32 - 1, **SMALL)  # gensim's top


# -- rough edges -----------------------------------------------------------------------------------
def test_workers_beyond_the_cpus_are_capped_with_a_warning(monkeypatch, caplog):
    from semhuff import cpu_session
    from semhuff.layers import layer_class
    monkeypatch.setattr(cpu_session, "available_cpus", lambda: 2)
    vocab = Vocab(list("abcd"), np.array([4, 3, 2, 1]), 10)
    layer = layer_class("hs").create(vocab)
    layer.allocate(4, 8)
    with caplog.at_level(logging.WARNING, logger="semhuff.cpu_session"):
        session = cpu_session.CpuDevice().open(np.zeros((4, 8), np.float32), layer, 1000)
    assert session.concurrency == 2
    assert "workers=1000 is more than the 2 CPUs available" in caplog.text
    assert cpu_session.CpuDevice().open(np.zeros((4, 8), np.float32), layer, 2).concurrency == 2


@pytest.mark.parametrize("loss", ["hs", "ns", "class", "hs-self-organized"])
def test_one_word_corpus_says_the_real_problem(loss, tmp_path, capsys):
    corpus = tmp_path / "one.txt"
    corpus.write_text("hello hello hello\n" * 10)
    out = tmp_path / "v.kv"
    code, _, err = run([str(corpus), "-o", str(out), *FAST, "--loss", loss], capsys)
    one_line_error(code, err, "needs at least 2 words in the vocabulary",
                   "the corpus has only 1 distinct word: 'hello'")
    assert "min_count" not in err and not out.exists()


def test_too_few_words_at_min_count_names_min_count():
    with pytest.raises(VocabError, match=r"only 1 word reaches min_count=5 \(a lower min_count"):
        Word2Vec([["a"] * 5 + ["b", "c"]] * 1, min_count=5, **SMALL)
    with pytest.raises(VocabError, match="negative sampling needs at least 2 words"):
        Word2Vec([["a"] * 5 + ["b", "c"]] * 1, min_count=5, loss="ns", **SMALL)


def test_one_epoch_is_singular():
    from semhuff.trainer import EpochStats, TrainReport
    report = TrainReport(seconds=1.0, epochs=[EpochStats(raw_words=10, pairs=1)], hook_calls=1)
    assert report.summary().startswith("1 epoch, 10 raw words") and "1 call," in report.summary()
    report.epochs.append(EpochStats())
    assert report.summary().startswith("2 epochs,")
