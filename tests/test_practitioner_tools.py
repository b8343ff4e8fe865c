"""Issue 23, "what practitioners reach for": semhuff-query (nearest neighbours and analogies on
saved vectors, checked against gensim's KeyedVectors on the same file), --init-vectors /
Word2Vec(init_vectors=...) (pretrained start), and what the memory work made structural."""
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from gensim.models import KeyedVectors

from semhuff import Word2Vec
from semhuff.cli import query
from semhuff.cli.train import main as train_main
from semhuff.errors import OptionError, VectorsError, VocabError
from semhuff.vocab import Vocab

DIM = 12


def _kv(n=300, dim=DIM, seed=0, prefix="w"):
    """Random vectors with some structure (clusters), so neighbours are not ties."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(10, dim))
    vectors = centres[np.arange(n) % 10] + 0.5 * rng.normal(size=(n, dim))
    kv = KeyedVectors(dim)
    kv.add_vectors([f"{prefix}{i}" for i in range(n)], vectors.astype(np.float32))
    return kv


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same vectors in every format semhuff-query reads, and gensim's reading of them."""
    folder = tmp_path_factory.mktemp("query")
    kv = _kv()
    paths = {"text": folder / "v.txt", "binary": folder / "v.bin", "kv": folder / "v.kv",
             "npz": folder / "v.npz", "gz": folder / "v.txt.gz"}
    kv.save_word2vec_format(str(paths["text"]))
    kv.save_word2vec_format(str(paths["gz"]))
    kv.save_word2vec_format(str(paths["binary"]), binary=True)
    kv.save(str(paths["kv"]))
    model = Word2Vec(vector_size=DIM, min_count=1, progress=False)
    counts = np.arange(len(kv), 0, -1)  # the file's order is the frequency order
    model.set_vocab(Vocab(list(kv.index_to_key), counts, int(counts.sum())))
    model.syn0[:] = kv.vectors
    model.save(str(paths["npz"]))
    reference = KeyedVectors.load_word2vec_format(str(paths["binary"]), binary=True)
    return {k: str(v) for k, v in paths.items()}, reference


def run_query(argv, capsys):
    code = query.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def parse_tsv(text):
    rows = {}
    for line in text.splitlines():
        label, rank, word, score = line.split("\t")
        rows.setdefault(label, []).append((int(rank), word, float(score)))
    return rows


def same_answers(got, expected):
    assert [w for _, w, _ in got] == [w for w, _ in expected]
    assert [r for r, _, _ in got] == list(range(1, len(expected) + 1))
    np.testing.assert_allclose([s for _, _, s in got], [s for _, s in expected], atol=2e-6)


@pytest.mark.parametrize("fmt", ["text", "binary", "kv", "npz", "gz"])
def test_query_neighbours_equal_gensim_most_similar(files, capsys, fmt):
    paths, gensim_kv = files
    code, out, err = run_query([paths[fmt], "w3", "w17", "--topn", "7", "--tsv"], capsys)
    assert code == 0, err
    rows = parse_tsv(out)
    assert list(rows) == ["w3", "w17"]
    for word in ("w3", "w17"):
        same_answers(rows[word], gensim_kv.most_similar(word, topn=7))


def test_query_analogy_forms_and_methods_equal_gensim(files, capsys):
    paths, gensim_kv = files
    code, out, err = run_query([paths["text"], "w1:w2::w3:?", "w4:w5::w6", "--analogy", "w7",
                                "w8", "w9", "--tsv", "--topn", "5"], capsys)
    assert code == 0, err
    rows = parse_tsv(out)
    assert list(rows) == ["w1:w2::w3:?", "w4:w5::w6:?", "w7:w8::w9:?"]
    for label, (a, b, c) in zip(rows, [("w1", "w2", "w3"), ("w4", "w5", "w6"), ("w7", "w8", "w9")]):
        same_answers(rows[label], gensim_kv.most_similar(positive=[b, c], negative=[a], topn=5))
    code, out, _ = run_query([paths["text"], "w1:w2::w3:?", "--method", "mul", "--tsv",
                              "--topn", "5", "--restrict-vocab", "100"], capsys)
    assert code == 0
    same_answers(parse_tsv(out)["w1:w2::w3:?"], gensim_kv.most_similar_cosmul(
        positive=["w2", "w3"], negative=["w1"], topn=5, restrict_vocab=100))


