"""The language-model output layers (semhuff.lm) against independent references: the full
distribution by brute force, naive per-token loops, torch's own modules, finite differences
(gradcheck), the Numba HS scorer on a trained Word2Vec model, and the Numba self-organizing
layers' re-assignment."""
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from semhuff import Word2Vec  # noqa: E402
import lm_helpers  # noqa: E402
from lm_helpers import randomise  # noqa: E402
from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import (AdaptiveSoftmax, ClassSoftmax, FullSoftmax,  # noqa: E402
                        SelfOrganizedSoftmax, TreeSoftmax, make_output_layer)
from semhuff.lm.layers.registry import LM_LAYERS  # noqa: E402
from semhuff.trees import make_tree  # noqa: E402
from semhuff.trees.clusters import frequency_binning, random_clusters  # noqa: E402
from semhuff.trees.huffman import build_huffman  # noqa: E402

D = 6
V = 40
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def zipf_vocab(n=V):
    return lm_helpers.zipf_vocab(n)


def layers(vocab, dtype=torch.float64, device="cpu", **so):
    """One of every layer (the tree softmax over several trees), random weights."""
    out = {name: make_output_layer(name, D, vocab, **(so if name.startswith("self") else {}))
           for name in LM_LAYERS}
    out["tree random"] = make_output_layer("tree", D, vocab, tree="random")
    out["tree alphabetical"] = make_output_layer("tree", D, vocab, tree="alphabetical")
    out["tree clusters"] = make_output_layer("tree", D, vocab, tree="clusters", clusters=5)
    out["class random"] = make_output_layer("class", D, vocab, clustering="random")
    out["class projection"] = make_output_layer("class", D, vocab, projection=True)
    out["tree sparse"] = make_output_layer("tree", D, vocab, sparse=True)
    return {k: randomise(v.to(device=device, dtype=dtype)) for k, v in out.items()}


def batch(n=12, dtype=torch.float64, device="cpu", seed=1, vocab_size=V):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, D, generator=g, dtype=dtype)
    t = torch.randint(0, vocab_size, (n,), generator=g)
    return h.to(device), t.to(device)


def naive_tree_log_prob(tree, weight, h, w):
    """log P(w | h) by walking w's path node by node (the Numba convention)."""
    total = 0.0
    for j in range(tree.lengths[w]):
        s = float(h @ weight[tree.points[w, j]])
        total += -math.log1p(math.exp(-s)) if tree.codes[w, j] == 0 else -math.log1p(math.exp(s))
    return total


# -- the distribution -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(layers(zipf_vocab())))
def test_log_prob_sums_to_one_and_forward_matches_it(name):
    layer = layers(zipf_vocab())[name]
    h, t = batch()
    lp = layer.log_prob(h)
    assert lp.shape == (12, V)
    assert torch.allclose(lp.exp().sum(1), torch.ones(12, dtype=torch.float64), atol=1e-6)
    out = layer(h, t)
    gathered = lp.gather(1, t.unsqueeze(1)).squeeze(1)
    assert torch.allclose(out.output, gathered, atol=1e-10)
    assert torch.allclose(out.loss, -gathered.mean(), atol=1e-10)
    assert torch.equal(layer.predict(h), lp.argmax(1))
    # leading dimensions, as an LSTM's (batch, time, D) output
    out3 = layer(h.view(3, 4, D), t.view(3, 4))
    assert out3.output.shape == (3, 4)
    assert torch.allclose(out3.output.reshape(-1), out.output, atol=1e-12)
    assert layer.after_step() is None or name.startswith("self")
    assert isinstance(layer.describe(), str) and layer.describe()


