"""The papers' rules that a wrong implementation would break silently (exit 0, plausible
numbers), each pinned against a reference that shares no code with the library:

* SemHuff (Yang et al.): a level's graph weighs two nodes by the *average* similarity of their
  leaf pairs, and each level's sibling pairs form a maximum-weight matching of that graph
  (a hand-made case where the sum would pick other siblings; a brute-force matching per level);
* self-organized re-assignment (Shen et al.): an output row kept for an unchanged split gives
  the same branch probabilities after the tree is rebuilt, negated when the split's sides
  swapped (a hand-made scenario with swaps; random re-assignments);
* the learning rate the kernels see decays linearly over epochs x words, never restarting
  per epoch (word2vec), observed by a plugin layer that records the rate it is handed;
* Huffman codes follow word2vec.c's CreateBinaryTree (which child gets bit 1, how ties are
  broken), on the codes and points themselves against a hand-built tree.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp

import alpha_recorder
from semhuff import Word2Vec
from semhuff.corpus import Corpus
from semhuff.hooks import HookContext
from semhuff.layers import SelfOrganizedHS
from semhuff.trees import make_tree
from semhuff.trees.clusters import cluster_tree
from semhuff.trees.huffman import build_huffman
from semhuff.trees.organizer import SelfOrganizer
from semhuff.trees.semhuff import build_semhuff
from semhuff.vocab import Vocab


# -- naive tree helpers (parent / branch arrays only) -------------------------------------------

def _depths(parent):
    out = []
    for node in range(len(parent)):
        d = 0
        while parent[node] >= 0:
            node, d = parent[node], d + 1
        out.append(d)
    return out


def _leaves_under(parent, n_words):
    """Set of leaves (words) under every node, by walking each leaf up."""
    under = [set() for _ in range(len(parent))]
    for w in range(n_words):
        node = w
        while node >= 0:
            under[node].add(w)
            node = parent[node]
    return under


def _children(parent, branch):
    """{inner node: (its 0-child, its 1-child)}."""
    kids = {}
    for node, p in enumerate(parent):
        if p >= 0:
            kids.setdefault(int(p), [None, None])[int(branch[node])] = node
    return {p: tuple(c) for p, c in kids.items()}


def _path(parent, branch, w):
    """[(inner node, bit taken)] from word w's leaf up to the root."""
    out, node = [], w
    while parent[node] >= 0:
        out.append((int(parent[node]), int(branch[node])))
        node = parent[node]
    return out


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def _p_bit(h, row, bit):
    """word2vec's node classifier: sigma(h . row) is the probability of bit 0."""
    x = float(np.dot(h.astype(np.float64), row.astype(np.float64)))
    return _sigmoid(x) if bit == 0 else _sigmoid(-x)


# -- 1. SemHuff: averaged level weights, maximum-weight sibling pairs ------------------------------

def test_semhuff_level_graph_averages_leaf_pairs_not_sums_them():
    """Counts [2, 2, 2, 2, 2, 2, 1, 1]: word2vec's Huffman tree puts words 1..5 and the subtree
    S over words {6, 7} on depth 3 (words 6 and 7 merge first; ties go to the inner node).
    Word 1 has one strong edge to word 2 (0.5) and two moderate ones into S (0.4 to each of 6
    and 7). Averaged over leaf pairs, 1-S weighs (0.4 + 0.4) / (1 x 2) = 0.4 < 0.5, so 1 and 2
    become siblings; summed, 1-S would weigh 0.8 and take word 1 away from word 2."""
    counts = np.array([2, 2, 2, 2, 2, 2, 1, 1])
    huffman = build_huffman(counts)
    depth = _depths(huffman.parent)
    assert [depth[w] for w in range(8)] == [2, 3, 3, 3, 3, 3, 4, 4]  # the layout described
    assert huffman.parent[6] == huffman.parent[7] and depth[huffman.parent[6]] == 3
    sim = np.zeros((8, 8))
    for a, b, s in ((1, 2, 0.5), (1, 6, 0.4), (1, 7, 0.4)):
        sim[a, b] = sim[b, a] = s
    for matching in ("exact", "approx", "auto"):
        tree = build_semhuff(counts, sp.csr_matrix(sim), matching=matching)
        tree.validate()
        assert tree.parent[1] == tree.parent[2], matching
        assert tree.parent[6] == tree.parent[7], matching
        np.testing.assert_array_equal(tree.lengths, huffman.lengths)


