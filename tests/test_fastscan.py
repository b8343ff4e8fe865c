"""The compiled tokenising path (``semhuff.fastscan``) against the Python path (``Corpus`` +
``vocab.scan_counts`` + ``encode.encode_chunks``): the same vocabulary in the same order, the
same chunks of ids, hence bit-identical training; files it cannot read exactly go to Python."""
import bz2
import gzip
import lzma

import numpy as np
import pytest

from semhuff import Word2Vec, fastscan
from semhuff.corpus import Corpus
from semhuff.encode import encode_chunks
from semhuff.vocab import scan_counts

# every whitespace character str.split() knows, ASCII, separators and Unicode spaces, between
# tokens that hold multi-byte letters, a zero-width space (not whitespace) and an emoji
WEIRD = ("a b\u00a0c\u2003d\u3000e\x1cf\x1fg\u2028h\u0085i\tj\rk\x0bl\x0cm\u1680n\u205fo\u202fp"
         "\u2029q  \n\n  r s t\u200bu \u00e9t\u00e9 caf\u00e9 \U0001F600x\n") * 300 + "tail without newline"


def python_path(paths, limit, max_vocab, chunk_words, block):
    corpus = Corpus(paths, max_sentence_length=limit, block_bytes=block)
    counts, total, min_reduce = scan_counts(list(corpus), max_vocab)  # a list: the Python scan
    index = {w: i for i, w in enumerate(counts)}
    chunks = list(encode_chunks(Corpus(paths, max_sentence_length=limit, block_bytes=block), index, chunk_words))
    return list(counts.items()), total, min_reduce, index, chunks


@pytest.fixture(scope="module")
def files(tmp_path_factory, lee_path):
    folder = tmp_path_factory.mktemp("fastscan")
    (folder / "weird.txt").write_text(WEIRD, encoding="utf-8")
    for name, opener in (("w.gz", gzip.open), ("w.bz2", bz2.open), ("w.xz", lzma.open)):
        with opener(folder / name, "wt", encoding="utf-8") as fh:
            fh.write(WEIRD)
    return folder, lee_path


@pytest.mark.parametrize("case", ["lee", "weird", "weird-97-byte-blocks", "compressed-3-files",
                                  "pieces-of-7", "pruned"])
def test_same_vocabulary_and_chunks_as_the_python_path(files, case):
    folder, lee = files
    paths, limit, max_vocab, chunk_words, block = {
        "lee": (lee, 10_000, None, 100_000, 1 << 20),
        "weird": (str(folder / "weird.txt"), 10_000, None, 1_000, 1 << 20),
        "weird-97-byte-blocks": (str(folder / "weird.txt"), 10_000, None, 1_000, 97),
        "compressed-3-files": ([str(folder / n) for n in ("w.gz", "w.bz2", "w.xz")], 10_000, None, 5_000, 4096),
        "pieces-of-7": (lee, 7, None, 1_000, 1 << 20),
        "pruned": (lee, 10_000, 500, 100_000, 1 << 16),
    }[case]
    counts, total, min_reduce, index, chunks = python_path(paths, limit, max_vocab, chunk_words, block)
    corpus = Corpus(paths, max_sentence_length=limit, block_bytes=block)
    fast = fastscan.scan(corpus, max_vocab)
    assert fast is not None
    assert list(fast[0].items()) == counts and fast[1:] == (total, min_reduce)
    # the scan recorded every token's entry, unless it pruned (pruning renumbers entries)
    assert (fastscan._corpus_key(corpus) in fastscan._RECORDED) == (max_vocab is None)
    words = sorted(index, key=index.get)
    assert_same_chunks(fastscan.encode_chunks(corpus, words, chunk_words), chunks)
    assert not fastscan._RECORDED  # taken once
    # without the recording (a second epoch without the id cache): tokenised again, the same
    assert_same_chunks(fastscan.encode_chunks(corpus, words, chunk_words), chunks)
    if case == "pruned":
        assert min_reduce > 1  # pruning did happen