def test_query_restrict_and_plain_output(files, capsys):
    paths, gensim_kv = files
    code, out, err = run_query([paths["npz"], "w250", "--restrict-vocab", "50", "--topn", "3"], capsys)
    assert code == 0, err
    expected = gensim_kv.most_similar("w250", topn=3, restrict_vocab=50)
    assert all(int(w[1:]) < 50 for w, _ in expected)
    assert out == "w250 -> " + ", ".join(f"{w} {s:.4f}" for w, s in expected) + "\n"


@pytest.mark.parametrize("argv,message", [
    (["{text}", "w1", "nope", "w2:zip::w3:?"], "not in the vocabulary of {text} (300 words): nope, zip"),
    (["{missing}", "w1"], "vectors file not found"),
    (["{text}", "w1::w2"], "cannot read the analogy"),
    (["{text}"], "no query"),
    (["{text}", "w1", "--topn", "0"], "--topn"),
    (["{text}", "--analogy", "w1", "w2"], "--analogy"),
])
def test_query_errors_are_one_line_exit_2(files, capsys, tmp_path, argv, message):
    paths = dict(files[0], missing=str(tmp_path / "nothing.bin"))
    argv = [a.format(**paths) for a in argv]
    try:  # argparse's own errors end in SystemExit
        code = query.main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()  # usage errors: the short usage line, then the error
    assert len(lines) == (2 if argv[-1] in ("0", "w2") else 1), err
    assert message.format(**paths) in lines[-1] and lines[-1].startswith("semhuff-query: error")
    assert "Traceback" not in err