def _best_perfect_matching(nodes, weight):
    """Largest total weight over every way to pair up ``nodes`` (brute force)."""
    if not nodes:
        return 0.0
    first, rest = nodes[0], nodes[1:]
    best = -math.inf
    for i, other in enumerate(rest):
        pairing_rest = _best_perfect_matching(rest[:i] + rest[i + 1:], weight)
        best = max(best, weight(first, other) + pairing_rest)
    return best


def _level_checks(tree, sim):
    """For every level of ``tree``: (weight of its sibling pairs, best weight of any pairing of
    its nodes), both on the average leaf-pair similarity between two nodes."""
    parent = tree.parent.tolist()
    V = tree.n_words
    depth = _depths(parent)
    under = _leaves_under(parent, V)

    def averaged(a, b):
        total = sum(sim[i, j] for i in under[a] for j in under[b])
        return total / (len(under[a]) * len(under[b]))

    out = []
    for d in range(max(depth), 0, -1):
        nodes = [n for n in range(len(parent)) if depth[n] == d]
        siblings = {}
        for n in nodes:
            siblings.setdefault(parent[n], []).append(n)
        chosen = sum(averaged(a, b) for a, b in siblings.values())
        out.append((d, chosen, _best_perfect_matching(nodes, averaged)))
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("matching", ["exact", "auto"])
def test_semhuff_pairs_every_level_by_a_maximum_matching_of_averaged_weights(seed, matching):
    """Small vocabularies (levels of at most 12 nodes), counts with ties (levels mixing leaves
    and subtrees), sparse random similarities: each level's sibling pairs, given the levels
    below as built, weigh as much as the best pairing found by brute force."""
    rng = np.random.default_rng(seed)
    V = int(rng.integers(6, 13))
    counts = np.sort(rng.integers(1, 6, V))[::-1]
    dense = np.triu(rng.random((V, V)) * (rng.random((V, V)) < 0.5), 1)
    sim = dense + dense.T
    tree = build_semhuff(counts, sp.csr_matrix(sim), matching=matching)
    tree.validate()
    np.testing.assert_array_equal(tree.lengths, build_huffman(counts).lengths)
    for d, chosen, best in _level_checks(tree, sim):
        assert chosen == pytest.approx(best, rel=1e-9, abs=1e-12), f"level {d}"


# -- 2. self-organized re-assignment: kept splits keep their probabilities -------------------------

def _splits(tree, cluster_of):
    """{inner node: (side-0 set, side-1 set)}: sets of cluster ids where the node's leaves span
    more than one cluster (the cluster part), sets of words inside a cluster."""
    parent, V = tree.parent.tolist(), tree.n_words
    under = _leaves_under(parent, V)
    out = {}
    for node, (c0, c1) in _children(parent, tree.branch.tolist()).items():
        clusters = {int(cluster_of[w]) for w in under[node]}
        if len(clusters) > 1:
            sides = tuple(frozenset(int(cluster_of[w]) for w in under[c]) for c in (c0, c1))
            out[node] = ("clusters",) + sides
        else:
            out[node] = ("words", frozenset(under[c0]), frozenset(under[c1]))
    return out


def _organized_layer(counts, before, n_clusters, dim, seed):
    organizer = SelfOrganizer(clusters=n_clusters, freq_budget=1.0, gamma=4.0, seed=seed)
    organizer.start(counts)
    organizer.cluster_of = np.asarray(before, np.int32)
    tree, depth = cluster_tree(organizer.cluster_of, counts, n_clusters, kind="self-organized")
    layer = SelfOrganizedHS(tree, depth, organizer=organizer)
    layer.allocate(len(counts), dim)
    layer.weights[:] = np.random.default_rng(seed).standard_normal(layer.weights.shape)
    return layer