def assert_same_chunks(got, expected):
    got = list(got)
    assert len(got) == len(expected) > 0
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.bounds, b.bounds)
        assert a.raw_tokens == b.raw_tokens


@pytest.mark.parametrize("limit", [10**9, 5_000])
def test_recording_grows_and_gives_up_past_its_limit(files, monkeypatch, limit):
    """The recording starts small and doubles; past ``RECORD_TOKENS`` it stops, and the first
    epoch tokenises again: the chunks are the Python path's either way."""
    _, lee = files
    monkeypatch.setattr(fastscan.Recording, "FIRST", 64)
    monkeypatch.setattr(fastscan, "_most_tokens", lambda corpus: None)  # as for compressed files
    monkeypatch.setattr(fastscan, "RECORD_TOKENS", limit)
    counts, total, _, index, chunks = python_path(lee, 10_000, None, 3_000, 1 << 12)
    corpus = Corpus(lee, block_bytes=1 << 12)
    assert list(fastscan.scan(corpus)[0].items()) == counts
    recorded = fastscan._RECORDED.get(fastscan._corpus_key(corpus))
    if limit > total:
        assert recorded is not None and sum(map(len, recorded[0])) == total
    else:
        assert recorded is None
    assert_same_chunks(fastscan.encode_chunks(corpus, sorted(index, key=index.get), 3_000), chunks)


def test_a_file_changed_after_the_scan_is_tokenised_again(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a b c a\nb a d\n" * 50)
    corpus = Corpus(str(path))
    fastscan.scan(corpus)
    assert fastscan._RECORDED
    path.write_text("d d c\nq a b a b\n" * 70)  # another size: another key
    words = ["a", "b", "d"]
    expected = list(encode_chunks(Corpus(str(path)), {w: i for i, w in enumerate(words)}, 100))
    assert_same_chunks(fastscan.encode_chunks(corpus, words, 100), expected)


def test_training_is_bit_identical_on_either_path(files, monkeypatch):
    _, lee = files
    settings = dict(vector_size=16, min_count=3, epochs=2, workers=1, seed=5, progress=False)
    fast = Word2Vec(lee, **settings)
    monkeypatch.setattr(fastscan, "scan", lambda *a, **k: None)
    monkeypatch.setattr(fastscan, "eligible", lambda corpus: False)
    slow = Word2Vec(lee, **settings)
    assert fast.vocab.words == slow.vocab.words
    np.testing.assert_array_equal(fast.syn0, slow.syn0)
    np.testing.assert_array_equal(fast.layer.weights, slow.layer.weights)


def test_invalid_utf8_and_giant_tokens_go_to_the_python_path(tmp_path, monkeypatch):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"some words here\ncaf\xe9 and more words\n" * 10)
    assert fastscan.scan(Corpus(str(bad))) is None
    assert not fastscan.eligible(Corpus(str(bad)))
    model = Word2Vec(str(bad), min_count=1, vector_size=8, epochs=1, progress=False)
    assert "caf\ufffd" in model.vocab.index  # the Python path's replacement
    monkeypatch.setattr("semhuff.fastscan._MAX_TOKEN_CHARS", 1000)
    giant = tmp_path / "giant.txt"
    giant.write_text("a b " + "x" * 5000 + " c\n")
    assert fastscan.scan(Corpus(str(giant), block_bytes=512)) is None


def test_cut_utf8_at_the_end_of_a_file_goes_to_the_python_path(tmp_path):
    cut = tmp_path / "cut.txt"
    cut.write_bytes("caf\u00e9 words".encode("utf-8") + "\u00e9".encode("utf-8")[:1])
    assert fastscan.scan(Corpus(str(cut))) is None