def test_tree_softmax_matches_a_walk_along_each_path():
    vocab = zipf_vocab()
    for kind in ("huffman", "random", "alphabetical", "clusters"):
        tree = make_tree(kind, vocab)
        layer = randomise(TreeSoftmax(D, tree).double())
        h, t = batch()
        out = layer(h, t).output
        w = layer.weight.detach().numpy()
        ref = [naive_tree_log_prob(tree, w, h[n].numpy(), int(t[n])) for n in range(len(t))]
        assert np.allclose(out.detach().numpy(), ref, atol=1e-12), kind


def test_tree_softmax_over_a_semhuff_tree(tmp_path):
    vocab = zipf_vocab()
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("w1 w7 w9\nw2 w3\nw10 w20 w30\n")
    layer = make_output_layer("tree", D, vocab, tree="semhuff", similarity=str(pairs))
    assert layer.tree.kind == "semhuff"
    randomise(layer.double())
    h, t = batch()
    w = layer.weight.detach().numpy()
    ref = [naive_tree_log_prob(layer.tree, w, h[n].numpy(), int(t[n])) for n in range(len(t))]
    assert np.allclose(layer(h, t).output.detach().numpy(), ref, atol=1e-12)


def test_class_softmax_matches_a_per_token_two_level_softmax():
    vocab = zipf_vocab()
    for projection in (False, True):
        cluster_of = frequency_binning(vocab.counts, 6)
        layer = randomise(ClassSoftmax(D, cluster_of, projection=projection).double())
        h, t = batch()
        out = layer(h, t).output
        for n in range(len(t)):
            hc = h[n]
            hw = h[n]
            if projection:
                hc = F.relu(layer.cluster_projection(h[n]))
                hw = F.relu(layer.word_projection(h[n]))
            c = int(cluster_of[t[n]])
            members = [int(w) for w in np.flatnonzero(cluster_of == c)]
            p_c = torch.log_softmax(layer.cluster_weight @ hc, 0)[c]
            p_w = torch.log_softmax(layer.word_weight[members] @ hw, 0)[members.index(int(t[n]))]
            assert torch.allclose(out[n], p_c + p_w, atol=1e-12)


def test_full_and_adaptive_match_torch():
    vocab = zipf_vocab()
    h, t = batch()
    full = randomise(FullSoftmax(D, V).double())
    ref = F.log_softmax(full.linear(h), dim=1)
    assert torch.allclose(full.log_prob(h), ref, atol=1e-12)
    adaptive = randomise(AdaptiveSoftmax(D, V, cutoffs=[4, 12]).double())
    plain = torch.nn.AdaptiveLogSoftmaxWithLoss(D, V, [4, 12]).double()
    plain.load_state_dict(adaptive.state_dict())
    assert torch.allclose(adaptive(h, t).output, plain(h, t).output, atol=1e-12)
    assert torch.allclose(adaptive.log_prob(h), plain.log_prob(h), atol=1e-12)
    made = make_output_layer("adaptive", D, zipf_vocab(1000))
    assert made.cutoffs[:-1] == [40, 200]  # 4% and 20% of V


# -- gradients -------------------------------------------------------------------------------------

GRADCHECK = {
    "tree": lambda v: TreeSoftmax(D, build_huffman(v.counts)),
    "class": lambda v: ClassSoftmax(D, frequency_binning(v.counts, 5)),
    "class projection": lambda v: ClassSoftmax(D, random_clusters(len(v), 5, 1), projection=True),
    "self-organized": lambda v: SelfOrganizedSoftmax(D, v.counts, 5),
    "self-organized binary": lambda v: SelfOrganizedSoftmax(D, v.counts, 5, form="binary"),
}


@pytest.mark.parametrize("name", list(GRADCHECK))
def test_gradcheck(name):
    vocab = zipf_vocab(20)
    layer = randomise(GRADCHECK[name](vocab).double())
    h, t = batch(8, vocab_size=20)
    params = dict(layer.named_parameters())
    names = list(params)

    def f(h, *values):
        return torch.func.functional_call(layer, dict(zip(names, values)), (h, t)).output

    inputs = (h.requires_grad_(), *[p.detach().clone().requires_grad_() for p in params.values()])
    assert torch.autograd.gradcheck(f, inputs)


