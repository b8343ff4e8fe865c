"""The smaller cases of issue 12.5, each as the user met it: a one-line error instead of a
silent surprise, and quiet pipes."""
import logging
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest
from gensim.models import KeyedVectors

from semhuff import Word2Vec
from semhuff.cli.train import main as train_main
from semhuff.corpus import Corpus
from semhuff.vectors_io import detect_format, read_vectors

FAST = ["--epochs", "1", "--dim", "8", "--no-progress", "-q", "--workers", "1"]


def run(argv, capsys):
    code = train_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_init_model_refuses_options_it_cannot_honour_and_applies_the_others(tmp_path, capsys):
    model = tmp_path / "m.npz"
    assert run(["lee", "-o", model, *FAST], capsys)[0] == 0
    code, _, err = run(["lee", "--init-model", model, "-o", tmp_path / "m2.npz", "--dim", "30",
                        "--cbow", "--loss", "ns", "--window", "3", "-q"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    for part in ("--dim 30", "vector dimension: 8", "--sg/--cbow cbow", "--loss ns"):
        assert part in err
    assert not (tmp_path / "m2.npz").exists()
    # the same dimension is no conflict; the window applies to the continued run and is saved
    code, _, err = run(["lee", "--init-model", model, "-o", tmp_path / "m2.npz", "--dim", "8",
                        "--window", "3", "--alpha", "0.01", *FAST[:2], "-q", "--no-progress"], capsys)
    assert code == 0, err
    again = Word2Vec.load(tmp_path / "m2.npz")
    assert (again.window, again.alpha, again.vector_size, again.train_calls) == (3, 0.01, 8, 2)


@pytest.mark.parametrize("name", ["v.w2v", "vectors", "v.vectors"])
def test_unknown_extension_is_an_error_not_a_zip_model(tmp_path, capsys, name):
    code, _, err = run(["lee", "-o", tmp_path / name, *FAST], capsys)
    assert code == 2 and "cannot tell the output format" in err and "--format" in err
    assert os.listdir(tmp_path) == []
    code, _, err = run(["lee", "-o", tmp_path / name, "--format", "text", *FAST], capsys)
    assert code == 0 and KeyedVectors.load_word2vec_format(str(tmp_path / name)).vector_size == 8


def test_compressed_word2vec_output(tmp_path, capsys):
    code, _, err = run(["lee", "-o", tmp_path / "v.txt.gz", *FAST], capsys)
    assert code == 0, err
    assert (tmp_path / "v.txt.gz").read_bytes()[:2] == b"\x1f\x8b"  # really gzip
    assert KeyedVectors.load_word2vec_format(str(tmp_path / "v.txt.gz")).vector_size == 8
    code, _, err = run(["lee", "-o", tmp_path / "v.kv.gz", *FAST], capsys)
    assert code == 2 and "only the word2vec text and binary formats are written compressed" in err


def test_garbage_similarity_file_is_an_error_not_a_huffman_tree(tmp_path, capsys):
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("qwzx vbnm\n%% ## !!\n1 2 3\n")
    code, _, err = run(["lee", "-o", tmp_path / "v.bin", "--tree", "semhuff", "--similarity", garbage,
                        *FAST], capsys)
    assert code == 2 and "no usable similarity" in err and "0 edges" in err
    assert not (tmp_path / "v.bin").exists()


def test_a_huge_token_is_cut_with_a_warning(tmp_path, monkeypatch, caplog):
    from semhuff import corpus as corpus_module
    monkeypatch.setattr(corpus_module, "_MAX_TOKEN_CHARS", 1000)
    path = tmp_path / "c.txt"
    path.write_text("a b " + "x" * 3500 + " c d\n")
    corpus = Corpus(str(path), block_bytes=256)
    with caplog.at_level(logging.WARNING, logger="semhuff.corpus"):
        sentences = list(corpus)
        list(corpus)  # one warning per file, not per pass
    tokens = sentences[0]
    assert tokens[:2] == ["a", "b"] and tokens[-2:] == ["c", "d"]
    assert "".join(tokens[2:-2]) == "x" * 3500  # nothing dropped
    assert corpus.stats.long_tokens_cut >= 2
    warnings = [r for r in caplog.records if "longer than 1,000 characters" in r.getMessage()]
    assert len(warnings) == 1


def test_binary_vectors_with_a_long_first_word_are_read_as_binary(tmp_path):
    kv = KeyedVectors(vector_size=4)
    kv.add_vectors(["y" * 10_000, "short"], np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32))
    kv.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    kv.save_word2vec_format(str(tmp_path / "v.txt"))
    assert detect_format(str(tmp_path / "v.bin")) == "binary"
    assert detect_format(str(tmp_path / "v.txt")) == "text"
    back, _ = read_vectors(tmp_path / "v.bin")
    np.testing.assert_array_equal(back["short"], [5, 6, 7, 8])


def test_tree_show_into_head_ends_quietly(tmp_path, lee_path):
    from semhuff.cli.tree import main as tree_main
    tree_file = tmp_path / "t.npz"
    assert tree_main(["-q", "build", lee_path, "--tree", "huffman", "--min-count", "3",
                      "-o", str(tree_file)]) == 0
    proc = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m semhuff.cli.tree show "
                           f"{tree_file} government fire police | head -1; exit ${{PIPESTATUS[0]}}"],
                          capture_output=True, text=True)
    assert proc.stdout.startswith("# government") and proc.stderr == ""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: no race with head
    proc = subprocess.run([sys.executable, "-m", "semhuff.cli.tree", "show", str(tree_file),
                           "government"], stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    assert proc.returncode == 141 and proc.stderr == ""  # as a process killed by SIGPIPE