@pytest.mark.parametrize("workers", [2, 3, 5])
@pytest.mark.parametrize("case", ["lee", "lee-twice-weird", "pieces-of-7", "one-line-pieces-of-997",
                                  "one-line-pieces-of-7-then-lee"])
def test_parallel_scan_gives_the_same_vocabulary_and_chunks(files, monkeypatch, workers, case):
    """Plain files split after whitespace (inside lines too), scanned in threads, merged in
    order: the same counts in the same first-seen order, and the same first-epoch chunks
    (the same pieces of long lines) from the merged recordings."""
    folder, lee = files
    one_line = folder / "one-line.txt"
    if not one_line.exists():  # lee's text as one line, as text8-like corpora are
        one_line.write_text(" ".join(open(lee, encoding="utf-8").read().split()), encoding="utf-8")
    monkeypatch.setattr(fastscan, "PARALLEL_MIN_BYTES", 0)
    paths, limit = {"lee": (lee, 10_000),
                    "lee-twice-weird": ([lee, str(folder / "weird.txt"), lee], 10_000),
                    "pieces-of-7": (lee, 7),
                    "one-line-pieces-of-997": (str(one_line), 997),
                    "one-line-pieces-of-7-then-lee": ([str(one_line), lee], 7)}[case]
    counts, total, _, index, chunks = python_path(paths, limit, None, 2_000, 1 << 12)
    corpus = Corpus(paths, max_sentence_length=limit, block_bytes=1 << 12)
    parts = fastscan._parts(corpus, workers)
    assert len(parts) == workers  # every part has bytes: the scan did split
    fast = fastscan.scan(corpus, workers=workers)
    assert list(fast[0].items()) == counts and fast[1] == total
    assert len(fastscan._RECORDED[fastscan._corpus_key(corpus)][0]) == workers
    assert_same_chunks(fastscan.encode_chunks(corpus, sorted(index, key=index.get), 2_000), chunks)


def test_parts_split_after_whitespace(tmp_path, monkeypatch):
    monkeypatch.setattr(fastscan, "PARALLEL_MIN_BYTES", 0)
    path = tmp_path / "one-line.txt"
    path.write_bytes("caf\u00e9 bb\u3000x ".encode("utf-8") * 1000 + b"no newline at all")
    data = path.read_bytes()
    parts = fastscan._parts(Corpus(str(path)), 4)
    assert len(parts) == 4
    flat = [span for part in parts for span in part]
    assert flat[0][1] == 0 and flat[-1][2] == len(data)
    for (_, _, end), (_, start, _) in zip(flat, flat[1:]):
        assert end == start and data[start - 1:start] in (b" ", b"\n", b"\t", b"\r")
    assert fastscan._parts(Corpus(str(path)), 1) is None


def _python_says_valid(data: bytes) -> bool:
    """valid_utf8's rule by Python's decoder: valid, or invalid only by a cut at the end."""
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        return exc.reason == "unexpected end of data"


def test_valid_utf8_agrees_with_pythons_decoder():
    """ASCII runs (checked 8 bytes at a time) with valid and invalid sequences at every
    alignment, and cut at every length."""
    pieces = ["é".encode(), "€".encode(), "😀".encode(), b"\xc0\xaf", b"\xed\xa0\x80", b"\xff",
              b"\xe2\x82", b"\xf4\x90\x80\x80", b"\x80"]
    rng = np.random.default_rng(4)
    cases = 0
    for _ in range(300):
        parts = []
        for _ in range(rng.integers(1, 5)):
            parts.append(b"a" * int(rng.integers(0, 20)))
            parts.append(pieces[rng.integers(len(pieces))])
        data = b"".join(parts) + b"z" * int(rng.integers(0, 9))
        buf = np.frombuffer(data, np.uint8)
        for n in {len(data), len(data) - 1, int(rng.integers(0, len(data) + 1))}:
            assert fastscan.valid_utf8(buf, n) == _python_says_valid(data[:n]), (data, n)
            cases += 1
    assert cases > 600