@pytest.mark.parametrize("name", ["tree", "class", "self-organized", "self-organized-binary"])
def test_sparse_gradient_equals_the_dense_one(name):
    vocab = zipf_vocab()
    dense = randomise(make_output_layer(name, D, vocab).double())
    sparse = make_output_layer(name, D, vocab, sparse=True).double()
    sparse.load_state_dict(dense.state_dict())
    h, t = batch(30)
    dense(h, t).loss.backward()
    sparse(h, t).loss.backward()
    for (n, a), b in zip(dense.named_parameters(), sparse.parameters()):
        if b.grad.is_sparse:
            touched = b.grad._indices()[0]
            untouched = torch.ones(a.shape[0], dtype=torch.bool)
            untouched[touched] = False
            assert torch.all(a.grad[untouched] == 0), n  # the rows it leaves out have none
        assert torch.allclose(a.grad, b.grad.to_dense(), atol=1e-12), n
    # an optimizer that takes sparse gradients trains it
    opt = torch.optim.Adagrad(sparse.parameters(), lr=0.1)
    before = sparse(h, t).loss.item()
    for _ in range(5):
        opt.zero_grad()
        sparse(h, t).loss.backward()
        opt.step()
    assert sparse(h, t).loss.item() < before


def test_clip_grad_norm_handles_sparse_gradients_as_torch_does_dense_ones():
    from semhuff.lm import clip_grad_norm
    vocab = zipf_vocab()
    sparse = randomise(make_output_layer("tree", D, vocab, sparse=True).double())
    dense = make_output_layer("tree", D, vocab).double()
    dense.load_state_dict(sparse.state_dict())
    h, t = batch(30)
    for layer in (sparse, dense):
        (layer(h, t).loss * 100).backward()
    assert sparse.weight.grad.is_sparse
    total = clip_grad_norm(sparse.parameters(), 0.5)
    reference = torch.nn.utils.clip_grad_norm_(dense.parameters(), 0.5)
    assert total.item() == pytest.approx(reference.item(), rel=1e-9) and total > 0.5
    assert torch.allclose(sparse.weight.grad.to_dense(), dense.weight.grad, atol=1e-12)


# -- the Numba side --------------------------------------------------------------------------------

def test_tree_softmax_scores_a_word2vec_model_as_its_numba_scorer():
    rng = np.random.default_rng(5)
    words = [f"t{i}" for i in range(30)]
    p = 1 / np.arange(1, 31)
    sentences = [list(rng.choice(words, size=rng.integers(5, 15), p=p / p.sum()))
                 for _ in range(60)]
    model = Word2Vec(sentences, vector_size=12, window=3, min_count=1, sample=0, loss="hs",
                     epochs=3, workers=1, seed=3, progress=False)
    report = model.score(sentences, workers=1)
    layer = TreeSoftmax(12, model.tree).double()
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(model.layer.weights.astype(np.float64)))
    syn0 = torch.from_numpy(model.syn0.astype(np.float64))
    context, centre = [], []
    for sentence in sentences:
        ids = [model.vocab.index[w] for w in sentence]
        for i in range(len(ids)):  # skip-gram: predict the centre from each word of its window
            for j in range(max(0, i - 3), min(len(ids), i + 4)):
                if j != i:
                    context.append(ids[j])
                    centre.append(ids[i])
    out = layer(syn0[torch.tensor(context)], torch.tensor(centre))
    assert len(centre) == report.predictions
    assert -out.output.sum().item() == pytest.approx(report.nll, rel=1e-5)


class _Context:
    """What the Numba layers' reorganize() reads of a training context."""

    def __init__(self, counts):
        self.counts = counts

    def layer_changed(self):
        pass


