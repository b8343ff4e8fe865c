import os

import numpy as np
import pytest

from semhuff.cli.tree import format_neighbourhood, main  # the top-level cli/ folder
from semhuff.trees.base import Tree
from semhuff.trees.huffman import build_huffman

# the counts of the paper's six-word demo (tests/test_semhuff.py): cat and dog end up siblings
CORPUS = "animal " * 10 + "plant " * 9 + "cat tree " * 5 + "dog grass " * 4 + "\n"
PAIRS = "cat dog 0.9\ntree grass 0.7\nplant tree 0.6\nplant grass 0.65\nanimal cat 0.7\nanimal dog 0.75\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "corpus.txt").write_text(CORPUS)
    (tmp_path / "pairs.txt").write_text(PAIRS)
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_build_stats_show(files, capsys):
    tree_path = files / "tree.npz"
    code, out, err = run(capsys, "-q", "build", files / "corpus.txt", "--min-count", "1",
                         "--tree", "semhuff", "--similarity", files / "pairs.txt", "-o", tree_path,
                         "--save-vocab", files / "vocab.txt")
    assert code == 0, err
    assert "expected code length" in out and "total sibling similarity" in out
    tree = Tree.load(str(tree_path))  # the trainer's loader reads the file as is
    tree.validate()
    assert tree.kind == "semhuff"
    code, out, err = run(capsys, "stats", tree_path, "--similarity", files / "pairs.txt")
    assert code == 0 and "depth histogram" in out
    code, out, err = run(capsys, "show", tree_path, "cat", "--up", "1")
    assert code == 0
    assert "<word>cat</word>" in out and "<word>dog</word>" in out  # siblings
    # a vocabulary file gives the same tree
    code, out, err = run(capsys, "-q", "build", "--vocab", files / "vocab.txt", "--tree", "semhuff",
                         "--similarity", files / "pairs.txt", "-o", files / "again.npz")
    assert code == 0
    assert np.array_equal(Tree.load(str(files / "again.npz")).parent, tree.parent)


def test_huffman_tree_and_plain_tree_files(files, capsys):
    (files / "vocab.txt").write_text("b 3\na 5\nc 1\n")
    code, out, _ = run(capsys, "-q", "build", "--vocab", files / "vocab.txt", "--tree", "huffman",
                       "-o", files / "h.npz")
    assert code == 0 and "tree: huffman, 3 words" in out
    build_huffman([5, 3, 1]).save(str(files / "plain.npz"))  # no vocabulary inside
    code, out, err = run(capsys, "show", files / "plain.npz", "a")
    assert code == 2 and "give --vocab" in err
    code, out, err = run(capsys, "show", files / "plain.npz", "a", "--vocab", files / "vocab.txt")
    assert code == 0 and "<word>a</word>" in out


@pytest.mark.parametrize("argv,message", [
    (["build", "{d}/missing.txt", "--tree", "semhuff", "--similarity", "{d}/pairs.txt", "-o", "{d}/t.npz"], "not found"),
    (["build", "{d}/corpus.txt", "--tree", "semhuff", "-o", "{d}/t.npz"], "needs --similarity"),
    (["build", "{d}/corpus.txt", "--similarity", "{d}/pairs.txt", "-o", "{d}/t.npz"], "add --tree semhuff"),
    (["build", "{d}/corpus.txt", "--vocab", "{d}/vocab.txt", "-o", "{d}/t.npz"], "one of them"),
    (["build", "-o", "{d}/t.npz"], "one of them"),
    (["build", "{d}/corpus.txt", "--tree", "semhuff", "--similarity", "{d}/nope", "-o", "{d}/t.npz"], "not found"),
    (["build", "{d}/corpus.txt", "--tree", "semhuff", "--similarity", "{d}/pairs.txt", "-o", "{d}/no/t.npz"], "does not exist"),
    (["build", "--vocab", "{d}/pairs.txt", "--tree", "semhuff", "--similarity", "{d}/pairs.txt", "-o", "{d}/t.npz"], "expected 'word count'"),
    (["stats", "{d}/pairs.txt"], "is not a tree file (or model file) (a .npz archive): it is text"),
    (["show", "{d}/t.npz", "cat"], "tree file (or model file) not found"),
])
def test_errors_are_one_line_exit_2(files, capsys, argv, message):
    code, out, err = run(capsys, *[a.format(d=files) for a in argv])
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not os.path.exists(files / "t.npz")


def test_unknown_word_in_show(files, capsys):
    run(capsys, "-q", "build", files / "corpus.txt", "--min-count", "1", "--tree", "semhuff",
        "--similarity", files / "pairs.txt", "-o", files / "t.npz")
    code, _, err = run(capsys, "show", files / "t.npz", "unicorn")
    assert code == 2 and "unicorn" in err


def test_neighbourhood_format_like_figure_3():
    tree = build_huffman([8, 4, 2, 1])  # a chain: depths 1, 2, 3, 3
    text = format_neighbourhood(tree, ["a", "b", "c", "d"], 3, up=2)
    # branch bit 0 first; word2vec's Huffman gives the lighter child bit 0
    assert text.splitlines() == ["<level1>", "  <level2>", "    <word>d</word>   <!-- query -->",
                                 "    <word>c</word>", "  </level2>", "  <word>b</word>", "</level1>"]
    assert "1 more words" in format_neighbourhood(tree, ["a", "b", "c", "d"], 3, up=3, max_words=3)
