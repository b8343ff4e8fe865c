"""Issue 23, "what practitioners reach for": semhuff-query (nearest neighbours and analogies on
saved vectors, checked against gensim's KeyedVectors on the same file), --init-vectors /
Word2Vec(init_vectors=...) (pretrained start), and what the memory work made structural."""
import subprocess
import sys

import numpy as np
import pytest
from gensim.models import KeyedVectors

from semhuff import Word2Vec
from semhuff.cli import query
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
                              "--topn", "5", "--restrict", "100"], capsys)
    assert code == 0
    same_answers(parse_tsv(out)["w1:w2::w3:?"], gensim_kv.most_similar_cosmul(
        positive=["w2", "w3"], negative=["w1"], topn=5, restrict_vocab=100))


def test_query_restrict_and_plain_output(files, capsys):
    paths, gensim_kv = files
    code, out, err = run_query([paths["npz"], "w250", "--restrict", "50", "--topn", "3"], capsys)
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
    assert len(err.strip().splitlines()) == 1 and message.format(**paths) in err, err
    assert "Traceback" not in err


def test_query_console_script_one_line_error(files):
    """The installed console path (python -m, as the entry point runs it): exit 2, one line."""
    paths, _ = files
    done = subprocess.run([sys.executable, "-m", "semhuff.cli.query", paths["binary"], "nope"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (f"semhuff-query: error: not in the vocabulary of "
                                   f"{paths['binary']} (300 words): nope")
