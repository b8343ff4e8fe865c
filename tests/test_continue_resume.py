"""Continued training and resume (issue 23, items 5 and 6, and the report's loss curve).

* Continuing a model on a corpus of another length: the learning rate the kernels see falls from
  alpha to min_alpha over *that* corpus x epochs (hand formula: alpha - (alpha - min_alpha) i / N,
  N counted here by splitting the file), and the progress bar's total is its words x epochs.
* ``--resume`` checks the whole corpus: a prefix, an edited or an unrelated corpus is refused
  (one line, nothing written), a finished checkpoint included; the same text resumes.
* The report's chunks are in corpus order, whatever order two workers finished them in.
"""
import json
import shutil

import numpy as np
import pytest

import alpha_recorder
from test_checkpoint import Crash
import semhuff.model
import semhuff.trainer
from semhuff import Word2Vec
from semhuff.checkpoint import read_state
from semhuff.cli.train import main as train_main
from semhuff.errors import CheckpointError
from semhuff.trainer import ChunkStats, TrainReport, record_chunk
from semhuff.training_report import report_dict

ALPHA, MIN_ALPHA = 0.05, 0.002


RECORDER = dict(loss=alpha_recorder.NAME, sg=0, sample=0, alpha=ALPHA,
                min_alpha=MIN_ALPHA, vector_size=4, min_count=2, window=2, workers=1,
                chunk_words=1_000, progress=False)


def _lines(path):
    return [line for line in open(path, encoding="utf-8").read().splitlines() if line.split()]


@pytest.fixture(scope="module")
def lee_parts(lee_path, tmp_path_factory):
    """lee's first 60 and first 240 documents (about 11k and 46k words)."""
    folder = tmp_path_factory.mktemp("lee")
    lines = _lines(lee_path)
    out = {}
    for n in (60, 240):
        path = folder / f"lee{n}.txt"
        path.write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
        out[n] = str(path)
    return out


def _in_vocab_words(path, vocab):
    """Independent count: whitespace tokens of the file that are in the vocabulary."""
    return sum(1 for line in _lines(path) for w in line.split() if w in vocab.index)


def _check_rates(model, path, epochs):
    """The rates of the last call: one per in-vocabulary word (CBOW, no down-sampling, every
    sentence has two words or more), falling linearly to min_alpha over epochs x words."""
    layer = model.layer
    n = int(layer.count[0])
    words = _in_vocab_words(path, model.vocab)
    assert n == epochs * words
    rates = layer.rates[:n].astype(np.float64)
    expected = ALPHA - (ALPHA - MIN_ALPHA) * np.arange(n) / n
    job = RECORDER["chunk_words"] + max(len(line.split()) for line in _lines(path))
    slack = (ALPHA - MIN_ALPHA) * job / n + 1e-6  # the rate is set per sentence or per job
    assert np.all(np.abs(rates - expected) <= slack)
    assert rates[-1] == pytest.approx(MIN_ALPHA, abs=slack)
    return rates


@pytest.mark.parametrize("first, then", [(240, 60), (60, 240)])
def test_continued_training_decays_over_the_new_corpus(lee_parts, first, then):
    """A second train() call on a corpus 4x shorter (before: the rate ended at 3/4 of the way
    down) or 4x longer (before: min_alpha a quarter of the way in)."""
    model = Word2Vec(lee_parts[first], epochs=1, **RECORDER)
    _check_rates(model, lee_parts[first], 1)
    model.layer.reset()
    model.train(lee_parts[then], epochs=2)
    rates = _check_rates(model, lee_parts[then], 2)
    half = len(rates) // 2
    assert rates[half] == pytest.approx((ALPHA + MIN_ALPHA) / 2, abs=0.002)


def test_a_loaded_model_continued_on_more_text_reaches_min_alpha(lee_parts, tmp_path):
    """The README's ``model.save(); Word2Vec.load(); model.train("more.txt", epochs=1)``."""
    model = Word2Vec(lee_parts[240], epochs=1, **RECORDER)
    model.save(tmp_path / "m.npz")
    loaded = Word2Vec.load(tmp_path / "m.npz", progress=False)
    loaded.train(lee_parts[60], epochs=1)
    _check_rates(loaded, lee_parts[60], 1)


class _Bar:
    """Stands for tqdm: what total the training bar was given and how far it went."""
    made = []

    def __init__(self, total, enabled):
        self.total, self.n = total, 0
        _Bar.made.append(self)

    def update(self, n):
        self.n += n

    def set_postfix_str(self, *a, **k):
        pass

    def close(self):
        pass


