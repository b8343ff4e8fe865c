import math
import os

import numpy as np
import pytest
import scipy.sparse as sp

from semhuff.trees.similarity import (
    SimilarityError,
    SimilarityReport,
    default_wordnet_dirs,
    embedding_similarity,
    find_wordnet,
    load_similarity,
    looks_like_vectors,
    pairs_file_similarity,
    similarity_from_pairs,
    wordnet_similarity,
)

WORDS = ["cat", "dog", "tree", "grass", "plant", "animal"]


def weight(matrix, words, a, b):
    return matrix[words.index(a), words.index(b)]


def assert_clean(matrix, n):
    assert matrix.shape == (n, n)
    assert (abs(matrix - matrix.T)).nnz == 0
    assert matrix.diagonal().sum() == 0
    assert np.all(matrix.data > 0) and np.all(np.isfinite(matrix.data))


def test_pairs_file_counts_bad_input(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text(
        "# weighted pairs and synonym sets\n"
        "cat dog 0.9\n"
        "tree, grass, plant\n"           # a synonym set: three pairs of weight 1
        "cat cat 0.5\n"                   # self-pair
        "cat tree -1\n"                   # negative
        "dog tree nan\n"                  # NaN
        "cat unicorn 0.3\n"               # unknown word
        "lonely\n"                        # malformed: one field
        "animal dog 0.4 0.5\n"            # malformed: numbers as words
        "\n"
        "animal cat 0.7  # trailing comment\n"
        "animal dog\n")
    report = SimilarityReport()
    matrix = pairs_file_similarity(str(path), WORDS, top_k=30, report=report)
    assert_clean(matrix, 6)
    assert weight(matrix, WORDS, "cat", "dog") == pytest.approx(0.9)
    assert weight(matrix, WORDS, "grass", "plant") == 1.0
    assert weight(matrix, WORDS, "animal", "dog") == 1.0
    assert weight(matrix, WORDS, "cat", "tree") == 0
    assert (report.self_pairs, report.bad_weights, report.unknown_words, report.malformed_lines) == (1, 2, 1, 2)
    assert report.edges == 6 and report.words_with_edges == 6
    assert "unknown" in report.summary()


def test_top_k_keeps_each_words_best_and_symmetrises():
    rng = np.random.default_rng(0)
    n = 40
    rows, cols = np.triu_indices(n, 1)
    weights = rng.random(rows.size)
    matrix = similarity_from_pairs(rows, cols, weights, n, top_k=3)
    assert_clean(matrix, n)
    full = sp.coo_matrix((weights, (rows, cols)), shape=(n, n)).toarray()
    full = full + full.T
    for word in range(n):
        best = np.argsort(-full[word])[:3]
        assert all(matrix[word, b] == pytest.approx(full[word, b]) for b in best)
    assert matrix.nnz <= 2 * 3 * n


def test_similarity_from_pairs_drops_bad_values():
    report = SimilarityReport()
    matrix = similarity_from_pairs([0, 1, 2, 0], [1, 1, 0, 2], [0.5, 0.5, math.inf, -2], 3, report=report)
    assert matrix.nnz == 2 and report.self_pairs == 1 and report.bad_weights == 2
    with pytest.raises(SimilarityError):
        similarity_from_pairs([0], [5], [1.0], 3)


@pytest.fixture
def vectors():
    rng = np.random.default_rng(1)
    base = {"cat": [1, 0, 0], "dog": [0.9, 0.1, 0], "tree": [0, 1, 0], "grass": [0, 0.9, 0.2],
            "plant": [0, 0.7, 0.7], "rock": [0, 0, 1]}
    words = list(base)
    return words, np.array([base[w] for w in words], dtype=np.float32) + rng.normal(0, 0.01, (6, 3))


@pytest.mark.parametrize("binary", [False, True])
def test_embedding_neighbours_from_word2vec_files(tmp_path, vectors, binary):
    from gensim.models import KeyedVectors
    words, matrix = vectors
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(words, matrix)
    path = str(tmp_path / ("vectors.bin" if binary else "vectors.txt"))
    kv.save_word2vec_format(path, binary=binary)
    assert looks_like_vectors(path)
    report = SimilarityReport()
    sim = load_similarity(path, WORDS, top_k=1, report=report)
    assert_clean(sim, 6)
    assert weight(sim, WORDS, "cat", "dog") > 0.9
    assert weight(sim, WORDS, "tree", "grass") > 0.9
    assert weight(sim, WORDS, "cat", "tree") == 0
    assert report.unknown_words == 1  # "rock"
    assert np.diff(sim.indptr)[WORDS.index("animal")] == 0  # no vector: no edge, still fine


def test_embedding_from_memory_and_keyedvectors(vectors):
    from gensim.models import KeyedVectors
    words, matrix = vectors
    from_tuple = embedding_similarity((words, matrix), WORDS, top_k=2)
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(words, matrix)
    assert (abs(from_tuple - load_similarity(kv, WORDS, top_k=2))).max() < 1e-6


def test_missing_sources_raise_a_clear_error(tmp_path):
    with pytest.raises(SimilarityError, match="not found"):
        load_similarity(str(tmp_path / "nope.txt"), WORDS)
    with pytest.raises(SimilarityError, match="WordNet"):
        load_similarity("wordnet", WORDS, wordnet_dir=str(tmp_path))
    with pytest.raises(SimilarityError, match="top_k"):
        load_similarity("wordnet", WORDS, top_k=0)
    with pytest.raises(SimilarityError, match="shape"):
        load_similarity(sp.csr_matrix((2, 2)), WORDS)
    bad = tmp_path / "bad.vec"
    bad.write_text("2 3\ncat 1 2\n")
    with pytest.raises(SimilarityError, match="cannot read vectors"):
        load_similarity(str(bad), WORDS)


HEADER = "  1 This software and database is being provided to you, the LICENSEE\n"


def write_tiny_wordnet(folder):
    """A five-synset WordNet in the real dict format: feline > {cat, lion}; dog; chase/dog (v)."""
    data = {
        "noun": ["00000001 05 n 01 feline 0 002 ~ 00000002 n 0000 ~ 00000003 n 0000 | a cat",
                 "00000002 05 n 02 cat 0 true_cat 0 001 @ 00000001 n 0000 | a cat",
                 "00000003 05 n 01 lion 0 001 @ 00000001 n 0000 | a lion",
                 "00000004 05 n 01 dog 0 000 | a dog"],
        "verb": ["00000010 38 v 02 chase 0 dog 0 000 01 + 02 00 | go after"],
        "adj": [], "adv": [],
    }
    index = {
        "noun": ["cat n 1 1 @ 1 0 00000002", "dog n 1 0 1 0 00000004",
                 "feline n 1 1 ~ 1 0 00000001", "lion n 1 1 @ 1 0 00000003"],
        "verb": ["chase v 1 0 1 0 00000010", "dog v 1 0 1 0 00000010"],
        "adj": [], "adv": [],
    }
    for pos in data:
        (folder / f"data.{pos}").write_text(HEADER + "".join(line + "  \n" for line in data[pos]))
        (folder / f"index.{pos}").write_text(HEADER + "".join(line + "  \n" for line in index[pos]))
    (folder / "noun.exc").write_text("kine cow\n")


def test_wordnet_path_similarity_on_a_tiny_wordnet(tmp_path):
    write_tiny_wordnet(tmp_path)
    words = ["cat", "cats", "lion", "feline", "dog", "chase", "dogs", "unicorn"]
    report = SimilarityReport()
    sim = wordnet_similarity(words, top_k=30, wordnet_dir=str(tmp_path), report=report)
    assert_clean(sim, len(words))
    assert weight(sim, words, "cat", "cats") == 1.0       # inflection: same synset
    assert weight(sim, words, "cat", "feline") == 0.5     # one hop
    assert weight(sim, words, "cat", "lion") == pytest.approx(1 / 3)  # two hops
    assert weight(sim, words, "dog", "chase") == 1.0      # the verb sense
    assert weight(sim, words, "dogs", "chase") == 1.0
    assert weight(sim, words, "dog", "cat") == 0
    assert np.diff(sim.indptr)[words.index("unicorn")] == 0
    assert report.words_with_edges == 7
    assert load_similarity("wordnet", words, wordnet_dir=str(tmp_path)).nnz == sim.nnz


@pytest.mark.skipif(not any(os.path.isfile(os.path.join(d, "data.noun")) for d in default_wordnet_dirs()),
                    reason="WordNet dict files not available")
def test_real_wordnet():
    words = ["cat", "cats", "feline", "dog", "canine", "king", "queen", "monarch", "the"]
    sim = wordnet_similarity(words, wordnet_dir=find_wordnet())
    assert weight(sim, words, "cat", "cats") == 1.0
    assert weight(sim, words, "cat", "feline") > 0
    assert weight(sim, words, "dog", "canine") > 0
    assert weight(sim, words, "king", "monarch") > 0
    assert np.diff(sim.indptr)[words.index("the")] == 0
