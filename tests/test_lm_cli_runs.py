"""semhuff-lm's real runs (issue 35): the Transformer end to end, checkpoints and --resume after
a kill -9, score / sample of a saved model, devices and precision."""
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from semhuff.cli.lm import main as lm_main  # noqa: E402
from semhuff.cli.train import resolve_corpus  # noqa: E402
from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm.token_ids import load_data  # noqa: E402
from semhuff.lm.trainer import LMSettings, evaluate, load_model  # noqa: E402

# a tiny run on gensim's lee corpus: 300 words, 5,000 training tokens
TINY = ["lee", "--max-vocab", "300", "--heldout-chars", "20000", "--emb", "16", "--hidden", "16",
        "--train-tokens", "5000", "--threads", "1", "--no-progress"]


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_data():
    return load_data(resolve_corpus(["lee"]), None, 20000, 1, 300, 5000, None)


def unigram_perplexity(data) -> float:
    """The held-out perplexity of the training text's add-one unigram model (independent of
    the trainer)."""
    counts = np.bincount(data.train, minlength=len(data.vocab)).astype(float) + 1
    p = counts / counts.sum()
    return float(np.exp(-np.log(p[data.heldout[1:]]).mean()))


def test_a_transformer_lm_trains_beats_the_unigram_and_reloads(tmp_path, capsys):
    model_path, report_path = tmp_path / "t.pt", tmp_path / "t.json"
    assert lm_main(TINY + ["--arch", "transformer", "--layers", "1", "--heads", "2",
                           "--max-len", "32", "--epochs", "2", "--lr", "0.05",
                           "-o", str(model_path), "--report", str(report_path)]) == 0
    assert "TRANSFORMER" in capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert report["settings"]["cell"] == "transformer"
    assert report["settings"]["network_options"] == {"layers": 1, "heads": 2, "max_len": 32}
    data = tiny_data()
    final = report["epochs"][-1]["heldout"]["perplexity"]
    assert final < 0.95 * unigram_perplexity(data)
    model, vocab, settings = load_model(str(model_path))[:3]
    assert type(model).__name__ == "TransformerLanguageModel" and len(model.blocks) == 1
    assert model.max_len == 32 and vocab.words == data.vocab.words
    again = evaluate(model, data.heldout, settings.eval_batch, settings.bptt)
    assert again.perplexity == final


def test_a_bptt_longer_than_the_transformer_window_is_refused_early(tmp_path, capsys):
    with pytest.raises(OptionError, match="max_len"):
        LMSettings(cell="transformer", network_options={"max_len": 10}, bptt=20).check()
    # the command line: a one-line error before any data is read
    assert lm_main(["/nonexistent/corpus", "--heldout-chars", "10", "--arch", "transformer",
                    "--max-len", "10", "--bptt", "20"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-len" in err[0] and "nonexistent" not in err[0]
