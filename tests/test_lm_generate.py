"""semhuff.lm.generate: score_text gives the trainer's evaluate numbers (and an unbatched
recomputation's); sample draws from the output layer's exact distribution (frequencies of first
draws against exp(log_prob), with and without temperature), is reproducible by seed, becomes
the greedy continuation (recomputed from scratch, no carried state) as temperature -> 0, for
the LSTM and the Transformer; prompts map unknown words to <unk>."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import clip_grad_norm, make_output_layer  # noqa: E402
from semhuff.lm.generate import encode_prompt, sample, score_text  # noqa: E402
from semhuff.lm.networks import LSTMLanguageModel  # noqa: E402
from semhuff.lm.token_ids import EOS, UNK, batchify, build_vocab, to_ids  # noqa: E402
from semhuff.lm.evaluation import evaluate  # noqa: E402
from semhuff.lm.transformer import TransformerLanguageModel  # noqa: E402


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(7)
    words = []
    for _ in range(300):  # lines of a few words: <eos> is in the vocabulary
        words += [f"w{int(i) % 30}" for i in rng.zipf(1.6, rng.integers(2, 8))] + [EOS]
    vocab = build_vocab(words[:1500])
    return vocab, to_ids(words[:1500], vocab), to_ids(words[1500:], vocab)


def make(kind, vocab, H=16, seed=0):
    torch.manual_seed(seed)
    layer = make_output_layer("tree", H, vocab, sparse=True)
    if kind == "lstm":
        return LSTMLanguageModel(len(vocab), layer, emb=12, hidden=H)
    return TransformerLanguageModel(len(vocab), layer, emb=12, hidden=H, layers=1, heads=2,
                                    max_len=8)


@pytest.fixture(scope="module", params=["lstm", "transformer"])
def trained(request, stream):
    vocab, train, _ = stream
    model = make(request.param, vocab)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.1)
    data = torch.as_tensor(batchify(train, 8))
    for t in range(0, data.shape[1] - 1, 8):  # a little training: a peaked distribution
        x, y = data[:, t:t + 8], data[:, t + 1:t + 9]
        optimizer.zero_grad()
        model(x[:, :y.shape[1]], y)[0].loss.backward()
        clip_grad_norm(model.parameters(), 0.25)
        optimizer.step()
    return request.param, model


def unbatched_nll(model, ids):
    """The mean -log P of ids[1:] in one pass over ids[:-1] (one row, one window), read off the
    full log_prob at the targets."""
    model.eval()
    with torch.no_grad():
        out, _ = model.hidden(torch.as_tensor(ids[:-1]).unsqueeze(0))
        lp = model.output.log_prob(out[0]).double()
    return -lp[torch.arange(len(ids) - 1), torch.as_tensor(ids[1:])].mean().item()


def test_score_is_evaluates_numbers_and_an_unbatched_pass(stream, trained):
    kind, model = trained
    vocab, _, held = stream
    score = score_text(model, held, batch=4, bptt=8)
    reference = evaluate(model, held, 4, 8)
    assert (score.perplexity, score.nll, score.tokens) == \
        (reference.perplexity, reference.nll, reference.tokens)
    assert score.seconds > 0 and score.tokens_per_second == score.tokens / score.seconds
    # one row, one window (the LSTM; the Transformer's window is max_len): the mean of the full
    # log_prob's entries at the targets
    if kind == "lstm":
        nll = unbatched_nll(model, held)
        one = score_text(model, held, batch=1, bptt=len(held))
        assert one.nll == pytest.approx(nll, rel=1e-6) and one.tokens == len(held) - 1
        assert one.perplexity == pytest.approx(math.exp(nll), rel=1e-6)


def test_a_sentence_is_scored_whole_not_cut_into_rows(stream, trained):
    """A sentence under the default 10 rows, one window long (the LSTM: 17 words, bptt 20; the
    Transformer: 9 words, its max_len 8): one row, every prediction, each with every word
    before it (10 rows would have scored half, each after one word)."""
    kind, model = trained
    n, bptt = (17, 20) if kind == "lstm" else (9, 8)
    sentence = stream[2][:n]
    nll = unbatched_nll(model, sentence)
    got = score_text(model, sentence, bptt=bptt)
    assert got.tokens == n - 1 and got.nll == pytest.approx(nll, rel=1e-6)
    # a text of `batch` windows or more keeps the rows asked for: the run's held-out figures
    assert score_text(model, stream[2][:3 * (bptt + 1)], batch=3, bptt=bptt).tokens == 3 * bptt


def test_score_refuses_ids_outside_the_vocabulary(stream, trained):
    _, model = trained
    vocab = stream[0]
    with pytest.raises(OptionError, match=f"ids must be word ids in 0..{len(vocab) - 1}"):
        score_text(model, np.array([0, 1, len(vocab)]))
    with pytest.raises(OptionError, match="at least 2"):
        score_text(model, np.array([0]))


def greedy(model, vocab, context, n):
    """The greedy continuation recomputed from scratch each step (no carried state)."""
    max_len = getattr(model, "max_len", None)
    context, out = list(context), []
    model.eval()
    with torch.no_grad():
        for _ in range(n):
            window = context[-max_len:] if max_len else context
            h, _ = model.hidden(torch.as_tensor([window]))
            word = int(model.output.log_prob(h[0, -1:])[0].argmax())
            out.append(word)
            context.append(word)
    return [vocab.words[i] for i in out]


def test_seed_reproducible_and_different_seeds_differ(stream, trained):
    _, model = trained
    vocab = stream[0]
    a = sample(model, vocab, tokens=40, seed=3)
    assert a == sample(model, vocab, tokens=40, seed=3) and len(a) == 40
    assert a != sample(model, vocab, tokens=40, seed=4)
    assert set(a) <= set(vocab.words)
    torch.manual_seed(0)  # the global generator is not used: drawing leaves it alone
    before = torch.rand(1)
    torch.manual_seed(0)
    sample(model, vocab, tokens=5, seed=9)
    assert torch.equal(torch.rand(1), before)


def test_temperature_to_zero_is_the_greedy_continuation(stream, trained):
    _, model = trained
    vocab = stream[0]
    prompt = [vocab.index[w] for w in ("w1", "w2", EOS, "w1")]
    expected = greedy(model, vocab, prompt, 12)  # beyond max_len: the window slides
    assert sample(model, vocab, prompt, tokens=12, temperature=0) == expected
    for seed in (1, 2):
        assert sample(model, vocab, prompt, tokens=12, temperature=1e-4, seed=seed) == expected
    # without a prompt the context is <eos>
    assert sample(model, vocab, tokens=6, temperature=0) == greedy(model, vocab,
                                                                    [vocab.index[EOS]], 6)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_draws_follow_the_exact_distribution(stream, temperature):
    vocab = stream[0]
    model = make("lstm", vocab, seed=4)
    with torch.no_grad():
        model.output.weight.mul_(40)  # an untrained model is near uniform: spread it
        h, _ = model.eval().hidden(torch.as_tensor([[vocab.index["w3"]]]))
        p = torch.softmax(model.output.log_prob(h[0, -1:])[0].double() / temperature, 0).numpy()
    draws = [vocab.index[sample(model, vocab, prompt="w3", tokens=1,
                                temperature=temperature, seed=s)[0]] for s in range(600)]
    freq = np.bincount(draws, minlength=len(vocab)) / len(draws)
    assert p.max() > 0.15  # a distribution worth testing
    assert np.abs(freq - p).max() < 4 * math.sqrt(0.25 / len(draws))


def test_prompt_words_outside_the_vocabulary_are_unk(stream, trained):
    _, model = trained
    vocab = stream[0]
    ids = encode_prompt(vocab, "w1 never-seen w2")
    assert ids == [vocab.index["w1"], vocab.index[UNK], vocab.index["w2"]]
    assert encode_prompt(vocab, ["w1", "never-seen"]) == ids[:2]
    assert sample(model, vocab, prompt="w1 never-seen w2", tokens=8, seed=5) == \
        sample(model, vocab, ids, tokens=8, seed=5)


def test_no_eos_starts_from_a_unigram_draw(stream):
    vocab, train, _ = stream
    words = [w for w in vocab.words if w != EOS]
    plain = build_vocab([w for w in (vocab.words[i] for i in train) if w != EOS])
    assert EOS not in plain.index and set(plain.words) <= set(words) | {UNK}
    model = make("lstm", plain)
    out = sample(model, plain, tokens=5, seed=2)
    assert len(out) == 5 and set(out) <= set(plain.words)
    assert out == sample(model, plain, tokens=5, seed=2)


def test_bad_arguments_are_one_line_errors(stream, trained):
    _, model = trained
    vocab = stream[0]
    for kwargs, phrase in (({"tokens": 0}, "tokens must be an integer >= 1"),
                           ({"temperature": -1.0}, "temperature must be >= 0"),
                           ({"prompt_ids": [0, len(vocab)]}, "prompt_ids must be word ids"),
                           ({"prompt_ids": [0], "prompt": "w1"}, "not both")):
        with pytest.raises(OptionError, match=phrase) as err:
            sample(model, vocab, **kwargs)
        assert "\n" not in str(err.value)
    other = build_vocab(["a", "b", "a"])
    with pytest.raises(OptionError, match="the model predicts"):
        sample(model, other)


def test_score_files_reproduces_the_training_reports_perplexity(lee_path, tmp_path):
    """The issue's check: ``score`` on the training run's held-out text gives the report's
    held-out perplexity exactly, before and after save / load; several files are read as the
    trainer reads them (joined) and scored one by one too."""
    from semhuff.lm.generate import score_files, text_ids
    from semhuff.lm.token_ids import load_data
    from semhuff.lm.models import load_model, save_model
    from semhuff.lm.settings import LMSettings
    from semhuff.lm.trainer import train_lm
    lines = open(lee_path, encoding="utf-8").read().splitlines()
    (tmp_path / "train.txt").write_text("\n".join(lines[:120]) + "\n")
    (tmp_path / "held1.txt").write_text("\n".join(lines[120:140]) + "\n")
    (tmp_path / "held2.txt").write_text("\n".join(lines[140:160]) + "\n")
    held = [str(tmp_path / "held1.txt"), str(tmp_path / "held2.txt")]
    data = load_data([str(tmp_path / "train.txt")], held, max_vocab=300, heldout_tokens=1500)
    settings = LMSettings(emb=16, hidden=16, batch_size=8, bptt=10, eval_batch=6,
                          progress=False)
    model, report = train_lm(data, settings)
    expected = report.epochs[-1].heldout
    assert np.array_equal(text_ids(held, data.vocab, data.eos, 1500), data.heldout)
    total, each = score_files(model, data.vocab, held, data.eos, settings.eval_batch,
                              settings.bptt, max_tokens=1500)
    assert (total.perplexity, total.tokens) == (expected.perplexity, expected.tokens)
    assert [path for path, _ in each] == held
    for path, score in each:  # each file alone: its own ids, its own score
        alone = evaluate(model, text_ids([path], data.vocab, data.eos, 1500), 6, 10)
        assert score.perplexity == alone.perplexity
    save_model(str(tmp_path / "m.pt"), model, data, report)
    loaded, vocab, saved = load_model(str(tmp_path / "m.pt"))
    again, _ = score_files(loaded, vocab, held, data.eos, saved.eval_batch, saved.bptt,
                           max_tokens=1500)
    assert again.perplexity == expected.perplexity
    with pytest.raises(OptionError, match="no text to score"):
        score_files(model, data.vocab, [], data.eos)
