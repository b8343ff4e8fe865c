"""Generation from every LM output layer (issue 44): ``sample`` draws from ``log_prob``'s
distribution as the warpers shape it (chi-square against a distribution renormalised by hand
here, in NumPy), ``topk`` / ``predict`` equal the whole distribution's, exactly; the tree's
searches (the CPU's best-first, the device's beam) and their fallbacks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from scipy import stats  # noqa: E402

import lm_helpers  # noqa: E402
from lm_helpers import randomise  # noqa: E402
from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import make_output_layer  # noqa: E402
from semhuff.lm.kernels import tree_search, tree_search_numba  # noqa: E402
from semhuff.lm.layers.registry import LM_LAYERS  # noqa: E402

D, V = 6, 40
VOCAB = lm_helpers.zipf_vocab(V)
NAMES = sorted(LM_LAYERS)


def layer(name, dtype=torch.float32, **kw):
    if name == "adaptive":  # tails as wide as the input: no two words tie
        kw.setdefault("div_value", 1.0)
    return randomise(make_output_layer(name, D, VOCAB, **kw).to(dtype), scale=1.0)


def rows(n=1, seed=3, dtype=torch.float32):
    return torch.randn(n, D, generator=torch.Generator().manual_seed(seed), dtype=dtype) * 1.5


def by_hand(log_prob, temperature=1.0, top_k=None, top_p=None, exclude=()):
    """The distribution drawn from: excluded words out, renormalised, ^(1/T), renormalised,
    the top_k best kept, renormalised, the smallest best set reaching top_p kept, renormalised."""
    p = np.exp(np.asarray(log_prob, np.float64))
    p[list(exclude)] = 0
    p = p ** (1 / temperature)
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    if top_k is not None:
        p[order[top_k:]] = 0
        p /= p.sum()
    if top_p is not None:
        mass_before = 0.0
        for w in order:
            if mass_before >= top_p:
                p[w] = 0
            mass_before += p[w]
        p /= p.sum()
    return p


def chi_square_p(draws, expected_p):
    """The p-value of the draws' counts against ``expected_p``; words expected fewer than 5
    times pooled (one bin), a drawn word of probability 0 a failure outright."""
    counts = np.bincount(draws, minlength=len(expected_p))
    assert counts[expected_p == 0].sum() == 0, np.flatnonzero((expected_p == 0) & (counts > 0))
    expected = expected_p * len(draws)
    big = expected >= 5
    obs = np.append(counts[big], counts[~big & (expected_p > 0)].sum())
    exp = np.append(expected[big], expected[~big & (expected_p > 0)].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    if len(obs) < 2:
        return 1.0
    return stats.chisquare(obs, exp).pvalue


WARPS = [dict(), dict(temperature=0.6), dict(temperature=1.7), dict(top_k=5),
         dict(top_k=7, temperature=1.4), dict(top_p=0.7), dict(top_p=0.8, temperature=0.8),
         dict(top_k=10, top_p=0.6, temperature=1.2), dict(exclude=[0, 3]),
         dict(top_p=0.75, exclude=[1]), dict(top_k=4, exclude=[2, 5])]


@pytest.mark.parametrize("name", NAMES)
def test_sample_draws_from_the_warped_distribution(name):
    L = layer(name)
    h = rows()
    lp = L.log_prob(h).detach().double()[0].numpy()
    g = torch.Generator().manual_seed(11)
    n = 6000
    for warp in WARPS:
        draws = L.sample(h.expand(n, D), generator=g, **warp).numpy()
        expected = by_hand(lp, **warp)
        assert chi_square_p(draws, expected) > 1e-4, (name, warp)


@pytest.mark.parametrize("name, options", [
    ("class-tree", {}), ("class-tree", {"head": 0}), ("head-tree", {"tail_entries": 3}),
    ("class-tree", {"head": 4, "tail_dim": 3}), ("organized-tree", {})])
def test_the_flat_top_layers_walk_without_the_whole_distribution(name, options, monkeypatch):
    """head-tree, class-tree, organized-tree at temperature 1: the entry from the top, then a
    walk down its subtree (``walk_sample``), never ``full_log_prob`` (O(V) a row); the draws
    follow the exact distribution (as the test above, for these settings too)."""
    L = layer(name, **options)
    h = rows()
    lp = L.log_prob(h).detach().double()[0].numpy()

    def whole(*args, **kwargs):
        raise AssertionError("the whole distribution was computed")
    with monkeypatch.context() as patch:
        patch.setattr(L, "full_log_prob", whole)
        draws = L.sample(h.expand(6000, D), generator=torch.Generator().manual_seed(5)).numpy()
    assert chi_square_p(draws, by_hand(lp)) > 1e-4, (name, options)
    assert chi_square_p(draws, by_hand(lp, temperature=0.7)) < 1e-6
    # an excluded word: drawn again (a row that keeps drawing it: its whole row, exact)
    exclude = [int(np.argmax(lp))]
    draws = L.sample(h.expand(6000, D), generator=torch.Generator().manual_seed(6),
                     exclude=exclude).numpy()
    assert chi_square_p(draws, by_hand(lp, exclude=exclude)) > 1e-4, (name, options)


@pytest.mark.parametrize("name, options", [
    ("class-tree", {}), ("class-tree", {"head": 0}), ("head-tree", {"tail_entries": 3}),
    ("class-tree", {"head": 4, "tail_dim": 3})])
@pytest.mark.parametrize("k", [1, 5])
def test_the_flat_top_layers_search_from_their_entries(name, options, k):
    """``search_topk`` of head-tree / class-tree: begun at the entries (their words found at
    once), down their subtrees; a row it settles is the whole distribution's top k (values to
    rounding, indices where no two values tie)."""
    L = layer(name, dtype=torch.float64, **options)
    h = rows(40, seed=7, dtype=torch.float64)
    values, indices, exact = L.search_topk(h, k)
    want_v, want_i = L.full_log_prob(h).topk(k, dim=1)
    assert exact.double().mean() > 0.5  # the search, not the fallback, answers most rows
    torch.testing.assert_close(values[exact], want_v[exact], rtol=0, atol=1e-10)
    gaps = want_v[:, :-1] - want_v[:, 1:]
    clear = exact & (gaps.min(dim=1).values > 1e-9 if k > 1 else exact)
    assert torch.equal(indices[clear], want_i[clear])


@pytest.mark.parametrize("name", ["tree", "class", "self-organized-binary", "class-tree"])
def test_the_chi_square_sees_a_wrong_distribution(name):
    """The test above can fail: the walk at temperature 1 against the tempered distribution,
    and the draws against the distribution without its excluded word."""
    L = layer(name)
    h = rows()
    lp = L.log_prob(h).detach().double()[0].numpy()
    draws = L.sample(h.expand(6000, D), generator=torch.Generator().manual_seed(1)).numpy()
    assert chi_square_p(draws, by_hand(lp, temperature=0.7)) < 1e-6
    with pytest.raises(AssertionError):  # a word of probability 0 drawn
        chi_square_p(draws, by_hand(lp, exclude=[int(np.argmax(lp))]))


@pytest.mark.parametrize("name", NAMES)
def test_topk_and_predict_are_the_whole_distributions(name):
    L = layer(name)
    h = rows(64, seed=5)
    lp = L.log_prob(h).detach()
    for k in (1, 3, 10, V):
        values, indices = L.topk(h, k)
        ref_values, _ = lp.topk(k, dim=1)
        assert torch.allclose(values.double(), ref_values.double(), atol=1e-5)
        # the words themselves: each has the log-probability found (ties aside)
        assert torch.allclose(lp.gather(1, indices).double(), values.double(), atol=1e-5)
    assert torch.equal(L.predict(h), lp.argmax(dim=1))
    assert torch.equal(L.sample(h, temperature=0), lp.argmax(dim=1))
    # leading dimensions, as log_prob
    values, indices = L.topk(h.view(8, 8, D), 2)
    assert values.shape == indices.shape == (8, 8, 2)
    assert L.sample(h.view(8, 8, D)).shape == (8, 8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tree_searches_against_the_whole_distribution(dtype):
    """The CPU's best-first search and the device's beam search, every row they call exact
    equal to the whole distribution's top k; a beam too narrow or a heap too small leaves rows
    open, which topk then takes whole."""
    L = layer("tree", dtype, tree="random")
    h = rows(200, seed=8, dtype=dtype)
    ref = L.log_prob(h).topk(6, dim=1).values.double()
    walk = tree_search.TreeWalk(L.tree)
    for values, _, exact in (tree_search_numba.best_first_topk(h, L.weight, walk, 6),
                             tree_search.beam_topk(h, L.weight.detach(), walk, 6, beam=64)):
        assert bool(exact.all())
        assert torch.allclose(values.double(), ref, atol=1e-6)
    for values, _, exact in (tree_search_numba.best_first_topk(h, L.weight, walk, 6, capacity=12),
                             tree_search.beam_topk(h, L.weight.detach(), walk, 6, beam=5)):
        assert 0 < int(exact.sum()) < len(exact)  # some rows settled, some not
        assert torch.allclose(values[exact].double(), ref[exact], atol=1e-6)


def test_topk_takes_the_rows_the_search_leaves_open_whole(monkeypatch):
    L = layer("tree")
    h = rows(50, seed=2)
    monkeypatch.setattr(tree_search_numba, "best_first_topk", _open_half)
    values, _ = L.topk(h, 4)
    assert torch.allclose(values, L.log_prob(h).topk(4, dim=1).values, atol=1e-5)


def _open_half(h, weight, walk, k, capacity=1 << 16):
    values, indices, exact = tree_search.beam_topk(h, weight.detach(), walk, k, beam=64)
    exact[::2] = False
    values[::2] = -5.0  # wrong, as a search cut short may be
    return values, indices, exact


def test_draws_are_reproducible_by_generator_and_differ_between_seeds():
    L = layer("tree")
    h = rows(500, seed=4)
    draw = lambda seed, **kw: L.sample(h, generator=torch.Generator().manual_seed(seed), **kw)
    assert torch.equal(draw(1), draw(1)) and not torch.equal(draw(1), draw(2))
    assert torch.equal(draw(1, top_k=5), draw(1, top_k=5))


@pytest.mark.parametrize("name", NAMES)
def test_empty_input_and_bad_arguments(name):
    L = layer(name)
    empty = torch.zeros(0, D)
    assert L.sample(empty).shape == (0,)
    assert L.topk(empty, 3)[1].shape == (0, 3)
    h = rows()
    for kw in (dict(temperature=-1), dict(top_k=0), dict(top_p=0), dict(top_p=1.5),
               dict(exclude=[V]), dict(exclude=list(range(V)))):
        with pytest.raises(OptionError):
            L.sample(h, **kw)
    for k in (0, V + 1, 2.0):
        with pytest.raises(OptionError):
            L.topk(h, k)


# -- semhuff.lm.generate.sample and semhuff-lm sample ----------------------------------------------

@pytest.fixture(scope="module")
def unk_heavy_model():
    """An LSTM LM over 12 words whose tree gives <unk> most of the mass at every step."""
    from semhuff.lm.networks import LSTMLanguageModel
    from semhuff.lm.token_ids import EOS, UNK, build_vocab
    words = [f"w{i % 10}" for i in range(200)] + [EOS] * 5  # <unk>: build_vocab adds it
    vocab = build_vocab(words)
    torch.manual_seed(0)
    model = LSTMLanguageModel(len(vocab), make_output_layer("tree", 8, vocab), emb=8, hidden=8)
    out, unk = model.output, vocab.index[UNK]
    with torch.no_grad():  # every node on <unk>'s path leans its way, whatever the context
        model.rnn.bias_ih_l0.fill_(5.0)  # the gates open, so every output is near one vector
        h, _ = model.eval().hidden(torch.zeros(1, 1, dtype=torch.long))
        for j in range(out.tree.lengths[unk]):
            sign = 1.0 - 2.0 * out.tree.codes[unk, j]
            out.weight[out.tree.points[unk, j]] = sign * 3 * h[0, -1] / h[0, -1].norm() ** 2
    return model, vocab


def test_generate_sample_no_unk_and_top_k(unk_heavy_model):
    from semhuff.lm.generate import sample
    from semhuff.lm.token_ids import UNK
    model, vocab = unk_heavy_model
    plain = sample(model, vocab, tokens=30, seed=1)
    assert plain.count(UNK) > 10  # the model's own preference
    kept = sample(model, vocab, tokens=30, seed=1, no_unk=True)
    assert UNK not in kept and len(kept) == 30
    greedy = sample(model, vocab, tokens=5, temperature=0, no_unk=True)
    assert UNK not in greedy
    one = sample(model, vocab, tokens=20, top_k=1, no_unk=True, seed=3)
    assert one == sample(model, vocab, tokens=20, temperature=0, no_unk=True)
    for bad in (dict(top_k=0), dict(top_p=1.5)):
        with pytest.raises(OptionError):
            sample(model, vocab, **bad)


def test_semhuff_lm_sample_takes_top_k_top_p_and_no_unk(unk_heavy_model, monkeypatch, capsys):
    import semhuff.lm.models as models
    from semhuff.cli.lm import main as lm_main
    from semhuff.lm.token_ids import UNK
    model, vocab = unk_heavy_model
    monkeypatch.setattr(models, "load_model", lambda path, device="cpu": (model, vocab, None))
    assert lm_main(["sample", "m.pt", "--tokens", "25", "--no-unk", "--top-k", "3",
                    "--top-p", "0.9", "--temperature", "0.8"]) == 0
    words = capsys.readouterr().out.split()
    assert words and UNK not in words
    assert lm_main(["sample", "m.pt", "--tokens", "25"]) == 0
    assert UNK in capsys.readouterr().out.split()
    assert lm_main(["sample", "m.pt", "--top-k", "0"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "top_k" in err[0]