def test_cli_init_model_progress_counts_the_new_corpus(lee_parts, tmp_path, monkeypatch, capsys):
    """``semhuff-train more.txt --init-model model.npz -o model2.npz --epochs 2`` (the
    README's command): the bar's total is the new corpus's words x 2 and it reaches it."""
    assert train_main([lee_parts[240], "-o", str(tmp_path / "m.npz"), "--epochs", "1",
                       "--dim", "8", "--min-count", "2", "--workers", "1", "-q"]) == 0
    monkeypatch.setattr(semhuff.trainer, "_progress_bar", _Bar)
    _Bar.made.clear()
    code = train_main([lee_parts[60], "--init-model", str(tmp_path / "m.npz"), "-o",
                       str(tmp_path / "m2.npz"), "--epochs", "2", "--workers", "1"])
    assert code == 0, capsys.readouterr().err
    words = sum(len(line.split()) for line in _lines(lee_parts[60]))
    [bar] = _Bar.made
    assert bar.total == 2 * words and bar.n == bar.total
    report = Word2Vec.load(tmp_path / "m2.npz", progress=False)
    assert report.train_calls == 2


def _no_counting(*args, **kwargs):
    raise AssertionError("the corpus was counted again")


def test_the_corpus_the_vocabulary_was_built_from_is_not_counted_again(lee_parts, monkeypatch):
    monkeypatch.setattr(semhuff.model, "count_words", _no_counting)
    Word2Vec(lee_parts[60], **{**RECORDER, "epochs": 1})
    model = Word2Vec(**{**RECORDER, "epochs": 1})
    model.build_vocab(lee_parts[60])
    model.train(lee_parts[60])
    model.train(lee_parts[60])  # again on the same, unchanged file
    sentences = [line.split() for line in _lines(lee_parts[60])]
    Word2Vec(sentences, **{**RECORDER, "epochs": 1})


def test_gensim_drop_in_takes_its_totals(lee_parts, monkeypatch):
    """The drop-in's schedule comes from gensim's total_examples / total_words, as gensim's:
    never from a count of its own."""
    from semhuff.gensim import Word2Vec as GensimWord2Vec
    monkeypatch.setattr(semhuff.model, "count_words", _no_counting)
    sentences = [line.split() for line in _lines(lee_parts[60])]
    model = GensimWord2Vec(sentences, vector_size=8, min_count=2, workers=1, epochs=1)
    model.train(sentences, total_examples=model.corpus_count, epochs=1)
    model.train(sentences, total_words=model.corpus_total_words, epochs=1)


def test_a_one_shot_iterator_on_a_loaded_model_warns(lee_parts, tmp_path, caplog):
    model = Word2Vec(lee_parts[60], epochs=1, **{**RECORDER, "loss": "hs"})
    model.save(tmp_path / "m.npz")
    loaded = Word2Vec.load(tmp_path / "m.npz", progress=False)
    loaded.train((line.split() for line in _lines(lee_parts[240])), epochs=1)
    assert "words_per_epoch" in caplog.text


# -- item 6: --resume checks the whole corpus -----------------------------------------------------

SMALL = dict(vector_size=16, min_count=3, epochs=2, workers=1, seed=3, progress=False,
             chunk_words=2000)




def _killed(tmp_path, corpus, at=10_000):
    """A checkpoint of a run on ``corpus`` killed after ``at`` words of its first epoch."""
    model = Word2Vec(**SMALL)
    model.build_vocab(corpus)
    path = tmp_path / "run.ckpt.npz"
    with pytest.raises(KeyboardInterrupt):
        model.train(corpus, hooks=[Crash(at)], checkpoint=path, checkpoint_every=0)
    assert read_state(path)["position"]["epoch"] == 0
    return path


def _prefix(lee_path, tmp_path, share=2 / 3):
    text = open(lee_path, "rb").read()
    cut = text.index(b"\n", int(len(text) * share)) + 1  # whole lines: a plausible file
    path = tmp_path / "prefix.txt"
    path.write_bytes(text[:cut])
    return path


def test_resume_on_a_prefix_of_the_corpus_is_refused(tmp_path, lee_path):
    """The checkpoint was taken inside the prefix: the trained chunks match, the rest does not."""
    ckpt = _killed(tmp_path, lee_path)
    with pytest.raises(CheckpointError, match=r"prefix.txt has [\d,]+ bytes where the "
                                              r"checkpoint's run read [\d,]+ \(a part of it\?\)"):
        Word2Vec.resume(ckpt, str(_prefix(lee_path, tmp_path)), progress=False)


