"""Issue 45's layer with a flat head and trees below it (``head-tree``) and the tree surgery it is
made with (``semhuff.trees.subtrees``), against independent references: the restricted tree's
codes from the original paths filtered by hand, the top subtrees by a naive split loop, every
word's probability by a dense float64 computation (a softmax over the top, then a walk along
the original path below the cut), finite differences, and a file round trip."""
import io
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from lm_helpers import randomise, zipf_vocab  # noqa: E402
from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import make_output_layer  # noqa: E402
from semhuff.lm.layers.head_tree import HeadTreeSoftmax, head_size  # noqa: E402
from semhuff.trees import make_tree  # noqa: E402
from semhuff.trees.base import Tree  # noqa: E402
from semhuff.trees.clusters import frequency_binning  # noqa: E402
from semhuff.trees.huffman import build_huffman  # noqa: E402
from semhuff.trees.organizer import SelfOrganizer  # noqa: E402
from semhuff.trees.subtrees import frontier, join, restrict, subtree_mass  # noqa: E402
from semhuff.vocab import Vocab  # noqa: E402

D = 6
V = 60


def random_counts(n, seed=0):
    """Distinct counts in descending order (no ties: the split order is then unique)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(np.arange(1, 50 * n), size=n, replace=False))[::-1].copy()


def sibling_words(tree, node, branch):
    """The words below ``node``'s child on ``branch`` (naive: every word's path searched)."""
    return {w for w in range(tree.n_words)
            for j in range(tree.lengths[w])
            if tree.points[w, j] == node - tree.n_words and tree.codes[w, j] == branch}


# -- trees ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["huffman", "random"])
def test_restrict_keeps_exactly_the_splits_between_kept_words(kind):
    vocab = zipf_vocab(30)
    tree = make_tree(kind, vocab, seed=3)
    keep = np.array([1, 4, 5, 9, 12, 13, 20, 21, 22, 29])
    small = restrict(tree, keep)
    small.validate()
    kept = set(keep.tolist())
    for i, w in enumerate(keep):
        # by hand: w's path in the big tree, a node kept when its other side holds a kept word
        code = "".join(str(int(tree.codes[w, j])) for j in range(tree.lengths[w])
                       if sibling_words(tree, tree.points[w, j] + tree.n_words,
                                        1 - tree.codes[w, j]) & kept)
        assert small.code_string(i) == code, (w, code)


def naive_frontier(tree, weights, n):
    """The heaviest non-leaf subtree split into its two children, a list scanned each time."""
    mass = {node: sum(weights[w] for w in below(tree, node)) for node in range(2 * tree.n_words - 1)}
    roots = [tree.root]
    while len(roots) < n:
        node = max((r for r in roots if r >= tree.n_words), key=lambda r: mass[r])
        roots.remove(node)
        roots += [c for c in range(2 * tree.n_words - 1) if tree.parent[c] == node]
    return sorted(tuple(sorted(below(tree, r))) for r in roots)


def below(tree, node):
    if node < tree.n_words:
        return {node}
    return {w for w in range(tree.n_words)
            if any(tree.points[w, j] == node - tree.n_words for j in range(tree.lengths[w]))}


@pytest.mark.parametrize("n", [1, 2, 5, 11, 30])
def test_frontier_splits_the_heaviest_subtree_first(n):
    counts = random_counts(30)
    tree = make_tree("random", zipf_vocab(30), seed=2)
    group, depth = frontier(tree, counts, n)
    got = sorted(tuple(np.flatnonzero(group == g).tolist()) for g in range(n))
    assert got == naive_frontier(tree, counts, n)
    for w in range(30):  # the depth is that of the node holding exactly w's group
        node = w if depth[w] == tree.lengths[w] else tree.points[w, depth[w]] + 30
        assert below(tree, node) == set(np.flatnonzero(group == group[w]).tolist())


def test_join_puts_two_trees_under_one_root():
    a, b = make_tree("huffman", zipf_vocab(5)), make_tree("random", zipf_vocab(7), seed=1)
    both = join(a, b, kind="joined")
    both.validate()
    assert [both.code_string(w) for w in range(5)] == ["0" + a.code_string(w) for w in range(5)]
    assert [both.code_string(5 + w) for w in range(7)] == ["1" + b.code_string(w)
                                                           for w in range(7)]
    one = join(make_tree("huffman", zipf_vocab(1)), b, kind="joined")  # a single word: a leaf
    assert one.code_string(0) == "0" and one.n_words == 8
    assert subtree_mass(both, np.ones(12))[both.root] == 12


# -- the layer ---------------------------------------------------------------------------------------

def dense_log_prob(layer, h):
    """(N, V) float64 by brute force: log_softmax of the top, then each node of the word's path
    in ``layer.tree`` below its cut, walked one by one."""
    top = torch.log_softmax(layer.top(h).double(), dim=1).detach().numpy()
    W = layer.weight.detach().double().numpy()
    # with tail_dim, the rows score the input times the projection's matrix
    P = None if layer.tail_proj is None else layer.tail_proj.weight.detach().double().numpy()
    tree = layer.tree
    entry, cut = layer.entry.numpy(), layer.cut.numpy()
    out = np.empty((h.shape[0], layer.n_classes))
    for n in range(h.shape[0]):
        x = h[n].detach().double().numpy()
        x = x if P is None else P @ x
        for w in range(layer.n_classes):
            total = top[n, entry[w]]
            for j in range(cut[w], tree.lengths[w]):
                s = float(x @ W[tree.points[w, j]])
                total += -math.log1p(math.exp(-s)) if tree.codes[w, j] == 0 else \
                    -math.log1p(math.exp(s))
            out[n, w] = total
    return out


VARIANTS = {
    "head 5, one tail entry": ("head-tree", dict(head=5)),
    "no head, 7 entries (two-level, trees inside)": ("head-tree", dict(head=0, tail_entries=7)),
    "head 8, 3 entries, random tree": ("head-tree", dict(head=8, tail_entries=3, tree="random")),
    "head by coverage": ("head-tree", dict(coverage=0.5, tail_entries=2)),
    "default head (2% of V)": ("head-tree", dict()),
    "sparse, with a head bias": ("head-tree", dict(head=4, tail_entries=2, sparse=True,
                                                   head_bias=True)),
    "class-tree, Huffman's top subtrees": ("class-tree", dict()),
    "class-tree, frequency bins": ("class-tree", dict(cluster_by="frequency")),
    "class-tree, random clusters and a head": ("class-tree", dict(cluster_by="random", head=5,
                                                                  clusters=4)),
    "organized-tree, as it starts": ("organized-tree", dict(head=5, clusters=6)),
    "class-tree, rows of 3 (a projection)": ("class-tree", dict(tail_dim=3, sparse=True)),
    "head-tree, rows of 2": ("head-tree", dict(head=5, tail_entries=2, tail_dim=2)),
}


def batch(n=9, seed=1, vocab_size=V):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, D, generator=g, dtype=torch.float64),
            torch.randint(0, vocab_size, (n,), generator=g))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_word_against_a_dense_float64_computation(name):
    layer_name, settings = VARIANTS[name]
    layer = randomise(make_output_layer(layer_name, D, zipf_vocab(V), **settings).double())
    h, t = batch()
    lp = layer.log_prob(h)
    ref = dense_log_prob(layer, h)
    assert np.allclose(lp.detach().numpy(), ref, atol=1e-10)
    assert np.allclose(np.exp(ref).sum(1), 1.0, atol=1e-12)  # the structure normalises
    out = layer(h, t)
    assert np.allclose(out.output.detach().numpy(), ref[np.arange(len(t)), t.numpy()],
                       atol=1e-10)
    assert torch.equal(layer.predict(h), lp.argmax(1))
    assert layer.describe()


def test_the_head_is_the_most_frequent_words_and_their_probability_the_top_alone():
    layer = randomise(make_output_layer("head-tree", D, zipf_vocab(V), head=6,
                                        tail_entries=3).double())
    assert layer.head_words == 6 and layer.n_entries == 9
    assert np.array_equal(layer.entry.numpy()[:6], np.arange(6))
    assert set(layer.entry.numpy()[6:]) == {6, 7, 8}
    h, _ = batch()
    top = torch.log_softmax(layer.top(h), dim=1)
    assert torch.allclose(layer.log_prob(h)[:, :6], top[:, :6], atol=1e-12)
    assert torch.all(layer.lengths[:6] == 0)
    # a tail entry's words share its probability: their sum is the entry's
    lp = layer.log_prob(h).exp()
    for e in (6, 7, 8):
        words = torch.as_tensor(np.flatnonzero(layer.entry.numpy() == e))
        assert torch.allclose(lp[:, words].sum(1), top[:, e].exp(), atol=1e-12)


def test_the_tail_keeps_the_tree_s_groupings(tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("w11 w17 w19\nw12 w13\nw20 w30 w40\n")
    vocab = zipf_vocab(V)
    layer = make_output_layer("head-tree", D, vocab, head=10, tree="semhuff",
                              similarity=str(pairs))
    full = make_tree("semhuff", vocab, similarity=str(pairs))
    tail = np.arange(10, V)
    expected = restrict(full, tail)
    # a tail word's path below the new root is its path in the restricted SemHuff tree
    for i, w in enumerate(tail):
        assert layer.tree.code_string(w)[1:] == expected.code_string(i)


def test_gradients_by_finite_differences_and_sparse_equals_dense():
    vocab = zipf_vocab(20)
    layer = randomise(make_output_layer("head-tree", D, vocab, head=4, tail_entries=2,
                                        head_bias=True).double())
    h, t = batch(8, vocab_size=20)
    t[0], t[1] = 0, 19  # a head word and a tail word at least
    params = dict(layer.named_parameters())
    names = list(params)

    def f(h, *values):
        return torch.func.functional_call(layer, dict(zip(names, values)), (h, t)).output

    inputs = (h.clone().requires_grad_(),
              *[p.detach().clone().requires_grad_() for p in params.values()])
    assert torch.autograd.gradcheck(f, inputs)
    sparse = make_output_layer("head-tree", D, vocab, head=4, tail_entries=2, head_bias=True,
                               sparse=True).double()
    sparse.load_state_dict(layer.state_dict())
    layer(h, t).loss.backward()
    sparse(h, t).loss.backward()
    assert sparse.weight.grad.is_sparse
    for (name, a), b in zip(layer.named_parameters(), sparse.parameters()):
        assert torch.allclose(a.grad, b.grad.to_dense(), atol=1e-12), name


def test_a_batch_of_head_words_only_trains():
    layer = randomise(make_output_layer("head-tree", D, zipf_vocab(V), head=10, sparse=True)
                      .double())
    h = torch.randn(5, D, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 3, 9, 9, 1])
    out = layer(h, t)
    out.loss.backward()
    top = torch.log_softmax(layer.top(h), dim=1)
    assert torch.allclose(out.output, top[torch.arange(5), t], atol=1e-12)
    assert layer.top.weight.grad is not None and h.grad is not None
    assert layer.weight.grad is None or float(layer.weight.grad.to_dense().abs().sum()) == 0


def test_state_dict_loads_from_a_file_with_weights_only_into_another_tree(tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("w11 w17 w19\nw12 w13\n")
    vocab = zipf_vocab(V)
    layer = randomise(make_output_layer("head-tree", D, vocab, head=7, tail_entries=3,
                                        tree="semhuff", similarity=str(pairs)).double())
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    settings = HeadTreeSoftmax.settings_for_state(
        {"head": 7, "tail_entries": 3, "tree": "semhuff", "similarity": "gone.txt"}, state)
    assert settings == {"head": 7, "tail_entries": 3}  # no similarity needed to load it
    again = make_output_layer("head-tree", D, vocab, **settings).double()  # a Huffman tail
    again.load_state_dict(state)
    h, t = batch()
    assert torch.equal(again.log_prob(h), layer.log_prob(h))
    assert torch.equal(again(h, t).output, layer(h, t).output)
    assert again.tree.kind == "semhuff" and again.head_words == 7


def test_retree_keeps_the_head_and_carries_the_rows():
    vocab = zipf_vocab(V)
    layer = randomise(make_output_layer("head-tree", D, vocab, head=6, head_bias=True).double())
    h, t = batch(30)
    opt = torch.optim.Adagrad(layer.parameters(), lr=0.1)
    layer(h, t).loss.backward()
    opt.step()
    before = layer.log_prob(h)
    top = layer.top.weight.detach().clone()
    new = make_tree("random", vocab, seed=5)
    layer.retree(new, vocab.counts, opt)
    after = layer.log_prob(h)
    assert torch.allclose(after.exp().sum(1), torch.ones(30, dtype=torch.float64))
    assert torch.equal(layer.entry[:6], torch.arange(6))
    # the one tail entry's row is its words' (one) former entry's: the top is unchanged
    assert torch.allclose(layer.top.weight, top, atol=1e-12)
    tail = np.arange(6, V)
    assert layer.tree.kind == "random"
    expected = restrict(new, tail)
    assert all(layer.tree.code_string(w)[1:] == expected.code_string(i)
               for i, w in enumerate(tail))
    assert not torch.equal(after, before)
    assert torch.all(opt.state[layer.weight]["sum"] == 0)  # Adagrad's sums restart
    # the top's: the head entries (the same words) keep theirs, the tail entry's restarts
    for p in (layer.top.weight, layer.top.bias):
        sums = opt.state[p]["sum"]
        assert torch.all(sums[6:] == 0) and torch.all(sums[:6].reshape(6, -1).sum(1) > 0)


def test_retree_moves_a_bias_state_row_by_row():
    """``remap_rows`` on a (N,) state (the top's bias): row i from ``source[i]``, not a
    broadcast (N, N) mix."""
    from semhuff.lm.kernels.optimizer_state import remap_rows
    got = remap_rows(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2, -1, 0]), None, 0.5)
    assert torch.equal(got, torch.tensor([3.0, 0.5, 1.0]))
    rows = remap_rows(torch.tensor([[1.0, 1.5], [2.0, 2.5]]), torch.tensor([1, -1]),
                      torch.tensor([-1.0, 1.0]), 0.0)
    assert torch.equal(rows, torch.tensor([[-2.0, -2.5], [0.0, 0.0]]))


@pytest.mark.parametrize("settings, message", [
    (dict(head=V), "must leave words for the tail"),
    (dict(head=3, coverage=0.5), "not both"),
    (dict(head=50, tail_entries=11), "tail_entries must be in 1..10"),
    (dict(head=-1), "head must be an integer >= 0"),
    (dict(coverage=1.5), "coverage must be in (0, 1]"),
    (dict(tail_entries=0), "tail_entries must be an integer >= 1"),
    (dict(tail_dim=0), "tail_dim must be an integer >= 1"),
    (dict(tail_dim=D + 1), f"tail_dim must be an integer in 1..{D}"),
])
def test_bad_settings_are_one_line_option_errors(settings, message):
    with pytest.raises(OptionError) as info:
        make_output_layer("head-tree", D, zipf_vocab(V), **settings)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_structure_whose_entries_are_not_subtrees_is_refused():
    tree = make_tree("huffman", zipf_vocab(8))
    with pytest.raises(OptionError, match="exactly the leaves of one subtree"):
        HeadTreeSoftmax(D, tree, entry=np.array([0, 0, 0, 0, 1, 1, 1, 0]),
                        cut=np.ones(8, np.int64))
    with pytest.raises(OptionError, match="a word's cut at most"):
        HeadTreeSoftmax(D, tree, entry=np.zeros(8, np.int64), cut=np.full(8, 40))
    with pytest.raises(OptionError, match="Tree"):
        HeadTreeSoftmax(D, "huffman", entry=np.zeros(8, np.int64), cut=np.zeros(8, np.int64))


def test_head_size_by_coverage_is_the_fewest_words_reaching_it():
    counts = np.array([50, 20, 10, 10, 5, 5])
    assert head_size(counts, None, 0.5) == 1
    assert head_size(counts, None, 0.51) == 2
    assert head_size(counts, None, 0.8) == 3
    assert head_size(counts, 2, None) == 2
    assert head_size(np.ones(100), None, None) == 2


def test_class_tree_clusters_are_frequency_bins_with_a_huffman_tree_inside():
    vocab = zipf_vocab(V)
    layer = make_output_layer("class-tree", D, vocab, cluster_by="frequency", head=4, clusters=5)
    assert layer.n_entries == 9 and layer.head_words == 4
    bins = frequency_binning(vocab.counts[4:], 5)
    entry = layer.entry.numpy()
    assert np.array_equal(entry[:4], np.arange(4)) and np.array_equal(entry[4:], 4 + bins)
    for c in range(5):  # below the cluster's entry: Huffman over its words, by count
        words = 4 + np.flatnonzero(bins == c)
        huffman = build_huffman(vocab.counts[words])
        assert sorted(layer.tree.lengths[w] - layer.cut[w].item() for w in words) == \
            sorted(huffman.lengths.tolist())
    with pytest.raises(OptionError, match="Huffman tree inside each"):
        make_output_layer("class-tree", D, vocab, cluster_by="frequency", tree="random")


# -- organized-tree: the tail's clusters learned ------------------------------------------------------

def organized(**settings):
    settings = dict(dict(head=5, clusters=6, reassign_every=3, freq_budget=0.5), **settings)
    return randomise(make_output_layer("organized-tree", D, zipf_vocab(80), **settings).double())


def train(layer, steps, seed=0, opt=None):
    opt = opt or torch.optim.Adagrad(layer.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(seed)
    done = []
    for _ in range(steps):
        h = torch.randn(40, D, dtype=torch.float64, generator=g)
        t = torch.randint(0, 80, (40,), generator=g)
        opt.zero_grad()
        layer(h, t).loss.backward()
        opt.step()
        done.append(layer.after_step(opt))
    return done, opt


def test_organized_statistic_is_each_tail_word_s_mean_log2_cluster_probability():
    layer = organized(reassign_every=100)
    h, t = batch(40, vocab_size=80)
    t[:3] = torch.tensor([0, 2, 4])  # head words: no sample
    layer(h, t)
    top = layer.top(h).detach().numpy()[:, 5:]
    x = (top - np.log(np.exp(top).sum(1, keepdims=True))) / math.log(2)
    for w in range(5, 80):  # by hand, token by token
        tokens = np.flatnonzero(t.numpy() == w)
        got = layer.q_sum[w - 5].numpy()
        assert layer.q_tokens[w - 5] == tokens.size
        assert np.allclose(got, x[tokens].sum(0), atol=1e-10)
    assert layer.q_tokens[-1] == np.isin(t.numpy(), range(5)).sum()  # the head's, set aside
    layer.eval()
    layer(h, t)
    assert layer.q_tokens[:-1].sum() == np.sum(t.numpy() >= 5)  # none gathered in eval mode


def test_organized_reassignment_is_algorithm_1_on_the_statistic_with_huffman_trees_inside():
    layer = organized()
    before = layer.organizer.q.copy()
    h, t = batch(60, vocab_size=80)
    layer(h, t)
    seen = layer.q_tokens[:-1].numpy() > 0
    mean = layer.q_sum[:-1].numpy() / np.maximum(layer.q_tokens[:-1].numpy(), 1)[:, None]
    q = before.copy()
    q[seen] = mean[seen]
    reference = SelfOrganizer(clusters=6, reassign_every=3, freq_budget=0.5, reassign_until=1.0)
    reference.start(zipf_vocab(80).counts[5:])
    reference.q[:] = q
    reference.reassign(zipf_vocab(80).counts[5:])
    info = layer.reassign()
    assert np.array_equal(layer.organizer.cluster_of, reference.cluster_of)
    assert np.array_equal(layer.entry.numpy()[5:], 5 + reference.cluster_of)
    assert info["changed_share"] > 0
    for c in range(6):  # a Huffman tree over each cluster's words, by count
        words = 5 + np.flatnonzero(reference.cluster_of == c)
        if words.size > 1:
            want = sorted(build_huffman(zipf_vocab(80).counts[words]).lengths.tolist())
            assert sorted(int(layer.tree.lengths[w] - layer.cut[w]) for w in words) == want
    assert float(layer.weight.detach().abs().sum()) == 0  # new_rows zero
    assert float(layer.q_tokens.sum()) == 0  # a new interval
    h, _ = batch()
    assert torch.allclose(layer.log_prob(h).exp().sum(1), torch.ones(9, dtype=torch.float64))


def test_organized_reassigns_every_k_steps_until_frozen_and_carries_rows_if_asked():
    layer = organized(freeze_after=7)
    done, _ = train(layer, 10)
    assert [i + 1 for i, d in enumerate(done) if d] == [3, 6]
    assert layer.reassignments == 2 and layer.steps == 10
    carried = organized(new_rows="carried")
    train(carried, 3)
    assert float(carried.weight.detach().abs().sum()) > 0


def test_retree_is_offered_by_head_and_class_tree_not_by_organized_tree():
    from semhuff.lm.layers.registry import layers_with
    able = layers_with("retree")
    assert "head-tree" in able and "class-tree" in able and "organized-tree" not in able


def test_organized_state_loads_with_weights_only_after_reassignments():
    layer = organized()
    train(layer, 7)
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    fresh = organized(seed=9)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    h, t = batch(vocab_size=80)
    assert torch.equal(fresh.log_prob(h), layer.log_prob(h))
    assert fresh.steps == 7 and fresh.reassignments == 2
    assert np.array_equal(fresh.organizer.cluster_of, layer.organizer.cluster_of)
    assert np.array_equal(fresh.organizer.q, layer.organizer.q)
    train(fresh, 2, seed=3)  # and trains on: the next re-assignment at step 9
    assert fresh.reassignments == 3


def test_an_entry_without_words_gets_no_probability():
    tree = make_tree("huffman", zipf_vocab(8))
    # entries 0 and 1 (the two halves under the root), entry 2 empty
    halves = np.array([tree.codes[w, 0] for w in range(8)], np.int64)
    layer = randomise(HeadTreeSoftmax(D, tree, entry=halves, cut=np.ones(8, np.int64),
                                      n_entries=3).double())
    h, t = batch(vocab_size=8)
    lp = layer.log_prob(h)
    assert torch.allclose(lp.exp().sum(1), torch.ones(9, dtype=torch.float64))
    top = torch.log_softmax(layer.top(h)[:, :2], dim=1)  # as if entry 2 were not there
    assert torch.allclose(lp, top[:, halves] + torch.as_tensor(dense_log_prob(layer, h)
                                                              - dense_log_prob_top(layer, h)))
    assert torch.allclose(layer(h, t).output, lp[torch.arange(9), t])


def dense_log_prob_top(layer, h):
    """The top's part of ``dense_log_prob`` (every entry, unmasked)."""
    top = torch.log_softmax(layer.top(h).double(), dim=1).detach().numpy()
    return top[:, layer.entry.numpy()]


def renumbered_inner_nodes(tree):
    """``tree`` with its inner nodes' ids reversed (the same shape, the same words below each
    node; ``frontier`` then numbers the same subtrees in another order)."""
    V = tree.n_words
    new_id = np.concatenate([np.arange(V), V + np.arange(V - 1)[::-1]])
    parent = np.full_like(tree.parent, -1)
    branch = np.zeros_like(tree.branch)
    has = tree.parent >= 0
    parent[new_id[has]] = new_id[tree.parent[has]]
    branch[new_id[has]] = tree.branch[has]
    return Tree(parent, branch, kind=tree.kind)


def test_retree_onto_the_same_subtrees_keeps_every_entry_s_probability():
    """The top's rows follow their words to the new entries: the bias too (by hand: each
    word's top probability before and after, the tail's subtrees the same sets of words)."""
    vocab = zipf_vocab(V)
    layer = randomise(make_output_layer("head-tree", D, vocab, head=5, tail_entries=4,
                                        head_bias=True).double())
    h, _ = batch()
    before = torch.log_softmax(layer.top(h), dim=1)[:, layer.entry].detach()
    old_entry = layer.entry.clone()
    layer.retree(renumbered_inner_nodes(layer.tree), vocab.counts)
    assert not torch.equal(layer.entry, old_entry)  # the same groups, numbered otherwise
    after = torch.log_softmax(layer.top(h), dim=1)[:, layer.entry].detach()
    assert torch.allclose(after, before, atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_a_batch_of_head_words_only_keeps_ddp_going(sparse, tmp_path):
    """DDP as ``semhuff.lm.parallel`` wraps the layer (no search for unused parameters: the
    layer says it uses every one) takes a step whose targets are all head words (one rank,
    gloo): the rows take part with a zero gradient, else the next step fails."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1)
    try:
        layer = make_output_layer("head-tree", D, zipf_vocab(V), head=10, sparse=sparse)
        ddp = DDP(layer, broadcast_buffers=False,
                  find_unused_parameters=not layer.uses_every_parameter)
        opt = torch.optim.Adagrad(layer.parameters(), lr=0.1)
        grads = []
        for targets in ([0, 1, 2], [3, 9, 5], [20, 30, 1]):
            opt.zero_grad()
            ddp(torch.randn(3, D), torch.tensor(targets)).loss.backward()
            opt.step()
            grad = layer.weight.grad
            grads.append(None if grad is None else float(grad.to_dense().abs().sum()))
        assert grads[0] == grads[1] == 0 and grads[2] > 0
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("n_words", [V - 10, V + 10])
def test_retree_onto_a_tree_of_another_size_is_a_one_line_option_error(n_words):
    layer = make_output_layer("head-tree", D, zipf_vocab(V), head=5)
    with pytest.raises(OptionError, match=f"the tree has {n_words} leaves, the layer {V}"):
        layer.retree(make_tree("random", zipf_vocab(n_words), seed=1), zipf_vocab(V).counts)
    assert layer.tree.kind == "huffman"  # unchanged


@pytest.mark.parametrize("counts", [np.ones(5), np.ones((8, 2)), -np.ones(8)])
def test_counts_that_are_not_one_per_word_are_a_one_line_option_error(counts):
    tree = make_tree("huffman", zipf_vocab(8))
    halves = np.array([tree.codes[w, 0] for w in range(8)], np.int64)
    with pytest.raises(OptionError, match="counts must be 8 integers >= 0") as info:
        HeadTreeSoftmax(D, tree, halves, np.ones(8, np.int64), counts=counts)
    assert "\n" not in str(info.value)


def test_retree_of_a_float16_layer_with_counts_beyond_its_range():
    """The count-weighted means of the top's rows in float16 overflowed at counts above
    65,504 (text8's most frequent word: ~1M): inf / inf, the top NaN."""
    counts = np.maximum((1_000_000 / np.arange(1, V + 1)).astype(np.int64), 1)
    vocab = Vocab([f"w{i}" for i in range(V)], counts, int(counts.sum()))
    layer = randomise(make_output_layer("head-tree", D, vocab, head=5, tail_entries=4,
                                        head_bias=True)).half()
    h = batch()[0].half()
    before = torch.log_softmax(layer.top(h).float(), dim=1)[:, layer.entry]
    layer.retree(renumbered_inner_nodes(layer.tree), counts)  # the same groups
    after = torch.log_softmax(layer.top(h).float(), dim=1)[:, layer.entry]
    assert torch.allclose(after, before, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_organized_statistic_stays_exact_in_a_low_precision_layer(dtype):
    """A bfloat16 / float16 layer casts its weights, not the statistic: 600 tokens of a word
    count 600 (bfloat16 counts stop at 256) and their sum is the float64 one's."""
    layer = organized(reassign_every=100)
    reference = organized(reassign_every=100)
    layer.to(dtype)
    h = torch.randn(600, D, generator=torch.Generator().manual_seed(4)).to(dtype)
    t = torch.full((600,), 7)
    layer(h, t)
    reference(h.double(), t)
    assert layer.q_tokens[2] == 600
    assert torch.allclose(layer.q_sum[2].double(), reference.q_sum[2].double(), rtol=1e-2)


def test_tail_dim_projects_the_input_for_the_rows_alone_and_trains_the_projection():
    """The adaptive softmax's smaller tails as a head-tree option: rows of tail_dim columns,
    the top on the whole input; the projection learns (finite differences through it), a
    head-words-only batch keeps it in the graph, and a state with it loads with weights_only."""
    vocab = zipf_vocab(20)
    layer = randomise(make_output_layer("class-tree", D, vocab, head=3, tail_dim=2).double())
    assert layer.weight.shape == (19, 2) and layer.top.in_features == D
    assert layer.tail_proj.weight.shape == (2, D) and "rows of 2" in layer.describe()
    h, t = batch(6, vocab_size=20)
    t[0], t[1] = 0, 19
    params = dict(layer.named_parameters())
    names = list(params)

    def f(h, *values):
        return torch.func.functional_call(layer, dict(zip(names, values)), (h, t)).output

    assert "tail_proj.weight" in names
    assert torch.autograd.gradcheck(f, (h.clone().requires_grad_(), *[
        p.detach().clone().requires_grad_() for p in params.values()]))
    layer(h[:2], torch.tensor([0, 1])).loss.backward()  # head words only
    assert layer.tail_proj.weight.grad is not None
    assert float(layer.tail_proj.weight.grad.abs().sum()) == 0
    same = make_output_layer("class-tree", D, vocab, head=3, tail_dim=2).double()
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    same.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(same.log_prob(h), layer.log_prob(h))
    full = make_output_layer("class-tree", D, vocab, head=3, tail_dim=D)
    assert full.tail_proj is None and full.weight.shape == (19, D)  # no projection to the same size


@pytest.mark.parametrize("cluster_by", ["frequency", "random"])
def test_class_tree_clusters_without_a_tree_refuse_a_retree_in_one_line(cluster_by):
    """retree re-cuts a new tree's top subtrees: frequency or random clusters would silently
    become the tree's clusters, so the layer, and semhuff-lm's settings, refuse it."""
    vocab = zipf_vocab(V)
    layer = make_output_layer("class-tree", D, vocab, cluster_by=cluster_by, clusters=5)
    with pytest.raises(OptionError, match=f"--cluster-by {cluster_by} has no tree") as info:
        layer.retree(make_tree("huffman", vocab), vocab.counts)
    assert "\n" not in str(info.value)
    from semhuff.lm.settings import LMSettings
    with pytest.raises(OptionError, match="--retree-every: re-cuts"):
        LMSettings(output="class-tree", retree_every=1,
                   layer_options={"cluster_by": cluster_by}).check()
    LMSettings(output="class-tree", retree_every=1, layer_options={"cluster_by": "tree"}).check()


def test_tail_dim_in_a_bfloat16_layer_scores_and_normalises():
    """The projection follows the layer's dtype (a bfloat16 layer failed on a float32 matmul)."""
    layer = make_output_layer("class-tree", D, zipf_vocab(V), tail_dim=3).bfloat16()
    h = torch.randn(4, D, dtype=torch.bfloat16)
    t = torch.tensor([0, 7, 30, V - 1])
    lp = layer.log_prob(h)
    assert torch.allclose(lp.exp().sum(1).double(), torch.ones(4, dtype=torch.float64), atol=1e-3)
    assert torch.allclose(layer(h, t).output.float(), lp[torch.arange(4), t].float(), atol=0.05)


def test_class_tree_heads_two_percent_by_default_and_an_older_file_loads_as_saved():
    """``class-tree``'s default head is 2% of V (issue 45's text8 winner); a layer saved with no
    head (the former default) rebuilds with its own head and entries from its state."""
    vocab = zipf_vocab(200)
    layer = make_output_layer("class-tree", D, vocab)
    assert layer.head_words == head_size(vocab.counts, None, None) == 4
    old = randomise(make_output_layer("class-tree", D, vocab, head=0).double())
    state = old.state_dict()
    settings = type(old).settings_for_state({"tree": "semhuff", "similarity": "gone"}, state)
    assert settings == {"head": 0, "clusters": old.n_entries}
    again = make_output_layer("class-tree", D, vocab, **settings).double()
    again.load_state_dict(state)
    h = torch.randn(5, D, dtype=torch.float64)
    assert again.head_words == 0
    assert torch.equal(again.log_prob(h), old.log_prob(h))