def _shared_statistic(layer, seed=7):
    g = torch.Generator().manual_seed(seed)
    q = -torch.rand(layer.q.shape, generator=g, dtype=torch.float64) * 5
    layer.q.copy_(q.to(layer.q.dtype))
    return layer.q.cpu().numpy().astype(np.float32)


def test_two_level_reassignment_equals_the_numba_layers():
    from semhuff.layers.classes import ClassSoftmax as NumbaClassSoftmax
    vocab = zipf_vocab(120)
    layer = SelfOrganizedSoftmax(D, vocab.counts, 9, reassign_every=1, gamma=1.2,
                                  freq_budget=0.3, seed=4)
    numba = NumbaClassSoftmax.create(vocab, seed=4, clusters=9, gamma=1.2, freq_budget=0.3)
    assert np.array_equal(numba.organizer.cluster_of, layer.cluster_of.numpy())  # same start
    q = _shared_statistic(layer)
    numba.organizer.q[:] = q
    numba.reorganize(_Context(vocab.counts))
    info = layer.reassign()
    assert np.array_equal(layer.cluster_of.numpy(), numba.organizer.cluster_of)
    assert np.array_equal(layer.body.cluster_of.numpy(), numba.organizer.cluster_of)
    assert info["changed_share"] > 0


def test_binary_reassignment_equals_the_numba_layers_rows():
    from semhuff.layers.self_organized import SelfOrganizedHS
    vocab = zipf_vocab(120)
    layer = SelfOrganizedSoftmax(D, vocab.counts, 9, form="binary", gamma=1.2,
                                  freq_budget=0.3, seed=4, new_rows="zero")  # the Numba layer's
    randomise(layer)
    numba = SelfOrganizedHS.create(vocab, seed=4, clusters=9, gamma=1.2, freq_budget=0.3)
    numba.allocate(len(vocab), D)
    assert np.array_equal(numba.organizer.cluster_of, layer.cluster_of.numpy())
    assert np.array_equal(numba.tree.parent, layer.body.tree.parent)
    numba.weights[:] = layer.body.weight.detach().numpy()
    numba.organizer.q[:] = _shared_statistic(layer)
    numba.reorganize(_Context(vocab.counts))
    info = layer.reassign()
    assert np.array_equal(layer.cluster_of.numpy(), numba.organizer.cluster_of)
    assert np.array_equal(layer.body.tree.parent, numba.tree.parent)
    kept = np.abs(numba.weights).sum(1) > 0
    assert 0 < kept.sum() < len(kept)  # some rows carried over (some negated), some reset
    assert np.array_equal(layer.body.weight.detach().numpy(), numba.weights)
    assert info["rows_kept"] == pytest.approx(kept.mean())


def _splits(tree, cluster_of, cluster_depth):
    """Per inner row, its two leaf sets (by branch bit) by brute force: sets of cluster ids in
    the cluster part (the first cluster_depth nodes of a path), sets of words below."""
    out = {}
    for w in range(tree.n_words):
        for j in range(tree.lengths[w]):
            row, bit = int(tree.points[w, j]), int(tree.codes[w, j])
            member = int(cluster_of[w]) if j < cluster_depth[w] else w
            side = out.setdefault(row, (set(), set()))
            side[bit].add(member)
    return {row: (frozenset(a), frozenset(b)) for row, (a, b) in out.items()}


