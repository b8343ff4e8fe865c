"""The one vectors reader / writer: the format detector on every format, and round trips."""
import gzip

import numpy as np
import pytest
from gensim.models import Word2Vec as GensimWord2Vec

from semhuff import Word2Vec
from semhuff.errors import OptionError, VectorsError
from semhuff.vectors_io import (detect_format, read_vectors, resolve_format, save_keyed_vectors,
                                to_keyed_vectors)

WORDS = ["king", "queen", "man", "woman", "paris", "france"]


def tiny_model():
    return Word2Vec([WORDS] * 20, vector_size=4, min_count=1, epochs=1, workers=1, progress=False)


@pytest.fixture
def kv():
    vectors = np.random.default_rng(0).normal(size=(len(WORDS), 5)).astype(np.float32)
    return to_keyed_vectors(WORDS, np.arange(len(WORDS), 0, -1), vectors)


def test_detector_tells_every_format_by_content(tmp_path, kv):
    kv.save_word2vec_format(str(tmp_path / "v.txt"))
    kv.save_word2vec_format(str(tmp_path / "v.data"), binary=True)         # no telling name
    kv.save_word2vec_format(str(tmp_path / "text.bin"))                   # a misleading name
    kv.save_word2vec_format(str(tmp_path / "v.bin.gz"), binary=True)
    kv.save_word2vec_format(str(tmp_path / "v.txt.gz"))
    (tmp_path / "glove.txt").write_text("king 1 2 3\nqueen 1 2 4\n")      # no header line
    kv.save(str(tmp_path / "v.kv"))
    GensimWord2Vec([WORDS] * 3, vector_size=4, min_count=1, workers=1, epochs=1).save(
        str(tmp_path / "gensim.model"))
    tiny_model().save(str(tmp_path / "semhuff.npz"))
    expected = {"v.txt": "text", "v.data": "binary", "text.bin": "text", "v.bin.gz": "binary",
                "v.txt.gz": "text", "glove.txt": "text", "v.kv": "kv", "gensim.model": "kv",
                "semhuff.npz": "npz"}
    for name, fmt in expected.items():
        assert detect_format(str(tmp_path / name)) == fmt, name
        loaded, report = read_vectors(tmp_path / name)
        assert len(loaded) > 0 and report.problems == 0, name


def test_a_header_alone_is_told_by_the_extension(tmp_path):
    for name, fmt in (("empty.bin", "binary"), ("empty.txt", "text"), ("empty.bin.gz", "binary")):
        path = tmp_path / name
        if name.endswith(".gz"):
            with gzip.open(path, "wb") as fh:
                fh.write(b"0 5\n")
        else:
            path.write_bytes(b"0 5\n")
        assert detect_format(str(path)) == fmt, name


@pytest.mark.parametrize("name, fmt", [("v.kv", "kv"), ("v.txt", "text"), ("v.vec", "text"),
                                       ("v.bin", "binary")])
def test_saved_vectors_read_back(tmp_path, kv, name, fmt):
    path = str(tmp_path / name)
    assert resolve_format(path) == fmt
    save_keyed_vectors(kv, path, fmt)
    back, report = read_vectors(path)
    assert back.index_to_key == WORDS and report.words == len(WORDS) and report.dimensions == 5
    np.testing.assert_allclose(back.vectors, kv.vectors, atol=1e-5)
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temp files


def test_semhuff_model_gives_its_vectors_and_counts(tmp_path):
    model = tiny_model()
    model.save(str(tmp_path / "m.npz"))
    back, _ = read_vectors(tmp_path / "m.npz")
    assert back.index_to_key == model.vocab.words
    np.testing.assert_array_equal(back.vectors, model.syn0)
    assert list(back.expandos["count"]) == list(model.vocab.counts)


def test_formats_and_objects(tmp_path, kv):
    assert resolve_format("out.npz") == resolve_format("out.w2v", "npz") == "npz"
    assert resolve_format("out.w2v", "model") == "npz"  # its former name, still read
    assert resolve_format("v.txt.gz") == "text" and resolve_format("v.bin.bz2") == "binary"
    for name in ("v.w2v", "out"):  # issue 12.5: never a silent zip model
        with pytest.raises(OptionError, match="cannot tell the output format"):
            resolve_format(name)
    with pytest.raises(OptionError, match="only the word2vec text and binary formats"):
        resolve_format("v.kv.gz")
    with pytest.raises(OptionError, match="unknown output format"):
        resolve_format("out.npz", "pickle")
    assert read_vectors(kv)[0] is kv
    with pytest.raises(VectorsError, match="not word vectors"):
        read_vectors([1, 2])
    kv.save_word2vec_format(str(tmp_path / "v.txt"))
    with pytest.raises(VectorsError, match="unknown vectors format"):
        read_vectors(tmp_path / "v.txt", fmt="pickle")


@pytest.mark.parametrize("name", ["v.bin", "v.bin.gz", "v.bin.bz2"])
def test_native_binary_writer_matches_gensims_bytes(tmp_path, name):
    """semhuff writes .bin without gensim; the (decompressed) bytes are gensim's own, and words
    with spaces-free unicode survive."""
    from gensim import utils
    from gensim.models import KeyedVectors

    from semhuff.vectors_io import save_word2vec_binary
    words = ["the", "naïve", "日本", "x"]
    vectors = np.random.default_rng(3).normal(size=(4, 7)).astype(np.float32)
    kv = KeyedVectors(7)
    kv.add_vectors(words, vectors)
    kv.save_word2vec_format(str(tmp_path / ("g_" + name)), binary=True)
    save_word2vec_binary(words, vectors, str(tmp_path / name))
    with utils.open(str(tmp_path / ("g_" + name)), "rb") as a, utils.open(str(tmp_path / name), "rb") as b:
        assert a.read() == b.read()
    back = KeyedVectors.load_word2vec_format(str(tmp_path / name), binary=True)
    assert back.index_to_key == words and np.array_equal(back.vectors, vectors)