def test_cli_resume_on_a_prefix_or_another_corpus_writes_nothing(tmp_path, lee_path, capsys):
    ckpt = _killed(tmp_path, lee_path)
    before = ckpt.read_bytes()
    out = tmp_path / "v.txt"
    out.write_text("old\n")
    reordered = tmp_path / "reversed.txt"  # the same words, the lines in reverse order
    reordered.write_text("\n".join(_lines(lee_path)[::-1]) + "\n", encoding="utf-8")
    for corpus in (str(_prefix(lee_path, tmp_path)), str(reordered)):
        code = train_main([corpus, "-o", str(out), "--resume", str(ckpt), "--checkpoint",
                           str(ckpt), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "differs from the one" in err, err
        assert out.read_text() == "old\n" and ckpt.read_bytes() == before


def test_a_finished_checkpoint_with_another_corpus_is_refused(tmp_path, lee_path, capsys):
    ckpt, out = tmp_path / "c.npz", tmp_path / "v.txt"
    args = ["--min-count", "3", "--dim", "8", "--epochs", "1", "--workers", "1", "-q"]
    assert train_main([lee_path, "-o", str(out), "--checkpoint", str(ckpt), *args]) == 0
    assert read_state(ckpt)["complete"]
    finished = out.read_bytes()
    other = _prefix(lee_path, tmp_path, 0.5)
    out.write_text("old\n")
    code = train_main([str(other), "-o", str(out), "--resume", str(ckpt), *args])
    assert code == 2 and "differs from the one" in capsys.readouterr().err
    assert out.read_text() == "old\n"
    with pytest.raises(CheckpointError, match="differs from the one"):
        Word2Vec.resume(ckpt, str(other), progress=False)
    # the same text under another name resumes (to the finished result)
    copy = tmp_path / "copy.txt"
    shutil.copy(lee_path, copy)
    assert train_main([str(copy), "-o", str(out), "--resume", str(ckpt), *args]) == 0
    assert out.read_bytes() == finished


def test_resume_of_sentences_checks_all_of_them_and_stays_bit_exact(tmp_path, lee_path):
    sentences = [line.split() for line in _lines(lee_path)]
    reference = Word2Vec(sentences, **SMALL)
    ckpt = _killed(tmp_path, sentences)
    with pytest.raises(CheckpointError, match="sentences and"):
        Word2Vec.resume(ckpt, sentences[:-50], progress=False)
    edited = [list(s) for s in sentences]
    edited[-1][-1] = "edited"
    with pytest.raises(CheckpointError, match="same length"):
        Word2Vec.resume(ckpt, edited, progress=False)
    resumed = Word2Vec.resume(ckpt, sentences, progress=False)
    np.testing.assert_array_equal(resumed.syn0, reference.syn0)
    np.testing.assert_array_equal(resumed.layer.weights, reference.layer.weights)


def test_resume_of_a_continued_run_keeps_its_schedule(tmp_path, lee_path, lee_parts):
    """A killed second train() call on another corpus resumes bit-exactly: the checkpoint
    holds the words its schedule ran over."""
    reference = Word2Vec(lee_parts[60], **SMALL)
    reference.train(lee_path)
    model = Word2Vec(lee_parts[60], **SMALL)
    path = tmp_path / "c.npz"
    with pytest.raises(KeyboardInterrupt):
        model.train(lee_path, hooks=[Crash(10_000)], checkpoint=path, checkpoint_every=0)
    raw = sum(len(line.split()) for line in _lines(lee_path))
    assert read_state(path)["call"]["epoch_words"][1] == raw
    resumed = Word2Vec.resume(path, progress=False)
    np.testing.assert_array_equal(resumed.syn0, reference.syn0)


# -- the report's loss curve ----------------------------------------------------------------------

def test_chunks_are_kept_and_reported_in_corpus_order():
    """Two workers finish chunks out of order; the records (and the plot's x axis, the JSON's
    raw_words_done) follow positions in the corpus."""
    records = []
    for epoch, number in [(0, 1), (0, 0), (0, 2), (0, 4), (0, 3), (1, 1), (1, 0)]:
        record_chunk(records, ChunkStats(epoch, number, 10 * (number + 1), 0, 1, 1.0, 0.0))
    assert [(r.epoch, r.number) for r in records] == sorted((r.epoch, r.number) for r in records)
    report = TrainReport(chunks=[records[1], records[0], records[2]])  # an older report's order
    doc = report_dict(_FakeModel(), report)
    assert [c["chunk"] for c in doc["chunks"]] == [0, 1, 2]
    assert [c["raw_words_done"] for c in doc["chunks"]] == [10, 30, 60]
    json.dumps(doc)


class _FakeModel:
    layer = type("L", (), {"describe": lambda self: "hierarchical softmax"})()
    vocab = type("V", (), {"__len__": lambda self: 1, "total_tokens": 1, "retained_tokens": 1})()

    def params(self):
        return {"alpha": 0.025, "min_alpha": 0.0001, "sg": 1, "vector_size": 8}


def test_report_explains_the_online_loss_and_draws_the_learning_rate(tmp_path):
    """The last epoch's online loss rises as the rate falls (docs/performance.md): the report
    says so and gives each epoch's learning rate, word2vec's linear decay over the call."""
    from semhuff.trainer import EpochStats
    from semhuff.training_report import write_training_report
    report = TrainReport(epochs=[EpochStats(100, 90, 50, 50.0 * x, 1.0) for x in (7, 6, 6.5, 7)],
                         chunks=[ChunkStats(e, 0, 100, 90, 50, 50.0, 1.0) for e in range(4)])
    png = write_training_report(str(tmp_path / "run.json"), _FakeModel(), report)
    doc = json.loads((tmp_path / "run.json").read_text())
    assert "adaptation" in doc["loss_note"] and "held-out" in doc["loss_note"]
    for k, epoch in enumerate(doc["epochs"]):  # by hand: 0.025 - 0.0249 k / 4
        assert epoch["learning_rate_start"] == pytest.approx(0.025 - 0.0249 * k / 4)
        assert epoch["learning_rate_end"] == pytest.approx(0.025 - 0.0249 * (k + 1) / 4)
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