def test_binary_reassignment_carries_every_unchanged_split_and_the_optimizer_state():
    vocab = zipf_vocab(150)
    layer = randomise(SelfOrganizedSoftmax(D, vocab.counts, 10, form="binary",
                                            reassign_every=3, freq_budget=0.3, seed=2,
                                            new_rows="zero").double())
    opt = torch.optim.Adam(layer.parameters(), lr=0.01)
    h, t = batch(64, vocab_size=150, seed=3)
    for step in range(2):
        opt.zero_grad()
        layer(h, t).loss.backward()
        opt.step()
        assert layer.after_step(opt) is None
    opt.zero_grad()
    layer(h, t).loss.backward()
    opt.step()
    old_tree, old_clusters = layer.body.tree, layer.cluster_of.numpy().copy()
    old_depth = layer.cluster_depth.numpy().copy()
    old_state = {k: v.clone() for k, v in opt.state[layer.body.weight].items()}
    old_p = torch.sigmoid(h @ layer.body.weight.detach().t())  # P(branch 0) at every node
    old_lp = layer.log_prob(h).detach()
    info = layer.after_step(opt)  # step 3: the statistic of 3 batches moves some words
    assert info is not None and info["step"] == 3
    assert {"cluster_ppl", "in_cluster_ppl", "changed_share", "changed_mass",
            "rows_kept"} <= set(info)
    assert info["cluster_ppl"] * info["in_cluster_ppl"] == pytest.approx(info["ppl"])
    new_tree, new_clusters = layer.body.tree, layer.cluster_of.numpy()
    assert not np.array_equal(old_clusters, new_clusters)
    old_splits = {v: k for k, v in _splits(old_tree, old_clusters, old_depth).items()}
    new_splits = _splits(new_tree, new_clusters, layer.cluster_depth.numpy())
    new_p = torch.sigmoid(h @ layer.body.weight.detach().t())
    state = opt.state[layer.body.weight]
    kept = 0
    for row, (zero, one) in new_splits.items():
        same, swapped = old_splits.get((zero, one)), old_splits.get((one, zero))
        if same is not None or swapped is not None:
            old = same if same is not None else swapped
            sign = 1.0 if same is not None else -1.0
            want = old_p[:, old] if same is not None else 1 - old_p[:, old]
            assert torch.allclose(new_p[:, row], want, atol=1e-12)  # the same branch odds
            assert torch.allclose(state["exp_avg"][row], sign * old_state["exp_avg"][old])
            assert torch.allclose(state["exp_avg_sq"][row], old_state["exp_avg_sq"][old])
            kept += 1
        else:  # a new split starts from zero, its optimizer state too
            assert torch.all(layer.body.weight[row] == 0)
            assert torch.all(state["exp_avg"][row] == 0)
            assert torch.all(state["exp_avg_sq"][row] == 0)
    assert 0 < kept < len(new_splits)
    assert info["rows_kept"] == pytest.approx(kept / len(new_splits))
    # a word whose cluster kept all its members keeps P(w | c, h): its in-cluster path is intact
    new_lp = layer.log_prob(h).detach()
    for c in range(10):
        before = set(np.flatnonzero(old_clusters == c))
        if before and before == set(np.flatnonzero(new_clusters == c)):
            members = sorted(before)
            old_in = old_lp[:, members] - torch.logsumexp(old_lp[:, members], 1, keepdim=True)
            new_in = new_lp[:, members] - torch.logsumexp(new_lp[:, members], 1, keepdim=True)
            assert torch.allclose(old_in, new_in, atol=1e-10)
    # and training goes on with the moved state
    opt.zero_grad()
    layer(h, t).loss.backward()
    opt.step()


def test_adagrad_state_moves_without_sign_and_resets_to_its_initial_value():
    vocab = zipf_vocab(150)
    layer = randomise(SelfOrganizedSoftmax(D, vocab.counts, 10, form="binary",
                                            reassign_every=2, freq_budget=0.3, seed=2,
                                            new_rows="zero"))
    opt = torch.optim.Adagrad(layer.parameters(), lr=0.1, initial_accumulator_value=0.25)
    h, t = batch(64, vocab_size=150, seed=3, dtype=torch.float32)
    layer(h, t).loss.backward()
    opt.step()
    layer.after_step(opt)
    layer(h, t).loss.backward()
    opt.step()
    before = opt.state[layer.body.weight]["sum"].clone()
    old_w = layer.body.weight.detach().clone()
    layer.after_step(opt)
    after = opt.state[layer.body.weight]["sum"]
    w = layer.body.weight.detach()
    reset = (w == 0).all(1)
    assert torch.all(after[reset] == 0.25)
    assert 0 < int(reset.sum()) < len(reset)
    for row in torch.nonzero(~reset).flatten().tolist():  # kept rows: their old row by value
        old = torch.nonzero((old_w == w[row]).all(1) | (old_w == -w[row]).all(1)).flatten()[0]
        assert torch.equal(after[row], before[old])


