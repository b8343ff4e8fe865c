import numpy as np
import pytest
import scipy.sparse as sp

from semhuff.trees.base import TreeError
from semhuff.trees import make_tree
from semhuff.trees.huffman import build_huffman
from semhuff.trees.semhuff import build_semhuff, sibling_similarity
from semhuff.vocab import Vocab

DEMO_WORDS = ["animal", "plant", "cat", "tree", "dog", "grass"]
DEMO_COUNTS = [10, 9, 5, 5, 4, 4]
DEMO_SIMILARITY = {
    ("cat", "dog"): 0.9, ("tree", "grass"): 0.7,
    ("plant", "tree"): 0.6, ("plant", "grass"): 0.65,  # the two values §3.2 gives
    ("animal", "cat"): 0.7, ("animal", "dog"): 0.75, ("animal", "plant"): 0.2,
    ("cat", "tree"): 0.05, ("dog", "grass"): 0.05,
}


def demo_matrix():
    ids = {w: i for i, w in enumerate(DEMO_WORDS)}
    rows = [ids[a] for a, b in DEMO_SIMILARITY]
    cols = [ids[b] for a, b in DEMO_SIMILARITY]
    return sp.coo_matrix((list(DEMO_SIMILARITY.values()), (rows, cols)), shape=(6, 6)).tocsr()


def siblings(tree, word_a, word_b):
    a, b = DEMO_WORDS.index(word_a), DEMO_WORDS.index(word_b)
    return tree.parent[a] == tree.parent[b]


def leaves_under(tree, node):
    under = []
    for leaf in range(tree.n_words):
        n = leaf
        while n >= 0 and n != node:
            n = tree.parent[n]
        if n == node:
            under.append(DEMO_WORDS[leaf])
    return set(under)


def random_problem(seed, n_words, density=0.02):
    rng = np.random.default_rng(seed)
    counts = np.sort(rng.zipf(1.3, n_words).clip(1, 10**6))[::-1].astype(np.int64)
    similarity = sp.random(n_words, n_words, density=density, random_state=seed, format="csr")
    return counts, similarity


def test_paper_demo_matches_figure_2():
    huffman = build_huffman(DEMO_COUNTS)
    # the starting Huffman tree pairs the words badly: {dog, grass} and {cat, tree}
    assert siblings(huffman, "dog", "grass") and siblings(huffman, "cat", "tree")
    tree = build_semhuff(DEMO_COUNTS, demo_matrix())
    tree.validate()
    # bottom level: <cat, dog> and <tree, grass>; next level: plant joins {tree, grass},
    # animal joins {cat, dog}
    assert siblings(tree, "cat", "dog") and siblings(tree, "tree", "grass")
    plant, animal = DEMO_WORDS.index("plant"), DEMO_WORDS.index("animal")
    assert leaves_under(tree, tree.parent[plant]) == {"plant", "tree", "grass"}
    assert leaves_under(tree, tree.parent[animal]) == {"animal", "cat", "dog"}
    assert np.array_equal(tree.lengths, huffman.lengths)
    # sim(plant, {tree, grass}) = (0.6 + 0.65) / 2 = 0.625, as computed in §3.2
    per_node = sibling_similarity(tree, demo_matrix())
    assert per_node[tree.parent[plant] - 6] == pytest.approx(0.625)


@pytest.mark.parametrize("matching", ["auto", "exact", "approx"])
@pytest.mark.parametrize("seed,n_words", [(0, 50), (1, 301), (2, 2000)])
def test_depths_and_expected_code_length_are_huffmans(seed, n_words, matching):
    counts, similarity = random_problem(seed, n_words)
    huffman = build_huffman(counts)
    tree = build_semhuff(counts, similarity, matching=matching)
    tree.validate()  # full, one root, bits 0/1 under every inner node: prefix-free
    assert tree.kind == "semhuff"
    assert np.array_equal(tree.lengths, huffman.lengths)
    assert tree.expected_code_length(counts) == huffman.expected_code_length(counts)
    codes = {tree.code_string(w) for w in range(n_words)}
    assert len(codes) == n_words


def test_rearrangement_raises_sibling_similarity():
    counts, similarity = random_problem(5, 1500, density=0.01)
    tree = build_semhuff(counts, similarity)
    assert sibling_similarity(tree, similarity).sum() > 5 * sibling_similarity(
        build_huffman(counts), similarity).sum()


def test_level_stats_and_words_without_edges():
    counts, _ = random_problem(3, 400)
    only_two = sp.coo_matrix(([1.0], ([0], [1])), shape=(400, 400))
    levels = []
    tree = build_semhuff(counts, only_two, on_level=levels.append)
    tree.validate()
    assert [s.depth for s in levels] == list(range(tree.max_depth, 0, -1))
    assert sum(s.leaves for s in levels) == 400
    assert all(2 * s.matched_pairs <= s.nodes for s in levels)
    # no edges at all still gives a valid tree with Huffman's depths
    empty = build_semhuff(counts, sp.csr_matrix((400, 400)))
    assert np.array_equal(empty.lengths, build_huffman(counts).lengths)


@pytest.mark.parametrize("n_words", [1, 2, 3])
def test_tiny_vocabularies(n_words):
    counts = np.arange(n_words, 0, -1) * 10
    tree = build_semhuff(counts, sp.csr_matrix(np.ones((n_words, n_words))))
    tree.validate()
    assert np.array_equal(tree.lengths, build_huffman(counts).lengths)


def test_bad_similarity_shape():
    with pytest.raises(TreeError, match="similarity matrix is 3x3"):
        build_semhuff([5, 4, 3, 2], sp.csr_matrix((3, 3)))


def test_make_tree_dispatch(tmp_path):
    vocab = Vocab(DEMO_WORDS, DEMO_COUNTS, total_tokens=sum(DEMO_COUNTS))
    assert make_tree("huffman", vocab).kind == "huffman"
    assert siblings(make_tree("semhuff", vocab, demo_matrix()), "cat", "dog")
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("cat dog 0.9\ntree grass 0.7\nplant tree 0.6\nplant grass 0.65\n"
                     "animal cat 0.7\nanimal dog 0.75\n")
    tree = make_tree("semhuff", vocab, str(pairs), top_k=5, matching="approx")
    assert siblings(tree, "cat", "dog") and siblings(tree, "tree", "grass")
    with pytest.raises(TreeError, match="needs similarity"):
        make_tree("semhuff", vocab)
    with pytest.raises(TreeError, match="unknown tree kind"):
        make_tree("no-such-tree", vocab)
    with pytest.raises(TreeError, match="the semhuff tree does not use colour"):
        make_tree("semhuff", vocab, demo_matrix(), colour="blue")
    with pytest.raises(TreeError):
        make_tree("huffman", vocab, "wordnet")


def test_unknown_matching_method():
    with pytest.raises(TreeError, match="unknown matching"):
        build_semhuff(DEMO_COUNTS, demo_matrix(), matching="blossom")