def test_query_console_script_one_line_error(files):
    """The installed console path (python -m, as the entry point runs it): exit 2, one line."""
    paths, _ = files
    done = subprocess.run([sys.executable, "-m", "semhuff.cli.query", paths["binary"], "nope"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (f"semhuff-query: error: not in the vocabulary of "
                                   f"{paths['binary']} (300 words): nope")


# -- init_vectors ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lee_words(lee_path):
    return Word2Vec(vector_size=DIM, min_count=5, progress=False,
                    workers=1).build_vocab(lee_path)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, lee_words):
    """Vectors for every third lee word and for words lee lacks, as a word2vec text file."""
    words = lee_words.words[::3] + ["zzz-not-in-lee", "qqq-nor-this"]
    kv = _kv(len(words), seed=5)
    kv.index_to_key = words
    kv.key_to_index = {w: i for i, w in enumerate(words)}
    path = tmp_path_factory.mktemp("pre") / "pre.txt"
    kv.save_word2vec_format(str(path))
    return str(path)


def test_init_vectors_rows_equal_the_file_others_unchanged(lee_path, pretrained, lee_words):
    start = Word2Vec(vector_size=DIM, min_count=5, progress=False, workers=1,
                     init_vectors=pretrained)
    start.build_vocab(lee_path)
    plain = Word2Vec(vector_size=DIM, min_count=5, progress=False, workers=1)
    plain.build_vocab(lee_path)
    file_kv = KeyedVectors.load_word2vec_format(pretrained)  # gensim's reading of the file
    shared = [w for w in lee_words.words if w in file_kv.key_to_index]
    assert start.init_vectors_used == len(shared) == len(lee_words.words[::3])
    ids = [start.vocab.index[w] for w in shared]
    np.testing.assert_array_equal(start.syn0[ids], file_kv[shared])
    others = np.setdiff1d(np.arange(len(start.vocab)), ids)
    np.testing.assert_array_equal(start.syn0[others], plain.syn0[others])  # word2vec's random start


def test_init_vectors_start_training_from_them_and_keep_training(lee_path, pretrained):
    file_kv = KeyedVectors.load_word2vec_format(pretrained)
    shared = [w for w in file_kv.index_to_key if not w.startswith(("zzz", "qqq"))]
    # a vanishing learning rate: the trained vectors are the file's
    still = Word2Vec(lee_path, vector_size=DIM, min_count=5, progress=False, workers=1,
                     epochs=1, alpha=1e-12, min_alpha=0.0, init_vectors=pretrained)
    np.testing.assert_allclose(still.wv[shared], file_kv[shared], atol=1e-6)
    # imported vectors keep training by default (init_vectors_lockf=1.0; 0 freezes them,
    # tests/test_lockf.py)
    moved = Word2Vec(lee_path, vector_size=DIM, min_count=5, progress=False, workers=1,
                     epochs=1, init_vectors=file_kv)
    assert np.abs(moved.wv[shared] - file_kv[shared]).max() > 1e-3


def test_init_vectors_wrong_dimension_is_an_option_error(pretrained):
    with pytest.raises(OptionError, match=f"{DIM}-dimensional vectors but the model's are "
                                          "10-dimensional"):
        Word2Vec(vector_size=10, init_vectors=pretrained)  # before any corpus is read


def test_init_vectors_missing_file_and_no_overlap(tmp_path, lee_path, caplog):
    with pytest.raises(VectorsError, match="not found"):
        Word2Vec(vector_size=DIM, init_vectors=str(tmp_path / "none.txt"))
    other = tmp_path / "other.txt"
    _kv(20, prefix="zz").save_word2vec_format(str(other))
    with caplog.at_level(logging.WARNING, logger="semhuff.model"):
        model = Word2Vec(vector_size=DIM, min_count=5, progress=False, init_vectors=str(other))
        model.build_vocab(lee_path)
    assert model.init_vectors_used == 0
    assert "0 of" in caplog.text and "at random" in caplog.text


def test_cli_init_vectors(tmp_path, capsys, lee_path, pretrained):
    out = tmp_path / "v.npz"
    code = train_main([lee_path, "-o", str(out), "--dim", str(DIM), "--epochs", "1",
                       "--workers", "1", "--no-progress", "--init-vectors", pretrained,
                       "--alpha", "1e-12", "--min-alpha", "0", "--probe"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    file_kv = KeyedVectors.load_word2vec_format(pretrained)
    n = len(file_kv) - 2
    assert f"init vectors: {n:,} of " in captured.out
    kv = Word2Vec.load(str(out)).wv
    np.testing.assert_allclose(kv[file_kv.index_to_key[:n]], file_kv.vectors[:n], atol=1e-6)


def test_cli_freeze_init_vectors(tmp_path, capsys, lee_path, pretrained):
    """--freeze-init-vectors: the words taken from the file end training with exactly its
    vectors (their lock factor 0, saved with the model); the other words train."""
    from semhuff.vectors_io import read_vectors
    out = tmp_path / "v.npz"
    code = train_main([lee_path, "-o", str(out), "--dim", str(DIM), "--epochs", "1",
                       "--workers", "2", "--no-progress", "--init-vectors", pretrained,
                       "--freeze-init-vectors"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "and kept (frozen)" in captured.out
    model = Word2Vec.load(str(out))
    file_kv = read_vectors(pretrained)[0]  # semhuff's own reading of the file
    shared = [w for w in file_kv.index_to_key if w in model.vocab.index]
    ids = [model.vocab.index[w] for w in shared]
    np.testing.assert_array_equal(model.syn0[ids], file_kv[shared])
    assert sorted(np.flatnonzero(model.lockf == 0).tolist()) == sorted(ids)
    start = Word2Vec(vector_size=DIM, min_count=5, progress=False, workers=2)
    start.build_vocab(lee_path)
    others = np.setdiff1d(np.arange(len(model.vocab)), ids)
    assert np.abs(model.syn0[others] - start.syn0[others]).max() > 1e-3


def test_cli_freeze_needs_init_vectors(tmp_path, capsys, lee_path):
    code = train_main([lee_path, "-o", str(tmp_path / "v.bin"), "--no-progress",
                       "--freeze-init-vectors"])
    err = capsys.readouterr().err
    assert code == 2 and "--freeze-init-vectors goes with --init-vectors" in err, err


@pytest.mark.parametrize("extra,message", [
    (["--dim", "10"], "12-dimensional vectors but the model's are 10-dimensional"),
    (["--init-model", "{model}"], "--init-vectors starts a new model; --init-model"),
])
def test_cli_init_vectors_errors(tmp_path, capsys, lee_path, pretrained, extra, message):
    model = tmp_path / "m.npz"
    m = Word2Vec(vector_size=DIM, min_count=5, progress=False)
    m.build_vocab(lee_path)
    m.save(str(model))
    out = tmp_path / "v.bin"
    code = train_main([lee_path, "-o", str(out), "--no-progress", "--init-vectors", pretrained,
                       *[e.format(model=model) for e in extra]])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not out.exists()


# -- memory (issue 23): structural reductions -------------------------------------------------------

def _zipf_sentences(n_sentences=300, length=40, vocab=60, seed=0):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab + 1)
    weights /= weights.sum()
    return [[f"w{i}" for i in rng.choice(vocab, size=length, p=weights)]
            for _ in range(n_sentences)]


def _two_thread_setup():
    from semhuff.devices import Plan
    from semhuff.encode import EpochSource
    from semhuff.schedule import Schedule
    sentences = _zipf_sentences()
    model = Word2Vec(vector_size=16, window=3, min_count=1, sample=0, seed=3, workers=2,
                     progress=False)
    model.build_vocab(sentences)
    chunks = list(EpochSource(sentences, model.vocab.index, chunk_words=2000,
                              use_cache=False).epoch())
    plan = Plan(sg=True, keep_thr=model.vocab.keep_thresholds(0), window=3, reduce_window=True,
                schedule=Schedule(0.05, 0.001, sum(len(c.ids) for c in chunks)),
                counts=model.vocab.counts)
    return model, chunks, plan


def _run_chunks(session, chunks, plan):
    from semhuff.kernels.common import mix_seed
    session.warm_up(plan)
    before = 0
    for i, chunk in enumerate(chunks):  # one at a time: the same arithmetic on any path
        session.train_chunk(plan, chunk, before, int(mix_seed(1, 0, i)))
        before += len(chunk.ids)
    session.close()


def test_two_threads_copy_neither_matrix_and_train_the_same():
    """The threads' private copies of the hottest rows go into room below the model's own
    matrices: the kernels' input matrix and output weights are the model's memory (before,
    the input vectors were copied whole for the whole training call, 80 MB at 200k words x
    100, and the output weights copied when placed). Trained chunk by chunk, the result is bit
    for bit that of the copying path (a session over copies, which have no room)."""
    import copy
    from semhuff.devices import CpuSession
    model, chunks, plan = _two_thread_setup()
    reference = CpuSession(model.syn0.copy(), copy.deepcopy(model.layer), 2)
    syn0, weights = model.syn0, model.layer.weights
    session = CpuSession(model.syn0, model.layer, 2)
    # 8 private rows of 59: the default would be most of this small layer (then none)
    session.HOT_ROWS = reference.HOT_ROWS = 8
    session.warm_up(plan)
    assert session.hot is not None and session.hot_in is not None
    assert np.shares_memory(session.hot_in.weights, syn0)
    assert np.shares_memory(session.hot.weights, weights)
    assert not np.shares_memory(reference.syn0, syn0)  # the fallback: a copy with no room
    _run_chunks(session, chunks, plan)
    _run_chunks(reference, chunks, plan)
    assert model.syn0 is syn0 and np.shares_memory(model.layer.weights, weights)
    np.testing.assert_array_equal(model.syn0, reference.host_syn0)
    np.testing.assert_array_equal(model.layer.weights, reference.layer.weights)
    assert np.abs(model.syn0 - _fresh_start(model)).max() > 0  # it did train


def _fresh_start(model):
    """word2vec's uniform start, computed as before the room existed."""
    rng = np.random.default_rng(model.seed)
    V, D = len(model.vocab), model.vector_size
    return (rng.random((V, D), dtype=np.float32) - np.float32(0.5)) / np.float32(D)


def test_the_random_start_is_unchanged_by_the_room():
    for workers in (1, 2):
        model = Word2Vec(vector_size=7, min_count=1, workers=workers, seed=11, progress=False)
        model.build_vocab(_zipf_sentences(50))
        np.testing.assert_array_equal(model.syn0, _fresh_start(model))
        assert model.syn0.shape == (len(model.vocab), 7) and model.syn0.flags.c_contiguous


def test_hs_hot_rows_traffic_as_the_whole_table_computed_it():
    """The level-by-level traffic (no table-sized temporaries) names the same rows."""
    from semhuff.layers.hs import HierarchicalSoftmax
    from semhuff.trees import make_tree
    model, _, plan = _two_thread_setup()
    for kind in ("huffman", "random"):
        layer = HierarchicalSoftmax(make_tree(kind, model.vocab, seed=2))
        t = layer.tree
        on_path = np.arange(t.points.shape[1]) < t.lengths[:, None]
        traffic = np.bincount(t.points[on_path], minlength=t.n_words - 1, weights=np.broadcast_to(
            plan.counts.astype(np.float64)[:, None], on_path.shape)[on_path])
        expected = np.argsort(-traffic, kind="stable")[:20]
        np.testing.assert_array_equal(layer.hot_rows(plan.counts, 20), expected)


def test_summary_probes_equal_gensim_most_similar_without_importing_gensim(tmp_path, lee_path):
    """The summary's neighbours are gensim's most_similar on the written vectors, computed
    over the model's own array: a run that writes word2vec binary never imports gensim (its
    import and model.wv's copy were the last 60 MB of the peak at 147k words)."""
    out = tmp_path / "v.bin"
    code = ("import sys; from semhuff.cli.train import main; "
            f"code = main([{lee_path!r}, '-o', {str(out)!r}, '--dim', '16', '--epochs', '1', "
            "'--workers', '1', '--no-progress', '--probe', 'government', 'police', 'zzz', "
            "'--topn', '4']); print('gensim imported:', 'gensim' in sys.modules); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gensim imported: False" in done.stdout
    kv = KeyedVectors.load_word2vec_format(str(out), binary=True)
    for word in ("government", "police"):
        expected = ", ".join(f"{w} {s:.2f}" for w, s in kv.most_similar(word, topn=4))
        assert f"  {word} -> {expected}\n" in done.stdout
    assert "  zzz: not in the vocabulary" in done.stdout


def test_the_scans_recording_waits_in_a_file_not_in_memory(tmp_path, lee_path, monkeypatch):
    """The vocabulary scan's recording (4 bytes a token) keeps ``Recording.FIRST`` entries in
    memory and the rest in an unnamed temporary file; the first epoch's chunks read from it
    are the Python path's (encode.encode_chunks), and a second reading gives them again."""
    from semhuff import fastscan
    from semhuff.corpus import Corpus
    from semhuff.encode import encode_chunks
    monkeypatch.setattr(fastscan.Recording, "FIRST", 1000)
    monkeypatch.setattr(fastscan, "PARALLEL_MIN_BYTES", 0)
    for workers in (1, 2):
        corpus = Corpus(lee_path, block_bytes=1 << 14)
        counts, total, _ = fastscan.scan(corpus, workers=workers)
        parts = fastscan._RECORDED[fastscan._corpus_key(corpus)][0]
        assert len(parts) == workers and sum(map(len, parts)) == total > 1000 * workers
        assert all(p.entries is None and p.fh is not None for p in parts)
        words = [w for w, c in counts.items() if c >= 3]
        index = {w: i for i, w in enumerate(words)}
        expected = list(encode_chunks(Corpus(lee_path), index, 3000))
        for take in (False, True):  # a count before training, then the first epoch
            got = list(fastscan.encode_chunks(corpus, words, 3000, take=take))
            assert len(got) == len(expected)
            for a, b in zip(got, expected):
                np.testing.assert_array_equal(a.ids, b.ids)
                np.testing.assert_array_equal(a.bounds, b.bounds)
                assert a.raw_tokens == b.raw_tokens


_HEAP_PROBE = """
import sys, numpy as np
from semhuff.memory import return_large_blocks
fixed = return_large_blocks() if sys.argv[1] == "fixed" else None
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
big = np.ones(2 << 20)  # 16 MB, freed: glibc's threshold would rise to 16 MB
del big
block = np.ones(1 << 19)  # 4 MB, every page written
before = rss()
del block
print(fixed, before - rss())
"""


def heap_probe(script: str, modes) -> dict:
    """{mode: (what the setting call returned, bytes the process's memory fell by)}."""
    got = {}
    for mode in modes:
        done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        took, freed = done.stdout.split()
        got[mode] = (took, int(freed))
    return got


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_large_temporaries_go_back_to_the_os():
    """semhuff-train fixes glibc's mmap threshold (semhuff.memory): a 4 MB temporary freed
    after a larger block was freed leaves the process's memory; without it, it stays."""
    got = heap_probe(_HEAP_PROBE, ("fixed", "default"))
    if got["fixed"][0] != "True":
        pytest.skip("not glibc: mallopt refused")
    assert got["fixed"][1] >= 3 << 20
    if got["default"][1] >= 1 << 20:  # seen inside a long pytest session: the block sat at
        # the heap's top and glibc trimmed it anyway; the probe then shows no difference
        pytest.skip("glibc returned the block without the fixed threshold too")


_KEEP_PROBE = """
import sys, numpy as np
from semhuff.memory import keep_large_blocks
kept = keep_large_blocks() if sys.argv[1] == "keep" else None
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
block = np.ones(8 << 20)  # 64 MB, every page written: above glibc's largest own threshold
before = rss()
del block
print(kept, before - rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_semhuff_lm_keeps_freed_large_blocks_for_reuse():
    """semhuff-lm's opposite choice (a training step frees and makes the same large blocks):
    without it a freed 64 MB block goes back to the OS, and its pages fault again when the next
    step allocates it; with it the pages stay for the next allocation."""
    got = heap_probe(_KEEP_PROBE, ("keep", "default"))
    if got["keep"][0] != "True":
        pytest.skip("not glibc: mallopt refused")
    assert got["default"][1] >= 60 << 20
    assert got["keep"][1] < 1 << 20


def test_the_divergence_check_allocates_no_mask():
    """health's finite check: the answer of np.isfinite(a).all() for NaN and infinities
    anywhere, without the V x dim mask it allocated at the run's peak."""
    import tracemalloc
    from semhuff.health import _all_finite
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2000, 100)).astype(np.float32)
    tracemalloc.start()
    assert _all_finite(a)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < a.nbytes // 100  # np.isfinite(a) alone: a.nbytes // 4
    for value in (np.nan, np.inf, -np.inf):
        for at in ((0, 0), (1999, 99), (777, 3)):
            b = a.copy()
            b[at] = value
            assert _all_finite(b) == bool(np.isfinite(b).all()) is False


def test_training_on_a_file_never_builds_the_word_index(tmp_path, lee_path):
    """The vocabulary's word -> id dict (7.6 MiB at 147k words, held through training) is
    built only when asked: a run on a file tokenises in compiled code with its own table, and
    the summary's probe words are found without it. Built on demand, it is the first-seen
    order of the words, and ``find`` answers the same with or without it."""
    out = tmp_path / "v.bin"
    import semhuff.vocab as vocab_module
    built = []
    original = vocab_module.Vocab.index.fget

    def watched(self):
        built.append(self._index is None)
        return original(self)
    try:
        vocab_module.Vocab.index = property(watched)
        assert train_main([lee_path, "-o", str(out), "--epochs", "1", "--dim", "8",
                           "--no-progress", "--probe", "government", "--probe",
                           "no-such-word"]) == 0
    finally:
        vocab_module.Vocab.index = property(original)
    assert out.exists() and not any(built)
    v = vocab_module.Vocab(["b", "a", "c"], np.array([3, 2, 1]), 6)
    assert v.find("a") == 1 and v.find("z") is None and v._index is None
    assert v.index == {"b": 0, "a": 1, "c": 2} and v.find("c") == 2 and v.find("z") is None
    with pytest.raises(VocabError, match="duplicate"):
        vocab_module.Vocab(["a", "b", "a"], np.array([3, 2, 1]), 6)
    for words in (("b", "a"), np.array(["b", "a"])):  # not lists: find still answers
        assert vocab_module.Vocab(words, np.array([2, 1]), 3).find("a") == 1


def test_hot_rows_hold_no_vocabulary_sized_array():
    """The hot rows a layer names are their own small arrays, not views that keep the whole
    V-long argsort alive through training."""
    from semhuff.layers.hs import HierarchicalSoftmax
    from semhuff.layers.ns import NegativeSampling
    from semhuff.trees import make_tree
    model, _, plan = _two_thread_setup()
    for layer in (HierarchicalSoftmax(make_tree("huffman", model.vocab)),
                  NegativeSampling.create(model.vocab)):
        rows = layer.hot_rows(plan.counts, 5)
        assert rows.base is None and rows.shape == (5,)