def test_statistic_is_the_sequential_smoothing_of_eq_9():
    vocab = zipf_vocab(50)
    for form in ("two-level", "binary"):
        layer = randomise(SelfOrganizedSoftmax(D, vocab.counts, 6, form=form,
                                                statistic_rows=None, smoothing="epoch").double())
        q0 = torch.from_numpy(_shared_statistic(layer)).double()
        layer.q.copy_(q0)
        h, t = batch(40, vocab_size=50, seed=9)
        t[:10] = 3  # a word several times in one batch
        layer(h, t)
        lp = layer.log_prob(h).detach()
        cluster_of = layer.cluster_of.numpy()
        lam = layer.lam.double()
        assert torch.all((lam >= 0) & (lam < 1))
        q = q0.clone()
        assert np.all(np.bincount(cluster_of, minlength=6) > 0)
        for n in range(len(t)):  # eq. 9, token after token
            w = int(t[n])
            for c in range(6):  # log2 P(c | h): the log2 of the sum over its words
                x = torch.logsumexp(lp[n, cluster_of == c], 0) / math.log(2)
                q[w, c] = lam[w] * q[w, c] + (1 - lam[w]) * x
        assert torch.allclose(layer.q.double(), q, atol=1e-10)
        assert not torch.allclose(q, q0)
        # evaluation does not touch the statistic
        layer.eval()
        before = layer.q.clone()
        layer(h, t)
        assert torch.equal(layer.q, before)


