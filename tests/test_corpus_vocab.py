"""Corpus streaming and vocabulary, against plain Python references (str.split, Counter)."""
import bz2
import gzip
import heapq
import lzma
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from semhuff.corpus import Corpus
from semhuff.errors import CorpusError, VocabError
from semhuff.trees.huffman import build_huffman
from semhuff.trees.base import Tree, TreeError
from semhuff.vocab import Vocab, scan_counts

TEXT = "the cat sat on the mat\nthe dog ate the cat food\n\n  a   b  c\nlast line without newline"


@pytest.mark.parametrize("opener,name", [(open, "c.txt"), (gzip.open, "c.txt.gz"),
                                         (bz2.open, "c.txt.bz2"), (lzma.open, "c.xz")])
def test_reads_plain_and_compressed(tmp_path, opener, name):
    with opener(tmp_path / name, "wb") as fh:
        fh.write(TEXT.encode())
    sentences = list(Corpus(tmp_path / name))
    assert sentences == [line.split() for line in TEXT.split("\n") if line.split()]


def test_directory_of_files_in_sorted_order(tmp_path):
    (tmp_path / "b.txt").write_text("two words\n")
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / ".hidden").write_text("skipped\n")
    assert list(Corpus(tmp_path)) == [["one"], ["two", "words"]]


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_long_line_cut_into_pieces_without_losing_a_token(tmp_path, block):
    rng = np.random.default_rng(0)
    words = [f"w{int(x)}é" for x in rng.integers(0, 50, size=2345)]  # multi-byte chars
    path = tmp_path / "one_line.txt"
    path.write_text(" ".join(words) + "\nshort line\n")
    corpus = Corpus(path, max_sentence_length=100, block_bytes=block)
    pieces = list(corpus)
    assert [len(p) for p in pieces[:-1]] == [100] * 23 + [45]
    assert sum(pieces[:-1], []) == words
    assert pieces[-1] == ["short", "line"]
    assert corpus.stats.tokens == 2347 and corpus.stats.invalid_utf8 == 0


def test_invalid_utf8_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good \xff\xfe word caf\xc3\xa9\n")
    corpus = Corpus(path)
    assert list(corpus) == [["good", "\ufffd\ufffd", "word", "café"]]
    assert corpus.stats.invalid_utf8 == 2


@pytest.mark.parametrize("content,message", [(None, "not found"), (b"\x00\x01\x02binary", "binary")])
def test_bad_corpus_files(tmp_path, content, message):
    path = tmp_path / "x"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        list(Corpus(path))


def test_vocab_counts_sorting_and_min_count():
    sentences = [s.split() for s in TEXT.split("\n")]
    vocab = Vocab.build(sentences, min_count=2)
    ref = Counter(w for s in sentences for w in s)
    assert vocab.words == ["the", "cat"]  # 4 and 2 occurrences
    assert list(vocab.counts) == [ref["the"], ref["cat"]]
    assert vocab.total_tokens == sum(ref.values())
    with pytest.raises(VocabError, match="min_count=9"):
        Vocab.build(sentences, min_count=9)


def test_ties_keep_first_seen_order_like_gensim():
    vocab = Vocab.build([["b", "a", "c", "a", "b", "c"]], min_count=1)
    assert vocab.words == ["b", "a", "c"]


def test_max_vocab_size_prunes_like_word2vec():
    rng = np.random.default_rng(1)
    sentences = [[f"w{int(x)}" for x in rng.zipf(1.5, size=50)] for _ in range(200)]
    counts, total, _ = scan_counts(sentences, max_vocab_size=40)
    # naive reference of word2vec.c's ReduceVocab, applied after each sentence
    ref, min_reduce = {}, 1
    for s in sentences:
        for w in s:
            ref[w] = ref.get(w, 0) + 1
        if len(ref) > 40:
            ref = {w: c for w, c in ref.items() if c > min_reduce}
            min_reduce += 1
    assert dict(counts) == ref and total == 50 * 200


def test_keep_probabilities_match_gensim():
    from gensim.models import Word2Vec as GensimWord2Vec
    rng = np.random.default_rng(2)
    sentences = [[f"w{int(x)}" for x in rng.zipf(1.3, size=40)] for _ in range(300)]
    g = GensimWord2Vec(vector_size=8, min_count=2, sample=1e-2)
    g.build_vocab(sentences)
    vocab = Vocab.build(sentences, min_count=2)
    ours = vocab.keep_thresholds(1e-2).astype(np.float64)
    theirs = np.array([g.wv.get_vecattr(w, "sample_int") for w in vocab.words], dtype=np.float64)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=2)


def _reference_huffman_cost(counts):
    heap = [(int(c), i) for i, c in enumerate(counts)]
    heapq.heapify(heap)
    total, uid = 0, len(counts)
    while len(heap) > 1:
        a, b = heapq.heappop(heap), heapq.heappop(heap)
        total += a[0] + b[0]
        heapq.heappush(heap, (a[0] + b[0], uid))
        uid += 1
    return total


@pytest.mark.parametrize("seed", range(4))
def test_huffman_is_optimal_prefix_free_and_complete(seed):
    rng = np.random.default_rng(seed)
    counts = np.sort(rng.zipf(1.2, size=int(rng.integers(2, 3000))).clip(1, 10**7))[::-1]
    tree = build_huffman(counts)
    tree.validate()
    codes = {tree.code_string(w) for w in range(len(counts))}
    assert len(codes) == len(counts)
    as_list = sorted(codes)
    assert not any(b.startswith(a) for a, b in zip(as_list, as_list[1:]))  # prefix-free
    assert sum(Fraction(1, 2 ** len(c)) for c in codes) == 1  # Kraft sum exactly 1
    # expected code length equals an independent heapq Huffman (sum of merge weights)
    assert int((counts * tree.lengths).sum()) == _reference_huffman_cost(counts)


def test_tree_rejects_broken_parent_arrays():
    tree = build_huffman(np.array([5, 3, 2, 1]))
    parent, branch = tree.parent.copy(), tree.branch.copy()
    branch[0] = branch[np.flatnonzero(parent == parent[0])[1]]  # two children with one bit
    with pytest.raises(TreeError):
        Tree(parent, branch).validate()
    with pytest.raises(TreeError):
        build_huffman(np.array([1, 5]))  # not sorted


def test_tree_save_load_roundtrip(tmp_path):
    tree = build_huffman(np.array([9, 4, 4, 2, 1]))
    tree.save(tmp_path / "t.npz")
    back = Tree.load(tmp_path / "t.npz")
    assert back.kind == "huffman"
    np.testing.assert_array_equal(back.points, tree.points)
    np.testing.assert_array_equal(back.codes, tree.codes)