def _reassign_to(layer, counts, after):
    """Make Algorithm 1 choose ``after`` (q prefers each word's target cluster; no limits
    bind) and re-organize the layer as its hook does."""
    o = layer.organizer
    o.q[:] = -1.0
    o.q[np.arange(len(counts)), after] = 0.0
    info = layer.reorganize(HookContext(epoch=0, epochs=1, words_done=0, total_words=1,
                                        alpha=0.0, counts=counts, layer=layer, loss=0.0,
                                        predictions=0, _layer_changed=lambda: None))
    np.testing.assert_array_equal(o.cluster_of, after)
    return info


def _check_kept_splits(old_tree, old_of, old_weights, new_tree, new_of, new_weights, hs):
    """Every new split equal to an old one (either way round) gives each of its sides the old
    probability, for every input h in ``hs``; every other row is zero. Returns
    (same-side matches, swapped matches, kept nodes)."""
    V = old_tree.n_words
    old = {s: node for node, s in _splits(old_tree, old_of).items()}
    same = swapped = 0
    kept = set()
    for node, (kind, side0, side1) in _splits(new_tree, new_of).items():
        row = new_weights[node - V]
        if (kind, side0, side1) in old:
            old_node, flip = old[(kind, side0, side1)], False
            same += 1
        elif (kind, side1, side0) in old:
            old_node, flip = old[(kind, side1, side0)], True
            swapped += 1
        else:
            assert not row.any(), "a new split must start from a zero row"
            continue
        kept.add(node)
        old_row = old_weights[old_node - V]
        for h in hs:
            for bit in (0, 1):  # the side that was old_bit is now bit
                old_bit = 1 - bit if flip else bit
                assert _p_bit(h, row, bit) == pytest.approx(_p_bit(h, old_row, old_bit),
                                                            rel=1e-12, abs=1e-15)
    return same, swapped, kept


def _word_prob(tree, weights, h, w):
    V = tree.n_words
    return math.prod(_p_bit(h, weights[node - V], bit)
                     for node, bit in _path(tree.parent, tree.branch, w))