def test_empty_clusters_get_no_probability_but_keep_a_statistic():
    cluster_of = np.arange(V) % 3
    cluster_of[cluster_of == 1] = 3  # clusters 0, 2, 3 hold words; 1 and 4 none
    layer = randomise(ClassSoftmax(D, cluster_of, n_clusters=5).double())
    h, t = batch()
    lp = layer.log_prob(h)
    assert torch.allclose(lp.exp().sum(1), torch.ones(12, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(layer(h, t).output, lp.gather(1, t.unsqueeze(1)).squeeze(1))
    # self-organizing with as many clusters as words: the re-assignment empties some
    vocab = zipf_vocab(30)
    so = randomise(SelfOrganizedSoftmax(D, vocab.counts, 30, reassign_every=1).double())
    h, t = batch(vocab_size=30)
    so(h, t).loss.backward()
    so.after_step()
    empty = np.bincount(so.cluster_of.numpy(), minlength=30) == 0
    assert empty.any()
    lp = so.log_prob(h)
    assert torch.allclose(lp.exp().sum(1), torch.ones(12, dtype=torch.float64), atol=1e-12)
    q0 = so.q.clone()
    so(h[:1], t[:1])  # one token: q[w] <- lam q[w] + (1 - lam) log2 softmax(all C cluster logits)
    w = int(t[0])
    every = torch.log_softmax(so.body.cluster_weight @ h[0], 0) / math.log(2)
    lam = so.lam[w].double()
    assert torch.allclose(so.q[w].double(), lam * q0[w] + (1 - lam) * every, atol=1e-10)
    assert torch.isfinite(so.q).all()


def test_after_step_counts_and_freezes():
    vocab = zipf_vocab(60)
    layer = SelfOrganizedSoftmax(D, vocab.counts, 6, reassign_every=2, freeze_after=4)
    h, t = batch(20, vocab_size=60, dtype=torch.float32)
    done, q = [], [layer.q.clone()]
    for step in range(1, 9):
        layer(h, t)
        info = layer.after_step()
        if info is not None:
            done.append(info["step"])
        q.append(layer.q.clone())
    assert done == [2, 4]
    assert layer.steps == 8
    hist = layer.organizer.history_dict()
    assert list(hist["words_done"]) == [40, 80]
    # the statistic gathers the 4 batches of 20 tokens up to the freeze, nothing after it
    assert layer.tokens == 4 * 20
    assert all(not torch.equal(q[step], q[step - 1]) for step in range(1, 5))
    assert all(torch.equal(q[step], q[4]) for step in range(5, 9))


@pytest.mark.parametrize("smoothing", ["epoch", "interval"])
def test_binary_smoothing_counts_the_sampled_rows(smoothing):
    """eq. 10 in samples: the binary form's statistic samples ``statistic_rows`` = 8 of each
    batch's 40 tokens, so a word with count f gives f / 5 samples an epoch (and an interval
    of K = 50 steps holds 50 x 40 of the epoch's tokens): lam = 1 - 1 / max(samples, 1), by
    hand from the counts; the two-level form takes every token."""
    vocab = zipf_vocab(50)
    f = vocab.counts.astype(np.float64)
    h, t = batch(40, vocab_size=50, dtype=torch.float32)
    interval = min(1.0, 50 * 40 / f.sum()) if smoothing == "interval" else 1.0
    for form, share in (("binary", 8 / 40), ("two-level", 1.0)):
        layer = SelfOrganizedSoftmax(D, vocab.counts, 6, form=form, reassign_every=50,
                                      smoothing=smoothing,
                                      **({"statistic_rows": 8} if form == "binary" else {}))
        layer(h, t)
        want = 1 - 1 / np.maximum(f * share * interval, 1.0)
        np.testing.assert_allclose(layer.lam.numpy(), want, rtol=1e-6, err_msg=form)
        assert 0 < want.min() < want.max() < 1


# -- state -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LM_LAYERS))
def test_state_dict_round_trip(name):
    vocab = zipf_vocab(80)
    options = {"reassign_every": 2, "freq_budget": 0.3} if name.startswith("self") else {}
    layer = randomise(make_output_layer(name, D, vocab, **options).double())
    h, t = batch(30, vocab_size=80)
    opt = torch.optim.SGD(layer.parameters(), lr=0.5)
    for _ in range(4 if name.startswith("self") else 1):
        opt.zero_grad()
        layer(h, t).loss.backward()
        opt.step()
        layer.after_step(opt)
    fresh = make_output_layer(name, D, vocab, **options).double()
    fresh.load_state_dict(layer.state_dict())
    assert torch.equal(fresh.log_prob(h), layer.log_prob(h))
    assert torch.equal(fresh(h, t).output, layer(h, t).output)
    if name.startswith("self"):
        assert layer.reassignments == 2
        assert fresh.steps == layer.steps and fresh.reassignments == 2
        assert torch.equal(fresh.q, layer.q)
        assert np.array_equal(fresh.organizer.cluster_of, layer.organizer.cluster_of)
        assert len(fresh.organizer.history) == 2
    # and through a file
    import io
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    again = make_output_layer(name, D, vocab, **options).double()
    again.load_state_dict(torch.load(buffer, weights_only=False))
    assert torch.equal(again.log_prob(h), layer.log_prob(h))


def test_a_tree_layer_loads_another_tree():
    vocab = zipf_vocab()
    a = randomise(make_output_layer("tree", D, vocab, tree="random").double())
    b = make_output_layer("tree", D, vocab).double()  # Huffman
    b.load_state_dict(a.state_dict())
    assert b.tree.kind == "random"
    assert np.array_equal(b.tree.parent, a.tree.parent)
    h, _ = batch()
    assert torch.equal(b.log_prob(h), a.log_prob(h))


def test_float32_agrees_with_float64():
    vocab = zipf_vocab()
    for name, layer in layers(vocab).items():
        single = layers(vocab, dtype=torch.float32)[name]
        h, t = batch()
        assert torch.allclose(single(h.float(), t).output.double(), layer(h, t).output,
                              atol=1e-4), name


# -- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda v: make_output_layer("softmax", D, v),
    lambda v: make_output_layer("full", D, v, cutoffs=[3]),
    lambda v: make_output_layer("full", D, v, clusters=4),
    lambda v: make_output_layer("tree", D, v, reassign_every=3),
    lambda v: make_output_layer("tree", D, v, top_k=3),  # a semhuff option for a Huffman tree
    lambda v: make_output_layer("tree", D, v, tree=build_huffman(v.counts[:10])),
    lambda v: make_output_layer("class", D, v, clustering="k-means"),
    lambda v: make_output_layer("class", D, v, clusters=0),
    lambda v: make_output_layer("self-organized", D, v, clustering="random"),
    lambda v: make_output_layer("self-organized", D, v, gamma=0.5),
    lambda v: make_output_layer("self-organized", D, v, smoothing="weekly"),
    lambda v: make_output_layer("self-organized-binary", D, v, projection=True),
    lambda v: make_output_layer("self-organized-binary", D, v, statistic_rows=0),
    lambda v: make_output_layer("adaptive", D, v, cutoffs=[30, 10]),
    lambda v: SelfOrganizedSoftmax(D, v.counts[::-1].copy()),
    lambda v: SelfOrganizedSoftmax(D, v.counts, form="ternary"),
    lambda v: TreeSoftmax(D, "huffman"),
    lambda v: FullSoftmax(0, 10),
])
def test_bad_options_are_one_line_option_errors(call):
    with pytest.raises(OptionError) as info:
        call(zipf_vocab())
    assert "\n" not in str(info.value)


