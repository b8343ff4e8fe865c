"""The LM side against independent references, for bugs that passed every other test (issue
37): the recurrent state the trainer hands the LSTM from batch to batch, the held-out
perplexity against one unbatched pass of our own, ``<unk>``'s count, and the clustered
layers' cluster part against the full distribution, the tree layer's tree against the
builder's."""
import collections
import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from semhuff.lm import make_output_layer  # noqa: E402
from semhuff.lm.token_ids import UNK, build_vocab, load_data  # noqa: E402
from semhuff.lm.evaluation import evaluate  # noqa: E402
from semhuff.lm.settings import LMSettings  # noqa: E402
from semhuff.lm.trainer import train_lm  # noqa: E402
from semhuff.vocab import Vocab  # noqa: E402


def _markov_text(n_words, n_types=16, seed=0, line=12):
    """Text from a random first-order Markov chain (something for an LSTM to learn), lines of
    ``line`` words."""
    rng = np.random.default_rng(seed)
    step = rng.dirichlet(np.full(n_types, 0.3), size=n_types)
    w, words = 0, []
    for _ in range(n_words):
        w = rng.choice(n_types, p=step[w])
        words.append(f"w{w}")
    return "\n".join(" ".join(words[i:i + line]) for i in range(0, n_words, line)) + "\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm37")
    (folder / "train.txt").write_text(_markov_text(480, seed=1))
    (folder / "held.txt").write_text(_markov_text(120, seed=2))
    return load_data([str(folder / "train.txt")], [str(folder / "held.txt")])


def _settings(**kw):
    return LMSettings(**{**dict(emb=8, hidden=8, batch_size=4, bptt=7, epochs=1, eval_batch=3,
                                progress=False), **kw})


# -- 1. the recurrent state carried along the rows, detached ------------------------------------

def test_the_lstm_receives_the_previous_batchs_state_detached(data, monkeypatch):
    """Recorded where the LSTM receives it: at the first step of each epoch no state; at every
    later step the state the previous step returned, same values, cut from its graph."""
    calls = []
    forward = torch.nn.LSTM.forward

    def spy(self, input, hx=None):
        out, state = forward(self, input, hx)
        calls.append((self.training, hx, state))
        return out, state

    monkeypatch.setattr(torch.nn.LSTM, "forward", spy)
    s = _settings(epochs=2)
    train_lm(data, s)
    # training steps come in runs between the held-out evaluations (eval mode)
    epochs, run = [], []
    for training, hx, state in calls:
        if training:
            run.append((hx, state))
        elif run:
            epochs.append(run)
            run = []
    n = len(data.train) // s.batch_size  # batchify's row length
    assert len(epochs) == s.epochs
    for steps in epochs:
        assert len(steps) == len(range(0, n - 1, s.bptt)) >= 3
        assert steps[0][0] is None
        for (_, previous), (hx, _) in zip(steps, steps[1:]):
            assert hx is not None and len(hx) == 2  # (h, c)
            for given, returned in zip(hx, previous):
                assert returned.grad_fn is not None  # the state came out of a graph ...
                assert given.grad_fn is None and not given.requires_grad  # ... and is cut off
                assert torch.equal(given, returned)


# -- 2. held-out perplexity: every token, one mean ---------------------------------------------

def _unbatched_nll(model, ids, rows):
    """(summed nll, summed cluster nll or None, tokens) of ``ids`` laid out as ``evaluate``
    says (``rows`` contiguous parts of the text, the state carried along each), scored token
    by token in float64 from the layer's whole distribution."""
    ref = copy.deepcopy(model).double().eval()
    layer = ref.output
    cluster_of = getattr(layer, "cluster_of", None)
    n = len(ids) // rows
    nll, cluster_nll, count = 0.0, 0.0, 0
    with torch.no_grad():
        for r in range(rows):
            row = ids[r * n:(r + 1) * n]
            state = None
            for i in range(n - 1):
                out, state = ref.hidden(torch.tensor([[int(row[i])]]), state)
                lp = layer.log_prob(out.reshape(1, -1))[0]
                target = int(row[i + 1])
                nll -= float(lp[target])
                if cluster_of is not None:
                    same = cluster_of == cluster_of[target]
                    cluster_nll -= float(torch.logsumexp(lp[same], 0))
                count += 1
    return nll, (cluster_nll if cluster_of is not None else None), count


