"""semhuff.lm.transformer: the decoder-only Transformer LM learns a synthetic stream past its
unigram model (through the trainer's own step and ``evaluate``), is causal, matches torch's own
blocks, and refuses bad sizes in one line."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import clip_grad_norm, make_output_layer  # noqa: E402
from semhuff.lm.networks import LM_NETWORKS  # noqa: E402
from semhuff.lm.token_ids import LMData, batchify, build_vocab, to_ids  # noqa: E402
from semhuff.lm.evaluation import evaluate  # noqa: E402
from semhuff.lm.networks import detach_state  # noqa: E402
from semhuff.lm.settings import LMSettings  # noqa: E402
from semhuff.lm.trainer import train_lm  # noqa: E402
from semhuff.lm.transformer import TransformerLanguageModel  # noqa: E402


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def markov_data(n_words=40, train=12000, heldout=2000, seed=0):
    """A stream from a random first-order Markov chain, each word followed by one of 3 others
    (skewed): about log(3) nats of uncertainty a token given the previous one, far below the
    unigram's."""
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, n_words, size=(n_words, 3))
    p = np.array([0.6, 0.3, 0.1])
    words, w = [], 0
    for _ in range(train + heldout):
        w = nxt[w, rng.choice(3, p=p)]
        words.append(f"w{w}")
    vocab = build_vocab(words[:train])
    return LMData(vocab, to_ids(words[:train], vocab), to_ids(words[train:], vocab), False)


def unigram_perplexity(data):
    p = data.vocab.counts / data.vocab.counts.sum()
    return math.exp(-np.log(p[data.heldout]).mean())


def test_registered_as_an_lm_network():
    assert LM_NETWORKS["transformer"] is TransformerLanguageModel


def test_trains_end_to_end_with_the_tree_layer_and_beats_the_unigram():
    torch.manual_seed(0)
    data = markov_data(train=6000)
    H = 32
    model = TransformerLanguageModel(len(data.vocab), make_output_layer("tree", H, data.vocab,
                                                                        sparse=True),
                                     emb=H, hidden=H, layers=2, heads=4, max_len=16)
    before = evaluate(model, data.heldout, 10, 16).perplexity
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    train = torch.as_tensor(batchify(data.train, 16))
    state = None
    for _ in range(1):  # the trainer's step: the (None) state detached, clip, Adagrad
        for t in range(0, train.shape[1] - 1, 16):
            x, y = train[:, t:t + 16], train[:, t + 1:t + 17]
            x = x[:, :y.shape[1]]
            optimizer.zero_grad(set_to_none=True)
            out, state = model(x, y, detach_state(state))
            assert state is None
            out.loss.backward()
            clip_grad_norm(model.parameters(), 0.25)
            optimizer.step()
    after = evaluate(model, data.heldout, 10, 16).perplexity
    unigram = unigram_perplexity(data)
    assert after < before and after < 0.6 * unigram, (before, after, unigram)


def test_the_trainer_trains_it_by_name():
    data = markov_data(train=3000, heldout=600)
    settings = LMSettings(output="tree", arch="transformer", emb=16, hidden=16, batch_size=8,
                          bptt=12, epochs=1, lr=0.05, progress=False)
    model, report = train_lm(data, settings)
    assert isinstance(model, TransformerLanguageModel)
    assert report.epochs[-1].heldout.perplexity < report.untrained.perplexity


@pytest.mark.parametrize("mode", ["train", "eval", "eval, no grad"])
def test_causal_a_later_token_leaves_earlier_outputs_unchanged(mode):
    """In each of torch's paths (training; inference; inference without autograd, where torch
    may take its fused encoder path): the same numbers (dropout 0), nothing from the future."""
    torch.manual_seed(1)
    V, H = 30, 24
    model = TransformerLanguageModel(V, make_output_layer("full", H, counts=np.arange(V) + 1),
                                     emb=16, hidden=H, layers=2, heads=3, max_len=10)
    ids = torch.randint(0, V, (3, 10))
    reference, _ = model.hidden(ids)  # training mode
    model.train(mode == "train")
    changed = ids.clone()
    changed[:, 6] = (changed[:, 6] + 1) % V
    with torch.set_grad_enabled(mode != "eval, no grad"):
        a, _ = model.hidden(ids)
        b, _ = model.hidden(changed)
        torch.testing.assert_close(a, reference, rtol=1e-5, atol=1e-6)
        assert torch.equal(a[:, :6], b[:, :6])
        assert not torch.allclose(a[:, 6:], b[:, 6:])  # the change does reach the later ones
        # each prefix alone gives its own outputs: nothing leaks from the future
        for t in (1, 4, 9):
            alone, _ = model.hidden(ids[:, :t])
            torch.testing.assert_close(alone, a[:, :t], rtol=1e-5, atol=1e-6)


def test_the_blocks_are_torchs_pre_ln_layer_with_a_causal_mask():
    """hidden() recomputed by hand from the blocks' own weights: embedding, projection,
    positions, each block as x + attn(LN(x)) then x + FF(LN(x)), the final norm."""
    torch.manual_seed(2)
    V, E, H = 25, 12, 16
    model = TransformerLanguageModel(V, make_output_layer("full", H, counts=np.ones(V)),
                                     emb=E, hidden=H, layers=2, heads=2, max_len=8).eval()
    ids = torch.randint(0, V, (2, 7))
    T = ids.shape[1]
    x = model.embedding(ids) @ model.project.weight.T + model.position.weight[:T]
    future = torch.full((T, T), float("-inf")).triu(1)
    for block in model.blocks:
        y = block.norm1(x)
        attn = block.self_attn
        q, k, v = (y @ attn.in_proj_weight.T + attn.in_proj_bias).chunk(3, dim=-1)
        heads = attn.num_heads

        def split(z):
            return z.reshape(2, T, heads, H // heads).transpose(1, 2)
        w = torch.softmax(split(q) @ split(k).transpose(-1, -2) / math.sqrt(H // heads)
                          + future, dim=-1)
        a = (w @ split(v)).transpose(1, 2).reshape(2, T, H)
        x = x + attn.out_proj(a)
        y = block.norm2(x)
        x = x + block.linear2(torch.nn.functional.gelu(block.linear1(y)))
    expected = model.norm(x)
    got, state = model.hidden(ids)
    assert state is None
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_bad_sizes_are_one_line_errors():
    layer = make_output_layer("full", 30, counts=np.ones(10))
    with pytest.raises(OptionError, match="heads \\(4\\) must divide the width hidden \\(30\\)"):
        TransformerLanguageModel(10, layer, emb=30, hidden=30, heads=4)
    with pytest.raises(OptionError, match="layers must be an integer >= 1"):
        TransformerLanguageModel(10, layer, hidden=30, heads=3, layers=0)
    with pytest.raises(OptionError, match="output layer takes 30 inputs"):
        TransformerLanguageModel(10, layer, hidden=32, heads=4)
    model = TransformerLanguageModel(10, layer, emb=8, hidden=30, heads=3, max_len=5)
    with pytest.raises(OptionError, match="longer than max_len 5") as err:
        model.hidden(torch.zeros(1, 6, dtype=torch.long))
    assert "\n" not in str(err.value)
    with pytest.raises(OptionError, match="carries no state"):
        model.hidden(torch.zeros(1, 3, dtype=torch.long), (torch.zeros(1),))