def test_bad_inputs_are_option_errors():
    layer = make_output_layer("tree", D, zipf_vocab())
    with pytest.raises(OptionError):
        layer(torch.zeros(3, D + 1), torch.zeros(3, dtype=torch.long))
    with pytest.raises(OptionError):
        layer(torch.zeros(3, D), torch.zeros(4, dtype=torch.long))
    with pytest.raises(OptionError):
        layer(torch.zeros(3, D), torch.tensor([0, 1, V]))


def test_semhuff_imports_without_torch_and_semhuff_lm_says_what_to_install():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import semhuff, semhuff.trees, semhuff.layers\n"
            "try:\n    import semhuff.lm\nexcept ImportError as e:\n    print('ERR', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("ERR") and "pip install 'semhuff[torch]'" in line
    assert "\n" not in line


# -- CUDA ------------------------------------------------------------------------------------------

@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_layers_match_the_cpu(dtype):
    vocab = zipf_vocab()
    on_cpu = layers(vocab, dtype=dtype)
    h, t = batch(dtype=dtype)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    for name, layer in on_cpu.items():
        gpu = layers(vocab, dtype=dtype)[name].cuda()
        gpu.load_state_dict(layer.state_dict())
        lp = gpu.log_prob(h.cuda())
        assert torch.allclose(lp.exp().sum(1).cpu(), torch.ones(len(t), dtype=dtype), atol=tol)
        out = gpu(h.cuda(), t.cuda())
        assert torch.allclose(out.output.cpu(), layer(h, t).output, atol=tol), name
        assert torch.allclose(out.output, lp.gather(1, t.cuda().unsqueeze(1)).squeeze(1), atol=tol)
        out.loss.backward()
        layer(h, t).loss.backward()
        for a, b in zip(layer.parameters(), gpu.parameters()):
            assert torch.allclose(a.grad.to_dense(), b.grad.to_dense().cpu(), atol=tol), name
        if name.startswith("self"):
            gpu.reassign()
            layer.reassign()
            assert torch.equal(gpu.cluster_of.cpu(), layer.cluster_of)