@pytest.fixture(scope="module")
def trained(data):
    """The model of a tiny run with this output layer, trained once for the module."""
    models = {}

    def model(output):
        if output not in models:
            options = {"reassign_every": 5} if output.startswith("self") else {}
            models[output] = train_lm(data, _settings(output=output, layer_options=options))[0]
        return models[output]
    return model


@pytest.mark.parametrize("output", ["tree", "self-organized-binary"])
@pytest.mark.parametrize("batch, length, bptt, rows", [(1, 38, 5, 1), (3, 39, 5, 3),
                                                       (10, 40, 20, 1)])
def test_heldout_perplexity_is_the_per_token_mean_of_an_unbatched_pass(data, trained, output,
                                                                      batch, length, bptt, rows):
    """A held-out stream whose rows (38 tokens: one row of 37 targets; 39: three of 12) leave a
    short last batch of bptt = 5 (2 targets a row): every target is counted and the nll is the
    mean over tokens, not over batches; the clustered layer's cluster perplexity likewise. A
    text shorter than ``batch`` windows of bptt + 1 tokens is read in fewer rows, none shorter
    than a window: 40 tokens at bptt 20 are one row of 39 targets (two windows of 20 would be
    two rows of 19)."""
    model = trained(output)
    ids = data.heldout[:length]
    assert len(ids) == length and (length // rows - 1) % bptt != 0  # a short last batch
    got = evaluate(model, ids, batch=batch, bptt=bptt)
    nll, cluster_nll, count = _unbatched_nll(model, ids, rows)
    assert got.tokens == count == rows * (length // rows - 1)
    assert got.nll == pytest.approx(nll / count, rel=1e-6)
    assert got.perplexity == pytest.approx(math.exp(nll / count), rel=1e-6)
    if cluster_nll is None:
        assert got.cluster_perplexity is None
    else:
        assert got.cluster_perplexity == pytest.approx(math.exp(cluster_nll / count), rel=1e-6)
        assert got.in_cluster_perplexity == pytest.approx(
            math.exp((nll - cluster_nll) / count), rel=1e-6)


# -- 4. <unk> counts tokens --------------------------------------------------------------------

@pytest.mark.parametrize("limits", [dict(max_vocab=3), dict(min_count=4)])
def test_unk_counts_the_unknown_tokens_not_the_unknown_words(limits):
    words = ["a"] * 6 + ["b"] * 4 + ["c"] * 3 + ["d", "e"]  # c, d, e: 5 tokens, 3 words
    vocab = build_vocab(words, **limits)
    kept = set(vocab.words) - {UNK}
    assert kept == {"a", "b"}
    unknown = [w for w in words if w not in kept]
    assert len(unknown) != len(set(unknown))  # the example tells the two apart
    counts = dict(zip(vocab.words, vocab.counts.tolist()))
    assert counts == {**collections.Counter(w for w in words if w in kept), UNK: len(unknown)}
    assert vocab.words == sorted(vocab.words, key=lambda w: -counts[w])  # frequency order


def test_unk_count_through_load_data(tmp_path):
    text = "a a a a b b b x y x\na b z z z a\n"
    (tmp_path / "t.txt").write_text(text)
    (tmp_path / "h.txt").write_text("a b q\n")
    data = load_data([str(tmp_path / "t.txt")], [str(tmp_path / "h.txt")], min_count=4, eos=False)
    unk = data.vocab.index[UNK]
    # a (6) and b (4) kept; x, y, z: 6 tokens, 3 words
    assert int(data.vocab.counts[unk]) == int((data.train == unk).sum()) == 6


# -- 6. the cluster part of the clustered layers -------------------------------------------------

D, V = 6, 40


def _zipf_vocab(n=V):
    counts = np.maximum((1000 / np.arange(1, n + 1)).astype(np.int64), 1)
    return Vocab([f"w{i}" for i in range(n)], counts, int(counts.sum()))


def _randomise(layer, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    return layer


def _check_cluster_part(layer, h, t):
    """cluster_log_prob(h, t) = log of the summed probabilities of the target's cluster's
    words, from the whole distribution and the membership the layer holds."""
    layer.eval()
    with torch.no_grad():
        lp = layer.log_prob(h)
        got = layer.cluster_log_prob(h, t)
    cluster_of = layer.cluster_of
    assert torch.allclose(lp.exp().sum(1), torch.ones(len(h), dtype=lp.dtype), atol=1e-12)
    expected = torch.stack([torch.logsumexp(lp[n, cluster_of == cluster_of[t[n]]], 0)
                            for n in range(len(t))])
    assert torch.allclose(got, expected, atol=1e-10)
    layer.train()


@pytest.mark.parametrize("name", ["class", "self-organized", "self-organized-binary"])
def test_cluster_log_prob_is_the_clusters_share_of_the_distribution(name):
    options = {"reassign_every": 2} if name.startswith("self") else {}
    layer = _randomise(make_output_layer(name, D, _zipf_vocab(), clusters=6, **options).double())
    g = torch.Generator().manual_seed(3)
    h = torch.randn(30, D, generator=g, dtype=torch.float64)
    t = torch.randint(0, V, (30,), generator=g)
    sizes = np.bincount(layer.cluster_of.numpy())
    assert (sizes > 1).sum() >= 2  # clusters of several words: the sum means something
    _check_cluster_part(layer, h, t)
    if not name.startswith("self"):
        return
    # after training steps and re-assignments (the binary form's tree rebuilt)
    optimizer = torch.optim.Adagrad(layer.parameters(), lr=0.5)
    before = layer.cluster_of.clone()
    for step in range(4):
        hb = torch.randn(50, D, generator=g, dtype=torch.float64)
        tb = torch.randint(0, V, (50,), generator=g)
        optimizer.zero_grad()
        layer(hb, tb).loss.backward()
        optimizer.step()
        layer.after_step(optimizer)
    assert layer.reassignments == 2 and not torch.equal(layer.cluster_of, before)
    _check_cluster_part(layer, h, t)


# -- 3. the LM tree layer's tree is the builder's -------------------------------------------------

def _builder_settings(name, vocab):
    """The arguments a builder needs here (semhuff: a similarity; clusters: their number)."""
    if name == "semhuff":
        import scipy.sparse as sp
        sim = sp.random(len(vocab), len(vocab), density=0.1, random_state=0, format="csr")
        return {"similarity": (sim + sim.T).tocsr()}
    return {"clusters": 5} if name == "clusters" else {}


def _huffman_cost(counts):
    """sum count x code length of an optimal prefix code, by the textbook merge (heapq)."""
    import heapq
    heap = [int(c) for c in counts]
    heapq.heapify(heap)
    cost = 0
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        cost += merged
        heapq.heappush(heap, merged)
    return cost


def test_the_lm_tree_layer_holds_the_builders_tree():
    """For every tree builder, ``make_output_layer("tree", ...)``'s tree over a frequency-sorted
    vocabulary (the trainer's) is ``make_tree``'s (parent, branch, codes, points), and the
    Huffman layer's codes have the optimal expected length with the most frequent words
    nearest the root (test_lm_registry checks vocabularies in other id orders)."""
    from semhuff.trees import TREE_BUILDERS, make_tree
    vocab = _zipf_vocab(60)
    builtin = ("alphabetical", "clusters", "huffman", "random", "semhuff")  # (not other
    assert set(builtin) <= set(TREE_BUILDERS)  # tests' plugins, registered in this process)
    for name in builtin:
        settings = _builder_settings(name, vocab)
        layer = make_output_layer("tree", D, vocab, tree=name, seed=4, **settings)
        expected = make_tree(name, vocab, seed=4, **settings)
        for field in ("parent", "branch", "codes", "points", "lengths"):
            np.testing.assert_array_equal(getattr(layer.tree, field), getattr(expected, field),
                                          err_msg=f"{name}: {field}")
    layer = make_output_layer("tree", D, vocab, tree="huffman")
    lengths, counts = layer.tree.lengths, vocab.counts
    assert int((counts * lengths).sum()) == _huffman_cost(counts)
    assert np.all(np.diff(lengths) >= 0)  # counts descend along the ids: depths do not
    assert lengths[0] == lengths.min() < lengths.mean() < lengths[-1]