def test_reassignment_keeps_path_probabilities_through_kept_splits_with_swapped_sides():
    """Counts 100, 90, ..., 5 (12 words), four clusters: c0 = {0, 4, 6, 8} (mass 220),
    c1 = {1, 5, 9, 10} (165), c2 = {2, 11} (85), c3 = {3, 7} (100). Word 7 (30) moves from c3 to
    c1: c3 drops to 70, under c2's 85, and c1 + 30 = 195 outweighs c2 + c3 = 155. The Huffman tree
    over the clusters (by token mass) keeps its three splits {c2 | c3}, {c1 | c2 c3} and
    {c0 | rest}, but the first two with their sides swapped (the heavier side takes bit 1). c0
    and c2 keep their words, so every word of c0 and c2 has a path of kept splits, two of them
    swapped for c2's words: P(w | h) must not change for any of them. (Word 3, alone in c3
    now, also has only kept splits above it, but one fewer than before.)"""
    counts = np.array([100, 90, 80, 70, 60, 50, 40, 30, 20, 15, 10, 5])
    before = np.array([0, 1, 2, 3, 0, 1, 0, 3, 0, 1, 1, 2])
    after = before.copy()
    after[7] = 1
    dim = 6
    layer = _organized_layer(counts, before, 4, dim, seed=3)
    old_tree, old_weights = layer.tree, layer.weights.copy()
    info = _reassign_to(layer, counts, after)
    hs = np.random.default_rng(8).standard_normal((5, dim)).astype(np.float32)
    same, swapped, kept = _check_kept_splits(old_tree, before, old_weights, layer.tree, after,
                                             layer.weights, hs)
    assert swapped == 2 and same >= 5  # {c0 | rest}, c0's three rows, c2's one (and some of c1's)
    assert info["rows_kept"] == pytest.approx((same + swapped) / 11)  # what the layer reports
    new_paths = [_path(layer.tree.parent, layer.tree.branch, w) for w in range(12)]
    whole = [w for w in range(12) if all(node in kept for node, _ in new_paths[w])
             and len(new_paths[w]) == len(_path(old_tree.parent, old_tree.branch, w))]
    assert whole == [0, 2, 4, 6, 8, 11]  # c0's and c2's words
    for w in whole:
        for h in hs:
            assert _word_prob(layer.tree, layer.weights, h, w) == pytest.approx(
                _word_prob(old_tree, old_weights, h, w), rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_random_reassignments_keep_every_unchanged_split(seed):
    """Repeated re-assignments moving a few words each: every split the new tree repeats (same
    or swapped sides) keeps its branch probabilities; over the rounds some sides swap."""
    rng = np.random.default_rng(seed)
    V, C, dim = 40, 6, 4
    counts = np.sort(rng.integers(5, 400, V))[::-1]
    cluster_of = rng.integers(0, C, V)
    layer = _organized_layer(counts, cluster_of, C, dim, seed=seed)
    hs = rng.standard_normal((3, dim)).astype(np.float32)
    totals = np.zeros(2, int)  # same-side and swapped matches over the rounds
    for _ in range(8):
        old_tree, old_weights = layer.tree, layer.weights.copy()
        old_of = layer.organizer.cluster_of.copy()
        new_of = old_of.copy()
        moved = rng.choice(V, 3, replace=False)
        new_of[moved] = rng.integers(0, C, 3)
        _reassign_to(layer, counts, new_of)
        same, swapped, _ = _check_kept_splits(old_tree, old_of, old_weights, layer.tree, new_of,
                                              layer.weights, hs)
        totals += (same, swapped)
        layer.weights[:] = rng.standard_normal(layer.weights.shape)  # fresh rows for the next round
    assert totals[0] > 0 and totals[1] > 0


# -- 3. the learning rate the kernels see ----------------------------------------------------------

@pytest.fixture(scope="module")
def lee_prefix(lee_path, tmp_path_factory):
    """lee's first 120 documents (about 23k words)."""
    path = tmp_path_factory.mktemp("lee") / "lee120.txt"
    lines = [" ".join(s) for _, s in zip(range(120), Corpus(lee_path))]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_learning_rate_falls_linearly_over_all_epochs_without_restarting(lee_prefix):
    """CBOW, no down-sampling, one worker: each input word gives one prediction, in corpus
    order. The rate of the first prediction of epoch k must be alpha - (alpha - min_alpha) k /
    epochs (word2vec's decay over epochs x words), to within one job's words; the rates never
    rise; the last is near min_alpha."""
    alpha, min_alpha, epochs, chunk_words = 0.05, 0.002, 4, 1_000
    model = Word2Vec(lee_prefix, loss=alpha_recorder.NAME, sg=0, sample=0, alpha=alpha,
                     min_alpha=min_alpha, epochs=epochs, vector_size=4, min_count=2, window=2,
                     workers=1, chunk_words=chunk_words, progress=False)
    layer = model.layer
    per_epoch = [e.pairs for e in model.reports[0].epochs]
    n = int(layer.count[0])
    assert n == sum(per_epoch) <= layer.CAPACITY
    rates = layer.rates[:n].astype(np.float64)
    words = sum(per_epoch) / epochs  # all words are kept and every sentence has two or more
    # the rate may be set per sentence or per job (a chunk: chunk_words, rounded up to the end
    # of a sentence); a per-epoch restart would be off by (alpha - min_alpha) / epochs, 10x more
    job = chunk_words + max(len(s) for s in Corpus(lee_prefix))
    slack = (alpha - min_alpha) * job / (epochs * words)
    assert slack < 0.1 * (alpha - min_alpha) / epochs
    starts = np.concatenate([[0], np.cumsum(per_epoch)[:-1]])
    for k, first in enumerate(starts):
        expected = alpha - (alpha - min_alpha) * k / epochs
        assert expected - slack - 1e-7 <= rates[first] <= expected + 1e-7, f"epoch {k}"
    assert np.all(np.diff(rates) <= 1e-9)  # one worker: in corpus order, never restarting
    assert rates[-1] == pytest.approx(min_alpha, abs=slack + 1e-7)


# -- 4. Huffman codes: word2vec.c's convention -----------------------------------------------------

def test_huffman_codes_follow_word2vec_c():
    """word2vec.c's CreateBinaryTree on counts [4, 3, 2, 1, 1] (sorted descending, as the
    vocabulary is). Each step takes the two smallest nodes, min1 then min2, each from the end of
    the leaves or the front of the new inner nodes: the leaf only if its count is *strictly*
    smaller (a tie goes to the inner node); min2 gets binary = 1, min1 keeps 0; inner node
    V + a is the a-th created (its output row is a).

      a=0: leaves 4 (1) and 3 (1)            -> node 5 (2): 4 -> 0, 3 -> 1
      a=1: leaf 2 (2) ties node 5 (2): node 5 first, then leaf 2 -> node 6 (4): 5 -> 0, 2 -> 1
      a=2: leaf 1 (3) < node 6 (4); leaf 0 (4) ties node 6: node 6 -> node 7 (7): 1 -> 0, 6 -> 1
      a=3: leaf 0 (4) < node 7 (7), then node 7  -> node 8 (11), the root: 0 -> 0, 7 -> 1

    Codes are read root first (word2vec.c reverses the leaf-up walk), points are the rows of
    the inner nodes on the path, root first. Taking the leaf on ties would put word 0 at depth
    2; giving bit 1 to min1 would flip every bit."""
    tree = build_huffman(np.array([4, 3, 2, 1, 1]))
    expected = {0: ("0", [3]), 1: ("10", [3, 2]), 2: ("111", [3, 2, 1]),
                3: ("1101", [3, 2, 1, 0]), 4: ("1100", [3, 2, 1, 0])}
    for w, (code, points) in expected.items():
        n = int(tree.lengths[w])
        assert "".join(str(int(b)) for b in tree.codes[w, :n]) == code, w
        assert tree.points[w, :n].tolist() == points, w
    assert tree.parent.tolist() == [8, 7, 6, 5, 5, 6, 7, 8, -1]
    vocab = Vocab(["a", "b", "c", "d", "e"], np.array([4, 3, 2, 1, 1]), 11)
    np.testing.assert_array_equal(make_tree("huffman", vocab).codes, tree.codes)


def _word2vec_c_codes(counts):
    """word2vec.c's CreateBinaryTree written out naively: counts (descending), then per word
    (codes root first, points root first)."""
    V = len(counts)
    count = list(counts) + [math.inf] * (V - 1)
    parent = [-1] * (2 * V - 1)
    binary = [0] * (2 * V - 1)
    pos1, pos2 = V - 1, V
    for a in range(V - 1):
        picked = []
        for _ in range(2):
            if pos1 >= 0 and count[pos1] < count[pos2]:
                picked.append(pos1)
                pos1 -= 1
            else:
                picked.append(pos2)
                pos2 += 1
        count[V + a] = count[picked[0]] + count[picked[1]]
        parent[picked[0]] = parent[picked[1]] = V + a
        binary[picked[1]] = 1
    out = []
    for w in range(V):
        codes, points, node = [], [], w
        while parent[node] >= 0:
            codes.append(binary[node])
            points.append(parent[node] - V)
            node = parent[node]
        out.append((codes[::-1], points[::-1]))
    return out


@pytest.mark.parametrize("seed", range(10))
def test_huffman_codes_equal_word2vec_c_on_counts_with_ties(seed):
    rng = np.random.default_rng(seed)
    counts = np.sort(rng.integers(1, 8, int(rng.integers(2, 40))))[::-1]
    tree = build_huffman(counts)
    for w, (codes, points) in enumerate(_word2vec_c_codes(counts.tolist())):
        n = int(tree.lengths[w])
        assert tree.codes[w, :n].tolist() == codes and tree.points[w, :n].tolist() == points
